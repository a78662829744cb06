package index_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

// TestGramRecordsOfEarlierBuilds reads a store whose gram index an
// earlier build wrote: one record per trigram and place of each name,
// written here as that build's bytes (the tenant prefix, the trigram of
// the lowercased name and a NUL, the place's byte, the tail; an empty
// value), beside the other records of its entries. Lists answer from
// those records as they did, FoldGrams moves them all into blocks, and
// lists answer the same, before and after entries are removed and
// added.
func TestGramRecordsOfEarlierBuilds(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	x := index.New(nil)
	names := []string{"agent-0001234", "Agent-0001235", "web", "w", "api-gateway", "agent-0099999", "ab"}
	var live []*entry
	earlier := map[string]string{}
	for i, n := range names {
		e := &entry{id: i + 1, at: t0.Add(time.Duration(i) * time.Minute), name: n}
		live = append(live, e)
		// The earlier build's gram records of the name.
		s := strings.ToLower(n)
		if len(s) == 1 {
			earlier[tenantA+s+"\x00\x00\x00"+e.entry().Tail] = ""
		}
		for p, padded := 0, s+"\x00"; len(s) > 1 && p+3 <= len(padded); p++ {
			earlier[tenantA+padded[p:p+3]+string(rune(p))+e.entry().Tail] = ""
		}
		update(t, st, func(tx store.Tx) error {
			if err := index.Put(tx, tenantA, nil, e.entry()); err != nil {
				return err
			}
			// Only the earlier build's records stand for the gram index.
			return tx.Scan(index.ColGrams, tenantA, nil, func(k string, _ []byte) (bool, error) {
				return true, tx.Delete(index.ColGrams, k)
			})
		})
	}
	update(t, st, func(tx store.Tx) error {
		for k := range earlier {
			if err := tx.Put(index.ColGrams, k, nil); err != nil {
				return err
			}
		}
		return nil
	})
	needles := []string{"a", "w", "age", "AGENT-00012", "0001235", "99", "gate", "-", "b", "zz", "eb", "agent-0001234"}
	check := func(when string) {
		t.Helper()
		all := slices.Clone(live)
		newestFirst(all)
		for _, needle := range needles {
			want := page(all, func(e *entry) bool {
				return strings.Contains(strings.ToLower(e.name), strings.ToLower(needle))
			}, 0, 100)
			if got := list(t, st, x, tenantA, &index.Query{Name: needle, Limit: 100}); !slices.Equal(got, want) {
				t.Errorf("%s: name %q: got %v, want %v", when, needle, got, want)
			}
		}
	}
	check("the earlier build's records")
	// Put writes a new entry's gram records as the earlier build did.
	fresh := &entry{id: 100, at: t0.Add(time.Hour), name: "Agent-7"}
	put(t, st, tenantA, nil, fresh)
	live = append(live, fresh)
	d, err := storetest.Dump(ctx, st, index.ColGrams)
	if err != nil {
		t.Fatal(err)
	}
	for k := range earlier {
		if _, ok := d[index.ColGrams][k]; !ok {
			t.Fatalf("the earlier build's record %q is gone before any fold", k)
		}
	}
	if got := len(d[index.ColGrams]) - len(earlier); got != 6 {
		t.Errorf("a new entry named Agent-7 wrote %d gram records, want 6 as the earlier build", got)
	}
	check("the earlier build's records and a new entry's")

	foldGrams(t, st, 5, 2)
	d, err = storetest.Dump(ctx, st, index.ColGrams, index.ColGramBlocks)
	if err != nil {
		t.Fatal(err)
	}
	if len(d[index.ColGrams]) != 0 || len(d[index.ColGramBlocks]) == 0 {
		t.Fatalf("after FoldGrams: %d gram records, %d blocks; want none and some", len(d[index.ColGrams]), len(d[index.ColGramBlocks]))
	}
	check("folded")
	for _, i := range []int{0, 3, 4} { // in blocks now
		remove(t, st, tenantA, live[i])
	}
	live = slices.Delete(live, 3, 5)
	live = live[1:]
	more := &entry{id: 101, at: t0.Add(30 * time.Second), name: "agent-0001236"} // older than most: lands inside a block's range when folded
	put(t, st, tenantA, nil, more)
	live = append(live, more)
	check("folded, then entries removed and added")
	foldGrams(t, st, 1024, 2)
	check("folded again")
	for _, e := range live {
		remove(t, st, tenantA, e)
	}
	d, err = storetest.Dump(ctx, st, index.ColGrams, index.ColGramBlocks)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 0 {
		t.Errorf("every entry removed, the gram index still holds %v", d)
	}
}
