package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
)

// Deletes (wire contract sections 7 and 11). A DELETE of a deployment
// either removes its records at once, when none of its revisions ever
// reached an engine (ranAnywhere), or marks it AWAITING_DELETE and queues
// its teardown (worker.go), after which its records go. A teardown that
// fails is retried with backoff (teardownBackoff; the count of failures in
// a row is kept in the work's lease), the deployment's
// status_message saying why it waits; a forced DELETE removes the records
// of a deployment AWAITING_DELETE without its engine.

// DeleteDeploymentOptions are the options of a delete of a deployment. A
// nil *DeleteDeploymentOptions means the defaults: no force, and the
// tracing project deleted with the deployment.
type DeleteDeploymentOptions struct {
	// Force removes at once every record of a deployment that is
	// AWAITING_DELETE, without its Deployer's Teardown (force=true): for
	// a deployment whose teardown keeps failing, such as one whose
	// engine is gone. What the engine made for it may remain; a line
	// logged at WARN says so. A deployment in another status is refused
	// with apierr.ErrInvalidState (delete it without Force first).
	Force bool
	// KeepTracingProject keeps the deployment's tracing project when its
	// records are removed (delete_tracing_project=false); the
	// TracingProjects hook is told (TracingProjectRemover). A delete
	// without Force records it with AWAITING_DELETE, for the removal
	// after the teardown; a later delete without Force changes nothing,
	// a forced one decides anew.
	KeepTracingProject bool
}

// DeleteDeployment is DeleteDeploymentWith with the default options.
func (cp *ControlPlane) DeleteDeployment(ctx context.Context, tenant, id string) error {
	return cp.DeleteDeploymentWith(ctx, tenant, id, nil)
}

// DeleteDeploymentWith deletes a deployment, in one Update. A deployment
// none of whose revisions ever reached an engine (see ranAnywhere: no
// revision ever BUILDING, DEPLOYING, DEPLOYED or UNKNOWN) has nothing to
// tear down: its records go at once, its name is free, and no Teardown is
// called. Any other is marked AWAITING_DELETE, its unfinished revisions
// end INTERRUPTED, and its teardown is queued: Run (or Process) calls the
// Deployer's Teardown and then removes every record of the deployment;
// its name stays taken until then. Deleting a deployment already
// AWAITING_DELETE succeeds and changes nothing, but with opts.Force,
// which removes its records at once. Errors: *apierr.NotFoundError,
// apierr.ErrInvalidState (Force for a deployment not AWAITING_DELETE),
// the TracingProjectRemover's error.
func (cp *ControlPlane) DeleteDeploymentWith(ctx context.Context, tenant, id string, opts *DeleteDeploymentOptions) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	var o DeleteDeploymentOptions
	if opts != nil {
		o = *opts
	}
	cid, ok := pathID(id)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: id}
	}
	now := cp.now()
	var done *deploymentRecord // as removed or written; nil when nothing changed
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		done = nil
		stored, err := cp.getDeployment(tx, tenant, cid)
		if err != nil {
			return err
		}
		switch {
		case o.Force && stored.Status != StatusAwaitingDelete:
			return apierr.InvalidStatef("Deployment ID %s is not being deleted: force=true removes only a deployment "+
				"whose teardown is awaited (AWAITING_DELETE). Delete it without force first.", cid)
		case o.Force:
			rec := *stored
			rec.KeepTracingProject = o.KeepTracingProject
			rec.UpdatedAt = later(now, stored.UpdatedAt)
			done = &rec
			return cp.dropDeployment(ctx, tx, tenant, &rec)
		case stored.Status == StatusAwaitingDelete:
			return nil
		}
		done, err = cp.deleteInTx(ctx, tx, tenant, stored, o.KeepTracingProject, now)
		return err
	})
	if err != nil {
		return cp.storeErr("delete deployment", err)
	}
	if done != nil {
		cp.stopEnded(tenant, cid)              // the revisions it INTERRUPTED or removed (interrupt.go)
		cp.deletePreviewsOf(ctx, tenant, done) // previews.go
	}
	switch {
	case done == nil:
	case o.Force:
		cp.log.Warn("controlplane: deployment removed without its teardown (force=true): what its engine made for it may remain",
			deletedAttrs(tenant, done)...)
	case done.Status != StatusAwaitingDelete:
		cp.log.Info("controlplane: deployment removed at once: none of its revisions reached an engine",
			deletedAttrs(tenant, done)...)
	default:
		cp.notify()
		cp.notifyAgent(tenant, &done.Deployment) // agentwork.go
	}
	return nil
}

// MaxDeleteIDs is the most deployments one DeleteDeployments names (wire
// contract section 11).
const MaxDeleteIDs = 100

// DeleteResult is the outcome of the delete of one deployment of a
// DeleteDeployments.
type DeleteResult struct {
	// ID is the id as it was given (canonical when it is a UUID).
	ID string
	// Err is nil when the deployment was deleted (as
	// DeleteDeploymentWith's nil), else what DeleteDeploymentWith
	// answered for it, or a *apierr.ValidationError at ["query",
	// "deployment_ids", i] for an id that is no UUID (i its index among
	// the ids given).
	Err error
}

// DeleteDeployments deletes each deployment of ids (DELETE
// /v2/deployments?deployment_ids=...) exactly as DeleteDeploymentWith
// does with opts: the same rules for each (one that never ran is removed
// at once, the others are AWAITING_DELETE until torn down; Force and
// KeepTracingProject apply to every one), each in its own Update, so that
// one that fails leaves the others deleted. It returns one result per
// distinct id, in the order of the ids' first appearance (an id given
// twice is deleted once). Errors, for the request as a whole (nothing is
// deleted then): a *apierr.ValidationError at ["query", "deployment_ids"]
// when ids is empty or names more than MaxDeleteIDs deployments.
func (cp *ControlPlane) DeleteDeployments(ctx context.Context, tenant string, ids []string, opts *DeleteDeploymentOptions) ([]DeleteResult, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if err := ValidateDeleteDeployments(ids); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []DeleteResult
	for i, id := range ids {
		cid, ok := pathID(id)
		if seen[cid] {
			continue
		}
		seen[cid] = true
		r := DeleteResult{ID: cid}
		if ok {
			r.Err = cp.DeleteDeploymentWith(ctx, tenant, cid, opts)
		} else {
			r.Err = apierr.Validation(apierr.Problem{Loc: []any{"query", "deployment_ids", i}, Type: apierr.TypeUUIDParsing,
				Msg: apierr.MsgInvalidUUID})
		}
		out = append(out, r)
	}
	return out, nil
}

// ValidateDeleteDeployments checks the ids of a DeleteDeployments as a
// whole, without deleting anything: a *apierr.ValidationError at
// ["query", "deployment_ids"] when there are none or more than
// MaxDeleteIDs. (An id that is no UUID fails alone, in its result.)
func ValidateDeleteDeployments(ids []string) error {
	loc := []any{"query", "deployment_ids"}
	switch {
	case len(ids) == 0:
		return apierr.Validation(apierr.Problem{Loc: loc, Type: apierr.TypeMissing, Msg: "Field required"})
	case len(ids) > MaxDeleteIDs:
		return apierr.Validation(apierr.Problem{Loc: loc, Type: apierr.TypeTooLong,
			Msg: fmt.Sprintf("List should have at most %d items", MaxDeleteIDs)})
	}
	return nil
}

// deletedAttrs are the log attributes of a deployment removed.
func deletedAttrs(tenant string, r *deploymentRecord) []any {
	listener := ""
	if r.SourceConfig.ListenerID != nil {
		listener = *r.SourceConfig.ListenerID
	}
	return []any{"tenant", tenant, "deployment", r.ID, "name", r.Name, "listener", listener}
}

// deleteInTx deletes stored, a deployment not AWAITING_DELETE, in tx:
// it removes its records when it never ran anywhere, else marks it
// AWAITING_DELETE, interrupts its unfinished revisions and queues its
// teardown (for Run, or for the agents of its listener). It returns the
// deployment as removed (in its stored status) or as written
// (AWAITING_DELETE). keep is the delete's KeepTracingProject.
func (cp *ControlPlane) deleteInTx(ctx context.Context, tx store.Tx, tenant string, stored *deploymentRecord, keep bool, now time.Time) (*deploymentRecord, error) {
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return nil, err
	}
	ran, err := cp.ranAnywhere(tx, tenant, tp, stored)
	if err != nil {
		return nil, err
	}
	next := *stored
	next.KeepTracingProject = keep
	next.UpdatedAt = later(now, stored.UpdatedAt)
	if !ran {
		return &next, cp.dropDeployment(ctx, tx, tenant, &next)
	}
	next.Status = StatusAwaitingDelete
	if err := cp.interruptRevisions(tx, tenant, &next, next.UpdatedAt); err != nil { // worker.go; sets remote_reconciled
		return nil, err
	}
	return &next, cp.putDeployment(tx, tenant, stored, &next)
}

// engineStatus reports whether a revision in status s may have left
// something in its engine. A Deployer reports BUILDING before it builds
// (an image of the deployment's) and DEPLOYING before it creates anything
// that runs (containers, Kubernetes objects, databases; see Deployer);
// DEPLOYED comes after DEPLOYING, and UNKNOWN says the deployer cannot
// tell. The other statuses (CREATING, QUEUED, AWAITING_BUILD,
// AWAITING_DEPLOY, and the ends reached from them) are the control
// plane's and the queue's alone.
func engineStatus(s RevisionStatus) bool {
	switch s {
	case RevisionBuilding, RevisionDeploying, RevisionDeployed, RevisionUnknown:
		return true
	}
	return false
}

// reachedEngine reports whether a revision may have left something in its
// engine: its status or a status of its status_history is an
// engineStatus. A history that is not a chain of legal transitions from
// CREATING (a record stored before histories were kept answers one made
// of created_at and updated_at alone, which says nothing of the statuses
// between) is not evidence of the contrary: such a revision counts as
// having reached its engine.
func (r *revisionRecord) reachedEngine() bool {
	h := r.StatusHistory
	if engineStatus(r.Status) || len(h) == 0 || h[0].Status != RevisionCreating || h[len(h)-1].Status != r.Status {
		return true
	}
	for i, c := range h {
		if engineStatus(c.Status) || i > 0 && !CanTransition(r.Source, h[i-1].Status, c.Status) {
			return true
		}
	}
	return false
}

// ranAnywhere reports whether a deployment may have left something in an
// engine, so that its delete needs a teardown: the rule of a delete
// (DeleteDeploymentWith). It has, when it has an active revision or any
// of its revisions reachedEngine; a deployment without revisions (an
// internal_source one whose upload never came) has not. The revision
// order records hold each revision's status, which settles most; the
// others' records are read for their histories. tp is the tenant prefix.
func (cp *ControlPlane) ranAnywhere(r store.Reader, tenant, tp string, d *deploymentRecord) (bool, error) {
	if d.ActiveRevisionID != nil {
		return true, nil
	}
	prefix := deploymentKey(tp, d.ID)
	var ids []string
	ran := false
	err := r.Scan(colRevisionOrder, prefix, nil, func(k string, v []byte) (bool, error) {
		if engineStatus(RevisionStatus(v)) {
			ran = true
			return false, nil
		}
		id, _, ok := keyenc.ParseID(k[min(len(k), len(prefix)+keyenc.TimeLen):])
		if !ok {
			return false, fmt.Errorf("controlplane: malformed revision order key %q", k)
		}
		ids = append(ids, id)
		return true, nil
	})
	if err != nil || ran {
		return ran, err
	}
	for _, id := range ids {
		rev, err := cp.getRevision(r, tenant, d.ID, id)
		if err != nil {
			return false, err
		}
		if rev.reachedEngine() {
			return true, nil
		}
	}
	return false, nil
}

// dropDeployment removes every record of a deployment in tx (as
// removeDeployment), telling the TracingProjects hook when it is a
// TracingProjectRemover, and removes the deployment's listener when a
// forced DELETE of it waited for its deployments and this was the last.
func (cp *ControlPlane) dropDeployment(ctx context.Context, tx store.Tx, tenant string, r *deploymentRecord) error {
	if rm, ok := cp.tracing.(TracingProjectRemover); ok {
		p := TracingProject{Tenant: tenant, DeploymentID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt.Time()}
		if err := rm.RemoveTracingProject(ctx, tx, p, !r.KeepTracingProject); err != nil {
			return err
		}
	}
	if err := cp.removeDeployment(tx, tenant, r); err != nil {
		return err
	}
	if id := r.SourceConfig.ListenerID; id != nil {
		return cp.dropDeletedListener(tx, tenant, *id) // listeners.go
	}
	return nil
}

// Teardown backoff: a failed Teardown is called again after
// teardownRetryMin, then after twice as long each time it fails again, up
// to teardownRetryMax, by the ControlPlane's clock (Options.Clock; Run
// claims the work at its first poll after that).
const (
	teardownRetryMin = 2 * time.Second
	teardownRetryMax = 5 * time.Minute
)

// teardownBackoff is the wait after the failures-th failure in a row.
func teardownBackoff(failures int) time.Duration {
	d := teardownRetryMin
	for i := 1; i < failures && d < teardownRetryMax; i++ {
		d *= 2
	}
	return min(d, teardownRetryMax)
}

// teardownMessage is the status_message of a deployment whose teardown
// failed with err.
func teardownMessage(err error) string {
	return fmt.Sprintf("The deployment's teardown failed: %v. It is retried at growing intervals, at most %s apart; "+
		"a delete with force=true removes the deployment's records without it (what its engine made may then remain).",
		err, teardownRetryMax)
}

// teardownError is a Teardown error that teardownFailed recorded: on the
// deployment (status_message), in the log when it differs from the last,
// and in the work's lease (its backoff). Process returns it; Run does not
// log it again.
type teardownError struct{ err error }

func (e *teardownError) Error() string { return e.err.Error() }
func (e *teardownError) Unwrap() error { return e.err }

// teardownFailed records that j's Teardown failed with terr: in one
// Update, the deployment's status_message says so (written, and logged at
// ERROR, only when it differs from the one it has: once per distinct
// failure, not at every retry), and the work is given back until its
// backoff ends, the count of failures in a row kept in its lease. It
// returns a *teardownError, nil when the work was done meanwhile (a
// forced delete), or ErrLeaseLost when another holds it now.
func (cp *ControlPlane) teardownFailed(ctx context.Context, j *job, terr error) error {
	msg := teardownMessage(terr)
	now := cp.now()
	var changed *deploymentRecord
	var failures int
	var wait time.Duration
	gone := false // the work is done meanwhile (a forced delete)
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		changed, gone = nil, false
		cur, err := workqueue.Own(tx, j.lease)
		if err != nil || cur == nil {
			gone = err == nil
			return err
		}
		back := *cur // given back until the backoff ends, one more failure kept
		back.Failures++
		failures = back.Failures
		wait = teardownBackoff(failures)
		rec, err := cp.getDeployment(tx, j.tenant, j.deployment)
		if err != nil {
			return err
		}
		if rec.StatusMessage == nil || *rec.StatusMessage != msg {
			next := *rec
			next.StatusMessage = &msg
			next.UpdatedAt = later(now, rec.UpdatedAt)
			if err := cp.putDeployment(tx, j.tenant, rec, &next); err != nil {
				return err
			}
			changed = &next
		}
		return workqueue.Requeue(tx, &back, now.Add(wait))
	})
	if errors.Is(err, ErrLeaseLost) {
		return err
	}
	if gone || errors.As(err, new(*apierr.NotFoundError)) {
		return nil // removed meanwhile (a forced delete)
	}
	if err != nil {
		return cp.storeErr("record a failed teardown", err)
	}
	attrs := []any{"tenant", j.tenant, "deployment", j.deployment, "failures", failures, "retry_in", wait, "err", terr}
	if changed != nil {
		cp.log.Error("controlplane: teardown failed; the deployment stays AWAITING_DELETE and the teardown is retried with backoff",
			append(attrs, "name", changed.Name)...)
	} else {
		cp.log.Debug("controlplane: teardown failed again, as before", attrs...)
	}
	return &teardownError{fmt.Errorf("controlplane: teardown of deployment %s: %w", j.deployment, terr)}
}

// FailAgentTeardown records that the agent's Teardown of a teardown's
// lease failed, with message (its error's text): as for Run's teardowns,
// the deployment's status_message says so (logged once per distinct
// failure) and the work is given back until its backoff ends (2 s,
// doubling up to 5 min), when ClaimAgentWork offers it again. Errors:
// ErrLeaseLost (another agent holds the teardown now),
// apierr.ErrInvalidState for a revision's lease, the errors of a lease
// (see ReportAgent). The work gone meanwhile (a forced delete) is no
// error.
func (cp *ControlPlane) FailAgentTeardown(ctx context.Context, tenant, listenerID, lease, message string) error {
	j, err := cp.agentJob(ctx, tenant, listenerID, lease)
	if err != nil {
		return err
	}
	if j.revision != "" {
		return apierr.InvalidStatef("The lease is a revision's, not a teardown's.")
	}
	if message == "" {
		message = "The agent's teardown failed."
	}
	if err := cp.teardownFailed(ctx, j, errors.New(message)); !errors.As(err, new(*teardownError)) {
		return err
	}
	return nil
}

// RemoveTracingProject deletes the deployment's tracing project record
// when deleteProject is set, and keeps it otherwise: StoreTracingProjects
// is a TracingProjectRemover.
func (StoreTracingProjects) RemoveTracingProject(ctx context.Context, tx store.Tx, p TracingProject, deleteProject bool) error {
	if !deleteProject {
		return nil
	}
	tp, err := (*keyenc.Tenants)(nil).Prefix(tx, p.Tenant)
	if err != nil {
		return err
	}
	err = tx.Delete(colTracingProjects, deploymentKey(tp, p.DeploymentID))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}
