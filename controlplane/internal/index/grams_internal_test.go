package index

import (
	"slices"
	"testing"
)

// TestNameGramsShape pins the shape of a name's gram records (storemem's
// memory at scale follows their number): max(1, n-1) for a name of n
// bytes, each the trigram at its place of the lowercased name and one NUL.
func TestNameGramsShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"A", []string{"a\x00\x00\x00"}},
		{"Ab", []string{"ab\x00\x00"}},
		{"aaaa", []string{"aaa\x00", "aaa\x01", "aa\x00\x02"}},
		{"agent-0001234", []string{"age\x00", "gen\x01", "ent\x02", "nt-\x03", "t-0\x04", "-00\x05", "000\x06", "001\x07",
			"012\x08", "123\x09", "234\x0a", "34\x00\x0b"}},
	} {
		if got := nameGrams(tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("nameGrams(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
