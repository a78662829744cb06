package storebolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/storemem"
)

// TestMigrateAcrossReopen: a bbolt file of the old key layout, migrated
// and reopened, lists every tenant's deployments as the same fixture
// migrated over storemem does; Migrate on the reopened file finds nothing
// left to move.
func TestMigrateAcrossReopen(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	path := filepath.Join(t.TempDir(), "old.db")
	st := openPath(t, path, nil)
	controlplanetest.LoadLayoutV0(t, st)
	if err := controlplane.New(st, &controlplane.Options{SecretKey: key}).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openPath(t, path, nil)
	cp := controlplane.New(st, &controlplane.Options{SecretKey: key})
	if err := cp.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mem := storemem.New()
	controlplanetest.LoadLayoutV0(t, mem)
	memCP := controlplane.New(mem, &controlplane.Options{SecretKey: key})
	if err := memCP.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"zeta", "alpha"} {
		q := &controlplane.ListDeploymentsQuery{Limit: new(controlplane.MaxPageLimit)}
		want, err := memCP.ListDeployments(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cp.ListDeployments(ctx, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Resources) < 10 {
			t.Fatalf("%s has %d deployments after migrating over storemem", tenant, len(want.Resources))
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%s's deployments (-storemem +storebolt):\n%s", tenant, d)
		}
	}
}
