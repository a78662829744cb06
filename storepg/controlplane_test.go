package storepg_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/storepg"
)

// The control plane over storepg as replicas run it: several ControlPlanes,
// each over its own Store with its own pool, over one schema. These tests
// mirror the concurrency and lease tests of package controlplane (written
// there over storemem and storebolt, where every replica shares one Store
// value), here across connection pools and SERIALIZABLE retries.

const cpTenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

// replicas returns n ControlPlanes, each over its own Store (and pool) over
// one new schema.
func replicas(t *testing.T, n int, opts *controlplane.Options) []*controlplane.ControlPlane {
	t.Helper()
	schema := newSchema(t, nil)
	var cps []*controlplane.ControlPlane
	for range n {
		cps = append(cps, controlplane.New(openSchema(t, schema, nil), opts))
	}
	return cps
}

func dockerRequest(name, image string) *controlplane.CreateDeploymentRequest {
	return &controlplane.CreateDeploymentRequest{
		Name:                 new(name),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(image)},
	}
}

func githubRequest(name, integrationID string) *controlplane.CreateDeploymentRequest {
	return &controlplane.CreateDeploymentRequest{
		Name:                 new(name),
		Source:               new(controlplane.SourceGitHub),
		SourceConfig:         &controlplane.SourceConfig{IntegrationID: new(integrationID), RepoURL: new("https://github.com/acme/agent")},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")},
	}
}

// allRevisions lists every revision of a deployment, newest first.
func allRevisions(t *testing.T, cp *controlplane.ControlPlane, deploymentID string) []controlplane.Revision {
	t.Helper()
	page, err := cp.ListRevisions(context.Background(), cpTenant, deploymentID, &controlplane.ListRevisionsQuery{Limit: new(100)})
	if err != nil {
		t.Fatalf("ListRevisions: %v", err)
	}
	return page.Resources
}

// TestReplicasRaceCreatesAndPatches races creates of the same names and
// PATCHes of one deployment from two replicas: each name is created exactly
// once (the others get ErrConflict), and every accepted PATCH leaves exactly
// its own revision, the newest of which is latest_revision_id, as both
// replicas see it.
func TestReplicasRaceCreatesAndPatches(t *testing.T) {
	ctx := context.Background()
	cps := replicas(t, 2, nil)
	target, err := cps[0].CreateDeployment(ctx, cpTenant, dockerRequest("target", "r/a:0"))
	if err != nil {
		t.Fatal(err)
	}
	const workers, names = 8, 5
	var (
		mu        sync.Mutex
		winners   = map[string][]string{} // name -> ids of successful creates
		conflicts int
		patched   = map[string]string{} // revision id -> image_uri its PATCH sent
	)
	var wg sync.WaitGroup
	for w := range workers {
		cp := cps[w%2]
		wg.Go(func() {
			for i := range names {
				name := fmt.Sprint("n", i)
				d, err := cp.CreateDeployment(ctx, cpTenant, dockerRequest(name, "r/b:1"))
				image := fmt.Sprintf("r/a:%d.%d", w, i)
				p, perr := cp.UpdateDeployment(ctx, cpTenant, target.ID, &controlplane.UpdateDeploymentRequest{
					SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(image)}})
				mu.Lock()
				switch {
				case err == nil:
					winners[name] = append(winners[name], d.ID)
				case errors.Is(err, apierr.ErrConflict):
					conflicts++
				default:
					t.Errorf("create %s: %v", name, err)
				}
				if perr != nil {
					t.Errorf("patch: %v", perr)
				} else {
					patched[*p.LatestRevisionID] = image
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	wantIDs := []string{target.ID}
	for i := range names {
		ids := winners[fmt.Sprint("n", i)]
		if len(ids) != 1 {
			t.Errorf("name n%d created %d times, want once", i, len(ids))
		}
		wantIDs = append(wantIDs, ids...)
	}
	if conflicts != workers*names-names {
		t.Errorf("%d conflicts, want %d", conflicts, workers*names-names)
	}
	if len(patched) != workers*names {
		t.Errorf("%d PATCHes returned %d distinct latest_revision_ids", workers*names, len(patched))
	}

	var seen []any
	for i, cp := range cps {
		revs := allRevisions(t, cp, target.ID)
		got := map[string]string{}
		for _, r := range revs[:len(revs)-1] {
			got[r.ID] = *r.SourceRevisionConfig.ImageURI
		}
		if d := cmp.Diff(patched, got); d != "" {
			t.Errorf("replica %d: revisions after the first (id -> image_uri) differ from the PATCHes' (-want +got):\n%s", i, d)
		}
		if first := revs[len(revs)-1]; first.ID != *target.LatestRevisionID {
			t.Errorf("replica %d: oldest revision %s, want the create's %s", i, first.ID, *target.LatestRevisionID)
		}
		dep, err := cp.GetDeployment(ctx, cpTenant, target.ID)
		if err != nil {
			t.Fatal(err)
		}
		if *dep.LatestRevisionID != revs[0].ID || *dep.SourceRevisionConfig.ImageURI != *revs[0].SourceRevisionConfig.ImageURI {
			t.Errorf("replica %d: latest_revision_id %s (image %s), want the newest revision %s (image %s)", i,
				*dep.LatestRevisionID, *dep.SourceRevisionConfig.ImageURI, revs[0].ID, *revs[0].SourceRevisionConfig.ImageURI)
		}
		all, err := cp.ListDeployments(ctx, cpTenant, &controlplane.ListDeploymentsQuery{Limit: new(100)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range all.Resources {
			ids = append(ids, d.ID)
		}
		if d := cmp.Diff(wantIDs, ids, sortStrings); d != "" {
			t.Errorf("replica %d: listed deployments (-want +got):\n%s", i, d)
		}
		seen = append(seen, []any{dep, revs, all})
	}
	if d := cmp.Diff(seen[0], seen[1]); d != "" {
		t.Errorf("the replicas disagree (-replica 0 +replica 1):\n%s", d)
	}
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string { return slices.Sorted(slices.Values(in)) })

// TestReplicasListWhileCreating creates deployments with distinct names from
// both replicas while a third goroutine lists them through the second: every
// list is a consistent snapshot (newest first, no duplicates, never fewer
// than the list before), and at the end both replicas list exactly what was
// created, whole or in pages.
func TestReplicasListWhileCreating(t *testing.T) {
	ctx := context.Background()
	cps := replicas(t, 2, nil)
	const writers, each = 8, 6
	var (
		mu      sync.Mutex
		created []string
	)
	done := make(chan struct{})
	listed := make(chan []string)
	go func() {
		var last []string
		defer func() { listed <- last }()
		for {
			page, err := cps[1].ListDeployments(ctx, cpTenant, &controlplane.ListDeploymentsQuery{Limit: new(100)})
			if err != nil {
				t.Errorf("list: %v", err)
				return
			}
			ids := checkNewestFirst(t, page.Resources)
			if len(ids) < len(last) {
				t.Errorf("a list found %d deployments after one found %d", len(ids), len(last))
			}
			last = ids
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				d, err := cps[(w+i)%2].CreateDeployment(ctx, cpTenant, dockerRequest(fmt.Sprintf("agent-%d-%d", w, i), "r/a:1"))
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				mu.Lock()
				created = append(created, d.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(done)
	if last := <-listed; len(last) == 0 {
		t.Errorf("the concurrent lists found nothing")
	}
	for i, cp := range cps {
		all, err := cp.ListDeployments(ctx, cpTenant, &controlplane.ListDeploymentsQuery{Limit: new(100)})
		if err != nil {
			t.Fatal(err)
		}
		ids := checkNewestFirst(t, all.Resources)
		if d := cmp.Diff(created, ids, sortStrings); d != "" {
			t.Errorf("replica %d lists other deployments than were created (-created +listed):\n%s", i, d)
		}
		var paged []string
		for offset := 0; ; {
			page, err := cp.ListDeployments(ctx, cpTenant, &controlplane.ListDeploymentsQuery{Limit: new(7), Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Resources) == 0 {
				break
			}
			for _, d := range page.Resources {
				paged = append(paged, d.ID)
			}
			offset = page.Offset
		}
		if d := cmp.Diff(ids, paged); d != "" {
			t.Errorf("replica %d: pages of 7 differ from the whole list (-whole +pages):\n%s", i, d)
		}
		some, err := cp.ListDeployments(ctx, cpTenant, &controlplane.ListDeploymentsQuery{Limit: new(100), NameContains: "T-3-"})
		if err != nil {
			t.Fatal(err)
		}
		if len(some.Resources) != each {
			t.Errorf("replica %d: name_contains finds %d of writer 3's deployments, want %d", i, len(some.Resources), each)
		}
	}
}

// checkNewestFirst checks that ds is newest first without duplicates and
// returns their ids.
func checkNewestFirst(t *testing.T, ds []controlplane.Deployment) []string {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	for i, d := range ds {
		if seen[d.ID] {
			t.Errorf("deployment %s listed twice", d.ID)
		}
		seen[d.ID] = true
		if i > 0 && d.CreatedAt.After(ds[i-1].CreatedAt) {
			t.Errorf("list not newest first: %s (%v) after %s (%v)", d.ID, d.CreatedAt, ds[i-1].ID, ds[i-1].CreatedAt)
		}
		ids = append(ids, d.ID)
	}
	return ids
}

// recorder wraps a Deployer shared by several replicas and fails the test
// when two calls for one revision (or one teardown) overlap in time,
// whichever replicas make them.
//
// Every call first waits until the recorder has seen replicas distinct
// replicas start work (or its ctx ends): with each replica's Workers below
// the amount of work, each of them takes part, however the machine
// schedules them.
type recorder struct {
	t        *testing.T
	inner    controlplane.Deployer
	mu       sync.Mutex
	inflight map[string]string   // work -> the replica doing it
	starts   map[string][]string // work -> the replicas that started it, in order
	replicas int                 // the number of replicas that must start work before any goes on
	seen     map[string]bool     // the replicas that started work
	all      chan struct{}       // closed once replicas replicas started work
}

func newRecorder(t *testing.T, inner controlplane.Deployer, replicas int) *recorder {
	return &recorder{t: t, inner: inner, inflight: map[string]string{}, starts: map[string][]string{},
		replicas: replicas, seen: map[string]bool{}, all: make(chan struct{})}
}

// replica is the Deployer the named replica runs.
func (r *recorder) replica(name string) controlplane.Deployer { return &replicaDeployer{r, name} }

func (r *recorder) enter(work, replica string) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if other, ok := r.inflight[work]; ok {
		r.t.Errorf("%s: started by %s while %s still drives it", work, replica, other)
	}
	r.inflight[work] = replica
	r.starts[work] = append(r.starts[work], replica)
	if !r.seen[replica] {
		r.seen[replica] = true
		if len(r.seen) == r.replicas {
			close(r.all)
		}
	}
	return func() {
		r.mu.Lock()
		delete(r.inflight, work)
		r.mu.Unlock()
	}
}

type replicaDeployer struct {
	r    *recorder
	name string
}

func (d *replicaDeployer) Deploy(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter) error {
	defer d.r.enter("revision "+w.Revision.ID, d.name)()
	if err := d.r.wait(ctx); err != nil {
		return err
	}
	return d.r.inner.Deploy(ctx, w, rep)
}

func (d *replicaDeployer) Teardown(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
	defer d.r.enter("teardown of "+dep.ID, d.name)()
	if err := d.r.wait(ctx); err != nil {
		return err
	}
	return d.r.inner.Teardown(ctx, tenant, dep)
}

// wait waits until every replica has started some work.
func (r *recorder) wait(ctx context.Context) error {
	select {
	case <-r.all:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestReplicasRunLeases runs Run on two replicas over one schema with a
// simulated Deployer while deployments are created, PATCHed and deleted
// through both: no revision or teardown is ever driven by both at once
// (nor started twice), both replicas do some of the work, every revision
// ends terminal, every deployment ends READY on its newest revision, and
// the deleted ones are gone.
//
// Nothing in it depends on how fast the machine is: leases expire by the
// injected clock, which moves a microsecond per reading, so no lease
// expires however slow a replica is (a second start would be a real
// double claim, not a stall), and both replicas take part because no work
// goes on until each has started some (recorder.wait; two workers each,
// so neither can hold all the work). The test waits for the outcome, with
// no deadline of its own (go test's -timeout bounds it).
func TestReplicasRunLeases(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), time.Microsecond)
	cps := replicas(t, 2, &controlplane.Options{Clock: clock.Now, PollInterval: 5 * time.Millisecond, Workers: 2})
	rec := newRecorder(t, walkTagged, 2)
	runCtx, stop := context.WithCancel(ctx)
	var runs sync.WaitGroup
	for i, cp := range cps {
		runs.Go(func() {
			if err := cp.Run(runCtx, rec.replica(fmt.Sprint("replica ", i))); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	defer runs.Wait()
	defer stop()

	in, err := cps[0].CreateIntegration(ctx, cpTenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(1)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var ds []*controlplane.Deployment
	for i := range n {
		req := dockerRequest(fmt.Sprint("d", i), fmt.Sprintf("r/d%d:v1", i))
		if i%4 == 0 {
			req = githubRequest(fmt.Sprint("d", i), in.ID)
		}
		d, err := cps[i%2].CreateDeployment(ctx, cpTenant, req)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	// New revisions for some (superseding or following the first), through
	// the other replica, and deletes of two.
	deleted := map[string]bool{}
	for i, d := range ds {
		cp := cps[(i+1)%2]
		switch {
		case i == 5 || i == 8:
			if err := cp.DeleteDeployment(ctx, cpTenant, d.ID); err != nil {
				t.Fatal(err)
			}
			deleted[d.ID] = true
		case i%4 != 0 && i%3 == 0:
			for v := 2; v <= 3; v++ {
				if _, err := cp.UpdateDeployment(ctx, cpTenant, d.ID, &controlplane.UpdateDeploymentRequest{
					SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(fmt.Sprintf("r/d%d:v%d", i, v))}}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	for _, d := range ds {
		for !settled(t, cps[1], d, deleted[d.ID]) {
			time.Sleep(5 * time.Millisecond) // polls the outcome: how long it waits decides nothing
		}
	}
	stop()
	runs.Wait()

	byReplica := map[string]int{}
	for work, starts := range rec.starts {
		if len(starts) != 1 {
			t.Errorf("%s was started %d times (%v)", work, len(starts), starts)
		}
		byReplica[starts[0]]++
	}
	if len(byReplica) != 2 {
		t.Errorf("work done per replica: %v; want both to take part", byReplica)
	}
	t.Logf("work done per replica: %v", byReplica)
}

// settled reports whether d is done with: gone if it was deleted, else
// every revision terminal and the deployment READY on its newest revision
// with that revision's image tag as image_version.
func settled(t *testing.T, cp *controlplane.ControlPlane, d *controlplane.Deployment, deleted bool) bool {
	t.Helper()
	ctx := context.Background()
	if deleted {
		_, err := cp.GetDeployment(ctx, cpTenant, d.ID)
		if errors.Is(err, apierr.ErrNotFound) {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	// The revisions first: once all are terminal, the deployment read
	// after them shows their outcome.
	revs := allRevisions(t, cp, d.ID)
	for _, r := range revs {
		if !controlplane.IsTerminal(r.Status) {
			return false
		}
	}
	if revs[0].Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: newest revision %s ended %s, want DEPLOYED", d.Name, revs[0].ID, revs[0].Status)
	}
	got, err := cp.GetDeployment(ctx, cpTenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != controlplane.StatusReady || got.ActiveRevisionID == nil || *got.ActiveRevisionID != revs[0].ID {
		t.Errorf("%s: status %s, active revision %v; want READY on the newest %s", d.Name, got.Status, got.ActiveRevisionID, revs[0].ID)
	}
	if img := revs[0].SourceRevisionConfig.ImageURI; img != nil {
		want := (*img)[len(*img)-2:]
		if got.ImageVersion == nil || *got.ImageVersion != want {
			t.Errorf("%s: image_version %v, want %s", d.Name, got.ImageVersion, want)
		}
	}
	return true
}

// deployFunc is a Deployer made of a Deploy function; its teardowns succeed.
type deployFunc func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error

func (f deployFunc) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	return f(ctx, w, r)
}

func (deployFunc) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

// walk reports the rest of the happy path at once.
var walk = deployFunc(func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	for _, s := range path[slices.Index(path, w.Revision.Status)+1:] {
		if err := r.Report(ctx, controlplane.Step{Status: s}); err != nil {
			return err
		}
	}
	return nil
})

// walkTagged is walk, reporting the image tag as the image version on
// DEPLOYED (as deploysim does, without its delays).
var walkTagged = deployFunc(func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	for _, s := range path[slices.Index(path, w.Revision.Status)+1:] {
		step := controlplane.Step{Status: s}
		if img := w.Revision.SourceRevisionConfig.ImageURI; img != nil && s == controlplane.RevisionDeployed {
			step.ImageVersion = new((*img)[strings.LastIndexByte(*img, ':')+1:])
		}
		if err := r.Report(ctx, step); err != nil {
			return err
		}
	}
	return nil
})

// TestReplicaTakesOverExpiredLease: while replica a holds a revision's
// lease, replica b finds no work; once a stalls past the lease, b takes the
// revision over and finishes it, and a's late report is refused.
func TestReplicaTakesOverExpiredLease(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), time.Microsecond)
	cps := replicas(t, 2, &controlplane.Options{Clock: clock.Now, LeaseDuration: time.Hour}) // no renewal runs
	a, b := cps[0], cps[1]
	d, err := a.CreateDeployment(ctx, cpTenant, dockerRequest("agent", "r/a:1"))
	if err != nil {
		t.Fatal(err)
	}
	var late error
	ok, err := a.Process(ctx, deployFunc(func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		if err := r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued}); err != nil {
			return err
		}
		if ok, err := b.Process(ctx, walk); ok || err != nil {
			t.Errorf("b took a leased revision: %v, %v", ok, err)
		}
		clock.Advance(2 * time.Hour) // a stalls
		if ok, err := b.Process(ctx, walk); !ok || err != nil {
			t.Errorf("b did not take the expired lease: %v, %v", ok, err)
		}
		late = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionDeployFailed, Message: "late"})
		return nil
	}))
	if !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if !errors.Is(late, apierr.ErrInvalidState) && !errors.Is(late, controlplane.ErrLeaseLost) {
		t.Errorf("a's late report: %v, want a refusal", late)
	}
	for i, cp := range cps {
		rev, err := cp.GetRevision(ctx, cpTenant, d.ID, *d.LatestRevisionID)
		if err != nil || rev.Status != controlplane.RevisionDeployed {
			t.Errorf("replica %d sees revision %v (%v), want DEPLOYED by b", i, rev, err)
		}
	}
	if ok, err := a.Process(ctx, walk); ok || err != nil {
		t.Errorf("work left after the takeover: %v, %v", ok, err)
	}
}

// rapidChecks is how many random sequences TestControlPlaneStateMachine
// runs unless -rapid.checks or RAPID_CHECKS says otherwise: each step costs
// dozens of round trips, so rapid's default of 100 would take minutes.
const rapidChecks = 30

// TestControlPlaneStateMachine runs the controlplane state machine over
// storemem and storepg side by side: every step is checked against the
// model on both, and the same random sequence must give identical results
// and identical store contents. Each sequence gets a new schema.
func TestControlPlaneStateMachine(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testDSN(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	limitRapidChecks(t, rapidChecks)
	controlplanetest.Run(t,
		func() (store.Store, error) { return storemem.New(), nil },
		func() (store.Store, error) {
			return storepg.OpenPool(context.Background(), pool, &storepg.Options{Schema: newSchema(t, pool)})
		},
	)
}

// TestControlPlaneLogs runs the revision logs' model test over storepg,
// a new schema per sequence.
func TestControlPlaneLogs(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testDSN(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	limitRapidChecks(t, rapidChecks)
	controlplanetest.RunLogs(t, func() (store.Store, error) {
		return storepg.OpenPool(context.Background(), pool, &storepg.Options{Schema: newSchema(t, pool)})
	})
}

// TestControlPlaneDeploymentLogs runs the deployment logs' model test
// over storepg, a new schema per sequence.
func TestControlPlaneDeploymentLogs(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testDSN(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	limitRapidChecks(t, rapidChecks)
	controlplanetest.RunDeploymentLogs(t, func() (store.Store, error) {
		return storepg.OpenPool(context.Background(), pool, &storepg.Options{Schema: newSchema(t, pool)})
	})
}

// limitRapidChecks sets rapid's number of checks to n for the rest of the
// test, unless the command line (-rapid.checks) or the environment
// (RAPID_CHECKS) chose one.
func limitRapidChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || os.Getenv("RAPID_CHECKS") != "" {
		return
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	if given {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}

// TestReplicasCreateIntoOneTenant creates deployments into one tenant from
// 64 goroutines across two replicas, each over a pool of 16 connections:
// every create conflicts with the others (they advance the tenant's event
// counter and order counts), and none may fail for it. Both replicas then list exactly
// the deployments created.
func TestReplicasCreateIntoOneTenant(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t, nil)
	var cps []*controlplane.ControlPlane
	for range 2 {
		cps = append(cps, controlplane.New(openSchema(t, schema, &storepg.Options{MaxConns: 16}), nil))
	}
	const goroutines, each = 64, 8
	var (
		mu      sync.Mutex
		created []string
		failed  int
	)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				d, err := cps[g%2].CreateDeployment(ctx, cpTenant, dockerRequest(fmt.Sprintf("agent-%d-%d", g, i), "r/a:1"))
				mu.Lock()
				if err != nil {
					if failed++; failed <= 3 {
						t.Errorf("create: %v", err)
					}
				} else {
					created = append(created, d.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed > 0 {
		t.Fatalf("%d of %d creates failed", failed, goroutines*each)
	}
	for i, cp := range cps {
		var listed []string
		for offset := 0; ; {
			page, err := cp.ListDeployments(ctx, cpTenant, &controlplane.ListDeploymentsQuery{Limit: new(100), Offset: offset})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Resources) == 0 {
				break
			}
			for _, d := range page.Resources {
				listed = append(listed, d.ID)
			}
			offset = page.Offset
		}
		if d := cmp.Diff(created, listed, sortStrings); d != "" {
			t.Errorf("replica %d lists other deployments than were created (-created +listed):\n%s", i, d)
		}
	}
}

// TestReplicasEvents runs controlplanetest's event log checks across two
// replicas over one schema: random sequences of creates, changes,
// sequencer runs and followers on either replica (a new schema per
// sequence), then creates and changes from 16 goroutines across both
// while a follower on each reads.
func TestReplicasEvents(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testDSN(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	limitRapidChecks(t, rapidChecks)
	two := func(tb testing.TB, schema string) [2]store.Store {
		var sts [2]store.Store
		for i := range sts {
			s, err := storepg.OpenPool(context.Background(), pool, &storepg.Options{Schema: schema})
			if err != nil {
				tb.Fatalf("OpenPool: %v", err)
			}
			sts[i] = s
		}
		return sts
	}
	t.Run("random", func(t *testing.T) {
		controlplanetest.EventsAcrossReplicas(t, func(*rapid.T) [2]store.Store { return two(t, newSchema(t, pool)) })
	})
	t.Run("concurrent", func(t *testing.T) {
		controlplanetest.EventsUnderConcurrentWrites(t, two(t, newSchema(t, pool)), 16, 8)
	})
}
