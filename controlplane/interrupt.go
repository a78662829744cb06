package controlplane

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
)

// Revisions that end without their deployer (wire contract sections 7
// and 11): a revision is INTERRUPTED by InterruptRevision or by a delete
// of its deployment, and SKIPPED when a newer revision of its deployment
// is created while it is still before DEPLOYING. Either way its pending
// work goes in the same Update, so that nobody claims it again, and the
// deployer that drives it stops: the reports it sends are refused with an
// error matching ErrRevisionEnded, and its Deploy's ctx is cancelled with
// a cause matching ErrRevisionEnded (and ErrLeaseLost), at once when this
// ControlPlane's Run drives it (stopEnded), at its next lease renewal when
// another replica's or an agent does.

// ErrRevisionEnded says that a revision ended without its deployer
// (EndedWithoutDeployer: INTERRUPTED or SKIPPED), or was removed with its
// deployment. A Reporter's refusal matches it (beside
// apierr.ErrInvalidState), and so does the cause of a Deploy's ctx
// cancelled for it (beside ErrLeaseLost). Nobody drives such a revision
// again: unlike a lost lease, whose work another worker resumes, the
// deployer removes what it made for that revision alone and puts the
// active revision back, as after a failure of the revision.
var ErrRevisionEnded = errors.New("controlplane: the revision ended without its deployer")

// errEndedCause is the cause of a Deploy's ctx cancelled because its
// revision ended without it: it matches ErrRevisionEnded and ErrLeaseLost
// (the lease went with the work), so that a deployer that knows only the
// latter stops as before.
var errEndedCause = fmt.Errorf("%w: %w", ErrRevisionEnded, ErrLeaseLost)

// EndedWithoutDeployer reports whether a revision in status s ended
// without its deployer: INTERRUPTED (InterruptRevision, or a delete of
// its deployment) or SKIPPED (superseded by a newer revision before
// DEPLOYING). The deployer of such a revision removes what it made for it
// (ErrRevisionEnded).
func EndedWithoutDeployer(s RevisionStatus) bool {
	return s == RevisionInterrupted || s == RevisionSkipped
}

// endedRefusal is a Reporter's refusal of a report for rev, which is
// terminal and no longer pending: it matches apierr.ErrInvalidState
// (IsRefusal), and ErrRevisionEnded too when rev ended without its
// deployer.
func endedRefusal(rev *revisionRecord) error {
	kind := apierr.ErrInvalidState
	if EndedWithoutDeployer(rev.Status) {
		kind = errors.Join(apierr.ErrInvalidState, ErrRevisionEnded)
	}
	return &apierr.DetailError{Kind: kind, Detail: fmt.Sprintf("Revision %s is %s.", rev.ID, rev.Status)}
}

// InterruptRevision stops a revision that is not yet terminal: it becomes
// INTERRUPTED, with a status_message saying so, and its pending work is
// removed in the same Update. A revision still waiting (CREATING, QUEUED,
// AWAITING_BUILD or AWAITING_DEPLOY) is interrupted without ever running
// further; one a deployer drives (BUILDING, DEPLOYING, UNKNOWN) stops
// there: its Deploy's ctx is cancelled with a cause matching
// ErrRevisionEnded (at once when this ControlPlane's Run drives it, at the
// next lease renewal when another replica or an agent does) and the
// deployer removes what it made for the revision, putting the active one
// back. The deployment keeps its active revision, which goes on serving,
// and its latest_revision_id; a deployment UNKNOWN (the deployer could not
// tell) is READY again when it has an active revision, AWAITING_DATABASE
// when it has none. Errors: *apierr.NotFoundError (the deployment, or a
// revision that is not this deployment's), apierr.ErrInvalidState for a
// revision already terminal (DEPLOYED, SKIPPED, INTERRUPTED or a
// *_FAILED: every revision of a deployment being deleted is one).
func (cp *ControlPlane) InterruptRevision(ctx context.Context, tenant, deploymentID, revisionID string) (*Revision, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	now := cp.now()
	var out *revisionRecord
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		dep, rev, err := cp.getDeploymentRevision(tx, tenant, did, revisionID)
		if err != nil {
			return err
		}
		if IsTerminal(rev.Status) {
			return apierr.InvalidStatef("Revision %s is %s: only a revision not yet terminal can be interrupted.", rev.ID, rev.Status)
		}
		next := *rev
		next.enter(RevisionInterrupted, later(now, rev.UpdatedAt))
		next.StatusMessage = new("The revision was interrupted.")
		if err := cp.putRevision(tx, tenant, &next, false); err != nil {
			return err
		}
		tp, err := cp.writeTenant(tx, tenant)
		if err != nil {
			return err
		}
		for _, rg := range rangesOf(tp, dep.SourceConfig.ListenerID) {
			if err := workqueue.Remove(tx, revisionUnit(rg, &next)); err != nil {
				return err
			}
		}
		out = &next
		if dep.Status != StatusUnknown {
			return nil
		}
		d := *dep
		d.Status = StatusAwaitingDatabase
		if d.ActiveRevisionID != nil {
			d.Status = StatusReady
		}
		d.UpdatedAt = later(now, dep.UpdatedAt)
		return cp.putDeployment(tx, tenant, dep, &d)
	})
	if err != nil {
		return nil, cp.storeErr("interrupt revision", err)
	}
	cp.stopEnded(tenant, did)
	return new(out.wire()), nil
}

// runningJobs are the jobs this ControlPlane's Run (or Process) drives
// now, by tenant and deployment, so that a change that ends one of their
// revisions without them (stopEnded) stops them at once instead of at
// their next lease renewal.
type runningJobs struct {
	mu sync.Mutex
	m  map[string]map[*job]struct{} // tenant/deployment -> its jobs
}

func jobKey(tenant, deployment string) string { return tenant + "/" + deployment }

// add records j as running until the returned func is called.
func (r *runningJobs) add(j *job) (remove func()) {
	k := jobKey(j.tenant, j.deployment)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[*job]struct{}{}
	}
	if r.m[k] == nil {
		r.m[k] = map[*job]struct{}{}
	}
	r.m[k][j] = struct{}{}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.m[k], j)
		if len(r.m[k]) == 0 {
			delete(r.m, k)
		}
	}
}

// stopEnded is called after a change of the tenant's deployment that may
// have ended revisions without their deployer (committed): each job of
// that deployment this ControlPlane runs renews its lease at once
// (keepLease), which fails for a job whose work is gone and cancels its
// Deploy with the cause lostCause gives.
func (cp *ControlPlane) stopEnded(tenant, deployment string) {
	cp.jobs.mu.Lock()
	defer cp.jobs.mu.Unlock()
	for j := range cp.jobs.m[jobKey(tenant, deployment)] {
		select {
		case j.recheck <- struct{}{}:
		default:
		}
	}
}

// lostCause is the cause to cancel the job's work with once its lease is
// lost: errEndedCause when its revision ended without it (or was removed
// with its deployment), ErrLeaseLost otherwise (another worker holds it
// now, or the job itself ended it).
func (cp *ControlPlane) lostCause(ctx context.Context, j *job) error {
	if j.revision == "" {
		return ErrLeaseLost
	}
	var rev *revisionRecord
	err := cp.st.View(context.WithoutCancel(ctx), func(r store.Reader) error {
		var err error
		rev, err = cp.getRevision(r, j.tenant, j.deployment, j.revision)
		return err
	})
	switch {
	case errors.Is(err, apierr.ErrNotFound):
		return errEndedCause
	case err == nil && EndedWithoutDeployer(rev.Status):
		return errEndedCause
	}
	return ErrLeaseLost
}
