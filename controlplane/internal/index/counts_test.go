package index_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/storemem"
)

// TestOrderCountsPendingAndFolded: deep pages skip exactly over the
// counts, whatever part of the new entries and removals is still a pending
// change and whatever part Fold has folded in: random new entries
// (a clock that stands still or moves by 1 ms to days, so that windows of
// every level fill and empty), removals, folds (in batches of any size,
// over tenants whose prefixes take one byte or several), and pages at
// random offsets, checked against the newest-first order of the entries
// alive.
func TestOrderCountsPendingAndFolded(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		st := storemem.New()
		defer st.Close()
		x := index.New(nil)
		tenants := []string{tenantA, tenantB, tenantC, tenantD}
		tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
		others := rapid.SampledFrom(tenants).Filter(func(tp string) bool { return tp != tenant })
		var alive []*entry
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			switch rapid.SampledFrom([]string{"create", "create", "create", "remove", "fold", "page", "noise"}).Draw(rt, "action") {
			case "create":
				now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Millisecond, 70 * time.Millisecond,
					20 * time.Second, 2 * time.Hour, 13 * 24 * time.Hour}).Draw(rt, "step"))
				e := &entry{id: i, at: now, name: fmt.Sprintf("d%d", i)}
				put(rt, st, tenant, nil, e)
				alive = append(alive, e)
			case "noise": // another tenant's changes, folded in the same scans
				put(rt, st, others.Draw(rt, "other"), nil, &entry{id: i, at: now, name: fmt.Sprintf("d%d", i)})
			case "remove":
				if len(alive) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(alive)-1).Draw(rt, "victim")
				remove(rt, st, tenant, alive[j])
				alive = slices.Delete(alive, j, j+1)
			case "fold":
				fold(rt, st, rapid.SampledFrom([]int{1, 2, 3, 1024}).Draw(rt, "batch"))
			case "page":
				want := slices.Clone(alive)
				newestFirst(want)
				offset := rapid.IntRange(0, len(want)+1).Draw(rt, "offset")
				got := list(rt, st, x, tenant, &index.Query{Limit: 3, Offset: offset})
				exp := page(want, func(*entry) bool { return true }, offset, 3)
				if !slices.Equal(got, exp) {
					rt.Fatalf("page at offset %d: %v, want %v", offset, got, exp)
				}
			}
		}
	})
}
