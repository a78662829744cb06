package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestInterruptRevision: a revision not yet terminal becomes INTERRUPTED
// with a message, whatever its status (a queued one without ever
// running), and its work is gone; the deployment keeps its active
// revision, its latest_revision_id and its status. A terminal revision is
// refused (400), and so is a second interrupt; unknown ids, another
// deployment's revision and another tenant's are not found.
func TestInterruptRevision(t *testing.T) {
	inBubbleOverStores(t, testInterruptRevision)
}

func testInterruptRevision(t *testing.T, st store.Store) {
	ctx := context.Background()
	cp := controlplane.New(st, nil)
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	first := *d.LatestRevisionID

	// A queued revision: INTERRUPTED without ever running.
	rev, err := cp.InterruptRevision(ctx, tenantA, d.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "status_history", []controlplane.RevisionStatus{controlplane.RevisionCreating, controlplane.RevisionInterrupted}, statuses(rev.StatusHistory))
	if rev.Status != controlplane.RevisionInterrupted || rev.StatusMessage == nil || *rev.StatusMessage != "The revision was interrupted." {
		t.Errorf("interrupted revision: %s %v", rev.Status, rev.StatusMessage)
	}
	got, err := cp.GetRevision(ctx, tenantA, d.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the revision as GET answers it", rev, got)
	if ok, err := cp.Process(ctx, &script{deploy: func(context.Context, *controlplane.Work, controlplane.Reporter) error {
		t.Error("Deploy of an interrupted revision")
		return nil
	}}); ok || err != nil {
		t.Errorf("Process after the interrupt: %v, %v; want no work", ok, err)
	}
	dep, err := cp.GetDeployment(ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *dep.LatestRevisionID != first || dep.ActiveRevisionID != nil || dep.Status != controlplane.StatusAwaitingDatabase {
		t.Errorf("deployment after interrupting its only revision: latest %v, active %v, %s", *dep.LatestRevisionID, dep.ActiveRevisionID, dep.Status)
	}
	if _, err := cp.InterruptRevision(ctx, tenantA, d.ID, first); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("interrupting an interrupted revision: %v, want ErrInvalidState", err)
	}

	// A deployed revision serves on while a newer one is interrupted
	// mid-rollout; the deployed one cannot be interrupted.
	r2, err := cp.CreateRevision(ctx, tenantA, d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Process(ctx, newWalker(t, 0)); err != nil {
		t.Fatal(err)
	}
	r3, err := cp.CreateRevision(ctx, tenantA, d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		_, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{})
		return err
	}}); err != nil {
		t.Fatal(err)
	}
	before, _ := cp.GetDeployment(ctx, tenantA, d.ID)
	if rev, err := cp.InterruptRevision(ctx, tenantA, d.ID, r3.ID); err != nil || rev.Status != controlplane.RevisionInterrupted {
		t.Fatalf("interrupt of a revision DEPLOYING: %+v, %v", rev, err)
	}
	after, _ := cp.GetDeployment(ctx, tenantA, d.ID)
	diff(t, "the deployment after its newest revision was interrupted", before, after)
	if *after.ActiveRevisionID != r2.ID || after.Status != controlplane.StatusReady || *after.LatestRevisionID != r3.ID {
		t.Errorf("deployment: active %v, status %s, latest %v; want %s active, READY", *after.ActiveRevisionID, after.Status, *after.LatestRevisionID, r2.ID)
	}
	if _, err := cp.InterruptRevision(ctx, tenantA, d.ID, r2.ID); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("interrupting a DEPLOYED revision: %v, want ErrInvalidState", err)
	}

	other, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("other")))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, dep, rev string
		kind             string
	}{
		{tenantA, "00000000-0000-4000-8000-00000000abcd", first, apierr.KindDeployment},
		{tenantA, "x", first, apierr.KindDeployment},
		{tenantB, d.ID, *other.LatestRevisionID, apierr.KindDeployment},
		{tenantA, d.ID, *other.LatestRevisionID, apierr.KindRevision},
		{tenantA, d.ID, "y", apierr.KindRevision},
	} {
		_, err := cp.InterruptRevision(ctx, c.tenant, c.dep, c.rev)
		var nf *apierr.NotFoundError
		if !errors.As(err, &nf) || nf.Kind != c.kind {
			t.Errorf("interrupt %s/%s of %s: %v, want %s not found", c.dep, c.rev, c.tenant, err, c.kind)
		}
	}
	if rev, _ := cp.GetRevision(ctx, tenantA, other.ID, *other.LatestRevisionID); rev.Status != controlplane.RevisionCreating {
		t.Errorf("another deployment's revision after the refused interrupts: %s", rev.Status)
	}
}

// TestInterruptOfUnknownDeployment: a deployment the deployer could not
// tell about (UNKNOWN) is READY again once the revision being rolled out
// is interrupted, its active revision serving on; AWAITING_DATABASE when
// it has none.
func TestInterruptOfUnknownDeployment(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, dockerBody("agent"))
	if _, err := f.cp.Process(f.ctx, newWalker(t, 0)); err != nil {
		t.Fatal(err)
	}
	noActive := f.create(tenantA, dockerBody("fresh"))
	for _, dep := range []*controlplane.Deployment{d, noActive} {
		rev, err := f.cp.CreateRevision(f.ctx, tenantA, dep.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if dep == noActive {
			// Its first revision is SKIPPED: this one is the one to run.
			if _, err := f.cp.Process(f.ctx, &script{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.cp.Process(f.ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			return r.Report(ctx, controlplane.Step{Status: controlplane.RevisionUnknown, DeploymentStatus: controlplane.StatusUnknown})
		}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.cp.GetDeployment(f.ctx, tenantA, dep.ID); got.Status != controlplane.StatusUnknown {
			t.Fatalf("deployment %s before the interrupt: %s, want UNKNOWN", dep.Name, got.Status)
		}
		if _, err := f.cp.InterruptRevision(f.ctx, tenantA, dep.ID, rev.ID); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := f.cp.GetDeployment(f.ctx, tenantA, d.ID); got.Status != controlplane.StatusReady {
		t.Errorf("UNKNOWN deployment with an active revision after the interrupt: %s, want READY", got.Status)
	}
	if got, _ := f.cp.GetDeployment(f.ctx, tenantA, noActive.ID); got.Status != controlplane.StatusAwaitingDatabase {
		t.Errorf("UNKNOWN deployment without an active revision after the interrupt: %s, want AWAITING_DATABASE", got.Status)
	}
}

// blocked is a Deployer that reports its revision up to DEPLOYING, says
// so on started, and waits for its ctx; it sends the cause on cause and
// the error of one more report on report.
type blocked struct {
	started chan struct{}
	cause   chan error
	report  chan error
}

func newBlocked() *blocked {
	return &blocked{started: make(chan struct{}), cause: make(chan error, 1), report: make(chan error, 1)}
}

func (b *blocked) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	if _, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{}); err != nil {
		return err
	}
	close(b.started)
	<-ctx.Done()
	b.cause <- context.Cause(ctx)
	b.report <- r.Report(context.WithoutCancel(ctx), controlplane.Step{Status: controlplane.RevisionDeployed})
	return nil
}

func (b *blocked) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

// checkEnded checks that a Deploy stopped for a revision that ended
// without it: its ctx's cause matches ErrRevisionEnded and ErrLeaseLost,
// and its next report is refused, matching ErrRevisionEnded.
func checkEnded(t *testing.T, b *blocked) {
	t.Helper()
	cause := <-b.cause
	if !errors.Is(cause, controlplane.ErrRevisionEnded) || !errors.Is(cause, controlplane.ErrLeaseLost) {
		t.Errorf("Deploy's ctx ended with %v, want ErrRevisionEnded and ErrLeaseLost", cause)
	}
	err := <-b.report
	if !controlplane.IsRefusal(err) || !errors.Is(err, controlplane.ErrRevisionEnded) {
		t.Errorf("a report after the revision ended: %v, want a refusal matching ErrRevisionEnded", err)
	}
}

// TestInterruptStopsTheDeployerAtOnce: interrupting a revision that this
// ControlPlane's Process (as Run) drives cancels the Deploy at once,
// without waiting for a lease renewal (the lease lasts an hour), with a
// cause matching ErrRevisionEnded; so does superseding one (SKIPPED) and
// deleting its deployment.
func TestInterruptStopsTheDeployerAtOnce(t *testing.T) {
	for _, end := range []string{"interrupt", "supersede", "delete"} {
		t.Run(end, func(t *testing.T) {
			inBubbleOverStores(t, func(t *testing.T, st store.Store) {
				ctx := context.Background()
				cp := controlplane.New(st, &controlplane.Options{LeaseDuration: time.Hour})
				d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
				if err != nil {
					t.Fatal(err)
				}
				b := newBlocked()
				done := make(chan error, 1)
				go func() {
					_, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
						if end != "supersede" {
							return b.Deploy(ctx, w, r)
						}
						// Only a revision before DEPLOYING is superseded.
						if _, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionAwaitingDeploy, controlplane.Step{}); err != nil {
							return err
						}
						close(b.started)
						<-ctx.Done()
						b.cause <- context.Cause(ctx)
						b.report <- r.Report(context.WithoutCancel(ctx), controlplane.Step{Status: controlplane.RevisionDeploying})
						return nil
					}})
					done <- err
				}()
				<-b.started
				start := time.Now()
				switch end {
				case "interrupt":
					_, err = cp.InterruptRevision(ctx, tenantA, d.ID, *d.LatestRevisionID)
				case "supersede":
					_, err = cp.CreateRevision(ctx, tenantA, d.ID, nil)
				case "delete":
					err = cp.DeleteDeployment(ctx, tenantA, d.ID)
				}
				if err != nil {
					t.Fatal(err)
				}
				checkEnded(t, b)
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if waited := time.Since(start); waited != 0 {
					t.Errorf("the Deploy stopped %v after the revision ended, want at once", waited)
				}
			})
		})
	}
}

// TestInterruptStopsAnotherReplicasDeployer: a revision that another
// ControlPlane over the same store drives is stopped at that one's next
// lease renewal, with a cause matching ErrRevisionEnded.
func TestInterruptStopsAnotherReplicasDeployer(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		opts := &controlplane.Options{LeaseDuration: 30 * time.Second}
		a, b := controlplane.New(st, opts), controlplane.New(st, opts)
		d, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
		if err != nil {
			t.Fatal(err)
		}
		dep := newBlocked()
		done := make(chan error, 1)
		go func() {
			_, err := a.Process(ctx, dep)
			done <- err
		}()
		<-dep.started
		start := time.Now()
		if _, err := b.InterruptRevision(ctx, tenantA, d.ID, *d.LatestRevisionID); err != nil {
			t.Fatal(err)
		}
		checkEnded(t, dep)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited > 10*time.Second {
			t.Errorf("the other replica's Deploy stopped %v after the interrupt, want within a third of the lease", waited)
		}
	})
}

// TestLostLeaseIsNotAnEnd: a Deploy whose lease another worker took over
// (the revision goes on there) is cancelled with ErrLeaseLost alone: its
// work is resumed, so its deployer keeps what it made.
func TestLostLeaseIsNotAnEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := storemem.New()
		defer st.Close()
		clock := testclock.New(t0, time.Microsecond)
		opts := &controlplane.Options{Clock: clock.Now, LeaseDuration: 30 * time.Second}
		a, b := controlplane.New(st, opts), controlplane.New(st, opts)
		if _, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent"))); err != nil {
			t.Fatal(err)
		}
		release, bDone := make(chan struct{}), make(chan error, 1)
		var cause error
		_, err := a.Process(ctx, &script{deploy: func(wctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			clock.Advance(time.Hour) // a stalls past its lease; b takes the work over
			go func() {
				_, err := b.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, rb controlplane.Reporter) error {
					if err := rb.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued}); err != nil {
						return err
					}
					<-release
					return nil
				}})
				bDone <- err
			}()
			<-wctx.Done() // a's next renewal finds the lease b's
			cause = context.Cause(wctx)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		close(release)
		if err := <-bDone; err != nil {
			t.Fatal(err)
		}
		if !errors.Is(cause, controlplane.ErrLeaseLost) || errors.Is(cause, controlplane.ErrRevisionEnded) {
			t.Errorf("the Deploy whose lease was taken over ended with %v, want ErrLeaseLost alone", cause)
		}
	})
}

// TestInterruptOfAgentWork: an agent's revision interrupted while the
// agent holds it: its lease renewal is refused as lost, its next report is
// refused matching ErrRevisionEnded, and the revision answers INTERRUPTED
// on the agent's reads, which is how an agent tells an end from a
// takeover.
func TestInterruptOfAgentWork(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge := f.listener(tenantA, "edge-1")
		d := f.deployment(tenantA, "remote", edge)
		w := f.claim(tenantA, edge)
		if w == nil || w.Kind != controlplane.AgentDeploy {
			t.Fatalf("claim: %+v", w)
		}
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionAwaitingDeploy}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.cp.InterruptRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "renewal", f.cp.RenewAgentLease(f.ctx, tenantA, edge, w.Lease), controlplane.ErrLeaseLost)
		err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionDeploying})
		wantErr(t, "report", err, apierr.ErrInvalidState)
		wantErr(t, "report", err, controlplane.ErrRevisionEnded)
		rev, err := f.cp.AgentRevision(f.ctx, tenantA, edge, d.ID, *d.LatestRevisionID)
		if err != nil || rev.Status != controlplane.RevisionInterrupted || !controlplane.EndedWithoutDeployer(rev.Status) {
			t.Errorf("the agent's read of the revision: %+v, %v; want INTERRUPTED", rev, err)
		}
		if w := f.claim(tenantA, edge); w != nil {
			t.Errorf("claim after the interrupt: %+v, want no work", w)
		}
		// A queued revision of an agent-served deployment is interrupted
		// without an agent ever taking it.
		r2, err := f.cp.CreateRevision(f.ctx, tenantA, d.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rev, err := f.cp.InterruptRevision(f.ctx, tenantA, d.ID, r2.ID); err != nil || fmt.Sprint(statuses(rev.StatusHistory)) != "[CREATING QUEUED INTERRUPTED]" {
			t.Errorf("interrupt of a revision waiting for its agent: %+v, %v", rev, err)
		}
		if w := f.claim(tenantA, edge); w != nil {
			t.Errorf("claim after interrupting the queued revision: %+v, want no work", w)
		}
	})
}
