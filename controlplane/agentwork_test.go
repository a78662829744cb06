package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// agentFixture is a ControlPlane over st whose own Deployer drives only
// the listeners of compute_id "in-house"; the others are served by
// agents. It runs in a synctest bubble, where the default clock is the
// bubble's.
type agentFixture struct {
	t   *testing.T
	st  store.Store
	cp  *controlplane.ControlPlane
	ctx context.Context
}

const agentLease = 30 * time.Second

func agentOptions() *controlplane.Options {
	return &controlplane.Options{
		Drives:        func(l *controlplane.Listener) bool { return l.ComputeID == "in-house" },
		LeaseDuration: agentLease,
	}
}

func newAgentFixture(t *testing.T, st store.Store) *agentFixture {
	return &agentFixture{t: t, st: st, cp: controlplane.New(st, agentOptions()), ctx: context.Background()}
}

func (f *agentFixture) listener(tenant, computeID string) string {
	f.t.Helper()
	l, err := f.cp.CreateListener(f.ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new(computeID)})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.ID
}

// deployment creates an external_docker deployment on listener.
func (f *agentFixture) deployment(tenant, name, listener string) *controlplane.Deployment {
	f.t.Helper()
	d, err := f.cp.CreateDeployment(f.ctx, tenant, decode[controlplane.CreateDeploymentRequest](f.t, fmt.Sprintf(`{"name": %q,
		"source": "external_docker", "source_config": {"listener_id": %q},
		"source_revision_config": {"image_uri": "registry.example.com/agent:1"},
		"secrets": [{"name": "KEY", "value": "s3cret"}]}`, name, listener)))
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *agentFixture) revision(tenant string, d *controlplane.Deployment, id string) *controlplane.Revision {
	f.t.Helper()
	rev, err := f.cp.GetRevision(f.ctx, tenant, d.ID, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return rev
}

func (f *agentFixture) get(tenant, id string) *controlplane.Deployment {
	f.t.Helper()
	d, err := f.cp.GetDeployment(f.ctx, tenant, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *agentFixture) claim(tenant, listener string) *controlplane.AgentWork {
	f.t.Helper()
	w, err := f.cp.ClaimAgentWork(f.ctx, tenant, listener)
	if err != nil {
		f.t.Fatal(err)
	}
	return w
}

func statuses(h []controlplane.StatusChange) []controlplane.RevisionStatus {
	var out []controlplane.RevisionStatus
	for _, c := range h {
		out = append(out, c.Status)
	}
	return out
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: %v, want %v", what, err, target)
	}
}

// TestAgentWorkOnlyForItsListener: the revision of a deployment whose
// listener the server does not drive waits QUEUED for an agent; Process
// and Run never claim it, other listeners' and tenants' agents never see
// it, and its own listener's agent claims it (secrets included) and
// drives it to DEPLOYED through the agent API, with its url.
func TestAgentWorkOnlyForItsListener(t *testing.T) {
	inBubbleOverStores(t, testAgentWorkOnlyForItsListener)
}

func testAgentWorkOnlyForItsListener(t *testing.T, st store.Store) {
	f := newAgentFixture(t, st)
	edge, other, inHouse := f.listener(tenantA, "edge-1"), f.listener(tenantA, "edge-2"), f.listener(tenantA, "in-house")
	otherTenant := f.listener(tenantB, "edge-1")

	d := f.deployment(tenantA, "remote", edge)
	local := f.deployment(tenantA, "local", inHouse)
	// Both answer remote_reconciled: external_docker deployments are
	// (wire contract section 5), whoever drives them.
	if !d.RemoteReconciled || !local.RemoteReconciled {
		t.Errorf("remote_reconciled = %v and %v, want true for both", d.RemoteReconciled, local.RemoteReconciled)
	}
	rev := f.revision(tenantA, d, *d.LatestRevisionID)
	diff(t, "waiting revision", []any{controlplane.RevisionQueued, []controlplane.RevisionStatus{"CREATING", "QUEUED"},
		"Waiting for the agent of listener " + edge + " (last seen: never)."},
		[]any{rev.Status, statuses(rev.StatusHistory), *rev.StatusMessage})
	if lrev := f.revision(tenantA, local, *local.LatestRevisionID); lrev.Status != controlplane.RevisionCreating {
		t.Errorf("the server's revision is %s, want CREATING", lrev.Status)
	}

	// Process drives the server's deployment, and only it.
	var driven []string
	rec := &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		driven = append(driven, w.Deployment.Name)
		_, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeployed, controlplane.Step{})
		return err
	}}
	for {
		more, err := f.cp.Process(f.ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	diff(t, "deployments Process drove", []string{"local"}, driven)

	// Run neither.
	ctx, cancel := context.WithCancel(f.ctx)
	ran := make(chan error)
	go func() { ran <- f.cp.Run(ctx, rec) }()
	time.Sleep(10 * time.Second)
	synctest.Wait()
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	diff(t, "deployments Run drove", []string{"local"}, driven)
	if got := f.revision(tenantA, d, rev.ID); got.Status != controlplane.RevisionQueued {
		t.Errorf("after Run: %s, want QUEUED", got.Status)
	}
	pw, err := f.cp.PendingWork(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "pending work", controlplane.PendingWork{RevisionsWaiting: 1}, pw)

	// Other listeners' agents see nothing; another tenant's agent does not
	// know the listener.
	for _, c := range []struct{ tenant, listener string }{{tenantA, other}, {tenantA, inHouse}, {tenantB, otherTenant}} {
		if w := f.claim(c.tenant, c.listener); w != nil {
			t.Errorf("listener %s claimed %+v", c.listener, w)
		}
	}
	_, err = f.cp.ClaimAgentWork(f.ctx, tenantB, edge)
	wantErr(t, "claim with another tenant's listener", err, apierr.ErrNotFound)

	w := f.claim(tenantA, edge)
	if w == nil || w.Kind != controlplane.AgentDeploy || w.Work == nil {
		t.Fatalf("claim = %+v, want the revision's work", w)
	}
	diff(t, "work", []any{tenantA, d.ID, rev.ID, controlplane.RevisionQueued, []controlplane.Secret{{Name: "KEY", Value: "s3cret"}}, edge, 30},
		[]any{w.Work.Tenant, w.Work.Deployment.ID, w.Work.Revision.ID, w.Work.Revision.Status, w.Work.Secrets, w.Work.Listener.ID, w.LeaseSeconds})
	if again := f.claim(tenantA, edge); again != nil {
		t.Errorf("claimed again while leased: %+v", again)
	}

	// The lease is refused to other listeners and tenants, and nonsense is
	// no lease.
	step := controlplane.Step{Status: controlplane.RevisionAwaitingDeploy}
	wantErr(t, "report through another listener", f.cp.ReportAgent(f.ctx, tenantA, other, w.Lease, step), apierr.ErrNotFound)
	wantErr(t, "report through another tenant", f.cp.ReportAgent(f.ctx, tenantB, otherTenant, w.Lease, step), apierr.ErrNotFound)
	wantErr(t, "report with no lease", f.cp.ReportAgent(f.ctx, tenantA, edge, "nonsense", step), apierr.ErrInvalidState)
	wantErr(t, "teardown with a revision's lease", f.cp.FinishAgentTeardown(f.ctx, tenantA, edge, w.Lease), apierr.ErrInvalidState)

	// The reads of the agent's reconcile are its listener's.
	if _, err := f.cp.AgentDeployment(f.ctx, tenantA, edge, d.ID); err != nil {
		t.Error(err)
	}
	if _, err := f.cp.AgentRevision(f.ctx, tenantA, edge, d.ID, rev.ID); err != nil {
		t.Error(err)
	}
	_, err = f.cp.AgentDeployment(f.ctx, tenantA, other, d.ID)
	wantErr(t, "another listener's deployment", err, apierr.ErrNotFound)
	_, err = f.cp.AgentRevision(f.ctx, tenantA, other, local.ID, *local.LatestRevisionID)
	wantErr(t, "another listener's revision", err, apierr.ErrNotFound)
	_, err = f.cp.AgentDeployment(f.ctx, tenantB, edge, d.ID)
	wantErr(t, "another tenant's deployment", err, apierr.ErrNotFound)

	// The lifecycle, through the agent API.
	if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, step); err != nil {
		t.Fatal(err)
	}
	if got := f.revision(tenantA, d, rev.ID); got.StatusMessage != nil {
		t.Errorf("status_message once the agent took it: %q, want null", *got.StatusMessage)
	}
	// A report repeated after a lost answer changes nothing.
	before := f.revision(tenantA, d, rev.ID)
	if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, step); err != nil {
		t.Errorf("repeated report: %v", err)
	}
	diff(t, "revision after a repeated report", before, f.revision(tenantA, d, rev.ID))
	// A step the table refuses is refused.
	wantErr(t, "a step back", f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionQueued}), apierr.ErrInvalidState)

	if err := f.cp.LogAgent(f.ctx, tenantA, edge, w.Lease, controlplane.LogLine{Type: controlplane.LogDeploy, Message: "pulling"}); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.RenewAgentLease(f.ctx, tenantA, edge, w.Lease); err != nil {
		t.Fatal(err)
	}
	for _, s := range []controlplane.Step{{Status: controlplane.RevisionDeploying},
		{Status: controlplane.RevisionDeployed, URL: new("http://agent.edge:8000"), ImageVersion: new("1")}} {
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, s); err != nil {
			t.Fatal(err)
		}
	}
	got := f.get(tenantA, d.ID)
	diff(t, "deployed", []any{controlplane.StatusReady, rev.ID, "http://agent.edge:8000", true},
		[]any{got.Status, *got.ActiveRevisionID, *got.URL, got.RemoteReconciled})
	logs, err := f.cp.ListLogs(f.ctx, tenantA, d.ID, rev.ID, &controlplane.LogQuery{Type: controlplane.LogDeploy})
	if err != nil {
		t.Fatal(err)
	}
	if len(logs.Logs) != 1 || logs.Logs[0].Message != "pulling" {
		t.Errorf("deploy log = %+v", logs.Logs)
	}

	// Repeated once terminal: still nothing changes.
	dumped := dump(t, st)
	if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionDeployed,
		URL: new("http://agent.edge:8000"), ImageVersion: new("1")}); err != nil {
		t.Errorf("repeated DEPLOYED: %v", err)
	}
	diff(t, "store after a repeated DEPLOYED", dumped, dump(t, st))
	wantErr(t, "another status once terminal", f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease,
		controlplane.Step{Status: controlplane.RevisionDeployFailed}), apierr.ErrInvalidState)
	wantErr(t, "renewing a finished lease", f.cp.RenewAgentLease(f.ctx, tenantA, edge, w.Lease), controlplane.ErrLeaseLost)
	if w := f.claim(tenantA, edge); w != nil {
		t.Errorf("claimed after DEPLOYED: %+v", w)
	}
}

// TestAgentFailure: an agent's Deploy error fails the revision's phase,
// idempotently; work given back is claimed again.
func TestAgentFailure(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge := f.listener(tenantA, "edge-1")
		d := f.deployment(tenantA, "remote", edge)
		w := f.claim(tenantA, edge)
		if err := f.cp.ReleaseAgentWork(f.ctx, tenantA, edge, w.Lease, false); err != nil {
			t.Fatal(err)
		}
		w2 := f.claim(tenantA, edge)
		if w2 == nil || w2.Work.Revision.ID != w.Work.Revision.ID {
			t.Fatalf("claim after release = %+v", w2)
		}
		wantErr(t, "report with the released lease", f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease,
			controlplane.Step{Status: controlplane.RevisionAwaitingDeploy}), controlplane.ErrLeaseLost)
		for range 2 {
			if err := f.cp.FailAgentWork(f.ctx, tenantA, edge, w2.Lease, "image pull failed"); err != nil {
				t.Fatal(err)
			}
		}
		rev := f.revision(tenantA, d, *d.LatestRevisionID)
		diff(t, "failed", []any{controlplane.RevisionCreateFailed, "image pull failed"}, []any{rev.Status, *rev.StatusMessage})

		// Released for a retry: claimable again after the poll interval.
		r := f.newRevision(tenantA, d.ID)
		w3 := f.claim(tenantA, edge)
		if err := f.cp.ReleaseAgentWork(f.ctx, tenantA, edge, w3.Lease, true); err != nil {
			t.Fatal(err)
		}
		if w := f.claim(tenantA, edge); w != nil {
			t.Errorf("claimed at once after a release for a retry")
		}
		time.Sleep(controlplane.DefaultPollInterval)
		if w := f.claim(tenantA, edge); w == nil || w.Work.Revision.ID != r {
			t.Errorf("claim after the retry's wait = %+v, want revision %s", w, r)
		}
	})
}

// TestAgentLeaseTakeover: once an agent's lease expires, another agent of
// the listener takes the work over, and the first one's calls are
// refused.
func TestAgentLeaseTakeover(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge := f.listener(tenantA, "edge-1")
		d := f.deployment(tenantA, "remote", edge)
		first := f.claim(tenantA, edge)
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, first.Lease, controlplane.Step{Status: controlplane.RevisionAwaitingDeploy}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(agentLease / 2)
		if w := f.claim(tenantA, edge); w != nil {
			t.Fatalf("claimed before the lease expired")
		}
		time.Sleep(agentLease/2 + time.Second)
		// A second replica's agent takes it over.
		second := controlplane.New(st, agentOptions())
		w, err := second.ClaimAgentWork(f.ctx, tenantA, edge)
		if err != nil || w == nil {
			t.Fatalf("takeover: %v, %v", w, err)
		}
		diff(t, "taken over", []any{d.ID, controlplane.RevisionAwaitingDeploy}, []any{w.Work.Deployment.ID, w.Work.Revision.Status})
		wantErr(t, "the first agent's report", f.cp.ReportAgent(f.ctx, tenantA, edge, first.Lease,
			controlplane.Step{Status: controlplane.RevisionDeploying}), controlplane.ErrLeaseLost)
		wantErr(t, "the first agent's log", f.cp.LogAgent(f.ctx, tenantA, edge, first.Lease,
			controlplane.LogLine{Type: controlplane.LogDeploy, Message: "x"}), controlplane.ErrLeaseLost)
		wantErr(t, "the first agent's renewal", f.cp.RenewAgentLease(f.ctx, tenantA, edge, first.Lease), controlplane.ErrLeaseLost)
		wantErr(t, "the first agent's failure", f.cp.FailAgentWork(f.ctx, tenantA, edge, first.Lease, "x"), controlplane.ErrLeaseLost)
		if err := second.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionDeploying}); err != nil {
			t.Fatal(err)
		}
		if rev := f.revision(tenantA, d, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeploying {
			t.Errorf("status = %s, want DEPLOYING", rev.Status)
		}
	})
}

// TestAgentLongPoll: WaitAgentWork wakes at once when this ControlPlane
// queues work for the listener, finds other replicas' work within a
// poll, and returns nil once its wait has passed.
func TestAgentLongPoll(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge, other := f.listener(tenantA, "edge-1"), f.listener(tenantA, "edge-2")
		type result struct {
			w   *controlplane.AgentWork
			err error
			at  time.Time
		}
		wait := func(cp *controlplane.ControlPlane, listener string, d time.Duration) chan result {
			ch := make(chan result, 1)
			go func() {
				w, err := cp.WaitAgentWork(f.ctx, tenantA, listener, d)
				ch <- result{w, err, time.Now()}
			}()
			return ch
		}

		// Nothing: nil after the wait.
		start := time.Now()
		r := <-wait(f.cp, edge, 25*time.Second)
		if r.err != nil || r.w != nil || r.at.Sub(start) != 25*time.Second {
			t.Errorf("empty wait = %+v after %v, want nil after 25s", r, r.at.Sub(start))
		}

		// A new revision of the listener wakes its waiter at once, and not
		// another listener's.
		mine, theirs := wait(f.cp, edge, time.Minute), wait(f.cp, other, 3*time.Second)
		synctest.Wait()
		start = time.Now()
		d := f.deployment(tenantA, "remote", edge)
		r = <-mine
		if r.err != nil || r.w == nil || r.w.Work.Deployment.ID != d.ID || r.at != start {
			t.Errorf("woken wait = %+v at +%v, want the new revision at once", r, r.at.Sub(start))
		}
		if r := <-theirs; r.w != nil {
			t.Errorf("another listener's wait got %+v", r.w)
		}

		// Work another replica queued is found by a poll within a second.
		replica := controlplane.New(st, agentOptions())
		mine = wait(f.cp, edge, time.Minute)
		synctest.Wait()
		start = time.Now()
		if _, err := replica.RedeployRevision(f.ctx, tenantA, d.ID, r.w.Work.Revision.ID); err != nil {
			t.Fatal(err)
		}
		r = <-mine
		if r.err != nil || r.w == nil || r.at.Sub(start) > controlplane.AgentPollInterval {
			t.Errorf("polled wait = %+v after %v", r, r.at.Sub(start))
		}

		// A cancelled wait returns the context's error.
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan error)
		go func() {
			_, err := f.cp.WaitAgentWork(ctx, tenantA, other, time.Minute)
			done <- err
		}()
		synctest.Wait()
		cancel()
		wantErr(t, "cancelled wait", <-done, context.Canceled)
	})
}

// TestAgentTeardown: deleting an agent-served deployment queues its
// teardown for its agent (never for Process), and FinishAgentTeardown
// removes it.
func TestAgentTeardown(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge := f.listener(tenantA, "edge-1")
		a, b := f.deployment(tenantA, "a", edge), f.deployment(tenantA, "b", edge)
		page, err := f.cp.ListAgentDeployments(f.ctx, tenantA, edge, &controlplane.AgentDeploymentsQuery{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if page.Next == nil {
			t.Fatalf("first page of one: %+v, want a next", page)
		}
		next, err := f.cp.ListAgentDeployments(f.ctx, tenantA, edge, &controlplane.AgentDeploymentsQuery{Limit: 1, After: *page.Next})
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "pages", []any{[]string{a.ID}, []string{b.ID}, true}, []any{page.DeploymentIDs, next.DeploymentIDs, next.Next == nil})
		_, err = f.cp.ListAgentDeployments(f.ctx, tenantA, edge, &controlplane.AgentDeploymentsQuery{After: "zz", Limit: 1001})
		diff(t, "bad query", []string{"query.limit: less_than_equal", "query.after: value_error"}, locTypes(problems(t, err)))

		f.reachEngine(tenantA, edge) // else a delete removes them at once
		before, err := f.cp.ListAgentDeployments(f.ctx, tenantA, edge, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.cp.DeleteDeployment(f.ctx, tenantA, a.ID); err != nil {
			t.Fatal(err)
		}
		// Each id's digest: a's changes with its record (AWAITING_DELETE),
		// b's stays.
		after, err := f.cp.ListAgentDeployments(f.ctx, tenantA, edge, nil)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "ids and digests", []any{2, 2, true, false, true}, []any{len(before.Digests), len(after.Digests),
			after.Digests[0] != before.Digests[0], after.Digests[1] != before.Digests[1], after.Digests[0] != after.Digests[1]})
		if rev := f.revision(tenantA, a, *a.LatestRevisionID); rev.Status != controlplane.RevisionInterrupted {
			t.Errorf("waiting revision of a deleted deployment: %s, want INTERRUPTED", rev.Status)
		}
		// Until its agent removes them, the deployment says who will.
		waiting, err := f.cp.GetDeployment(f.ctx, tenantA, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if m := waiting.StatusMessage; waiting.Status != controlplane.StatusAwaitingDelete || m == nil ||
			!strings.Contains(*m, "Waiting for the agent of listener "+edge+" to remove") {
			t.Errorf("deleted, waiting for the agent: %s, status_message %q", waiting.Status, derefOr(m, "null"))
		}
		if more, err := f.cp.Process(f.ctx, &script{}); more || err != nil {
			t.Errorf("Process = %v, %v: it took an agent's teardown", more, err)
		}
		w := f.claim(tenantA, edge)
		if w == nil || w.Kind != controlplane.AgentTeardown || w.Deployment == nil || w.Deployment.ID != a.ID {
			t.Fatalf("claim = %+v, want a's teardown", w)
		}
		wantErr(t, "a report with a teardown's lease", f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease,
			controlplane.Step{Status: controlplane.RevisionDeploying}), apierr.ErrInvalidState)
		for range 2 { // the second as after a lost answer
			if err := f.cp.FinishAgentTeardown(f.ctx, tenantA, edge, w.Lease); err != nil {
				t.Fatal(err)
			}
		}
		_, err = f.cp.GetDeployment(f.ctx, tenantA, a.ID)
		wantErr(t, "get after the teardown", err, apierr.ErrNotFound)
		page, err = f.cp.ListAgentDeployments(f.ctx, tenantA, edge, nil)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "the listener's deployments", []string{b.ID}, page.DeploymentIDs)

		// The other deployment's revision is the only work left; deleting
		// it interrupts the revision, and its teardown is the work.
		if err := f.cp.DeleteDeployment(f.ctx, tenantA, b.ID); err != nil {
			t.Fatal(err)
		}
		w = f.claim(tenantA, edge)
		if w == nil || w.Kind != controlplane.AgentTeardown || w.Deployment.ID != b.ID {
			t.Fatalf("claim = %+v, want b's teardown", w)
		}
		if err := f.cp.FinishAgentTeardown(f.ctx, tenantA, edge, w.Lease); err != nil {
			t.Fatal(err)
		}
		pw, err := f.cp.PendingWork(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "pending work", controlplane.PendingWork{}, pw)
		if err := f.cp.DeleteListener(f.ctx, tenantA, edge); err != nil {
			t.Errorf("delete the listener once its deployments are gone: %v", err)
		}
	})
}

// TestSupersededAgentRevision: a new revision supersedes an agent's
// waiting or started one, whose lease is then refused.
func TestSupersededAgentRevision(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge := f.listener(tenantA, "edge-1")
		d := f.deployment(tenantA, "remote", edge)
		w := f.claim(tenantA, edge)
		newer := f.newRevision(tenantA, d.ID)
		if rev := f.revision(tenantA, d, w.Work.Revision.ID); rev.Status != controlplane.RevisionSkipped {
			t.Errorf("superseded: %s, want SKIPPED", rev.Status)
		}
		err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionAwaitingDeploy})
		if !controlplane.IsRefusal(err) {
			t.Errorf("report for a superseded revision: %v, want a refusal", err)
		}
		if w := f.claim(tenantA, edge); w == nil || w.Work.Revision.ID != newer || w.Work.Revision.Status != controlplane.RevisionQueued {
			t.Errorf("claim = %+v, want the newer revision, QUEUED", w)
		}
	})
}

// TestListenerStatus: a listener is CONNECTED while its agent was seen (a
// heartbeat or a claim) within AgentConnectedWindow, by the clock at read
// time; heartbeats record the agent's version and are written at most
// every few seconds.
func TestListenerStatus(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge := f.listener(tenantA, "edge-1")
		status := func() *controlplane.Listener {
			t.Helper()
			l, err := f.cp.GetListener(f.ctx, tenantA, edge)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		if l := status(); l.Status != controlplane.ListenerDisconnected || l.LastHeartbeatAt != nil {
			t.Errorf("new listener: %s, %v", l.Status, l.LastHeartbeatAt)
		}
		d := f.deployment(tenantA, "never", edge)
		if rev := f.revision(tenantA, d, *d.LatestRevisionID); *rev.StatusMessage != "Waiting for the agent of listener "+edge+" (last seen: never)." {
			t.Errorf("status_message = %q", *rev.StatusMessage)
		}

		if err := f.cp.AgentHeartbeat(f.ctx, tenantA, edge, "0.9.0"); err != nil {
			t.Fatal(err)
		}
		seen := time.Now().UTC()
		l := status()
		diff(t, "after a heartbeat", []any{controlplane.ListenerConnected, seen, "0.9.0"},
			[]any{l.Status, l.LastHeartbeatAt.Time(), l.Version})
		page, err := f.cp.ListListeners(f.ctx, tenantA, nil)
		if err != nil {
			t.Fatal(err)
		}
		if page.Resources[0].Status != controlplane.ListenerConnected {
			t.Errorf("listed: %s", page.Resources[0].Status)
		}
		d2, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		if rev := f.revision(tenantA, d2, *d2.LatestRevisionID); *rev.StatusMessage != "Waiting for the agent of listener "+edge+
			" (last seen: "+l.LastHeartbeatAt.String()+")." {
			t.Errorf("status_message = %q", *rev.StatusMessage)
		}

		// A heartbeat soon after writes nothing; a new version is written.
		time.Sleep(time.Second)
		before := dump(t, st)
		if err := f.cp.AgentHeartbeat(f.ctx, tenantA, edge, "0.9.0"); err != nil {
			t.Fatal(err)
		}
		diff(t, "store after a second heartbeat", before, dump(t, st))
		if err := f.cp.AgentHeartbeat(f.ctx, tenantA, edge, "1.0.0"); err != nil {
			t.Fatal(err)
		}
		if l := status(); l.Version != "1.0.0" || !l.LastHeartbeatAt.Time().Equal(seen.Add(time.Second)) {
			t.Errorf("after a new version: %s at %v", l.Version, l.LastHeartbeatAt)
		}

		// Silence beyond the window: DISCONNECTED, by the clock alone.
		time.Sleep(controlplane.AgentConnectedWindow)
		if l := status(); l.Status != controlplane.ListenerConnected {
			t.Errorf("at the window's end: %s, want CONNECTED", l.Status)
		}
		time.Sleep(time.Second)
		if l := status(); l.Status != controlplane.ListenerDisconnected {
			t.Errorf("past the window: %s, want DISCONNECTED", l.Status)
		}
		// A claim is a sign of life too.
		f.claim(tenantA, edge)
		if l := status(); l.Status != controlplane.ListenerConnected {
			t.Errorf("after a claim: %s, want CONNECTED", l.Status)
		}

		// Not the tenant's listener; a version too long.
		wantErr(t, "another tenant's heartbeat", f.cp.AgentHeartbeat(f.ctx, tenantB, edge, ""), apierr.ErrNotFound)
		err = f.cp.AgentHeartbeat(f.ctx, tenantA, edge, string(make([]byte, 257)))
		diff(t, "long version", []string{"body.version: string_too_long"}, locTypes(problems(t, err)))
	})
}

// TestRemoteReconciledFilter: a deployment answers remote_reconciled when
// it is external_docker (the one source placed on listeners, so every
// deployment an agent serves is one), and the list filter of that
// name selects exactly the deployments that answer it, on either walk (the
// filter alone, or beside another that the index walks first).
func TestRemoteReconciledFilter(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge, inHouse := f.listener(tenantA, "edge-1"), f.listener(tenantA, "in-house")
		intID, err := f.cp.CreateIntegration(f.ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(7)), Name: new("acme")})
		if err != nil {
			t.Fatal(err)
		}
		github := func(name string) *controlplane.Deployment {
			t.Helper()
			d, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, githubBody(name, intID.ID)))
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		want := map[string]bool{
			f.deployment(tenantA, "docker-served", edge).ID:      true,
			f.deployment(tenantA, "docker-in-house", inHouse).ID: true,
			github("github-1").ID:                                false,
			github("github-2").ID:                                false,
		}
		for _, q := range []controlplane.ListDeploymentsQuery{{}, {NameContains: "-"}, {Status: controlplane.StatusAwaitingDatabase}} {
			for _, remote := range []bool{true, false} {
				q.RemoteReconciled = &remote
				page, err := f.cp.ListDeployments(f.ctx, tenantA, &q)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range page.Resources {
					got = append(got, d.Name)
					if d.RemoteReconciled != remote || want[d.ID] != remote {
						t.Errorf("remote_reconciled=%v (beside %+v) lists %s, which answers %v", remote, q, d.Name, d.RemoteReconciled)
					}
				}
				n := 0
				for _, r := range want {
					if r == remote {
						n++
					}
				}
				if q.Status == "" && len(got) != n {
					t.Errorf("remote_reconciled=%v (beside %+v) lists %v, want %d deployments", remote, q, got, n)
				}
			}
		}
		// The flag is kept by changes that make no revision.
		served := f.deployment(tenantA, "docker-patched", edge)
		d, err := f.cp.UpdateDeployment(f.ctx, tenantA, served.ID, &controlplane.UpdateDeploymentRequest{DisplayName: new("Remote")})
		if err != nil || !d.RemoteReconciled {
			t.Errorf("after a PATCH in place: %v, %v", d.RemoteReconciled, err)
		}
	})
}

// newRevision makes a new revision of a deployment and returns its id.
func (f *agentFixture) newRevision(tenant, deploymentID string) string {
	f.t.Helper()
	rev, err := f.cp.CreateRevision(f.ctx, tenant, deploymentID,
		&controlplane.UpdateDeploymentRequest{SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:2")}})
	if err != nil {
		f.t.Fatal(err)
	}
	return rev.ID
}

// derefOr is *p, or or when p is nil.
func derefOr(p *string, or string) string {
	if p == nil {
		return or
	}
	return *p
}
