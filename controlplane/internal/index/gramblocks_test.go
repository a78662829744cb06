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
// the lowercased name padded with NULs, the place's byte, the tail; an
// empty value), its entries' changes of the counts folded. Lists answer
// from those records as they did; entries added since are packed into
// blocks by Fold, beside the earlier records in the same lists; lists
// answer the same whatever is removed and added.
func TestGramRecordsOfEarlierBuilds(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	x := index.New(nil)
	names := []string{"agent-0001234", "Agent-0001235", "web", "w", "api-gateway", "agent-0099999", "ab"}
	var live []*entry
	earlier := map[string]bool{}
	for i, n := range names {
		e := &entry{id: i + 1, at: t0.Add(time.Duration(i) * time.Minute), name: n}
		live = append(live, e)
		s := strings.ToLower(n)
		if len(s) == 1 {
			earlier[tenantA+s+"\x00\x00\x00"+e.entry().Tail] = true
		}
		for p, padded := 0, s+"\x00"; len(s) > 1 && p+3 <= len(padded); p++ {
			earlier[tenantA+padded[p:p+3]+string(rune(p))+e.entry().Tail] = true
		}
		put(t, st, tenantA, nil, e)
	}
	// The earlier build folded the counts, and its gram index is the
	// records alone.
	fold(t, st, 1024)
	update(t, st, func(tx store.Tx) error {
		for _, col := range []string{index.ColGrams, index.ColGramBlocks} {
			err := tx.Scan(col, "", nil, func(k string, _ []byte) (bool, error) {
				return true, tx.Delete(col, k)
			})
			if err != nil {
				return err
			}
		}
		for k := range earlier {
			if err := tx.Put(index.ColGrams, k, nil); err != nil {
				return err
			}
		}
		return nil
	})
	needles := []string{"a", "w", "age", "AGENT-00012", "0001235", "99", "gate", "-", "b", "zz", "eb", "agent-0001234", "agent-00012"}
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
	// blocks counts the gram index's blocks and records (markers left
	// out: one per list with blocks, checked here).
	blocks := func() (blocks, records int) {
		t.Helper()
		d, err := storetest.Dump(ctx, st, index.ColGrams, index.ColGramBlocks)
		if err != nil {
			t.Fatal(err)
		}
		lists := map[string]bool{}
		for k := range d[index.ColGramBlocks] {
			blocks++
			lists[k[:len(tenantA)+4]] = true
		}
		markers := 0
		for k := range d[index.ColGrams] {
			if k[len(tenantA)+4:] == "\x00" {
				markers++
				if !lists[k[:len(tenantA)+4]] {
					t.Errorf("a marker %q of a list without blocks", k)
				}
			} else {
				records++
			}
		}
		if markers != len(lists) {
			t.Errorf("%d markers of %d lists with blocks", markers, len(lists))
		}
		return blocks, records
	}
	check("the earlier build's records")
	fold(t, st, 1024)
	if b, r := blocks(); b != 0 || r != len(earlier) {
		t.Fatalf("Fold over the earlier build's records: %d blocks, %d records; want none and %d", b, r, len(earlier))
	}
	check("the earlier build's records, folded again")

	// Entries added since: their records as the earlier build wrote them,
	// then packed into blocks of two tails.
	for i, n := range []string{"Agent-7", "agent-0001236", "web2", "x"} {
		e := &entry{id: 100 + i, at: t0.Add(time.Hour + time.Duration(i)*time.Second), name: n}
		put(t, st, tenantA, nil, e)
		live = append(live, e)
	}
	if b, r := blocks(); b != 0 || r != len(earlier)+6+12+3+1 {
		t.Errorf("new entries named Agent-7, agent-0001236, web2 and x: %d blocks, %d gram records, want none and %d", b, r, len(earlier)+6+12+3+1)
	}
	check("the earlier build's records and new ones")
	foldGrams(t, st, 3, 2)
	if b, r := blocks(); b == 0 || r != len(earlier) {
		t.Errorf("after Fold: %d blocks, %d gram records; want some and %d", b, r, len(earlier))
	}
	check("the earlier build's records and blocks")
	// Removed: entries of the earlier build's records, and of blocks.
	for _, i := range []int{0, 3, 4, 8} {
		remove(t, st, tenantA, live[i])
	}
	live = slices.Delete(live, 8, 9)
	live = slices.Delete(live, 3, 5)
	live = live[1:]
	check("entries removed")
	older := &entry{id: 200, at: t0.Add(90 * time.Minute), name: "agent-0001237"}
	put(t, st, tenantA, nil, older)
	live = append(live, older)
	foldGrams(t, st, 1024, 2)
	check("entries removed and added")
	for _, e := range live {
		remove(t, st, tenantA, e)
	}
	d, err := storetest.Dump(ctx, st, index.ColGrams, index.ColGramBlocks)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 0 {
		t.Errorf("every entry removed, the gram index still holds %q", d)
	}
}
