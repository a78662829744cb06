package storebolt_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/store"
)

// TestReadCursorsNested checks the cursors a read-only transaction reuses
// (tx.go): Gets and Scans of a collection made from inside a Scan of the
// same collection, nested again, must each see exactly the stored keys,
// and the outer Scan must go on where it was, whatever the inner ones
// sought.
func TestReadCursorsNested(t *testing.T) {
	ctx := context.Background()
	st := openTemp(t, nil)
	var keys []string // sorted
	err := st.Update(ctx, func(tx store.Tx) error {
		for i := range 3000 { // several pages, so cursors hold a stack
			k := fmt.Sprintf("k%05d", i*3)
			keys = append(keys, k)
			for _, col := range []string{"c", "d"} {
				if err := tx.Put(col, k, []byte("v"+k)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := func(prefix string, reverse bool, limit int) []string {
		var ks []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				ks = append(ks, k)
			}
		}
		if reverse {
			slices.Reverse(ks)
		}
		return ks[:min(limit, len(ks))]
	}
	prefixes := rapid.SampledFrom([]string{"", "k0", "k01", "k012", "k0120", "k01200", "k01201", "k9", "j"})
	rapid.Check(t, func(rt *rapid.T) {
		var scan func(r store.Reader, depth int) error
		scan = func(r store.Reader, depth int) error {
			col := rapid.SampledFrom([]string{"c", "d"}).Draw(rt, "collection")
			prefix := prefixes.Draw(rt, "prefix")
			reverse := rapid.Bool().Draw(rt, "reverse")
			limit := rapid.IntRange(1, 40).Draw(rt, "limit")
			var got []string
			err := r.Scan(col, prefix, &store.ScanOptions{Reverse: reverse}, func(k string, v []byte) (bool, error) {
				if string(v) != "v"+k {
					return false, fmt.Errorf("%s: value %q", k, v)
				}
				got = append(got, k)
				switch rapid.IntRange(0, 3).Draw(rt, "inside") {
				case 0: // a Get of the same collection, present or absent
					i := rapid.IntRange(0, 3*len(keys)).Draw(rt, "get")
					g := fmt.Sprintf("k%05d", i)
					v, err := r.Get(col, g)
					switch {
					case i%3 == 0 && i/3 < len(keys) && (err != nil || string(v) != "v"+g):
						return false, fmt.Errorf("Get(%q) = %q, %v", g, v, err)
					case (i%3 != 0 || i/3 >= len(keys)) && !errors.Is(err, store.ErrNotFound):
						return false, fmt.Errorf("Get(%q) of an absent key = %q, %v", g, v, err)
					}
				case 1: // a nested Scan
					if depth < 3 {
						if err := scan(r, depth+1); err != nil {
							return false, err
						}
					}
				}
				return len(got) < limit, nil
			})
			if err != nil {
				return err
			}
			if w := want(prefix, reverse, limit); !slices.Equal(got, w) {
				return fmt.Errorf("Scan(%s, %q, reverse %v, limit %d) at depth %d: %q, want %q", col, prefix, reverse, limit, depth, got, w)
			}
			return nil
		}
		if err := st.View(ctx, func(r store.Reader) error { return scan(r, 0) }); err != nil {
			rt.Fatal(err)
		}
	})
}
