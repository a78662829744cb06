package index_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/storemem"
)

// orNone is n as an Options field: a drawn 0 means none, which Options
// spells as a negative value (its zero takes the default).
func orNone(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// TestNameContainsAndOffsetsModel checks Name (needles of every length,
// the short ones of 1 and 2 bytes included, pieces of live names at their
// ends and inside, in any case, Unicode needles, bytes no name holds) and
// unfiltered pages at every offset against the obvious filter over every
// entry, while entries are put at times bunched into one instant or
// spread over weeks (the order counts' windows), removed, and their counts
// folded, their gram records moved into blocks in part or in whole, with
// the thresholds of the short needles' two paths and of the long needles'
// place checks drawn small.
func TestNameContainsAndOffsetsModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := storemem.New()
		defer st.Close()
		now := t0
		tick := func() time.Time {
			now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Microsecond, 70 * time.Millisecond, 20 * time.Second,
				2 * time.Hour, 14 * 24 * time.Hour}).Draw(rt, "tick"))
			return now
		}
		// Short needles walk the newest summaries first when their gram
		// lists are many, within a budget, then the lists: both paths and
		// the switch between them at these sizes. Long needles' places:
		// listed, or checked one by one.
		x := index.New(&index.Options{
			ShortNeedleLists:  orNone(rapid.IntRange(0, 40).Draw(rt, "short needle many")),
			ShortNeedleBudget: orNone(rapid.IntRange(0, 48).Draw(rt, "short needle budget")),
			PlaceProbes:       orNone(rapid.IntRange(0, 8).Draw(rt, "place probes")),
		})
		alpha := rapid.SampledFrom([]rune("abcAB1-._kKi"))
		// The gram records are moved into blocks (of a few tails, to
		// have many) at random moments, part of them at a time: a list
		// is then in records and blocks at once.
		blockTails := rapid.SampledFrom([]int{1, 2, 3, 64}).Draw(rt, "block tails")
		maybeFoldGrams := func() {
			if rapid.IntRange(0, 3).Draw(rt, "fold grams") == 0 {
				foldGrams(rt, st, rapid.SampledFrom([]int{1, 3, 1024}).Draw(rt, "gram batch"), blockTails)
			}
		}
		var live []*entry
		n := rapid.IntRange(0, 40).Draw(rt, "n")
		for i := range n {
			// Short names, and names that repeat a trigram (aaaa).
			name := rapid.StringOfN(rapid.SampledFrom([]rune("abAB1k")), 1, 1, -1).Draw(rt, "first") +
				rapid.StringOfN(alpha, 0, 12, -1).Draw(rt, "rest")
			e := &entry{id: i + 1, at: tick(), name: name}
			put(rt, st, tenantA, nil, e)
			live = append(live, e)
			maybeFoldGrams()
		}
		// Noise in another tenant.
		put(rt, st, tenantB, nil, &entry{id: 1, at: tick(), name: "abc"})
		// Remove some, and fold the counts or not.
		live = slices.DeleteFunc(live, func(e *entry) bool {
			if rapid.IntRange(0, 4).Draw(rt, "remove") == 0 {
				remove(rt, st, tenantA, e)
				maybeFoldGrams()
				return true
			}
			return false
		})
		if rapid.Bool().Draw(rt, "fold") {
			fold(rt, st, 1024)
		}
		all := slices.Clone(live)
		newestFirst(all)
		for range 12 {
			q := &index.Query{
				Limit:  rapid.IntRange(1, 10).Draw(rt, "limit"),
				Offset: rapid.IntRange(0, len(all)+2).Draw(rt, "offset"),
			}
			if rapid.Bool().Draw(rt, "first page") { // a selective needle's matches are all on it
				q.Offset = 0
			}
			switch rapid.IntRange(0, 4).Draw(rt, "needle kind") {
			case 0: // no filter: the offset is skipped over the counts
			case 1: // Unicode (the Kelvin sign lowercases to k, İ to 3 bytes), bytes no name holds
				q.Name = rapid.SampledFrom([]string{"\u212a", "\u212aI", "İ", "ſ", "é", "a\x00", "\x00", "zz", "abc", "ab ", "%"}).Draw(rt, "odd needle")
			case 2: // a piece of a live name, at its start, end or inside, in either case
				if len(all) > 0 {
					name := rapid.SampledFrom(all).Draw(rt, "of").name
					i := rapid.IntRange(0, len(name)-1).Draw(rt, "from")
					j := rapid.IntRange(i+1, len(name)).Draw(rt, "to")
					q.Name = name[i:j]
					if rapid.Bool().Draw(rt, "near miss") { // one byte changed: the trigrams either side of it still agree
						b := []byte(q.Name)
						b[rapid.IntRange(0, len(b)-1).Draw(rt, "at")] = byte(alpha.Draw(rt, "byte"))
						q.Name = string(b)
					}
					if rapid.Bool().Draw(rt, "upper") {
						q.Name = strings.ToUpper(q.Name)
					}
				}
			default:
				q.Name = rapid.StringOfN(alpha, 1, 5, -1).Draw(rt, "needle")
			}
			want := page(all, func(e *entry) bool {
				return strings.Contains(strings.ToLower(e.name), strings.ToLower(q.Name))
			}, q.Offset, q.Limit)
			if got := list(rt, st, x, tenantA, q); !slices.Equal(want, got) {
				rt.Fatalf("name %q offset %d limit %d: got %v, want %v", q.Name, q.Offset, q.Limit, got, want)
			}
		}
	})
}

// TestNameContainsNearMisses asks, of names that share most of their
// trigrams, for every piece of each name and for that piece with any one
// byte changed (the trigrams either side of the change still agree with
// the name): the gram index must tell a needle that lies in a name from
// one whose trigrams are all there but not all in a row.
// It asks with the gram records as Put wrote them, and with every other
// one moved into blocks of two tails.
func TestNameContainsNearMisses(t *testing.T) {
	for _, folded := range []bool{false, true} {
		t.Run(fmt.Sprintf("folded=%v", folded), func(t *testing.T) { nearMisses(t, folded) })
	}
}

func nearMisses(t *testing.T, folded bool) {
	st := open(t)
	x := index.New(nil)
	names := []string{"abcabcabcabc", "abcabdabcabc", "aaaaaaaaaaab", "ab-ab-ab-ab-", "x1x1x1x1x2x1", "abcdefghijkl", "abcdefgXijkl", "a"}
	for i, n := range names {
		put(t, st, tenantA, nil, &entry{id: i, at: t0.Add(time.Duration(i) * time.Second), name: n})
		if folded && i%2 == 0 {
			foldGrams(t, st, 1024, 2)
		}
	}
	needles := map[string]bool{}
	for _, n := range names {
		for i := range min(len(n), 2) {
			for j := i + 1; j <= len(n); j++ {
				for k := i; k < j; k++ {
					for _, b := range []byte("aX2") {
						needle := []byte(n[i:j])
						needle[k-i] = b
						needles[string(needle)] = true
					}
				}
			}
		}
	}
	for needle := range needles {
		want := []string{}
		for _, n := range slices.Backward(names) { // newest first
			if strings.Contains(strings.ToLower(n), strings.ToLower(needle)) {
				want = append(want, n)
			}
		}
		got := []string{}
		for _, id := range list(t, st, x, tenantA, &index.Query{Name: needle, Limit: 100}) {
			got = append(got, names[id])
		}
		if !slices.Equal(got, want) {
			t.Errorf("name %q: %q, want %q", needle, got, want)
		}
	}
}
