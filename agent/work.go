package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// do drives one claimed unit of work, as the control plane's Run does.
func (a *Agent) do(ctx context.Context, w *controlplane.AgentWork) {
	switch w.Kind {
	case controlplane.AgentDeploy:
		a.deploy(ctx, w)
	case controlplane.AgentTeardown:
		a.teardown(ctx, w)
	default:
		a.log.Warn("agent: claimed work of a kind this agent does not know; giving it back", "kind", w.Kind)
		a.settle(ctx, w.Lease, "giving work back", a.log, func(ctx context.Context) error { return a.c.release(ctx, w.Lease, true) })
	}
}

// deploy drives a revision: Deployer.Deploy with a Reporter over the
// lease, the lease renewed meanwhile. After Deploy: a revision it ended is
// done; one it left before the end is given back to be resumed later
// (release, retry); an error is recorded as the failure of the revision's
// phase (fail), as Run records it.
func (a *Agent) deploy(ctx context.Context, aw *controlplane.AgentWork) {
	w := aw.Work
	log := a.log.With("deployment", w.Deployment.ID, "revision", w.Revision.ID)
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rep := &reporter{a: a, w: w, lease: aw.Lease, ctx: wctx, cancel: cancel, log: log}
	stop := a.keepLease(wctx, aw, cancel, log, rep.ended.Load)
	log.Info("agent: deploying", "status", w.Revision.Status)
	err := a.d.Deploy(wctx, w, rep)
	if ferr := rep.flush(wctx); ferr != nil && wctx.Err() == nil {
		log.Warn("agent: the revision's last log lines were not written", "err", ferr)
	}
	stop()
	switch {
	case errors.Is(context.Cause(wctx), controlplane.ErrRevisionEnded):
		log.Info("agent: the revision ended without this agent (interrupted, superseded or deleted); its deployer stopped")
	case errors.Is(context.Cause(wctx), controlplane.ErrLeaseLost):
		log.Info("agent: the revision is no longer this agent's to drive (its lease was lost, or it ended otherwise)")
	case ctx.Err() != nil:
		a.giveBack(ctx, aw.Lease, log)
	case err != nil:
		log.Warn("agent: the deployer failed the revision", "err", err)
		a.settle(ctx, aw.Lease, "recording a failure", log, func(ctx context.Context) error { return a.c.fail(ctx, aw.Lease, err.Error()) })
	case rep.ended.Load():
		log.Info("agent: the revision ended", "status", rep.status())
	default:
		a.settle(ctx, aw.Lease, "giving work back", log, func(ctx context.Context) error { return a.c.release(ctx, aw.Lease, true) })
	}
}

// teardown removes a deployment being deleted: Deployer.Teardown, then
// teardown-done (which removes its records). A failed Teardown is
// recorded through teardown-failed: the deployment's status_message says
// why, and the control plane offers the teardown again after a backoff.
func (a *Agent) teardown(ctx context.Context, aw *controlplane.AgentWork) {
	dep := aw.Deployment
	log := a.log.With("deployment", dep.ID)
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := a.keepLease(wctx, aw, cancel, log, func() bool { return false })
	log.Info("agent: tearing down")
	err := a.d.Teardown(wctx, dep.TenantID, dep)
	stop()
	switch {
	case errors.Is(context.Cause(wctx), controlplane.ErrLeaseLost):
		log.Info("agent: the teardown is no longer this agent's (its lease was lost)")
	case ctx.Err() != nil:
		a.giveBack(ctx, aw.Lease, log)
	case err != nil:
		log.Warn("agent: the teardown failed; it is tried again later, with backoff", "err", err)
		a.settle(ctx, aw.Lease, "recording a failed teardown", log, func(ctx context.Context) error {
			err := a.c.teardownFailed(ctx, aw.Lease, err.Error())
			if isNoRoute(err) {
				// A control plane without the route: the work is given
				// back to be tried again after its poll interval.
				return a.c.release(ctx, aw.Lease, true)
			}
			return err
		})
	default:
		a.settle(ctx, aw.Lease, "finishing a teardown", log, func(ctx context.Context) error { return a.c.teardownDone(ctx, aw.Lease) })
	}
}

// settle makes the last call of a unit of work, trying it again while it
// fails for a reason that may pass. A refusal (the lease lost, the
// revision ended otherwise) means there is nothing left to do. When ctx
// ends first (Run stopping) the work is given back.
func (a *Agent) settle(ctx context.Context, lease, what string, log *slog.Logger, f func(context.Context) error) {
	err := a.retry(ctx, what, log, f)
	switch {
	case err == nil, controlplane.IsRefusal(err), errors.Is(err, ErrRefused):
	case ctx.Err() != nil:
		a.giveBack(ctx, lease, log)
	default:
		log.Warn("agent: "+what+" failed; the work is taken up again once its lease expires", "err", err)
	}
}

// giveBack releases work at once (Run stopping), so that another agent of
// the listener, or this one restarted, takes it without waiting for its
// lease to expire; bounded by releaseTimeout.
func (a *Agent) giveBack(ctx context.Context, lease string, log *slog.Logger) {
	if errors.Is(context.Cause(ctx), ErrRefused) {
		return // the credentials are refused: so would the release be
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := a.retry(rctx, "giving work back", log, func(ctx context.Context) error { return a.c.release(ctx, lease, false) }); err != nil &&
		!controlplane.IsRefusal(err) {
		log.Warn("agent: giving work back failed; it is taken up again once its lease expires", "err", err)
		return
	}
	log.Info("agent: gave the work back")
}

// retry runs f until it succeeds, fails for a reason that will not pass,
// or ctx ends; it tries again after failures that may pass, with backoff,
// logging each distinct failure once.
func (a *Agent) retry(ctx context.Context, what string, log *slog.Logger, f func(context.Context) error) error {
	tr := &trouble{log: log, what: what}
	b := a.backoff.start()
	for {
		err := f(ctx)
		if err == nil {
			tr.ok()
			return nil
		}
		if !transient(err) || ctx.Err() != nil {
			return err
		}
		tr.failed(err)
		if !sleep(ctx, b.next(retryAfterOf(err))) {
			return errors.Join(context.Cause(ctx), err)
		}
	}
}

// keepLease renews the lease every third of its length until stop is
// called, ended reports true (the revision ended: its lease went with
// it), or ctx ends. When the control plane answers that the lease is no
// longer the agent's (409, 404, 400) it cancels ctx with
// controlplane.ErrLeaseLost, which the Deployer sees as its context's
// cause, or, when the revision ended without the agent (endedElsewhere),
// with endedCause, which matches controlplane.ErrRevisionEnded too. A
// renewal that fails for a reason that may pass is tried again with
// backoff, within the third.
func (a *Agent) keepLease(ctx context.Context, aw *controlplane.AgentWork, cancel context.CancelCauseFunc, log *slog.Logger, ended func() bool) (stop func()) {
	every := time.Duration(max(aw.LeaseSeconds, 1)) * time.Second / 3
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tr := &trouble{log: log, what: "renewing a lease"}
		b := a.backoff.start()
		wait := every
		for {
			t := time.NewTimer(wait)
			select {
			case <-quit:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if ended() {
				return
			}
			err := a.c.renew(ctx, aw.Lease)
			switch {
			case ctx.Err() != nil, errors.Is(err, ErrRefused):
				return
			case err == nil:
				tr.ok()
				b.reset()
				wait = every
			case errors.Is(err, controlplane.ErrLeaseLost), isNotFound(err), errors.Is(err, apierr.ErrInvalidState):
				if !ended() {
					if aw.Work != nil && a.endedElsewhere(ctx, aw.Work, log) {
						log.Info("agent: the revision ended without this agent; stopping the work", "err", err)
						cancel(endedCause)
					} else {
						log.Info("agent: the lease is lost; stopping the work", "err", err)
						cancel(controlplane.ErrLeaseLost)
					}
				}
				return
			default:
				tr.failed(err)
				wait = min(b.next(retryAfterOf(err)), every)
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}

// endedCause is the cause of a Deploy's ctx cancelled because its
// revision ended without the agent, as the control plane's Run cancels
// its own: it matches controlplane.ErrRevisionEnded and
// controlplane.ErrLeaseLost.
var endedCause = fmt.Errorf("%w: %w", controlplane.ErrRevisionEnded, controlplane.ErrLeaseLost)

// endedElsewhere asks the control plane, after it refused a call about
// w's lease, whether w's revision ended without this agent: it answers
// it INTERRUPTED or SKIPPED (controlplane.EndedWithoutDeployer), or says
// that it or its deployment is gone (a 404 naming it). Then nobody
// resumes the revision, and its deployer removes what it made for it.
// When no answer comes within releaseTimeout it says false: a
// lost lease, whose work another agent resumes (what was made stays, and
// the deployer's reconcile removes it once the revision has ended).
func (a *Agent) endedElsewhere(ctx context.Context, w *controlplane.Work, log *slog.Logger) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	rev, err := a.c.GetRevision(rctx, w.Tenant, w.Deployment.ID, w.Revision.ID) // tried again while it may pass
	if err != nil {
		if !isNotFound(err) {
			log.Warn("agent: could not tell whether a revision whose lease was refused ended", "err", err)
		}
		return errors.As(err, new(*apierr.NotFoundError))
	}
	return controlplane.EndedWithoutDeployer(rev.Status)
}

func isNotFound(err error) bool { return errors.Is(err, apierr.ErrNotFound) }

// isNoRoute reports whether err is a 404 that names nothing of the
// protocol's (no deployment, revision or listener): the control plane
// does not have the route.
func isNoRoute(err error) bool {
	return isNotFound(err) && !errors.As(err, new(*apierr.NotFoundError))
}

// Log lines are sent in batches: a reporter keeps a revision's lines for
// up to logDelay, or until it holds maxLogBatch lines or maxLogBatchBytes
// of messages, and sends them in one request, before any report (so that a
// revision's log and its statuses stay in order) and when Deploy returns.
// A deployment's rollout writes some twenty lines; one request each made
// the log three quarters of an agent's requests.
const (
	logDelay         = 250 * time.Millisecond
	maxLogBatch      = 100
	maxLogBatchBytes = 256 << 10
)

// reporter is the controlplane.Reporter of a revision an agent drives: its
// reports and logs go to the control plane through the lease, tried again
// while they fail for a reason that may pass (a report is idempotent). Its
// errors are those of a Reporter: controlplane.ErrLeaseLost (409) and
// apierr.ErrInvalidState (400) are refusals (controlplane.IsRefusal), and
// a refusal for a revision that ended without the agent matches
// controlplane.ErrRevisionEnded too (refused).
type reporter struct {
	a      *Agent
	w      *controlplane.Work
	lease  string
	ctx    context.Context // the unit's: batches sent later use it
	cancel context.CancelCauseFunc
	log    *slog.Logger
	ended  atomic.Bool // a terminal status was reported

	mu   sync.Mutex
	last controlplane.RevisionStatus

	send         sync.Mutex // held while a batch is taken and sent: batches go in order
	lmu          sync.Mutex // guards pending, pendingBytes and timer
	pending      []controlplane.LogLine
	pendingBytes int
	timer        *time.Timer // sends pending after logDelay; nil when none is armed
}

func (r *reporter) Report(ctx context.Context, s controlplane.Step) error {
	if err := r.flush(ctx); err != nil {
		return err
	}
	err := r.a.retry(ctx, "reporting a step", r.log, func(ctx context.Context) error { return r.a.c.report(ctx, r.lease, s) })
	switch {
	case err == nil && s.Status != "":
		r.mu.Lock()
		r.last = s.Status
		r.mu.Unlock()
		if controlplane.IsTerminal(s.Status) {
			r.ended.Store(true)
		}
	case controlplane.IsRefusal(err):
		return r.refused(ctx, err)
	}
	return err
}

// Log keeps lines to be sent with the next batch; it sends the batch at
// once when it is full.
func (r *reporter) Log(ctx context.Context, lines ...controlplane.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	r.lmu.Lock()
	r.pending = append(r.pending, lines...)
	for _, l := range lines {
		r.pendingBytes += len(l.Message)
	}
	full := len(r.pending) >= maxLogBatch || r.pendingBytes >= maxLogBatchBytes
	if !full && r.timer == nil {
		r.timer = time.AfterFunc(logDelay, func() {
			if err := r.flush(r.ctx); err != nil && r.ctx.Err() == nil {
				r.log.Warn("agent: log lines were not written", "err", err)
			}
		})
	}
	r.lmu.Unlock()
	if full {
		return r.flush(ctx)
	}
	return nil
}

// flush sends the lines kept so far, in one request.
func (r *reporter) flush(ctx context.Context) error {
	r.send.Lock()
	defer r.send.Unlock()
	r.lmu.Lock()
	lines := r.pending
	r.pending, r.pendingBytes = nil, 0
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.lmu.Unlock()
	if len(lines) == 0 {
		return nil
	}
	err := r.a.retry(ctx, "writing logs", r.log, func(ctx context.Context) error { return r.a.c.logs(ctx, r.lease, lines) })
	if errors.Is(err, controlplane.ErrLeaseLost) {
		return r.refused(ctx, err)
	}
	return err
}

// refused is the error of a call refused by the control plane (err): when
// the revision ended without the agent (endedElsewhere), it matches
// controlplane.ErrRevisionEnded too, and the Deploy's ctx is cancelled
// with endedCause; else a lost lease cancels it with
// controlplane.ErrLeaseLost, as the control plane's own Reporter does.
func (r *reporter) refused(ctx context.Context, err error) error {
	if r.a.endedElsewhere(ctx, r.w, r.log) {
		r.cancel(endedCause)
		return fmt.Errorf("%w (%w)", err, controlplane.ErrRevisionEnded)
	}
	if errors.Is(err, controlplane.ErrLeaseLost) {
		r.cancel(controlplane.ErrLeaseLost)
	}
	return err
}

// status is the last status reported.
func (r *reporter) status() controlplane.RevisionStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
