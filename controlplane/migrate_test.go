package controlplane_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

// readLayoutAnswers reads the answers file: phase -> question -> answer.
func readLayoutAnswers(t *testing.T) map[string]map[string]any {
	f, err := os.Open(layoutAnswersFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			P, Q string
			A    any
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if out[l.P] == nil {
			out[l.P] = map[string]any{}
		}
		out[l.P][l.Q] = l.A
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// jsonValue is v as encoding/json decodes it into an any.
func jsonValue(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLayoutAnswers asks cp (over a migrated fixture) everything the
// fixture's answers file holds and compares.
func checkLayoutAnswers(t *testing.T, cp *controlplane.ControlPlane) {
	want := readLayoutAnswers(t)
	got := map[string]map[string]any{"before": layoutAnswers(t, cp), "work": layoutWork(t, cp), "after": layoutAnswers(t, cp)}
	for phase, qs := range want {
		if len(qs) != len(got[phase]) {
			t.Errorf("%s: %d answers, want %d", phase, len(got[phase]), len(qs))
		}
		for q, w := range qs {
			tenant, _, _ := strings.Cut(q, " ")
			addedSinceFixture(w, tenant)
			if d := cmp.Diff(w, jsonValue(t, got[phase][q])); d != "" {
				t.Errorf("%s: %s (-before +after migration):\n%s", phase, q, d)
			}
		}
	}
}

// addedSinceFixture adds to an answer of the fixture (decoded JSON) the
// members answers gained after it was recorded (wire contract section 9):
// a deployment's tenant_id and display_name (null: the fixture's
// deployments have none), and langgraph_config_path, equal to
// graph_config_path, and source_tarball_path (null), in every
// source_revision_config, and a revision's tracked_packages (null).
func addedSinceFixture(v any, tenant string) {
	switch v := v.(type) {
	case map[string]any:
		if src, ok := v["source_revision_config"].(map[string]any); ok {
			src["langgraph_config_path"] = src["graph_config_path"]
			if _, ok := src["source_tarball_path"]; !ok {
				src["source_tarball_path"] = nil // wire contract section 10
			}
			if _, ok := v["status_history"]; ok {
				if _, ok := v["tracked_packages"]; !ok {
					v["tracked_packages"] = nil // a revision's, section 10
				}
			}
		}
		if _, ok := v["latest_revision_id"]; ok {
			if _, ok := v["tenant_id"]; !ok {
				v["tenant_id"] = tenant
			}
			if _, ok := v["display_name"]; !ok {
				v["display_name"] = nil
			}
		}
		for _, x := range v {
			addedSinceFixture(x, tenant)
		}
	case []any:
		for _, x := range v {
			addedSinceFixture(x, tenant)
		}
	}
}

// checkNoOldKeys: every key of the deployment collections is in the
// current layout (starts with a tenant prefix byte, or "r"/"d" and one).
func checkNoOldKeys(t *testing.T, st store.Store) {
	recs, err := storetest.Dump(context.Background(), st, controlplane.Collections()...)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(recs["cp_deployment_name_blocks"]); n > 0 {
		t.Errorf("%d name blocks left after migration (the gram index and order counts replace them)", n)
	}
	for _, col := range []string{"cp_deployments", "cp_deployment_order", "cp_deployment_summaries", "cp_deployment_pgrams", "cp_deployment_counts",
		"cp_deployment_index", "cp_deployment_names", "cp_revisions", "cp_revision_order", "cp_tracing_projects", "cp_pending"} {
		if len(recs[col]) == 0 {
			t.Errorf("%s is empty after migration", col)
		}
		for k := range recs[col] {
			if col == "cp_pending" {
				k = k[1:]
			}
			if k[0] >= ' ' {
				t.Errorf("%s: key %q is in the old layout after migration", col, k)
			}
		}
	}
}

// TestMigrateLayoutFixture: a store written by the earlier key layout
// answers every list (every filter, name_contains, paging), get, revision
// and listener read as it did there once migrated, and its pending work,
// pushes, name uniqueness and teardowns behave the same.
func TestMigrateLayoutFixture(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	n := controlplanetest.LoadLayoutV0(t, st)
	cp := controlplane.New(st, layoutOptions(100_000, layoutLaterNow))
	if err := cp.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkNoOldKeys(t, st)
	if err := cp.Migrate(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	if n < 500 {
		t.Fatalf("the fixture holds only %d records", n)
	}
	checkLayoutAnswers(t, cp)
	checkListsAgree(t, cp)
}

// checkListsAgree: over the migrated fixture, every unfiltered page (each
// offset, skipped over the order counts) and name_contains for every
// substring of 1 to 4 bytes of the tenants' names, in both cases, answer
// what the whole list, filtered the obvious way, says.
func checkListsAgree(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	ctx := context.Background()
	for _, tenant := range layoutTenants {
		all, err := cp.ListDeployments(ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(controlplane.MaxPageLimit)})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.Resources) < 10 {
			t.Fatalf("%s: only %d deployments", tenant, len(all.Resources))
		}
		needles := map[string]bool{"zzz": true, "\u212a": true}
		for i, d := range all.Resources {
			for n := 1; n <= 4; n++ {
				for j := 0; j+n <= len(d.Name); j++ {
					needles[d.Name[j:j+n]] = true
					needles[strings.ToUpper(d.Name[j:j+n])] = true
				}
			}
			page, err := cp.ListDeployments(ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(3), Offset: i})
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, d := range page.Resources {
				got = append(got, d.ID)
			}
			for _, d := range all.Resources[i:min(i+3, len(all.Resources))] {
				want = append(want, d.ID)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: page of 3 at %d (-want +got):\n%s", tenant, i, d)
			}
		}
		for needle := range needles {
			q := &controlplane.ListDeploymentsQuery{NameContains: needle, Limit: new(controlplane.MaxPageLimit)}
			page, err := cp.ListDeployments(ctx, tenant, q)
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, d := range page.Resources {
				got = append(got, d.ID)
			}
			for _, d := range all.Resources {
				if matches(&d, q) {
					want = append(want, d.ID)
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: name_contains %q (-want +got):\n%s", tenant, needle, d)
			}
		}
	}
}

// failingStore fails every Update after the first few, as a crash would.
type failingStore struct {
	store.Store
	left atomic.Int64
}

var errCrash = errors.New("crash")

func (s *failingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.left.Add(-1) < 0 {
		return errCrash
	}
	return s.Store.Update(ctx, fn)
}

// TestMigrateResumes: a migration stopped after any number of batches
// carries on when run again, and several replicas migrating one store at
// once leave it as one would.
func TestMigrateResumes(t *testing.T) {
	ctx := context.Background()
	controlplane.SetMigrateBatch(t, 16) // several batches per collection
	// The migration takes 48 Updates; the last few move the name blocks.
	for _, crashAfter := range []int64{0, 1, 5, 17, 40, 43, 45, 47} {
		st := storemem.New()
		controlplanetest.LoadLayoutV0(t, st)
		fs := &failingStore{Store: st}
		fs.left.Store(crashAfter)
		err := controlplane.New(fs, layoutOptions(100_000, layoutLaterNow)).Migrate(ctx)
		if !errors.Is(err, errCrash) && err != nil {
			t.Fatalf("crash after %d: %v", crashAfter, err)
		}
		if err == nil {
			t.Fatalf("the migration took only %d Updates", crashAfter-fs.left.Load())
		}
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = controlplane.New(st, layoutOptions(100_000, layoutLaterNow)).Migrate(ctx) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		checkNoOldKeys(t, st)
		t.Run(fmt.Sprint("crash after ", crashAfter), func(t *testing.T) {
			checkLayoutAnswers(t, controlplane.New(st, layoutOptions(100_000, layoutLaterNow)))
			checkListsAgree(t, controlplane.New(st, layoutOptions(200_000, layoutLaterNow)))
		})
	}
}
