package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu          sync.Mutex
	transitions []controlplane.Transition
	takeovers   int
	calls       []call
}

type call struct {
	op   string
	took time.Duration
	err  string
}

func (r *recorder) RevisionTransition(t controlplane.Transition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions = append(r.transitions, t)
}

func (r *recorder) LeaseTakenOver() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.takeovers++
}

func (r *recorder) DeployerCall(op string, took time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := call{op: op, took: took}
	if err != nil {
		c.err = err.Error()
	}
	r.calls = append(r.calls, c)
}

// TestObserverSeesTransitions: every status a Deployer reports reaches the
// Observer once committed, with the time the Deployer spent in the status
// it left, and the log gets an Info record per transition.
func TestObserverSeesTransitions(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, 0)
	rec := &recorder{}
	var logBuf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logBuf, nil))
	cp := controlplane.New(st, &controlplane.Options{Clock: clock.Now, Observer: rec, Logger: log})
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	revID := *d.LatestRevisionID
	steps := []struct {
		after  time.Duration
		status controlplane.RevisionStatus
	}{
		{2 * time.Second, controlplane.RevisionQueued},
		{0, controlplane.RevisionAwaitingDeploy},
		{30 * time.Second, controlplane.RevisionDeploying},
		{5 * time.Second, controlplane.RevisionDeployed},
	}
	ok, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		for _, s := range steps {
			clock.Advance(s.after)
			if err := r.Report(ctx, controlplane.Step{Status: s.status}); err != nil {
				return err
			}
			// A report that changes no status is no transition.
			if err := r.Report(ctx, controlplane.Step{Message: "working"}); err != nil && s.status != controlplane.RevisionDeployed {
				return err
			}
		}
		clock.Advance(time.Second)
		return nil
	}})
	if !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	base := controlplane.Transition{Tenant: tenantA, DeploymentID: d.ID, RevisionID: revID}
	var want []controlplane.Transition
	from := controlplane.RevisionCreating
	for _, s := range steps {
		tr := base
		tr.From, tr.To, tr.Step = from, s.status, s.after
		want = append(want, tr)
		from = s.status
	}
	if diff := cmp.Diff(want, rec.transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]call{{op: controlplane.DeployerDeploy, took: 38 * time.Second}}, rec.calls, cmp.AllowUnexported(call{})); diff != "" {
		t.Errorf("deployer calls (-want +got):\n%s", diff)
	}
	if rec.takeovers != 0 {
		t.Errorf("%d takeovers, want 0", rec.takeovers)
	}

	// The log: one Info record per transition, with its ids.
	var logged []map[string]string
	for line := range strings.Lines(logBuf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if m["msg"] != "revision transition" {
			continue
		}
		got := map[string]string{}
		for _, k := range []string{"level", "tenant", "deployment", "revision", "from", "to"} {
			got[k], _ = m[k].(string)
		}
		logged = append(logged, got)
	}
	var wantLog []map[string]string
	for _, tr := range want {
		wantLog = append(wantLog, map[string]string{"level": "INFO", "tenant": tenantA, "deployment": d.ID,
			"revision": revID, "from": string(tr.From), "to": string(tr.To)})
	}
	if diff := cmp.Diff(wantLog, logged); diff != "" {
		t.Errorf("transition log (-want +got):\n%s", diff)
	}
}

// TestObserverSeesFailureAndTeardown: a Deploy error is the failure of the
// revision's phase, observed like a report, and a Teardown is a deployer
// call of its own.
func TestObserverSeesFailureAndTeardown(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, 0)
	rec := &recorder{}
	cp := controlplane.New(st, &controlplane.Options{Clock: clock.Now, Observer: rec})
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("image pull failed")
	if _, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		if err := r.Report(ctx, controlplane.Step{Status: controlplane.RevisionUnknown}); err != nil {
			return err // (UNKNOWN: it may have run, so the delete needs a teardown)
		}
		clock.Advance(3 * time.Second)
		return boom
	}}); err != nil {
		t.Fatal(err)
	}
	if err := cp.DeleteDeployment(ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	teardownErr := errors.New("engine unreachable")
	if _, err := cp.Process(ctx, &script{teardown: func(context.Context, string, *controlplane.Deployment) error {
		clock.Advance(time.Second)
		return teardownErr
	}}); !errors.Is(err, teardownErr) {
		t.Fatalf("Process (teardown) = %v, want the teardown's error", err)
	}
	want := []controlplane.Transition{{Tenant: tenantA, DeploymentID: d.ID, RevisionID: *d.LatestRevisionID,
		From: controlplane.RevisionCreating, To: controlplane.RevisionUnknown},
		{Tenant: tenantA, DeploymentID: d.ID, RevisionID: *d.LatestRevisionID,
			From: controlplane.RevisionUnknown, To: controlplane.RevisionDeployFailed, Step: 3 * time.Second}}
	if diff := cmp.Diff(want, rec.transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	wantCalls := []call{{op: controlplane.DeployerDeploy, took: 3 * time.Second, err: boom.Error()},
		{op: controlplane.DeployerTeardown, took: time.Second, err: teardownErr.Error()}}
	if diff := cmp.Diff(wantCalls, rec.calls, cmp.AllowUnexported(call{})); diff != "" {
		t.Errorf("deployer calls (-want +got):\n%s", diff)
	}
}

// TestObserverCountsTakeovers: claiming work whose holder stopped renewing
// its lease is a takeover; claiming work given back for a retry, or at
// shutdown, is not.
func TestObserverCountsTakeovers(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, time.Microsecond)
	ra, rb := &recorder{}, &recorder{}
	opts := controlplane.Options{Clock: clock.Now, LeaseDuration: time.Hour, PollInterval: time.Minute}
	oa, ob := opts, opts
	oa.Observer, ob.Observer = ra, rb
	a, b := controlplane.New(st, &oa), controlplane.New(st, &ob)
	if _, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent"))); err != nil {
		t.Fatal(err)
	}
	// a returns before the revision is terminal: the work is given back
	// for PollInterval; b claims it after that, which takes nothing over.
	if ok, err := a.Process(ctx, &script{}); !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	clock.Advance(2 * time.Minute)
	// b claims it and stalls past its lease; a takes it over.
	if ok, err := b.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		clock.Advance(2 * time.Hour)
		if ok, err := a.Process(ctx, newWalker(t, 0)); !ok || err != nil {
			t.Fatalf("a did not take the expired lease: %v, %v", ok, err)
		}
		return nil
	}}); !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if ra.takeovers != 1 || rb.takeovers != 0 {
		t.Errorf("takeovers: a %d, b %d; want 1, 0", ra.takeovers, rb.takeovers)
	}
}

// slowDeployer is a Deployer whose engine may be unreachable.
type slowDeployer struct {
	script
	mu    sync.Mutex
	ready error
}

func (d *slowDeployer) Ready(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ready
}

func (d *slowDeployer) setReady(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ready = err
}

// components lists the components err says are not ready.
func components(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var nr *controlplane.NotReadyError
	if !errors.As(err, &nr) {
		t.Fatalf("Ready = %v, want a *NotReadyError", err)
	}
	var cs []string
	for _, p := range nr.Problems {
		cs = append(cs, p.Component)
	}
	return cs
}

// TestReady: the store answers, Run runs, and the Deployer (when it can
// tell) reaches its engine.
func TestReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := storemem.New()
		cp := controlplane.New(st, nil)
		if diff := cmp.Diff([]string{controlplane.ComponentReconcile}, components(t, cp.Ready(ctx))); diff != "" {
			t.Errorf("before Run (-want +got):\n%s", diff)
		}
		if err := cp.Ready(ctx); !errors.Is(err, controlplane.ErrNotRunning) {
			t.Errorf("before Run: %v, want ErrNotRunning", err)
		}
		d := &slowDeployer{}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- cp.Run(runCtx, d) }()
		synctest.Wait()
		if err := cp.Ready(ctx); err != nil {
			t.Errorf("running: %v, want ready", err)
		}
		unreachable := errors.New("cannot connect to the Docker daemon")
		d.setReady(unreachable)
		err := cp.Ready(ctx)
		if diff := cmp.Diff([]string{controlplane.ComponentDeployer}, components(t, err)); diff != "" {
			t.Errorf("engine down (-want +got):\n%s", diff)
		}
		if !errors.Is(err, unreachable) {
			t.Errorf("engine down: %v, want its cause", err)
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{controlplane.ComponentStore, controlplane.ComponentReconcile},
			components(t, cp.Ready(ctx))); diff != "" {
			t.Errorf("store closed, Run stopped (-want +got):\n%s", diff)
		}
	})
}

// TestPendingWork counts revisions and deletions waiting and in progress.
func TestPendingWork(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	var ds []*controlplane.Deployment
	for _, name := range []string{"a", "b", "c"} {
		d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody(name)))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	count := func() controlplane.PendingWork {
		t.Helper()
		pw, err := cp.PendingWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pw
	}
	if diff := cmp.Diff(controlplane.PendingWork{RevisionsWaiting: 3}, count()); diff != "" {
		t.Errorf("three new revisions (-want +got):\n%s", diff)
	}
	var during controlplane.PendingWork
	if _, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, _ *controlplane.Work, r controlplane.Reporter) error {
		during = count()
		return r.Report(ctx, controlplane.Step{Status: controlplane.RevisionUnknown}) // it may have run
	}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(controlplane.PendingWork{RevisionsWaiting: 2, RevisionsInProgress: 1}, during); diff != "" {
		t.Errorf("one being deployed (-want +got):\n%s", diff)
	}
	if err := cp.DeleteDeployment(ctx, tenantA, ds[2].ID); err != nil {
		t.Fatal(err)
	}
	// The deleted deployment never ran: it is gone with its revision; the
	// one given back for a retry is in progress until PollInterval has
	// passed.
	if diff := cmp.Diff(controlplane.PendingWork{RevisionsWaiting: 1, RevisionsInProgress: 1}, count(),
		cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("after a delete of one that never ran (-want +got):\n%s", diff)
	}
	if err := cp.DeleteDeployment(ctx, tenantA, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	// The one that may have run waits for its teardown; its revision is
	// INTERRUPTED.
	if diff := cmp.Diff(controlplane.PendingWork{RevisionsWaiting: 1, DeletionsWaiting: 1}, count(),
		cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("after a delete (-want +got):\n%s", diff)
	}
}

// ExampleControlPlane_PendingWork counts the work the reconcile loop has
// not done yet, as a metrics scrape does.
func ExampleControlPlane_PendingWork() {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	for _, name := range []string{"a", "b"} {
		req := &controlplane.CreateDeploymentRequest{Name: &name, Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example/agent:1")}}
		if _, err := cp.CreateDeployment(ctx, tenantA, req); err != nil {
			panic(err)
		}
	}
	pw, err := cp.PendingWork(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("waiting:", pw.RevisionsWaiting, "in progress:", pw.RevisionsInProgress)
	// Without Run, the control plane is not ready.
	fmt.Println(cp.Ready(ctx))
	// Output:
	// waiting: 2 in progress: 0
	// controlplane: not ready: reconcile: controlplane: the reconcile loop (Run) is not running
}
