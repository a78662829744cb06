package controlplane

import (
	"context"
	"slices"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// RollbackRequest is the body of POST /v2/deployments/{id}/rollback.
type RollbackRequest struct {
	// RevisionID names the DEPLOYED revision to go back to; null: the
	// newest DEPLOYED revision created before the active one.
	RevisionID *string `json:"revision_id"`
}

// Rollback makes a deployment serve an earlier DEPLOYED revision again,
// without a rebuild: a new revision copies that revision's snapshot, as a
// redeploy does, and the image it ran (its image_version), and starts
// AWAITING_DEPLOY when its source builds, so that the Deployer rolls the
// image out as it rolls any revision forward, with no gap, and reports
// it DEPLOYED. The new revision supersedes the revisions still before
// DEPLOYING (SKIPPED, as any new revision does); one already DEPLOYING
// goes on, and becomes active if it is DEPLOYED after the rollback's
// (interrupt it first to keep it from serving). The fields a PATCH
// changes in place keep their current values.
//
// Errors: *apierr.NotFoundError (the deployment, or a revision that is
// not its own); apierr.ErrInvalidState (400) while the deployment is
// being deleted or pinned (pinned_revision_id), when it has no active revision, when the revision named
// is not DEPLOYED or is the active one, when no earlier revision is
// DEPLOYED, and when the image of a revision that was built is not known.
func (cp *ControlPlane) Rollback(ctx context.Context, tenant, deploymentID string, req *RollbackRequest) (*Deployment, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	if req == nil {
		req = &RollbackRequest{}
	}
	now := cp.now()
	newID := cp.newID()
	var out *deploymentRecord
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		stored, target, err := cp.rollbackTarget(tx, tenant, did, req.RevisionID)
		if err != nil {
			return err
		}
		if stored.PinnedRevisionID != nil {
			return apierr.InvalidStatef("Deployment ID %s is pinned to revision %s: unpin it before rolling back.", did, *stored.PinnedRevisionID)
		}
		builds := slices.Contains(HappyPath(stored.Source), RevisionBuilding)
		if builds && (target.ImageVersion == nil || *target.ImageVersion == "") {
			return apierr.InvalidStatef("Revision %s cannot be rolled back to: the image it ran is not known.", target.ID)
		}
		next := *stored
		redeployed(&next.Deployment, target)
		next.LatestRevisionID = &newID
		next.UpdatedAt = later(now, stored.UpdatedAt)
		rev := newRevision(&next, newID, next.UpdatedAt)
		rev.TrackedPackages = slices.Clone(target.TrackedPackages)
		if target.ImageVersion != nil {
			rev.ImageVersion = new(*target.ImageVersion)
		}
		if builds {
			// Past the build: the Deployer takes the image it is given,
			// as one resumed after a build does.
			rev.enter(RevisionAwaitingDeploy, rev.CreatedAt)
		}
		if err := cp.addRevision(tx, tenant, &next, rev); err != nil {
			return err
		}
		out = &next
		return cp.putDeployment(tx, tenant, stored, &next)
	})
	if err != nil {
		return nil, cp.storeErr("roll back", err)
	}
	cp.notify()
	cp.notifyAgent(tenant, &out.Deployment)
	cp.stopEnded(tenant, did) // the revisions it SKIPPED (interrupt.go)
	return out.wire(), nil
}

// rollbackTarget reads the deployment did and the revision a rollback
// goes back to: the one named (id), else the newest DEPLOYED revision
// created before the active one.
func (cp *ControlPlane) rollbackTarget(r store.Reader, tenant, did string, id *string) (*deploymentRecord, *revisionRecord, error) {
	stored, err := cp.getDeployment(r, tenant, did)
	if err != nil {
		return nil, nil, err
	}
	if stored.Status == StatusAwaitingDelete {
		return nil, nil, apierr.InvalidStatef("Deployment ID %s is being deleted.", did)
	}
	if id != nil {
		_, target, err := cp.getDeploymentRevision(r, tenant, did, *id)
		switch {
		case err != nil:
			return nil, nil, err
		case target.Status != RevisionDeployed:
			return nil, nil, apierr.InvalidStatef("Revision %s is %s: only a DEPLOYED revision can be rolled back to.", target.ID, target.Status)
		case stored.ActiveRevisionID != nil && *stored.ActiveRevisionID == target.ID:
			return nil, nil, apierr.InvalidStatef("Revision %s is already the active revision.", target.ID)
		}
		return stored, target, nil
	}
	if stored.ActiveRevisionID == nil {
		return nil, nil, apierr.InvalidStatef("Deployment ID %s has no active revision to roll back from.", did)
	}
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, nil, err
	}
	// The revisions newest first, with their statuses (the order records'
	// values): past the active one, the first DEPLOYED.
	var found string
	passed := false
	prefix := deploymentKey(tp, did)
	err = r.Scan(colRevisionOrder, prefix, &store.ScanOptions{Reverse: true}, func(k string, v []byte) (bool, error) {
		rid, _, _ := keyenc.ParseID(k[len(prefix)+keyenc.TimeLen:])
		if passed && RevisionStatus(v) == RevisionDeployed {
			found = rid
			return false, nil
		}
		passed = passed || rid == *stored.ActiveRevisionID
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if found == "" {
		return nil, nil, apierr.InvalidStatef("Deployment ID %s has no DEPLOYED revision older than its active one.", did)
	}
	target, err := cp.getRevision(r, tenant, did, found)
	if err != nil {
		return nil, nil, err
	}
	return stored, target, nil
}
