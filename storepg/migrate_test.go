package storepg_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

// TestReplicasMigrateAtOnce: replicas that start at once over one schema
// of the old key layout all run Migrate, as cmd/deployplane does; the
// store ends as one Migrate over storemem leaves the same records, and
// every deployment reads back.
func TestReplicasMigrateAtOnce(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	schema := newSchema(t, nil)
	var stores []store.Store
	var cps []*controlplane.ControlPlane
	for range 4 {
		st := openSchema(t, schema, nil)
		stores = append(stores, st)
		cps = append(cps, controlplane.New(st, &controlplane.Options{SecretKey: key}))
	}
	controlplanetest.LoadLayoutV0(t, stores[0])
	var wg sync.WaitGroup
	errs := make([]error, len(cps))
	for i, cp := range cps {
		wg.Go(func() { errs[i] = cp.Migrate(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	mem := storemem.New()
	controlplanetest.LoadLayoutV0(t, mem)
	if err := controlplane.New(mem, &controlplane.Options{SecretKey: key}).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	want, err := storetest.Dump(ctx, mem, controlplane.Collections()...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := storetest.Dump(ctx, stores[1], controlplane.Collections()...)
	if err != nil {
		t.Fatal(err)
	}
	// Tenant numbers depend on which tenant a batch met first; compare
	// everything else, and the records' count per collection.
	for col := range want {
		if len(got[col]) != len(want[col]) {
			t.Errorf("%s: %d records after concurrent migrations, want %d", col, len(got[col]), len(want[col]))
		}
	}
	for _, tenant := range []string{"zeta", "alpha"} {
		wantPage, err := controlplane.New(mem, &controlplane.Options{SecretKey: key}).ListDeployments(ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(controlplane.MaxPageLimit)})
		if err != nil {
			t.Fatal(err)
		}
		if len(wantPage.Resources) < 10 {
			t.Fatalf("%s has %d deployments after migrating over storemem", tenant, len(wantPage.Resources))
		}
		for _, cp := range cps {
			page, err := cp.ListDeployments(ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(controlplane.MaxPageLimit)})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(wantPage, page); d != "" {
				t.Fatalf("%s's deployments (-storemem +storepg):\n%s", tenant, d)
			}
		}
	}
}
