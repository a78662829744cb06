package controlplane_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// gate is a Deployer that moves each revision to the status where its
// work takes long (BUILDING when it builds an image, DEPLOYING otherwise)
// and holds it there until the test releases it; then it reports
// DEPLOYED. It counts the units of each tenant it holds.
type gate struct {
	mu      sync.Mutex
	held    map[string][]chan struct{} // tenant -> the held units' release channels, oldest first
	most    map[string]int             // tenant -> most units held at once
	started map[string]int             // tenant -> Deploy calls
	arrived chan string                // the tenant of each unit as it is held, when not nil
}

func newGate() *gate {
	return &gate{held: map[string][]chan struct{}{}, most: map[string]int{}, started: map[string]int{}}
}

func (g *gate) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	hold := controlplane.RevisionDeploying
	if slices.Contains(path, controlplane.RevisionBuilding) {
		hold = controlplane.RevisionBuilding
	}
	at, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, hold, controlplane.Step{})
	if err != nil {
		return err
	}
	release := make(chan struct{})
	g.mu.Lock()
	g.started[w.Tenant]++
	g.held[w.Tenant] = append(g.held[w.Tenant], release)
	g.most[w.Tenant] = max(g.most[w.Tenant], len(g.held[w.Tenant]))
	g.mu.Unlock()
	if g.arrived != nil {
		g.arrived <- w.Tenant
	}
	select {
	case <-release:
	case <-ctx.Done():
		g.mu.Lock()
		g.held[w.Tenant] = slices.DeleteFunc(g.held[w.Tenant], func(c chan struct{}) bool { return c == release })
		g.mu.Unlock()
		return nil
	}
	_, err = controlplane.Advance(ctx, r, w.Revision.Source, at, controlplane.RevisionDeployed, controlplane.Step{})
	return err
}

func (g *gate) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

// holding returns how many units of tenant the gate holds.
func (g *gate) holding(tenant string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held[tenant])
}

// release lets the i-th oldest held unit of tenant go on to DEPLOYED.
func (g *gate) release(tenant string, i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.held[tenant][i]
	g.held[tenant] = slices.Delete(g.held[tenant], i, i+1)
	close(c)
}

// createWork creates n deployments of tenant, github ones (built) and
// external_docker ones alternately, with the GitHub installation inst.
func createWork(t testing.TB, cp *controlplane.ControlPlane, tenant string, inst int64, n int) []*controlplane.Deployment {
	t.Helper()
	ctx := context.Background()
	var integ string
	var ds []*controlplane.Deployment
	for i := range n {
		body := dockerBody(fmt.Sprint("d", i))
		if i%2 == 0 {
			if integ == "" {
				in, err := cp.CreateIntegration(ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(inst), Name: new("acme")})
				if err != nil {
					t.Fatal(err)
				}
				integ = in.ID
			}
			body = githubBody(fmt.Sprint("d", i), integ)
		}
		d, err := cp.CreateDeployment(ctx, tenant, decode[controlplane.CreateDeploymentRequest](t, body))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// statusCounts counts the latest revisions of ds by status.
func statusCounts(t testing.TB, cp *controlplane.ControlPlane, tenant string, ds []*controlplane.Deployment) map[controlplane.RevisionStatus]int {
	t.Helper()
	out := map[controlplane.RevisionStatus]int{}
	for _, d := range ds {
		rev, err := cp.GetRevision(context.Background(), tenant, d.ID, *d.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		out[rev.Status]++
	}
	return out
}

// TestTenantShareOfWorkers: a tenant with more work waiting than its share
// of the workers (Options.TenantWorkers) builds and deploys at most its
// share at once; another tenant's revision, created later, is claimed by a
// free worker and reaches DEPLOYED while the first tenant's units are all
// still held; once they are released, every revision is DEPLOYED.
func TestTenantShareOfWorkers(t *testing.T) {
	inBubbleOverStores(t, testTenantShare)
}

func testTenantShare(t *testing.T, st store.Store) {
	const workers, share = 4, 2
	cp := controlplane.New(st, &controlplane.Options{Workers: workers, TenantWorkers: share})
	g := newGate()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, g) }()

	as := createWork(t, cp, tenantA, 1, 7)
	synctest.Wait() // Run has claimed what it may, and every unit it drives is held
	if n := g.holding(tenantA); n != share {
		t.Fatalf("tenant A has %d units in flight of its %d waiting, %d workers; want its share, %d", n, len(as), workers, share)
	}
	// The API shows it too: A builds one revision and deploys another, the
	// rest wait.
	counts := statusCounts(t, cp, tenantA, as)
	if counts[controlplane.RevisionBuilding]+counts[controlplane.RevisionDeploying] != share || counts[controlplane.RevisionCreating] != len(as)-share {
		t.Errorf("tenant A's revisions by status: %v; want %d building or deploying, the rest CREATING", counts, share)
	}

	bs := createWork(t, cp, tenantB, 2, 1)
	synctest.Wait()
	if n := g.holding(tenantB); n != 1 {
		t.Fatalf("tenant B's revision is not being driven (%d held) while tenant A waits at its share", n)
	}
	g.release(tenantB, 0)
	synctest.Wait()
	if c := statusCounts(t, cp, tenantB, bs); c[controlplane.RevisionDeployed] != 1 {
		t.Fatalf("tenant B's revision: %v; want DEPLOYED", c)
	}
	if n := g.holding(tenantA); n != share {
		t.Fatalf("tenant A holds %d units after B's was done, want still %d", n, share)
	}

	// Release A's units one at a time: each frees a place that A's next
	// waiting revision takes.
	for g.holding(tenantA) > 0 {
		g.release(tenantA, 0)
		synctest.Wait()
		waiting := len(as) - g.started[tenantA]
		if n := g.holding(tenantA); n > share || (waiting > 0 && n != share) {
			t.Fatalf("tenant A holds %d units with %d waiting; want %d", n, waiting, min(share, n+waiting))
		}
	}
	if c := statusCounts(t, cp, tenantA, as); c[controlplane.RevisionDeployed] != len(as) {
		t.Fatalf("tenant A's revisions after every release: %v; want all DEPLOYED", c)
	}
	if g.most[tenantA] != share || g.started[tenantA] != len(as) {
		t.Errorf("tenant A: at most %d units at once, %d Deploys; want %d and %d", g.most[tenantA], g.started[tenantA], share, len(as))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestTenantShareProperty: for random mixes of tenants' work, worker
// counts and TenantWorkers (the default 0, no cap -1, and caps below,
// at and above Workers), released in random order: no tenant ever has
// more than its share in flight, and whenever the loop is idle with a
// worker free, every tenant with work waiting has its full share in
// flight (nobody starves). In the end every revision is DEPLOYED.
func TestTenantShareProperty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// rapid asks a *testing.T for its deadline, which a bubble's may
		// not tell: hand it the T as a plain testing.TB.
		rapid.Check(struct{ testing.TB }{t}, func(rt *rapid.T) { checkTenantShare(rt) })
	})
}

func checkTenantShare(rt *rapid.T) {
	tenants := []string{tenantA, tenantB, "5c1e7d9a-2b3f-4c6d-8e0a-1f2b3c4d5e6f"}
	workers := rapid.IntRange(1, 6).Draw(rt, "workers")
	tw := rapid.IntRange(-1, workers+1).Draw(rt, "tenant workers")
	share := min(tw, workers)
	switch {
	case tw == 0:
		share = max(1, workers/4)
	case tw < 0:
		share = workers
	}

	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, &controlplane.Options{Workers: workers, TenantWorkers: tw})
	g := newGate()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, g) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			rt.Fatal(err)
		}
	}()

	created := map[string]int{}
	var deps []struct {
		tenant string
		d      *controlplane.Deployment
	}
	budget := rapid.IntRange(1, 16).Draw(rt, "revisions")
	for {
		synctest.Wait()
		total := 0
		for _, tn := range tenants {
			total += g.holding(tn)
		}
		if total > workers {
			rt.Fatalf("%d units in flight, %d workers", total, workers)
		}
		var held []string // a tenant per held unit
		for _, tn := range tenants {
			n := g.holding(tn)
			if n > share {
				rt.Fatalf("tenant %s holds %d units, its share is %d", tn, n, share)
			}
			if waiting := created[tn] - g.started[tn]; waiting > 0 && n < share && total < workers {
				rt.Fatalf("tenant %s has %d waiting and %d of its %d in flight while %d of %d workers are busy: it starves",
					tn, waiting, n, share, total, workers)
			}
			for range n {
				held = append(held, tn)
			}
		}
		if budget == 0 && len(held) == 0 {
			break
		}
		if budget > 0 && (len(held) == 0 || rapid.Bool().Draw(rt, "create")) {
			tn := rapid.SampledFrom(tenants).Draw(rt, "tenant")
			n := rapid.IntRange(1, budget).Draw(rt, "burst")
			budget -= n
			for i := range n {
				d, err := cp.CreateDeployment(ctx, tn, decode[controlplane.CreateDeploymentRequest](rt, dockerBody(fmt.Sprint("d", created[tn]+i))))
				if err != nil {
					rt.Fatal(err)
				}
				deps = append(deps, struct {
					tenant string
					d      *controlplane.Deployment
				}{tn, d})
			}
			created[tn] += n
			continue
		}
		i := rapid.IntRange(0, len(held)-1).Draw(rt, "release")
		tn := held[i]
		g.release(tn, i-slices.Index(held, tn)) // held lists each tenant's units together
	}
	for _, x := range deps {
		rev, err := cp.GetRevision(ctx, x.tenant, x.d.ID, *x.d.LatestRevisionID)
		if err != nil {
			rt.Fatal(err)
		}
		if rev.Status != controlplane.RevisionDeployed {
			rt.Fatalf("revision %s of tenant %s is %s after every release", rev.ID, x.tenant, rev.Status)
		}
	}
	for _, tn := range tenants {
		if g.most[tn] > share {
			rt.Fatalf("tenant %s held %d units at once, its share is %d", tn, g.most[tn], share)
		}
	}
}
