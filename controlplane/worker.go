package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Pending work. internal/workqueue keeps cp_pending: one unit per
// revision not yet terminal and per deployment AWAITING_DELETE, written
// in the same Update as the change that creates or ends it, its key in
// the compact encoding (internal/keyenc: tenant prefix, id parts, a
// revision's time key and id), its value the unit's lease. The work of a
// deployment lies in Run's range of its tenant, or in the range of the
// agents of its listener (agentwork.go: queueFor decides, anew for each
// unit of work).

// serverRange is the range of Run's work of the tenant of prefix tp.
func serverRange(tp string) workqueue.Range { return workqueue.Range{Tenant: tp} }

// agentRange is the range of the work of the agents of listener
// listenerID, of the tenant of prefix tp.
func agentRange(tp, listenerID string) workqueue.Range {
	return workqueue.Range{Tenant: tp, Listener: keyenc.ID(listenerID)}
}

// rangesOf lists the ranges that may hold the work of a deployment placed
// on listener (nil for none): Run's, and its listener's agents', since
// whether an agent serves a deployment is decided anew for each unit of
// work (queueFor).
func rangesOf(tp string, listener *string) []workqueue.Range {
	if listener == nil {
		return []workqueue.Range{serverRange(tp)}
	}
	return []workqueue.Range{serverRange(tp), agentRange(tp, *listener)}
}

// revisionUnit is the unit of work of rev in rg.
func revisionUnit(rg workqueue.Range, rev *revisionRecord) workqueue.Unit {
	return workqueue.Unit{Range: rg, Deployment: keyenc.ID(rev.DeploymentID), Revision: keyenc.Time(rev.CreatedAt.Time()) + keyenc.ID(rev.ID)}
}

// pendingRevisions lists the units of a deployment's revisions in every
// range that may hold them.
func pendingRevisions(r store.Reader, tp string, d *deploymentRecord) ([]workqueue.Unit, error) {
	var us []workqueue.Unit
	for _, rg := range rangesOf(tp, d.SourceConfig.ListenerID) {
		more, err := workqueue.Revisions(r, rg, keyenc.ID(d.ID))
		if err != nil {
			return nil, err
		}
		us = append(us, more...)
	}
	return us, nil
}

// addRevision stores rev, a new revision of d (the deployment as it will
// be written), as pending work, and supersedes the deployment's revisions
// still before DEPLOYING: they become SKIPPED in this same Update. It
// decides whether an agent serves d (queueFor), which sets
// d.RemoteReconciled: the caller writes d after it.
func (cp *ControlPlane) addRevision(tx store.Tx, tenant string, d *deploymentRecord, rev *revisionRecord) error {
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	if err := cp.skipPending(tx, tenant, tp, d, rev); err != nil {
		return err
	}
	rg, l, err := cp.queueFor(tx, tenant, tp, d)
	if err != nil {
		return err
	}
	return cp.addFirstRevision(tx, tenant, rg, l, rev)
}

// addFirstRevision adds rev to range rg, the first revision of a
// deployment created in tx when called directly: there is no earlier
// revision to skip, and it reads nothing (a scan of the new deployment's
// pending work would lock, in PostgreSQL, the index page where concurrent
// creates add theirs). agent is the listener whose agent serves the
// deployment, nil when Run does: its revision waits for that agent in
// QUEUED.
func (cp *ControlPlane) addFirstRevision(tx store.Tx, tenant string, rg workqueue.Range, agent *Listener, rev *revisionRecord) error {
	if agent != nil {
		rev.enter(RevisionQueued, rev.CreatedAt)
		rev.StatusMessage = new(waitingMessage(agent))
	}
	if err := cp.putRevision(tx, tenant, rev, true); err != nil {
		return err
	}
	return workqueue.Add(tx, revisionUnit(rg, rev))
}

// skipPending moves the revisions of d that have not started to SKIPPED,
// superseded by rev.
func (cp *ControlPlane) skipPending(tx store.Tx, tenant, tp string, d *deploymentRecord, rev *revisionRecord) error {
	olds, err := pendingRevisions(tx, tp, d)
	if err != nil {
		return err
	}
	for _, u := range olds {
		old, err := cp.getRevision(tx, tenant, rev.DeploymentID, tailID(u.Revision))
		if err != nil {
			return err
		}
		if !skippable(old.Status) {
			continue
		}
		old.enter(RevisionSkipped, later(rev.CreatedAt.Time(), old.UpdatedAt))
		old.StatusMessage = new("Superseded by revision " + rev.ID + ".")
		if err := cp.putRevision(tx, tenant, old, false); err != nil {
			return err
		}
		if err := workqueue.Remove(tx, u); err != nil {
			return err
		}
	}
	return nil
}

// enter moves the revision to status s at at (its new updated_at) and
// records the change in its status_history.
func (r *revisionRecord) enter(s RevisionStatus, at wiretime.Time) {
	r.Status, r.UpdatedAt = s, at
	r.StatusHistory = append(slices.Clip(r.StatusHistory), StatusChange{Status: s, At: at})
}

// interruptRevisions ends every unfinished revision of d, a deployment
// being deleted (as it will be written), with INTERRUPTED, and queues its
// teardown where queueFor says (which sets d.RemoteReconciled).
func (cp *ControlPlane) interruptRevisions(tx store.Tx, tenant string, d *deploymentRecord, at wiretime.Time) error {
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	us, err := pendingRevisions(tx, tp, d)
	if err != nil {
		return err
	}
	for _, u := range us {
		rev, err := cp.getRevision(tx, tenant, d.ID, tailID(u.Revision))
		if err != nil {
			return err
		}
		rev.enter(RevisionInterrupted, later(at.Time(), rev.UpdatedAt))
		rev.StatusMessage = new("The deployment is being deleted.")
		if err := cp.putRevision(tx, tenant, rev, false); err != nil {
			return err
		}
		if err := workqueue.Remove(tx, u); err != nil {
			return err
		}
	}
	rg, l, err := cp.queueFor(tx, tenant, tp, d)
	if err != nil {
		return err
	}
	if l != nil {
		// Nothing here can remove its objects: say who will.
		d.StatusMessage = new(teardownWaitingMessage(l))
	}
	return workqueue.Add(tx, workqueue.Unit{Range: rg, Deployment: keyenc.ID(d.ID)})
}

// job is one claimed unit of work.
type job struct {
	lease      *workqueue.Lease // its unit and the claim's lease
	tenant     string
	deployment string
	revision   string // "" for a teardown
	// listener is the listener whose agents claim the work (agentwork.go),
	// "" for Run's work.
	listener string
	// stepStart is when the Deployer's current step began (Unix
	// nanoseconds by Options.Clock), for Transition.Step.
	stepStart atomic.Int64
	// recheck asks keepLease to renew the lease now (stopEnded): a
	// change may have ended the job's revision.
	recheck chan struct{}
}

// newJob is the job of lease l of the tenant. The queue has checked the
// key parts of l's unit (workqueue.Parse).
func newJob(l *workqueue.Lease, tenant string) *job {
	j := &job{lease: l, tenant: tenant, recheck: make(chan struct{}, 1)}
	j.deployment, _, _ = keyenc.ParseID(l.Deployment)
	if l.Revision != "" {
		j.revision = tailID(l.Revision)
	}
	if l.Range.Listener != "" {
		j.listener, _, _ = keyenc.ParseID(l.Range.Listener)
	}
	return j
}

// claim claims the first pending unit of Run's work whose lease is free or
// expired and whose tenant is below its share of this ControlPlane's
// workers (Options.TenantWorkers), taking a place in that share, which do
// gives back (workqueue.Queue.Claim). It returns nil when there is none.
// Its error is the store's, unwrapped.
func (cp *ControlPlane) claim(ctx context.Context) (*job, error) {
	l, err := cp.queue.Claim(ctx, cp.now())
	if err != nil || l == nil {
		return nil, err
	}
	if l.Takeover {
		cp.obs.LeaseTakenOver()
	}
	tenant, err := cp.tenants.Tenant(ctx, cp.st, l.Range.Tenant)
	if err != nil {
		// Give the work back at once rather than hold it unworked.
		cp.queue.Done(l)
		return nil, errors.Join(err, cp.queue.Release(ctx, l, time.Time{}))
	}
	return newJob(l, tenant), nil
}

// tenantShare is the cap per tenant that Options.TenantWorkers t gives
// over workers workers: 0 for none (a cap of workers or more caps nothing).
func tenantShare(t, workers int) int {
	if t == 0 {
		t = max(1, workers/4)
	}
	if t < 0 || t >= workers {
		return 0
	}
	return t
}

// renewLease pushes the job's lease expiry forward. Errors:
// ErrLeaseLost when the work is no longer the job's.
func (cp *ControlPlane) renewLease(ctx context.Context, j *job) error {
	return cp.storeErr("renew lease", cp.queue.Renew(ctx, j.lease, cp.now()))
}

// release gives the job's work back: at once (retry false: any replica
// takes it) or after PollInterval (retry true: the deployer asked to be
// called again later). Nothing happens if the lease is no longer the
// job's.
func (cp *ControlPlane) release(ctx context.Context, j *job, retry bool) error {
	var at time.Time
	if retry {
		at = cp.now().Add(cp.poll)
	}
	return cp.storeErr("release work", cp.queue.Release(ctx, j.lease, at))
}

// keepLease renews the job's lease every third of its duration, and at
// once when asked (job.recheck), until stop is called; once it is lost it
// cancels ctx with the cause lostCause gives (ErrLeaseLost, or a cause
// matching ErrRevisionEnded too when the revision ended without the job).
func (cp *ControlPlane) keepLease(ctx context.Context, j *job, cancel context.CancelCauseFunc) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(cp.leaseFor / 3)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			case <-j.recheck:
			}
			if err := cp.renewLease(ctx, j); errors.Is(err, ErrLeaseLost) {
				cancel(cp.lostCause(ctx, j))
				return
			} else if err != nil && ctx.Err() == nil {
				cp.log.Warn("controlplane: renewing a lease failed", "work", j.lease.Key(), "err", err)
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}

// Process claims one unit of pending work, if any, and does it in the
// calling goroutine: it calls d.Deploy for a revision not yet terminal, or
// d.Teardown and then removes the deployment for one AWAITING_DELETE. It
// reports whether there was work, and returns Teardown's error once it is
// recorded (the deployment's status_message, and the backoff after which
// the teardown is tried again). Run does the same concurrently, forever;
// Process is for tests and for callers that schedule work themselves.
// Work is claimed in key order (tenant, deployment, revision age), so a
// sequence of Process calls over the same state is deterministic.
func (cp *ControlPlane) Process(ctx context.Context, d Deployer) (bool, error) {
	if d == nil {
		return false, errors.New("controlplane: Process needs a Deployer")
	}
	j, err := cp.claim(ctx)
	if err != nil || j == nil {
		return false, cp.storeErr("claim work", err)
	}
	return true, cp.do(ctx, d, j)
}

// do runs one claimed job, and then gives back its place in its tenant's
// share. Errors are store errors (the work is then retried after
// PollInterval) and Teardown's error, as a *teardownError (retried after
// its backoff); a Deploy error is recorded on the revision instead.
func (cp *ControlPlane) do(ctx context.Context, d Deployer, j *job) error {
	defer cp.queue.Done(j.lease)
	defer cp.jobs.add(j)()
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := cp.keepLease(jctx, j, cancel)
	j.stepStart.Store(cp.clock().UnixNano())
	var err error
	if j.revision != "" {
		err = cp.deploy(jctx, d, j)
	} else {
		err = cp.teardown(jctx, d, j)
	}
	stop()
	switch {
	case errors.Is(context.Cause(jctx), ErrLeaseLost):
		return nil // someone else has it now
	case ctx.Err() != nil:
		// Stopping: give the work back at once, so that a replica or the
		// next start takes it over without waiting for the lease to expire.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		return errors.Join(ctx.Err(), cp.release(rctx, j, false))
	case errors.As(err, new(*teardownError)):
		return err // recorded, and given back until its backoff ends
	case err != nil:
		// A store failure: try again after PollInterval rather than when
		// the lease expires.
		return errors.Join(err, cp.release(ctx, j, true))
	}
	return nil
}

// loadWork reads the Work of the job's revision.
func (cp *ControlPlane) loadWork(r store.Reader, j *job) (*Work, error) {
	dep, err := cp.getDeployment(r, j.tenant, j.deployment)
	if err != nil {
		return nil, err
	}
	rev, err := cp.getRevision(r, j.tenant, j.deployment, j.revision)
	if err != nil {
		return nil, err
	}
	w := &Work{Tenant: j.tenant, Deployment: *dep.wire(), Revision: rev.wire(), Secrets: rev.Secrets,
		SecretReferences: rev.SecretReferences,
		ResourceSpec:     rev.ResourceSpec, InstallCommand: rev.InstallCommand, BuildCommand: rev.BuildCommand,
		ImageVersion: rev.ImageVersion}
	if b := dep.SourceConfig.AutoRollback; b != nil && *b {
		w.HealthWatchSeconds = int((cp.watchFor + time.Second - 1) / time.Second)
	}
	if w.Secrets == nil {
		w.Secrets = []Secret{}
	}
	if w.SecretReferences == nil {
		w.SecretReferences = []SecretReference{}
	}
	if id := dep.SourceConfig.ListenerID; id != nil {
		if w.Listener, err = getListener(r, j.tenant, *id); err != nil {
			return nil, err
		}
		cp.answerListener(w.Listener, cp.now())
	}
	return w, nil
}

func (cp *ControlPlane) deploy(ctx context.Context, d Deployer, j *job) error {
	var w *Work
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		w, err = cp.loadWork(r, j)
		return err
	})
	if err != nil {
		return cp.storeErr("load work", err)
	}
	rep := &reporter{cp: cp, j: j}
	start := cp.clock()
	derr := d.Deploy(ctx, w, rep)
	cp.obs.DeployerCall(DeployerDeploy, cp.clock().Sub(start), derr)
	if ctx.Err() != nil {
		return nil // do releases the work, or it was lost
	}
	if derr != nil {
		// Record the failure of the phase the revision is in.
		err := cp.apply(ctx, j, Step{Message: derr.Error()}, true)
		if IsRefusal(err) {
			return nil // someone else's now, or already terminal
		}
		return err
	}
	return cp.release(ctx, j, true) // no-op when the revision is terminal
}

func (cp *ControlPlane) teardown(ctx context.Context, d Deployer, j *job) error {
	var dep *deploymentRecord
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		dep, err = cp.getDeployment(r, j.tenant, j.deployment)
		return err
	})
	if errors.Is(err, apierr.ErrNotFound) {
		dep = nil // removed already; drop the work below
	} else if err != nil {
		return cp.storeErr("load work", err)
	}
	if dep != nil {
		start := cp.clock()
		err := d.Teardown(ctx, j.tenant, dep.wire())
		cp.obs.DeployerCall(DeployerTeardown, cp.clock().Sub(start), err)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			err = cp.teardownFailed(ctx, j, err) // deletes.go
			if errors.Is(err, ErrLeaseLost) {
				return nil
			}
			return err
		}
	}
	err = cp.finishTeardown(ctx, j)
	if errors.Is(err, ErrLeaseLost) {
		return nil
	}
	if err == nil && j.lease.Failures > 0 {
		cp.log.Info("controlplane: teardown succeeded after failing; the deployment is removed",
			"tenant", j.tenant, "deployment", j.deployment, "failures", j.lease.Failures)
	}
	return err
}

// finishTeardown removes every record of the job's deployment, once its
// Deployer tore it down, if the lease is still the job's (ErrLeaseLost
// otherwise; nothing when the work is gone already).
func (cp *ControlPlane) finishTeardown(ctx context.Context, j *job) error {
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		cur, err := workqueue.Own(tx, j.lease)
		if err != nil || cur == nil {
			return err
		}
		rec, err := cp.getDeployment(tx, j.tenant, j.deployment)
		if errors.Is(err, apierr.ErrNotFound) {
			return workqueue.Remove(tx, j.lease.Unit)
		}
		if err != nil {
			return err
		}
		return cp.dropDeployment(ctx, tx, j.tenant, rec) // deletes.go
	})
	return cp.storeErr("remove deployment", err)
}

// reporter is the Reporter of one claimed revision.
type reporter struct {
	cp *ControlPlane
	j  *job
}

func (r *reporter) Report(ctx context.Context, s Step) error {
	// A Deploy's ctx cancelled because its revision ended without it, or
	// its lease went, answers the refusal that is its cause, before or
	// during the write, not the cancellation: the deployer then stops as
	// for any refusal (IsRefusal).
	if ctx.Err() != nil && IsRefusal(context.Cause(ctx)) {
		return context.Cause(ctx)
	}
	err := r.cp.apply(ctx, r.j, s, false)
	if err != nil && ctx.Err() != nil && IsRefusal(context.Cause(ctx)) {
		return context.Cause(ctx)
	}
	return err
}

// apply records a step of the job's revision in one Update: the transition
// is checked against the table, the revision, its pending record (lease
// renewed, or removed when terminal) and, when it becomes active or the
// step sets a deployment status, the deployment are written together.
// With fail, the step's status is the failure of the revision's phase.
func (cp *ControlPlane) apply(ctx context.Context, j *job, s Step, fail bool) error {
	if s.Status != "" && !validRevisionStatus(s.Status) {
		return apierr.InvalidStatef("Unknown revision status %q.", s.Status)
	}
	if s.DeploymentStatus != "" {
		if err := deployerStatus(s.DeploymentStatus); err != nil {
			return err
		}
	}
	now := cp.now()
	var from, to RevisionStatus  // the status change committed, if any
	var entered time.Time        // when the revision entered from
	var held *apierr.DetailError // the refusal of a report its deployment's pin holds
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		from, to, held = "", "", nil
		cur, err := workqueue.Own(tx, j.lease) // nil: the work is done
		if err != nil {
			return err
		}
		rev, err := cp.getRevision(tx, j.tenant, j.deployment, j.revision)
		if cur == nil && errors.Is(err, apierr.ErrNotFound) {
			// Removed with its deployment (a delete of one that never
			// ran, or a forced one): a refusal, as for any revision ended
			// without the deployer.
			return &apierr.DetailError{Kind: errors.Join(apierr.ErrInvalidState, ErrRevisionEnded),
				Detail: fmt.Sprintf("Revision %s was removed with its deployment.", j.revision)}
		}
		if err != nil {
			return err
		}
		step := s
		if fail {
			step.Status = FailureOf(rev.Status)
		}
		if j.listener != "" && repeatedReport(rev.Status, step.Status, fail) {
			// An agent's report repeated after its answer was lost (the
			// revision may have ended with it): it changes nothing but
			// the lease, while the work is the lease's.
			if cur == nil {
				return nil
			}
			return cp.queue.Extend(tx, cur, now)
		}
		if cur == nil {
			return endedRefusal(rev) // interrupt.go
		}
		if step.Status != "" && !CanTransition(rev.Source, rev.Status, step.Status) {
			return apierr.InvalidStatef("Revision %s cannot move from %s to %s.", rev.ID, rev.Status, step.Status)
		}
		if step == (Step{}) {
			return cp.queue.Extend(tx, cur, now)
		}
		if step.Status == RevisionDeploying && !fail {
			if held, err = cp.holdForPin(tx, j, cur, rev); err != nil || held != nil { // pin.go
				return err
			}
		}
		next := *rev
		next.UpdatedAt = later(now, rev.UpdatedAt)
		if step.Status != "" {
			next.enter(step.Status, next.UpdatedAt)
		}
		if step.Message != "" {
			next.StatusMessage = new(step.Message)
		} else if j.listener != "" && rev.Status == RevisionQueued && next.Status != RevisionQueued {
			next.StatusMessage = nil // its agent took it: no longer waiting
		}
		if step.RepoCommitSHA != nil {
			next.SourceRevisionConfig.RepoCommitSHA = new(*step.RepoCommitSHA)
		}
		if step.ImageVersion != nil {
			next.ImageVersion = new(*step.ImageVersion)
		}
		if err := cp.putRevision(tx, j.tenant, &next, false); err != nil {
			return err
		}
		if next.Status != rev.Status {
			from, to = rev.Status, next.Status
			if h := rev.StatusHistory; len(h) > 0 {
				entered = h[len(h)-1].At.Time()
			}
		}
		if IsTerminal(next.Status) {
			err = workqueue.Remove(tx, j.lease.Unit)
		} else {
			err = cp.queue.Extend(tx, cur, now)
		}
		if err != nil {
			return err
		}
		if next.Status != RevisionDeployed && step.DeploymentStatus == "" && step.RepoCommitSHA == nil {
			return nil
		}
		return cp.applyToDeployment(tx, j, &next, step, now)
	})
	if err != nil {
		return cp.storeErr("report", err)
	}
	if held != nil {
		return held
	}
	if to != "" {
		if j.listener != "" && !entered.IsZero() {
			// An agent's job is made anew for each call: its step began
			// when the revision entered its status.
			j.stepStart.Store(entered.UnixNano())
		}
		cp.observeTransition(ctx, j, from, to, now)
	}
	return nil
}

// applyToDeployment makes a revision that just reached DEPLOYED active
// (unless a newer one already is), mirrors a repo_commit_sha reported for
// the deployment's latest revision into the deployment's
// source_revision_config, and sets the status a step asks for.
func (cp *ControlPlane) applyToDeployment(tx store.Tx, j *job, rev *revisionRecord, s Step, now time.Time) error {
	dep, err := cp.getDeployment(tx, j.tenant, j.deployment)
	if err != nil {
		return err
	}
	next := *dep
	if s.RepoCommitSHA != nil && dep.LatestRevisionID != nil && *dep.LatestRevisionID == rev.ID {
		next.SourceRevisionConfig.RepoCommitSHA = new(*s.RepoCommitSHA)
	}
	if rev.Status == RevisionDeployed && s.Status == RevisionDeployed {
		newer := dep.ActiveRevisionID == nil
		if !newer {
			act, err := cp.getRevision(tx, j.tenant, j.deployment, *dep.ActiveRevisionID)
			if err != nil {
				return err
			}
			newer = createdKey(act.CreatedAt.Time())+act.ID < createdKey(rev.CreatedAt.Time())+rev.ID
		}
		if newer {
			next.ActiveRevisionID = new(rev.ID)
			if rev.ImageVersion != nil {
				next.ImageVersion = new(*rev.ImageVersion)
			}
			if s.URL != nil {
				next.serveAt(*s.URL)
			}
			if next.Status == StatusAwaitingDatabase {
				next.Status = StatusReady
			}
		}
	}
	if s.DeploymentStatus != "" {
		if err := setDeployerStatus(&next, s.DeploymentStatus); err != nil {
			return err
		}
	}
	if next.equal(dep) {
		return nil
	}
	next.UpdatedAt = later(now, dep.UpdatedAt)
	return cp.putDeployment(tx, j.tenant, dep, &next)
}

// notify wakes Run: there is new work in this process.
func (cp *ControlPlane) notify() {
	select {
	case cp.wake <- struct{}{}:
	default:
	}
}

// Run drives pending work until ctx is done, then waits for the work in
// flight to stop and returns nil. It claims work inside store transactions
// with a lease (Options.LeaseDuration, renewed while the work runs), so
// several ControlPlanes over one store (replicas over one storepg database,
// or a restarted process) never drive the same revision at the same time,
// and work whose owner died is taken over once its lease expires. Up to
// Options.Workers units run at once, at most Options.TenantWorkers of them
// one tenant's: while a tenant is at its share, its waiting work is passed
// over and other tenants' is claimed. Run wakes at once when this
// ControlPlane creates work, and polls the store every
// Options.PollInterval for work other replicas created. Work in flight when
// ctx is done is given back at once, so a restart resumes it.
//
// A ControlPlane runs one Run at a time (a second call returns an error).
// Store failures are logged and retried at the next poll; Run returns
// early only when the store is closed.
func (cp *ControlPlane) Run(ctx context.Context, d Deployer) error {
	if d == nil {
		return errors.New("controlplane: Run needs a Deployer")
	}
	if !cp.running.CompareAndSwap(false, true) {
		return errors.New("controlplane: Run is already running")
	}
	defer cp.running.Store(false)
	cp.deployer.Store(&d)
	sem := make(chan struct{}, cp.workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(cp.poll)
	defer tick.Stop()
	for {
		for len(sem) < cap(sem) && ctx.Err() == nil {
			j, err := cp.claim(ctx)
			if err != nil {
				if errors.Is(err, store.ErrClosed) {
					return errors.New("controlplane: Run: the store is closed")
				}
				if ctx.Err() == nil {
					cp.log.Error("controlplane: claiming work failed", "err", err)
				}
				break
			}
			if j == nil {
				break
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem; cp.notify() }()
				// A failed teardown logged itself, once per distinct failure.
				if err := cp.do(ctx, d, j); err != nil && ctx.Err() == nil && !errors.As(err, new(*teardownError)) {
					cp.log.Error("controlplane: work failed", "work", j.lease.Key(), "err", err)
				}
			})
		}
		// Then number the outbox's events and fold the order counts
		// (sequencer.go), for this replica's writes and the others': after
		// the claims, so that new work does not wait for them.
		if err := cp.maintain(ctx); err != nil {
			if errors.Is(err, store.ErrClosed) {
				return errors.New("controlplane: Run: the store is closed")
			}
			if ctx.Err() == nil {
				cp.log.Error("controlplane: sequencing events failed", "err", err)
			}
		}
		cp.sweepPreviewsDue(ctx) // idle previews, every PreviewSweepInterval (previews.go)
		select {
		case <-ctx.Done():
			return nil
		case <-cp.wake:
		case <-tick.C:
		}
	}
}

// ReportDeploymentStatus sets a deployment's status on a deployer's word,
// outside any revision's work: UNUSED when it scaled an idle deployment to
// zero, UNKNOWN when it cannot tell, READY when it is serving again (only
// once a revision is active). Errors: *apierr.NotFoundError, apierr.ErrInvalidState for
// another status, a deployment being deleted, or READY without an active
// revision. Setting the status it already has changes nothing.
func (cp *ControlPlane) ReportDeploymentStatus(ctx context.Context, tenant, deploymentID string, s DeploymentStatus) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	return cp.setDeploymentStatus(ctx, tenant, s, func(tx store.Tx) (*deploymentRecord, error) {
		return cp.getDeployment(tx, tenant, did)
	})
}

// setDeploymentStatus applies a deployer's status s to the deployment
// read reads, in one Update.
func (cp *ControlPlane) setDeploymentStatus(ctx context.Context, tenant string, s DeploymentStatus,
	read func(store.Tx) (*deploymentRecord, error)) error {
	if err := deployerStatus(s); err != nil {
		return err
	}
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		dep, err := read(tx)
		if err != nil {
			return err
		}
		next := *dep
		if err := setDeployerStatus(&next, s); err != nil || next.Status == dep.Status {
			return err
		}
		next.UpdatedAt = later(now, dep.UpdatedAt)
		return cp.putDeployment(tx, tenant, dep, &next)
	})
	return cp.storeErr("report deployment status", err)
}

// deployerStatus checks that a deployer may set s at all.
func deployerStatus(s DeploymentStatus) error {
	switch s {
	case StatusReady, StatusUnused, StatusUnknown:
		return nil
	}
	return apierr.InvalidStatef("A deployer may not set the deployment status %q.", s)
}

// setDeployerStatus applies a deployer's status to d, checking its state.
func setDeployerStatus(d *deploymentRecord, s DeploymentStatus) error {
	switch {
	case d.Status == StatusAwaitingDelete:
		return apierr.InvalidStatef("Deployment ID %s is being deleted.", d.ID)
	case s == StatusReady && d.ActiveRevisionID == nil:
		return apierr.InvalidStatef("Deployment ID %s has no active revision; it cannot be READY.", d.ID)
	}
	d.Status = s
	return nil
}
