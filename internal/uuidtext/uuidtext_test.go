package uuidtext_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/internal/uuidtext"
)

// TestCanonicalIsUUIDs: Canonical answers what parsing with
// github.com/google/uuid and formatting gives, for strings of UUID shape
// in any letter case, with a byte out of place, or of other lengths.
func TestCanonicalIsUUIDs(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		u := uuid.UUID(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "uuid")).String()
		b := []byte(u)
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, 35), 0, 3).Draw(rt, "changed") {
			b[i] = rapid.SampledFrom([]byte("0aAfFgG-{}: ")).Draw(rt, "to")
		}
		s := string(b)
		if rapid.Bool().Draw(rt, "upper") {
			s = strings.ToUpper(s)
		}
		s = s[:rapid.OneOf(rapid.Just(36), rapid.IntRange(0, 36)).Draw(rt, "len")]
		want, err := uuid.Parse(s)
		got, ok := uuidtext.Canonical(s)
		if ok != (err == nil && len(s) == 36) || ok && got != want.String() || !ok && got != "" {
			rt.Fatalf("Canonical(%q) = %q, %v; uuid.Parse: %v, %v", s, got, ok, want, err)
		}
	})
}

// TestCanonicalDoesNotCopy: a canonical id is answered without allocating.
func TestCanonicalDoesNotCopy(t *testing.T) {
	id := "01a20d4b-5b42-750f-900c-cfa5613b989a"
	if n := testing.AllocsPerRun(100, func() { uuidtext.Canonical(id) }); n != 0 {
		t.Errorf("Canonical of a canonical id: %v allocations, want 0", n)
	}
}
