package controlplane

import (
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
)

// Pinning (wire contract section 11, pinned_revision_id): a deployment
// pinned to its active revision keeps serving it. New revisions are still
// created and built, but the report that would start deploying one
// (DEPLOYING) is refused and its pending work is held (workqueue.Hold),
// claimable by nobody, with the revision's status_message saying why.
// Removing the pin frees the held work in the same Update, and the
// deployer takes the revision up again where it waits: a built one is not
// built again. A revision superseded while held is SKIPPED, as any
// revision before DEPLOYING is, so that at most the newest waits.

// ErrRevisionHeld says that a revision waits for its deployment to be
// unpinned: the report that would have started deploying it was refused,
// and its work was given back until the pin is removed. A Reporter's
// refusal matches it beside apierr.ErrInvalidState and ErrLeaseLost (the
// work went back to the queue, as with a lost lease: the deployer stops
// without undoing what it made, which the revision resumes from).
var ErrRevisionHeld = errors.New("controlplane: the revision waits for its deployment to be unpinned")

// heldMessage is the status_message of a revision held by a pin.
func heldMessage(pinned string) string {
	return "Waiting: the deployment is pinned to revision " + pinned + "; this revision deploys once it is unpinned."
}

// checkPin checks the pin a PATCH writes (merged) against the stored
// deployment, in the PATCH's Update, and frees the work a removed pin
// held. Pinning names the active revision, and waits for no revision
// DEPLOYING (which would become active past the pin). Errors:
// apierr.ErrInvalidState (400) for either refusal, or the store's.
func (cp *ControlPlane) checkPin(tx store.Tx, tenant, tp string, stored, merged *deploymentRecord) error {
	was, now := stored.PinnedRevisionID, merged.PinnedRevisionID
	if now != nil && (was == nil || *was != *now) {
		if stored.ActiveRevisionID == nil || *stored.ActiveRevisionID != *now {
			return apierr.InvalidStatef("Revision %s is not the active revision of deployment %s: only the active revision can be pinned (roll back to it first).", *now, stored.ID)
		}
		us, err := pendingRevisions(tx, tp, stored)
		if err != nil {
			return err
		}
		for _, u := range us {
			rev, err := cp.getRevision(tx, tenant, stored.ID, tailID(u.Revision))
			if err != nil {
				return err
			}
			if rev.Status == RevisionDeploying {
				return apierr.InvalidStatef("Revision %s is DEPLOYING and would become active: wait for it to end, or interrupt it, before pinning.", rev.ID)
			}
		}
	}
	if was == nil || now != nil {
		return nil
	}
	return cp.unhold(tx, tenant, tp, stored)
}

// unhold frees the revisions of d that its pin held, clearing their
// status_message.
func (cp *ControlPlane) unhold(tx store.Tx, tenant, tp string, d *deploymentRecord) error {
	us, err := pendingRevisions(tx, tp, d)
	if err != nil {
		return err
	}
	for _, u := range us {
		freed, err := workqueue.Unhold(tx, u)
		if err != nil {
			return err
		}
		if !freed {
			continue
		}
		rev, err := cp.getRevision(tx, tenant, d.ID, tailID(u.Revision))
		if err != nil {
			return err
		}
		rev.StatusMessage = nil
		if err := cp.putRevision(tx, tenant, rev, false); err != nil {
			return err
		}
	}
	return nil
}

// holdForPin is apply's check of a report that starts deploying rev (its
// status DEPLOYING): when rev's deployment is pinned, it holds the job's
// work in tx (cur being the job's lease as stored), writes rev's
// status_message, and returns the refusal apply answers once tx has
// committed; nil when the deployment is not pinned.
func (cp *ControlPlane) holdForPin(tx store.Tx, j *job, cur *workqueue.Lease, rev *revisionRecord) (*apierr.DetailError, error) {
	dep, err := cp.getDeployment(tx, j.tenant, j.deployment)
	if err != nil {
		return nil, err
	}
	pinned := dep.PinnedRevisionID != nil
	if h := cp.hooks.pinHolds; h != nil {
		pinned = h(pinned)
	}
	if !pinned {
		return nil, nil
	}
	msg := heldMessage(*dep.PinnedRevisionID)
	if rev.StatusMessage == nil || *rev.StatusMessage != msg {
		next := *rev
		next.StatusMessage = &msg
		next.UpdatedAt = later(cp.now(), rev.UpdatedAt)
		if err := cp.putRevision(tx, j.tenant, &next, false); err != nil {
			return nil, err
		}
	}
	if err := workqueue.Hold(tx, cur); err != nil {
		return nil, err
	}
	return &apierr.DetailError{Kind: errors.Join(apierr.ErrInvalidState, ErrLeaseLost, ErrRevisionHeld),
		Detail: fmt.Sprintf("Revision %s waits: deployment %s is pinned to revision %s.", rev.ID, dep.ID, *dep.PinnedRevisionID)}, nil
}
