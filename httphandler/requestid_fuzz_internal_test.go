package httphandler

import (
	"strings"
	"testing"
)

// FuzzSanitizeRequestID: whatever a client sends, the id kept is short and
// safe, keeping a safe id whole, and sanitizing it again changes nothing.
func FuzzSanitizeRequestID(f *testing.F) {
	for _, s := range []string{"", "abc", "0194c0de-0000-7000-8000-00000000000a", "a b\t\"c\"<d>", "\x00\xff\n",
		strings.Repeat("x", 300), "réq-ü1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := sanitizeRequestID(v)
		if len(got) > MaxRequestIDBytes {
			t.Fatalf("%d bytes kept", len(got))
		}
		for i := 0; i < len(got); i++ {
			if !requestIDByte(got[i]) {
				t.Fatalf("unsafe byte %q kept in %q", got[i], got)
			}
		}
		if again := sanitizeRequestID(got); again != got {
			t.Fatalf("not idempotent: %q then %q", got, again)
		}
		safe := true
		for i := 0; i < len(v); i++ {
			safe = safe && requestIDByte(v[i])
		}
		if safe && len(v) <= MaxRequestIDBytes && got != v {
			t.Fatalf("a safe id %q became %q", v, got)
		}
		if !strings.HasPrefix(strings.Map(func(r rune) rune {
			if r < 128 && requestIDByte(byte(r)) {
				return r
			}
			return -1
		}, v), got) {
			t.Fatalf("%q is not the safe bytes of %q in order", got, v)
		}
	})
}
