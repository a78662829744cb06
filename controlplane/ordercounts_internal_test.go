package controlplane

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestOrderCountsPendingAndFolded: deep pages skip exactly over the
// counts, whatever part of the creates and removals is still a pending
// change and whatever part the sequencer has folded in: random creates
// (a clock that stands still or moves by 1 ms to days, so that windows of
// every level fill and empty), removals, folds, and pages at random
// offsets, checked against the newest-first order of the deployments
// alive.
func TestOrderCountsPendingAndFolded(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
		st := storemem.New()
		defer st.Close()
		cp := New(st, &Options{Clock: func() time.Time { return now }})
		const tenant = "t1"
		type dep struct {
			id string
			at time.Time
		}
		var alive []dep
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			switch rapid.SampledFrom([]string{"create", "create", "create", "remove", "fold", "page"}).Draw(rt, "action") {
			case "create":
				now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Millisecond, 70 * time.Millisecond,
					20 * time.Second, 2 * time.Hour, 13 * 24 * time.Hour}).Draw(rt, "step"))
				d, err := cp.CreateDeployment(ctx, tenant, &CreateDeploymentRequest{Name: new(fmt.Sprintf("d%d", i)),
					Source: new(SourceExternalDocker), SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
				if err != nil {
					rt.Fatal(err)
				}
				alive = append(alive, dep{d.ID, now})
			case "remove":
				if len(alive) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(alive)-1).Draw(rt, "victim")
				err := cp.st.Update(ctx, func(tx store.Tx) error {
					rec, err := cp.getDeployment(tx, tenant, alive[j].id)
					if err != nil {
						return err
					}
					return cp.removeDeployment(tx, tenant, rec)
				})
				if err != nil {
					rt.Fatal(err)
				}
				alive = slices.Delete(alive, j, j+1)
			case "fold":
				if err := cp.foldCounts(ctx); err != nil {
					rt.Fatal(err)
				}
			case "page":
				want := slices.Clone(alive)
				slices.SortFunc(want, func(a, b dep) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.id, a.id)) })
				offset := rapid.IntRange(0, len(want)+1).Draw(rt, "offset")
				page, err := cp.ListDeployments(ctx, tenant, &ListDeploymentsQuery{Limit: new(3), Offset: offset})
				if err != nil {
					rt.Fatal(err)
				}
				var got, exp []string
				for _, d := range page.Resources {
					got = append(got, d.ID)
				}
				for _, d := range want[min(offset, len(want)):min(offset+3, len(want))] {
					exp = append(exp, d.id)
				}
				if !slices.Equal(got, exp) {
					rt.Fatalf("page at offset %d: %v, want %v", offset, got, exp)
				}
			}
		}
	})
}
