package httphandler

import (
	"path"
	"testing"

	"pgregory.net/rapid"
)

// TestIsClean: isClean answers what comparing with path.Clean does, for
// paths that start with a slash.
func TestIsClean(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		parts := rapid.SliceOf(rapid.SampledFrom([]string{"/", ".", "..", "a", "v2", "-", "..a", ".b"})).Draw(rt, "parts")
		p := "/"
		for _, s := range parts {
			p += s
		}
		if got, want := isClean(p), path.Clean(p) == p; got != want {
			rt.Fatalf("isClean(%q) = %v, path.Clean gives %q", p, got, path.Clean(p))
		}
	})
}
