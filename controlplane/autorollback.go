package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// Automatic rollback (wire contract section 11, source_config.auto_rollback):
// a Deployer given Work.HealthWatchSeconds keeps checking a revision's
// health for that long after reporting it DEPLOYED, and tells the control
// plane when it fails them (ReportUnhealthy). Within
// Options.AutoRollbackWindow of the revision becoming active, the control
// plane rolls the deployment back to the newest earlier DEPLOYED revision,
// as Rollback does, and says why in the failed revision's status_message,
// its deploy log, and the new revision's status_message (each change an
// event).

// UnhealthyReporter is where a Deployer tells that a revision it watches
// (Work.HealthWatchSeconds) failed its health checks after it became
// active. *ControlPlane implements it; the agent's client implements it
// over the agent routes.
type UnhealthyReporter interface {
	ReportUnhealthy(ctx context.Context, tenant, deploymentID, revisionID, reason string) error
}

// autoRollbackPrefix begins the status_message of a revision rolled back
// automatically.
const autoRollbackPrefix = "Rolled back automatically: "

// ReportUnhealthy records that the tenant's revision failed its health
// checks (reason says how) after it became active, and rolls the
// deployment back automatically when it asks for that
// (source_config.auto_rollback), the revision is still the active one
// and became active within Options.AutoRollbackWindow, and the
// deployment is not pinned: a new revision goes back to the newest
// DEPLOYED revision older than it, without a rebuild (Rollback). With no
// such revision the failure is recorded (status_message and deploy log)
// and the revision keeps serving. A second report of a revision already
// rolled back changes nothing.
//
// Errors: *apierr.NotFoundError (the deployment, or a revision not its
// own); apierr.ErrInvalidState when nothing is to be done: the deployment
// is being deleted or pinned, auto_rollback is off, the revision is not
// the active one or became active longer ago than the window.
func (cp *ControlPlane) ReportUnhealthy(ctx context.Context, tenant, deploymentID, revisionID, reason string) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = "its health checks failed"
	}
	now := cp.now()
	newID := cp.newID()
	rolled := false
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		rolled = false
		stored, rev, err := cp.getDeploymentRevision(tx, tenant, did, revisionID)
		if err != nil {
			return err
		}
		switch {
		case stored.Status == StatusAwaitingDelete:
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", did)
		case stored.SourceConfig.AutoRollback == nil || !*stored.SourceConfig.AutoRollback:
			return apierr.InvalidStatef("Deployment ID %s does not roll back automatically (source_config.auto_rollback).", did)
		case stored.ActiveRevisionID == nil || *stored.ActiveRevisionID != rev.ID:
			return apierr.InvalidStatef("Revision %s is not the active revision of deployment %s.", rev.ID, did)
		case rev.StatusMessage != nil && strings.HasPrefix(*rev.StatusMessage, autoRollbackPrefix):
			return nil // rolled back already: the report is repeated
		case stored.PinnedRevisionID != nil:
			return apierr.InvalidStatef("Deployment ID %s is pinned to revision %s: it is not rolled back automatically.", did, *stored.PinnedRevisionID)
		}
		if at, ok := deployedAt(rev); !ok || now.Sub(at) > cp.watchFor {
			return apierr.InvalidStatef("Revision %s became active more than %s ago: it is not rolled back automatically.", rev.ID, cp.watchFor)
		}
		_, target, err := cp.rollbackTarget(tx, tenant, did, nil)
		msg := autoRollbackPrefix + reason
		if errors.Is(err, apierr.ErrInvalidState) {
			target, err = nil, nil
			msg = "Failed its health checks after it became active (" + reason + "); no earlier DEPLOYED revision to roll back to."
		}
		if err != nil {
			return err
		}
		if target != nil {
			if _, _, err := cp.rollBackTo(tx, tenant, stored, target, newID, now,
				"Automatic rollback to revision "+target.ID+": revision "+rev.ID+" failed its health checks ("+reason+")."); err != nil {
				return err
			}
			rolled = true
			msg += " Rolled back to revision " + target.ID + " by revision " + newID + "."
		}
		next := *rev
		next.StatusMessage = &msg
		next.UpdatedAt = later(now, rev.UpdatedAt)
		if err := cp.putRevision(tx, tenant, &next, false); err != nil {
			return err
		}
		return cp.appendLogs(tx, tenant, did, rev.ID, []LogLine{{Type: LogDeploy, Level: LevelError, Time: now, Message: msg}}, now)
	})
	if err != nil {
		return cp.storeErr("report unhealthy", err)
	}
	if rolled {
		cp.log.Warn("controlplane: rolled back automatically", "tenant", tenant, "deployment", did, "revision", revisionID, "reason", reason)
		cp.notify()
		if d, err := cp.GetDeployment(ctx, tenant, did); err == nil {
			cp.notifyAgent(tenant, d)
		}
		cp.stopEnded(tenant, did)
	}
	return nil
}

// deployedAt is when rev entered DEPLOYED, from its status history.
func deployedAt(rev *revisionRecord) (time.Time, bool) {
	for i := len(rev.StatusHistory) - 1; i >= 0; i-- {
		if h := rev.StatusHistory[i]; h.Status == RevisionDeployed {
			return h.At.Time(), true
		}
	}
	return time.Time{}, false
}

// WatchHealth is the watch a Deployer runs for a revision whose Work asks
// for one (Work.HealthWatchSeconds > 0), once it reported it DEPLOYED: it
// calls look every interval for that many seconds, until ctx ends or look
// says the revision no longer serves (live false: a newer one does, or the
// deployment is gone). When failures looks in a row find a problem, it
// reports the last one to r (ReportUnhealthy), once, and returns that
// call's error; nil otherwise.
func WatchHealth(ctx context.Context, w *Work, interval time.Duration, failures int,
	look func(ctx context.Context) (problem string, live bool), r UnhealthyReporter) error {
	if w.HealthWatchSeconds <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(w.HealthWatchSeconds)*time.Second)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	failed := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		problem, live := look(ctx)
		if !live || ctx.Err() != nil {
			return nil // ended meanwhile: a problem may be the end's
		}
		if problem == "" {
			failed = 0
			continue
		}
		if failed++; failed < failures {
			continue
		}
		return r.ReportUnhealthy(ctx, w.Tenant, w.Deployment.ID, w.Revision.ID,
			fmt.Sprintf("%d looks in a row found it failing after it became active, the last: %s", failed, problem))
	}
}
