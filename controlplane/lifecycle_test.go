package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// wantTransitions is the lifecycle of wire contract section 7, written out
// by hand: the second copy of controlplane.Transitions.
var wantTransitions = map[controlplane.Source]map[controlplane.RevisionStatus][]controlplane.RevisionStatus{
	controlplane.SourceGitHub: {
		"CREATING":        {"QUEUED", "CREATE_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"QUEUED":          {"AWAITING_BUILD", "CREATE_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"AWAITING_BUILD":  {"BUILDING", "BUILD_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"BUILDING":        {"AWAITING_DEPLOY", "BUILD_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"AWAITING_DEPLOY": {"DEPLOYING", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"DEPLOYING":       {"DEPLOYED", "DEPLOY_FAILED", "INTERRUPTED", "UNKNOWN"},
		"UNKNOWN": {"QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED",
			"CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "INTERRUPTED"},
	},
	controlplane.SourceExternalDocker: {
		"CREATING":        {"QUEUED", "CREATE_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"QUEUED":          {"AWAITING_DEPLOY", "CREATE_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"AWAITING_DEPLOY": {"DEPLOYING", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
		"DEPLOYING":       {"DEPLOYED", "DEPLOY_FAILED", "INTERRUPTED", "UNKNOWN"},
		"UNKNOWN": {"QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED",
			"CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "INTERRUPTED"},
	},
}

var allRevisionStatuses = []controlplane.RevisionStatus{"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY",
	"DEPLOYING", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "DEPLOYED", "SKIPPED", "INTERRUPTED", "UNKNOWN"}

func TestTransitions(t *testing.T) {
	for src, want := range wantTransitions {
		diff(t, string(src), want, controlplane.Transitions(src))
		for _, s := range allRevisionStatuses {
			if _, ok := want[s]; ok && controlplane.IsTerminal(s) {
				t.Errorf("IsTerminal(%s), but the table has moves out of it", s)
			}
		}
	}
}

// script is a Deployer that calls a function with the Reporter.
type script struct {
	deploy   func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error
	teardown func(ctx context.Context, tenant string, d *controlplane.Deployment) error
}

func (s *script) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	if s.deploy == nil {
		return nil
	}
	return s.deploy(ctx, w, r)
}

func (s *script) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	if s.teardown == nil {
		return nil
	}
	return s.teardown(ctx, tenant, d)
}

// TestReportedStatusesFollowTheTable: random sequences of reported
// statuses never store an illegal sequence; a refused report changes
// nothing; nothing leaves a terminal status.
func TestReportedStatusesFollowTheTable(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := newFixture(t, nil)
		src := rapid.SampledFrom([]controlplane.Source{controlplane.SourceGitHub, controlplane.SourceExternalDocker}).Draw(rt, "source")
		var d *controlplane.Deployment
		if src == controlplane.SourceGitHub {
			d = f.create(tenantA, githubBody("agent", f.integration(tenantA)))
		} else {
			d = f.create(tenantA, dockerBody("agent"))
		}
		reports := rapid.SliceOfN(rapid.SampledFrom(allRevisionStatuses), 1, 12).Draw(rt, "reports")
		stored := []controlplane.RevisionStatus{controlplane.RevisionCreating}
		ok, err := f.cp.Process(f.ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			for _, s := range reports {
				before := dump(t, f.st)
				cur := stored[len(stored)-1]
				err := r.Report(ctx, controlplane.Step{Status: s, Message: "m"})
				rev, gerr := f.cp.GetRevision(ctx, tenantA, d.ID, *d.LatestRevisionID)
				if gerr != nil {
					rt.Fatal(gerr)
				}
				legal := slices.Contains(wantTransitions[src][cur], s)
				switch {
				case err == nil && !legal:
					rt.Fatalf("%s -> %s accepted; the table forbids it", cur, s)
				case err == nil:
					if rev.Status != s {
						rt.Fatalf("accepted %s, stored %s", s, rev.Status)
					}
					stored = append(stored, s)
				case !errors.Is(err, apierr.ErrInvalidState):
					rt.Fatalf("%s -> %s: %v, want ErrInvalidState", cur, s, err)
				case legal:
					rt.Fatalf("%s -> %s refused (%v); the table allows it", cur, s, err)
				default:
					diff(rt, "store after a refused report", before, dump(t, f.st))
				}
			}
			return nil
		}})
		if !ok || err != nil {
			rt.Fatalf("Process = %v, %v", ok, err)
		}
		rev, _ := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID)
		if rev.Status != stored[len(stored)-1] {
			rt.Fatalf("final status %s, last accepted %s", rev.Status, stored[len(stored)-1])
		}
		got, _ := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
		if deployed := rev.Status == controlplane.RevisionDeployed; deployed != (got.Status == controlplane.StatusReady) ||
			deployed != (got.ActiveRevisionID != nil) {
			rt.Fatalf("revision %s, deployment %s with active %v", rev.Status, got.Status, got.ActiveRevisionID)
		}
		// Terminal or not, the work is pending exactly when the revision
		// is not terminal.
		again, err := f.cp.Process(f.ctx, &script{})
		if err != nil || again == controlplane.IsTerminal(rev.Status) {
			rt.Fatalf("after %s, Process found work: %v (%v)", rev.Status, again, err)
		}
	})
}

// walker walks the happy path from the revision's status, one step per
// delay, and fails the test if two Deploys of one revision overlap.
type walker struct {
	t        testing.TB
	step     time.Duration
	mu       sync.Mutex
	inflight map[string]bool
	starts   map[string][]controlplane.RevisionStatus // revision -> statuses Deploy started from
}

func newWalker(t testing.TB, step time.Duration) *walker {
	return &walker{t: t, step: step, inflight: map[string]bool{}, starts: map[string][]controlplane.RevisionStatus{}}
}

func (w *walker) Deploy(ctx context.Context, work *controlplane.Work, r controlplane.Reporter) error {
	id := work.Revision.ID
	w.mu.Lock()
	if w.inflight[id] {
		w.t.Errorf("two Deploys of revision %s at once", id)
	}
	w.inflight[id] = true
	w.starts[id] = append(w.starts[id], work.Revision.Status)
	w.mu.Unlock()
	defer func() { w.mu.Lock(); delete(w.inflight, id); w.mu.Unlock() }()
	path := controlplane.HappyPath(work.Revision.Source)
	for _, next := range path[slices.Index(path, work.Revision.Status)+1:] {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.step):
		}
		if err := r.Report(ctx, controlplane.Step{Status: next, ImageVersion: new("v-" + id)}); err != nil {
			return nil
		}
	}
	return nil
}

func (w *walker) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	return nil
}

// waitDeployed polls until every deployment's latest revision is DEPLOYED.
// It runs inside a synctest bubble: its sleeps and deadline are the
// bubble's fake time, which moves only when every goroutine of the bubble
// is blocked, so the load of the machine cannot make it fail.
func waitDeployed(t *testing.T, cp *controlplane.ControlPlane, ds []*controlplane.Deployment) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, d := range ds {
		for {
			rev, err := cp.GetRevision(context.Background(), tenantA, d.ID, *d.LatestRevisionID)
			if err != nil {
				t.Fatal(err)
			}
			if rev.Status == controlplane.RevisionDeployed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revision %s of %s is still %s", rev.ID, d.Name, rev.Status)
			}
			time.Sleep(2 * time.Millisecond)
		}
		got, err := cp.GetDeployment(context.Background(), tenantA, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != controlplane.StatusReady || *got.ActiveRevisionID != *d.LatestRevisionID || *got.ImageVersion != "v-"+*d.LatestRevisionID {
			t.Errorf("%s: status %s, active %v, image %v", d.Name, got.Status, got.ActiveRevisionID, got.ImageVersion)
		}
	}
}

func createMany(t *testing.T, cp *controlplane.ControlPlane, n int) []*controlplane.Deployment {
	t.Helper()
	in, err := cp.CreateIntegration(context.Background(), tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(1)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	var ds []*controlplane.Deployment
	for i := range n {
		body := dockerBody(fmt.Sprint("d", i))
		if i%2 == 0 {
			body = githubBody(fmt.Sprint("d", i), in.ID)
		}
		d, err := cp.CreateDeployment(context.Background(), tenantA, decode[controlplane.CreateDeploymentRequest](t, body))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// runReplicas runs two ControlPlanes over st until every deployment is
// DEPLOYED: they share the work and never drive one revision twice at once.
func runReplicas(t *testing.T, st store.Store) {
	opts := &controlplane.Options{PollInterval: 5 * time.Millisecond, Workers: 4}
	a, b := controlplane.New(st, opts), controlplane.New(st, opts)
	ds := createMany(t, a, 24)
	w := newWalker(t, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, cp := range []*controlplane.ControlPlane{a, b} {
		wg.Go(func() {
			if err := cp.Run(ctx, w); err != nil {
				t.Error(err)
			}
		})
	}
	waitDeployed(t, b, ds)
	cancel()
	wg.Wait()
	for id, starts := range w.starts {
		if len(starts) != 1 {
			t.Errorf("revision %s was deployed %d times (from %v)", id, len(starts), starts)
		}
	}
}

// The lifecycle tests that run Run, renew leases or wait run inside a
// testing/synctest bubble: time is fake (time.Now, timers, tickers,
// context deadlines) and moves only when every goroutine of the bubble is
// durably blocked, so poll intervals, lease durations and a walker's steps
// happen in order however loaded the machine is. The stores are opened
// inside the bubble (storebolt's writer goroutine waits on a sync.Cond,
// which is durable blocking) and closed before it ends.

func TestTwoReplicasOverOneStore(t *testing.T) {
	inBubbleOverStores(t, runReplicas)
}

// TestRestartResumes stops Run mid-flight, reopens the database with a new
// ControlPlane, and sees every revision through to DEPLOYED, the
// interrupted ones resumed from where they were.
func TestRestartResumes(t *testing.T) {
	synctest.Test(t, testRestartResumes)
}

func testRestartResumes(t *testing.T) {
	path := t.TempDir() + "/db"
	st := openBolt(t, path)
	opts := &controlplane.Options{PollInterval: 5 * time.Millisecond, Workers: 8}
	cp := controlplane.New(st, opts)
	ds := createMany(t, cp, 16)
	w := newWalker(t, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- cp.Run(ctx, w) }()
	// Stop once some revision is past QUEUED and none is DEPLOYED yet.
	for {
		page, err := cp.ListRevisions(context.Background(), tenantA, ds[0].ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := page.Resources[0].Status; s != controlplane.RevisionCreating && s != controlplane.RevisionQueued {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = openBolt(t, path)
	defer st.Close()
	cp = controlplane.New(st, opts)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- cp.Run(ctx, w) }()
	waitDeployed(t, cp, ds)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Some revision was resumed from the middle of its path (others may
	// have been stopped before their first report).
	resumed := 0
	for _, starts := range w.starts {
		if len(starts) > 1 && starts[1] != controlplane.RevisionCreating {
			resumed++
		}
	}
	if resumed == 0 {
		t.Errorf("no revision was resumed mid-path after the restart: %v", w.starts)
	}
}

// TestExpiredLeaseIsTakenOver: a worker that stalls past its lease loses
// the revision to another replica, and its late reports are refused.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, time.Microsecond)
	opts := &controlplane.Options{Clock: clock.Now, LeaseDuration: time.Hour} // renewals (every 20 min of real time) never run
	a, b := controlplane.New(st, opts), controlplane.New(st, opts)
	d, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	var late error
	ok, err := a.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		if err := r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued}); err != nil {
			t.Fatal(err)
		}
		if ok, err := b.Process(ctx, &script{}); ok || err != nil {
			t.Fatalf("b took a leased revision: %v, %v", ok, err)
		}
		clock.Advance(2 * time.Hour) // a stalls
		if ok, err := b.Process(ctx, newWalker(t, 0)); !ok || err != nil {
			t.Fatalf("b did not take the expired lease: %v, %v", ok, err)
		}
		late = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionDeployFailed, Message: "late"})
		return nil
	}})
	if !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if !errors.Is(late, apierr.ErrInvalidState) && !errors.Is(late, controlplane.ErrLeaseLost) {
		t.Errorf("late report: %v, want a refusal", late)
	}
	rev, err := a.GetRevision(ctx, tenantA, d.ID, *d.LatestRevisionID)
	if err != nil || rev.Status != controlplane.RevisionDeployed {
		t.Errorf("revision %v (%v), want DEPLOYED by the replica", rev, err)
	}
}

// TestLeaseLostWhileNotTerminal: the old owner's report is refused with
// ErrLeaseLost while the new owner still works on the revision.
func TestLeaseLostWhileNotTerminal(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, time.Microsecond)
	opts := &controlplane.Options{Clock: clock.Now, LeaseDuration: time.Hour}
	a, b := controlplane.New(st, opts), controlplane.New(st, opts)
	if _, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent"))); err != nil {
		t.Fatal(err)
	}
	var late error
	_, err := a.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		clock.Advance(2 * time.Hour)
		_, err := b.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, rb controlplane.Reporter) error {
			late = r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
			return rb.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
		}})
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(late, controlplane.ErrLeaseLost) {
		t.Errorf("old owner's report: %v, want ErrLeaseLost", late)
	}
}

// TestOlderDeployedStaysInactive: a revision that reaches DEPLOYED after a
// newer one keeps its status but does not become active.
func TestOlderDeployedStaysInactive(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, time.Microsecond)
	cp := controlplane.New(st, &controlplane.Options{Clock: clock.Now, PollInterval: time.Hour})
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	first := *d.LatestRevisionID
	upTo := func(last controlplane.RevisionStatus) controlplane.Deployer {
		return &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			path := controlplane.HappyPath(w.Revision.Source)
			for _, s := range path[slices.Index(path, w.Revision.Status)+1 : slices.Index(path, last)+1] {
				step := controlplane.Step{Status: s, ImageVersion: new("img-" + w.Revision.ID)}
				if s == controlplane.RevisionDeployed {
					step.URL = new("http://127.0.0.1:1/" + w.Revision.ID)
				}
				if err := r.Report(ctx, step); err != nil {
					return err
				}
			}
			return nil // not terminal: called again after PollInterval
		}}
	}
	if ok, err := cp.Process(ctx, upTo(controlplane.RevisionDeploying)); !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if got, err := cp.GetDeployment(ctx, tenantA, d.ID); err != nil || got.URL != nil {
		t.Fatalf("url before any DEPLOYED = %v, %v; want null", got.URL, err)
	}
	second, err := cp.CreateRevision(ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := cp.Process(ctx, upTo(controlplane.RevisionDeployed)); !ok || err != nil { // the second: the first waits
		t.Fatalf("Process = %v, %v", ok, err)
	}
	clock.Advance(2 * time.Hour)
	if ok, err := cp.Process(ctx, upTo(controlplane.RevisionDeployed)); !ok || err != nil { // the first, now
		t.Fatalf("Process = %v, %v", ok, err)
	}
	for _, id := range []string{first, second.ID} {
		if rev, err := cp.GetRevision(ctx, tenantA, d.ID, id); err != nil || rev.Status != controlplane.RevisionDeployed {
			t.Errorf("revision %s: %v, %v; want DEPLOYED", id, rev, err)
		}
	}
	got, err := cp.GetDeployment(ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *got.ActiveRevisionID != second.ID || *got.ImageVersion != "img-"+second.ID {
		t.Errorf("active %s image %s, want the newer %s", *got.ActiveRevisionID, *got.ImageVersion, second.ID)
	}
	if got.URL == nil || *got.URL != "http://127.0.0.1:1/"+second.ID {
		t.Errorf("url %v, want the newer revision's (an older DEPLOYED does not move it)", got.URL)
	}
}

// deployAll processes work with a walker until there is none.
func (f *fixture) deployAll() {
	f.t.Helper()
	w := newWalker(f.t, 0)
	for {
		ok, err := f.cp.Process(f.ctx, w)
		if err != nil {
			f.t.Fatal(err)
		}
		if !ok {
			return
		}
	}
}

func (f *fixture) active(id string) string {
	f.t.Helper()
	d, err := f.cp.GetDeployment(f.ctx, tenantA, id)
	if err != nil {
		f.t.Fatal(err)
	}
	if d.ActiveRevisionID == nil {
		return ""
	}
	return *d.ActiveRevisionID
}

func TestRedeployBecomesActive(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, dockerBody("agent"))
	first := *d.LatestRevisionID
	f.deployAll()
	diff(t, "active after create", first, f.active(d.ID))
	p, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:2")}})
	if err != nil {
		t.Fatal(err)
	}
	f.deployAll()
	diff(t, "active after PATCH", *p.LatestRevisionID, f.active(d.ID))
	r, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	if f.active(d.ID) != *p.LatestRevisionID {
		t.Errorf("the redeployed revision is active before it is DEPLOYED")
	}
	f.deployAll()
	diff(t, "active after redeploy", *r.LatestRevisionID, f.active(d.ID))
	rev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *r.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "redeployed image", "registry.example.com/agent:1", *rev.SourceRevisionConfig.ImageURI)

	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.cp.RedeployRevision(f.ctx, tenantA, d.ID, first)
	if !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("redeploy while AWAITING_DELETE: %v, want ErrInvalidState", err)
	}
}

func TestDeleteTearsDownAndRemoves(t *testing.T) {
	f := newFixture(t, &controlplane.Options{PollInterval: time.Nanosecond})
	d := f.create(tenantA, dockerBody("agent"))
	f.deployAll()
	inFlight, err := f.cp.CreateRevision(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	rev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, inFlight.ID)
	if err != nil || rev.Status != controlplane.RevisionInterrupted {
		t.Fatalf("unfinished revision after DELETE: %+v, %v; want INTERRUPTED", rev, err)
	}
	// A failing teardown is retried; the deployment stays until it works.
	var torn []string
	fail := true
	td := &script{teardown: func(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
		torn = append(torn, tenant+"/"+dep.ID+"/"+string(dep.Status))
		if fail {
			return errors.New("cluster unreachable")
		}
		return nil
	}}
	if ok, err := f.cp.Process(f.ctx, td); !ok || err == nil || !strings.Contains(err.Error(), "cluster unreachable") {
		t.Fatalf("Process with a failing teardown = %v, %v", ok, err)
	}
	if got, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID); err != nil || got.Status != controlplane.StatusAwaitingDelete ||
		got.StatusMessage == nil || !strings.Contains(*got.StatusMessage, "cluster unreachable") {
		t.Fatalf("after a failed teardown: %+v, %v", got, err)
	}
	fail = false
	// Tried again once its backoff (2 s by the clock, which moves a
	// second per reading) has passed.
	for tries := 1; ; tries++ {
		ok, err := f.cp.Process(f.ctx, td)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if tries == 3 {
			t.Fatal("the teardown is not tried again after its backoff")
		}
	}
	want := tenantA + "/" + d.ID + "/AWAITING_DELETE"
	diff(t, "teardowns", []string{want, want}, torn)
	if _, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("GetDeployment after teardown: %v, want not found", err)
	}
	if err := f.cp.SequenceEvents(f.ctx); err != nil { // number the events, fold the counts
		t.Fatal(err)
	}
	for col, recs := range dump(t, f.st) {
		for k, v := range recs {
			bin := uuid.MustParse(d.ID) // keys hold ids as their 16 bytes
			if (strings.Contains(k, d.ID) || strings.Contains(v, d.ID) || strings.Contains(k, string(bin[:])) || strings.Contains(v, string(bin[:]))) && col != "cp_tracing_projects" && col != "cp_events" {
				t.Errorf("%s/%s still names the removed deployment", col, k)
			}
		}
	}
	f.create(tenantA, dockerBody("agent")) // the name is free again
	if ok, err := f.cp.Process(f.ctx, &script{}); !ok || err != nil {
		t.Fatalf("the new deployment's revision is not pending: %v, %v", ok, err)
	}
}

func TestDeployErrorFailsThePhase(t *testing.T) {
	for _, tc := range []struct {
		reach []controlplane.RevisionStatus
		want  controlplane.RevisionStatus
	}{
		{nil, controlplane.RevisionCreateFailed},
		{[]controlplane.RevisionStatus{"QUEUED", "AWAITING_BUILD"}, controlplane.RevisionBuildFailed},
		{[]controlplane.RevisionStatus{"QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY"}, controlplane.RevisionDeployFailed},
		{[]controlplane.RevisionStatus{"UNKNOWN"}, controlplane.RevisionDeployFailed},
	} {
		f := newFixture(t, nil)
		d := f.create(tenantA, githubBody("agent", f.integration(tenantA)))
		_, err := f.cp.Process(f.ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			for _, s := range tc.reach {
				if err := r.Report(ctx, controlplane.Step{Status: s}); err != nil {
					return err
				}
			}
			return errors.New("registry down")
		}})
		if err != nil {
			t.Fatal(err)
		}
		rev, _ := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID)
		if rev.Status != tc.want || rev.StatusMessage == nil || *rev.StatusMessage != "registry down" {
			t.Errorf("after %v and an error: %s %v, want %s with the error's text", tc.reach, rev.Status, rev.StatusMessage, tc.want)
		}
	}
}

func TestReportedDeploymentStatus(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, dockerBody("agent"))
	var errs []error
	_, err := f.cp.Process(f.ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		for _, s := range []controlplane.Step{
			{DeploymentStatus: controlplane.StatusReady},          // no active revision yet
			{DeploymentStatus: controlplane.StatusAwaitingDelete}, // not a deployer's to set
			{DeploymentStatus: controlplane.StatusUnknown},
			{Status: "QUEUED"}, {Status: "AWAITING_DEPLOY"}, {Status: "DEPLOYING"},
			{Status: "DEPLOYED", RepoCommitSHA: new("abc"), ImageVersion: new("1")}, // active; UNKNOWN stays
			{DeploymentStatus: controlplane.StatusUnused},                           // the revision is terminal
			{Status: "QUEUED"},
		} {
			errs = append(errs, r.Report(ctx, s))
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range errs {
		got = append(got, fmt.Sprint(errors.Is(e, apierr.ErrInvalidState)))
	}
	diff(t, "refused", []string{"true", "true", "false", "false", "false", "false", "false", "true", "true"}, got)
	if dep, _ := f.cp.GetDeployment(f.ctx, tenantA, d.ID); dep.Status != controlplane.StatusUnknown {
		t.Errorf("deployment %s, want UNKNOWN (DEPLOYED moves only AWAITING_DATABASE to READY)", dep.Status)
	}
	for _, tc := range []struct {
		s    controlplane.DeploymentStatus
		want error
	}{
		{controlplane.StatusAwaitingDelete, apierr.ErrInvalidState},
		{"SLEEPING", apierr.ErrInvalidState},
		{controlplane.StatusReady, nil},
		{controlplane.StatusUnused, nil},
	} {
		if err := f.cp.ReportDeploymentStatus(f.ctx, tenantA, d.ID, tc.s); !errors.Is(err, tc.want) {
			t.Errorf("ReportDeploymentStatus(%s) = %v, want %v", tc.s, err, tc.want)
		}
	}
	if err := f.cp.ReportDeploymentStatus(f.ctx, tenantB, d.ID, controlplane.StatusReady); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("another tenant's deployment: %v, want not found", err)
	}
	dep, _ := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	rev, _ := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID)
	if dep.Status != controlplane.StatusUnused || *dep.ImageVersion != "1" || *rev.SourceRevisionConfig.RepoCommitSHA != "abc" {
		t.Errorf("deployment %s image %v, revision sha %v", dep.Status, dep.ImageVersion, rev.SourceRevisionConfig.RepoCommitSHA)
	}
}

func TestRunNotifiedAtOnce(t *testing.T) {
	synctest.Test(t, testRunNotifiedAtOnce)
}

func testRunNotifiedAtOnce(t *testing.T) {
	st := storemem.New()
	defer st.Close()
	// PollInterval is an hour: only the notification can wake Run.
	cp := controlplane.New(st, &controlplane.Options{PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWalker(t, 0)
	// Two Runs at once: whichever starts second is refused at once, and the
	// other serves until ctx is cancelled. (Starting one and sleeping before
	// the other is not enough: on a loaded machine the second could start
	// first, serve forever, and the test would hang.)
	results := make(chan error, 2)
	for range 2 {
		go func() { results <- cp.Run(ctx, w) }()
	}
	if err := <-results; err == nil {
		t.Fatal("a Run returned nil before its context was cancelled; want the second of two concurrent Runs refused")
	}
	synctest.Wait() // the remaining Run is idle, so the notification is what wakes it
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	waitDeployed(t, cp, []*controlplane.Deployment{d})
	cancel()
	if err := <-results; err != nil {
		t.Fatal(err)
	}
}

// inBubbleOverStores runs f in a testing/synctest bubble over a new
// storemem store and a new storebolt store, each opened inside the bubble
// and closed before it ends.
func inBubbleOverStores(t *testing.T, f func(*testing.T, store.Store)) {
	for _, s := range []struct {
		name string
		open func(*testing.T) store.Store
	}{
		{"storemem", func(*testing.T) store.Store { return storemem.New() }},
		{"storebolt", func(t *testing.T) store.Store { return openBolt(t, t.TempDir()+"/db") }},
	} {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := s.open(t)
				defer st.Close()
				f(t, st)
			})
		})
	}
}

func openBolt(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := storebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLeaseRenewedWhileWorking: a Deploy that reports nothing for several
// lease durations keeps its revision: the lease is renewed behind it.
func TestLeaseRenewedWhileWorking(t *testing.T) {
	synctest.Test(t, testLeaseRenewedWhileWorking)
}

func testLeaseRenewedWhileWorking(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	opts := &controlplane.Options{LeaseDuration: 30 * time.Millisecond}
	a, b := controlplane.New(st, opts), controlplane.New(st, opts)
	if _, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent"))); err != nil {
		t.Fatal(err)
	}
	started, done := make(chan struct{}), make(chan error)
	go func() {
		_, err := a.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			close(started)
			select {
			case <-ctx.Done():
				return fmt.Errorf("lease lost: %w", context.Cause(ctx))
			case <-time.After(200 * time.Millisecond):
			}
			return r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
		}})
		done <- err
	}()
	<-started
	// The replica tries every 5 ms of (fake) time, through more than six
	// lease durations, while the Deploy reports nothing.
	for range 40 {
		ok, err := b.Process(ctx, &script{deploy: func(context.Context, *controlplane.Work, controlplane.Reporter) error {
			t.Error("the replica took a revision whose lease is being renewed")
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestSupersededWorkIsCancelled: when a newer revision SKIPs the one being
// deployed, the next lease renewal cancels the Deploy's ctx.
func TestSupersededWorkIsCancelled(t *testing.T) {
	synctest.Test(t, testSupersededWorkIsCancelled)
}

func testSupersededWorkIsCancelled(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, &controlplane.Options{LeaseDuration: 30 * time.Millisecond})
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	queued, done := make(chan struct{}), make(chan error)
	go func() {
		_, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			if err := r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued}); err != nil {
				return err
			}
			close(queued)
			select {
			case <-ctx.Done():
				if !errors.Is(context.Cause(ctx), controlplane.ErrLeaseLost) {
					t.Errorf("Deploy's ctx ended with %v, want ErrLeaseLost", context.Cause(ctx))
				}
			case <-time.After(10 * time.Second):
				t.Error("Deploy of a superseded revision was not cancelled")
			}
			return nil
		}})
		done <- err
	}()
	<-queued
	if _, err := cp.CreateRevision(ctx, tenantA, d.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rev, err := cp.GetRevision(ctx, tenantA, d.ID, *d.LatestRevisionID)
	if err != nil || rev.Status != controlplane.RevisionSkipped {
		t.Errorf("superseded revision: %+v, %v; want SKIPPED", rev, err)
	}
}

func TestRunStopsWhenTheStoreIsClosed(t *testing.T) {
	synctest.Test(t, testRunStopsWhenTheStoreIsClosed)
}

func testRunStopsWhenTheStoreIsClosed(t *testing.T) {
	st := storemem.New()
	cp := controlplane.New(st, &controlplane.Options{PollInterval: time.Millisecond})
	st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cp.Run(ctx, &script{}); err == nil || ctx.Err() != nil {
		t.Errorf("Run over a closed store = %v (ctx %v), want an error at once", err, ctx.Err())
	}
	if err := cp.Run(ctx, nil); err == nil {
		t.Error("Run without a Deployer accepted")
	}
	if _, err := cp.Process(ctx, nil); err == nil {
		t.Error("Process without a Deployer accepted")
	}
}

// TestWorkCarriesTheReportedImage: a Deploy called again for the same
// revision (resumed) finds the image an earlier call reported in
// Work.ImageVersion; the first call finds none.
func TestWorkCarriesTheReportedImage(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, time.Microsecond)
	cp := controlplane.New(st, &controlplane.Options{Clock: clock.Now, PollInterval: time.Second})
	if _, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent"))); err != nil {
		t.Fatal(err)
	}
	var seen []*string
	d := &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		seen = append(seen, w.ImageVersion)
		if len(seen) == 1 {
			return r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued, ImageVersion: new("built:1")})
		}
		return nil
	}}
	for range 2 {
		if ok, err := cp.Process(ctx, d); !ok || err != nil {
			t.Fatalf("Process = %v, %v", ok, err)
		}
		clock.Advance(2 * time.Second)
	}
	if len(seen) != 2 || seen[0] != nil || seen[1] == nil || *seen[1] != "built:1" {
		t.Errorf("Work.ImageVersion of the two calls: %v", seen)
	}
}

// TestURLFollowsCustomURL: a deployment's url is null until a deployer
// reports where it serves; then it is the deployment's custom_url when it
// has one, else the reported address, and a PATCH of custom_url moves it
// at once (no new revision, no deployer involved).
func TestURLFollowsCustomURL(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, &controlplane.Options{Clock: testclock.New(t0, time.Microsecond).Now})
	serving := &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		path := controlplane.HappyPath(w.Revision.Source)
		for _, s := range path[slices.Index(path, w.Revision.Status)+1:] {
			step := controlplane.Step{Status: s}
			if s == controlplane.RevisionDeployed {
				step.URL = new("http://127.0.0.1:1/" + w.Deployment.ID)
			}
			if err := r.Report(ctx, step); err != nil {
				return err
			}
		}
		return nil
	}}
	url := func(id string) string {
		t.Helper()
		d, err := cp.GetDeployment(ctx, tenantA, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.URL == nil {
			return "null"
		}
		return *d.URL
	}
	patch := func(id, custom string) {
		t.Helper()
		if _, err := cp.UpdateDeployment(ctx, tenantA, id, decode[controlplane.UpdateDeploymentRequest](t,
			`{"source_config": {"custom_url": "`+custom+`"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("plain")))
	if err != nil {
		t.Fatal(err)
	}
	custom, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t,
		`{"name": "custom", "source": "external_docker", "source_config": {"custom_url": "https://a.example"},
		  "source_revision_config": {"image_uri": "r/a:1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	patch(plain.ID, "https://before.example") // before any deploy: still no url
	if got := url(plain.ID); got != "null" {
		t.Fatalf("url before any DEPLOYED: %s", got)
	}
	for {
		ok, err := cp.Process(ctx, serving)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if got := url(custom.ID); got != "https://a.example" {
		t.Errorf("url of a deployment with a custom_url: %s", got)
	}
	if got := url(plain.ID); got != "https://before.example" {
		t.Errorf("url of a deployment whose custom_url was patched before its deploy: %s", got)
	}
	patch(custom.ID, "https://b.example")
	if got := url(custom.ID); got != "https://b.example" {
		t.Errorf("url after a PATCH of custom_url: %s", got)
	}
	bare, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("bare")))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := cp.Process(ctx, serving); !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if got := url(bare.ID); got != "http://127.0.0.1:1/"+bare.ID {
		t.Errorf("url without a custom_url: %s, want the deployer's address", got)
	}
	patch(bare.ID, "https://c.example")
	if got := url(bare.ID); got != "https://c.example" {
		t.Errorf("url after the first custom_url: %s", got)
	}
}
