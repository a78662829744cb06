package index

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
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

// TestBlockRoundTrip encodes and decodes blocks of tails of every kind:
// version 7 UUIDs made in the millisecond of their time key (the short
// form) or not, other ids, times before 1970, tails that share a time
// key; and decodes truncated blocks without a panic.
func TestBlockRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		base := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
		if rapid.Bool().Draw(rt, "before 1970") {
			base = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		var tails []string
		for range rapid.IntRange(1, 40).Draw(rt, "n") {
			at := base.Add(time.Duration(rapid.Int64Range(0, 5_000_000).Draw(rt, "us")) * time.Microsecond)
			var id string
			switch rapid.IntRange(0, 2).Draw(rt, "id kind") {
			case 0: // controlplane's: a version 7 UUID of the same millisecond
				var u uuid.UUID
				copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "random"))
				ms := uuidTime(binary.BigEndian.Uint64([]byte(keyenc.Time(at))))
				copy(u[:6], ms[:])
				id = u.String()
			case 1: // a UUID of another time
				var u uuid.UUID
				copy(u[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "random"))
				id = u.String()
			default:
				id = rapid.StringN(0, 20, -1).Draw(rt, "id")
			}
			tails = append(tails, keyenc.Time(at)+keyenc.ID(id))
		}
		slices.Sort(tails)
		tails = slices.Compact(tails)
		b := encodeBlock(tails)
		got, err := decodeBlock(b)
		if err != nil || !slices.Equal(got, tails) {
			rt.Fatalf("decodeBlock(encodeBlock(%q)) = %q, %v", tails, got, err)
		}
		// Decoded up to a bound: the tails not newer than it.
		bound := rapid.SampledFrom(tails).Draw(rt, "bound")
		if rapid.Bool().Draw(rt, "between") {
			bound += "\x00"
		}
		data, ends, err := decodeTails(b, bound, nil)
		var upTo []string
		for i, start := 0, 0; err == nil && i < len(ends); i++ {
			upTo, start = append(upTo, data[start:ends[i]]), ends[i]
		}
		want := slices.DeleteFunc(slices.Clone(tails), func(t string) bool { return t > bound })
		if err != nil || !slices.Equal(upTo, want) {
			rt.Fatalf("decodeTails up to %q = %q, %v; want %q", bound, upTo, err, want)
		}
		for n := range len(b) {
			decodeBlock(b[:n]) // an error or tails, never a panic
		}
	})
}
