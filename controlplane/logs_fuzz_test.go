package controlplane_test

import (
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// FuzzDecodeLogOffset: the offset decoder never panics, accepts only what
// EncodeLogOffset makes (one spelling per position), and a query with any
// offset either validates or is one problem at ["query", "offset"].
func FuzzDecodeLogOffset(f *testing.F) {
	for _, s := range []string{"", "MWE3", controlplane.EncodeLogOffset(true, 1<<63), "MWEwNw", "MWE4888", "////", "MWQxODQ0Njc0NDA3MzcwOTU1MTYxNg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		desc, seq, ok := controlplane.DecodeLogOffset(s)
		if ok && controlplane.EncodeLogOffset(desc, seq) != s {
			t.Fatalf("DecodeLogOffset(%q) = %v, %d, which encodes as %q", s, desc, seq, controlplane.EncodeLogOffset(desc, seq))
		}
		order := "asc"
		if desc {
			order = "desc"
		}
		err := (&controlplane.LogQuery{Type: "build", Order: order, Offset: s}).Validate()
		if (err == nil) != (ok || s == "") {
			t.Fatalf("Validate with offset %q: %v (decodes: %v)", s, err, ok)
		}
		if err != nil {
			diff(t, "problems", []string{"query.offset: value_error"}, locTypes(problems(t, err)))
		}
	})
}
