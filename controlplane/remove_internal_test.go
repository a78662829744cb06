package controlplane

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

// TestRemoveDeployment checks the helper the lifecycle uses to remove a
// deployment: no record of the store names it afterwards, the others are
// intact, and its name is free again. (It is internal because removal has
// no public entry point until the lifecycle arrives.)
func TestRemoveDeployment(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	ids := 0
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp := New(st, &Options{
		Clock: func() time.Time { now = now.Add(time.Second); return now },
		NewID: func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
	})
	const tenant = "t1"
	var ds []*Deployment
	for i := range 600 { // more than two name blocks
		d, err := cp.CreateDeployment(ctx, tenant, &CreateDeploymentRequest{Name: new(fmt.Sprint("d", i)), Source: new(SourceExternalDocker),
			SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}, TagValueIDs: []string{"11111111-1111-4111-8111-111111111111"}})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	victim := ds[300]
	if _, err := cp.UpdateDeployment(ctx, tenant, victim.ID, &UpdateDeploymentRequest{SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:2")}}); err != nil {
		t.Fatal(err)
	}
	err := st.Update(ctx, func(tx store.Tx) error {
		rec, err := cp.getDeployment(tx, tenant, victim.ID)
		if err != nil {
			return err
		}
		return cp.removeDeployment(tx, tenant, rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	maintain(t, cp)
	records, err := storetest.Dump(ctx, st, Collections()...)
	if err != nil {
		t.Fatal(err)
	}
	for col, recs := range records {
		if col == colTracingProjects || col == eventlog.Events {
			continue // the hook's record; the event log's history (eventlog)
		}
		for k, v := range recs {
			if strings.Contains(k, victim.ID) || strings.Contains(v, victim.ID) || strings.Contains(k, keyenc.ID(victim.ID)) || strings.Contains(v, keyenc.ID(victim.ID)) || strings.Contains(v, "\x00d300\n") {
				t.Errorf("%s/%s still names the removed deployment", col, k)
			}
		}
	}
	for _, q := range []*ListDeploymentsQuery{{Limit: new(100), Offset: 250}, {NameContains: "d30", Limit: new(100)},
		{TagValueIDs: []string{"11111111-1111-4111-8111-111111111111"}, Limit: new(100), Offset: 250}} {
		page, err := cp.ListDeployments(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Resources {
			if d.ID == victim.ID {
				t.Errorf("list %+v returns the removed deployment", q)
			}
		}
		if q.NameContains != "" && len(page.Resources) != 10 { // d30, d301..d309
			t.Errorf("name_contains d30 returned %d deployments, want 10", len(page.Resources))
		}
	}
	if _, err := cp.GetDeployment(ctx, tenant, victim.ID); err == nil {
		t.Error("the removed deployment is still found")
	}
	if _, err := cp.CreateDeployment(ctx, tenant, &CreateDeploymentRequest{Name: new("d300"), Source: new(SourceExternalDocker),
		SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}}); err != nil {
		t.Errorf("reusing the removed deployment's name: %v", err)
	}
}

// TestRemoveManyKeepsIndexes removes deployments in random order and
// checks name_contains and deep pages against what is left; at the end no
// gram record or order count is left.
func TestRemoveManyKeepsIndexes(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	ids := 0
	var now time.Time
	cp := New(st, &Options{
		Clock: func() time.Time { return now },
		NewID: func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
	})
	const tenant = "t1"
	left := map[string]string{} // id -> name
	for i := range 1200 {
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(100000)) * time.Millisecond)
		d, err := cp.CreateDeployment(ctx, tenant, &CreateDeploymentRequest{Name: new(fmt.Sprint("n", i)), Source: new(SourceExternalDocker),
			SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
		if err != nil {
			t.Fatal(err)
		}
		left[d.ID] = d.Name
	}
	order := slices.Collect(maps.Keys(left))
	slices.Sort(order)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for round, id := range order {
		err := st.Update(ctx, func(tx store.Tx) error {
			rec, err := cp.getDeployment(tx, tenant, id)
			if err != nil {
				return err
			}
			return cp.removeDeployment(tx, tenant, rec)
		})
		if err != nil {
			t.Fatal(err)
		}
		delete(left, id)
		if round%97 != 0 && len(left) > 0 {
			continue
		}
		// Unfiltered pages skip over the order counts; the status index
		// (every deployment is AWAITING_DATABASE) skips record by record.
		for _, offset := range []int{0, 1, len(left) / 3, max(0, len(left)-1), len(left), len(left) + 1} {
			var pages [2][]string
			for i, q := range []*ListDeploymentsQuery{{Limit: new(5), Offset: offset}, {Limit: new(5), Offset: offset, Status: StatusAwaitingDatabase}} {
				page, err := cp.ListDeployments(ctx, tenant, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range page.Resources {
					pages[i] = append(pages[i], d.ID)
				}
			}
			if !slices.Equal(pages[0], pages[1]) || len(pages[0]) != min(5, max(0, len(left)-offset)) {
				t.Fatalf("round %d: page at %d of %d: %v, by status %v", round, offset, len(left), pages[0], pages[1])
			}
		}
		for _, needle := range []string{"n", "1", "99", "n11", "zz"} {
			want := 0
			for _, name := range left {
				if strings.Contains(name, needle) {
					want++
				}
			}
			got, offset := 0, 0
			for {
				page, err := cp.ListDeployments(ctx, tenant, &ListDeploymentsQuery{NameContains: needle, Limit: new(100), Offset: offset})
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range page.Resources {
					if left[d.ID] != d.Name || !strings.Contains(d.Name, needle) {
						t.Fatalf("round %d: %q matched %s %s", round, needle, d.ID, d.Name)
					}
				}
				got += len(page.Resources)
				if len(page.Resources) == 0 {
					break
				}
				offset = page.Offset
			}
			if got != want {
				t.Fatalf("round %d: name_contains %q found %d, want %d", round, needle, got, want)
			}
		}
	}
	maintain(t, cp)
	left2, err := storetest.Dump(ctx, st, index.ColGrams, index.ColCounts)
	if err != nil {
		t.Fatal(err)
	}
	for col, recs := range left2 {
		for k := range recs {
			t.Errorf("%s: %q left after every deployment is removed", col, k)
		}
	}
}
