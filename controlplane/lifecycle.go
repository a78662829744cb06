package controlplane

import (
	"context"
	"errors"
	"slices"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
)

// Deployer makes revisions real: it builds and runs them somewhere
// (Kubernetes, a build service, a simulation) and reports their progress.
// The control plane decides what to work on and when (Run, Process), keeps
// the lease, and checks every report against the transition table; the
// deployer only acts and reports. Package deploysim is the built-in one.
type Deployer interface {
	// Deploy drives one revision, starting from w.Revision.Status (CREATING
	// for a new revision; a later status when the work is resumed after a
	// restart or taken over from a replica that stopped). It reports each
	// status change through r and returns:
	//
	//   - nil once the revision is terminal (DEPLOYED or a *_FAILED status
	//     it reported);
	//   - nil with the revision not yet terminal to be called again later
	//     (after Options.PollInterval): a deployer that starts a long build
	//     elsewhere may return at once and look again on the next call;
	//   - an error: the control plane records the failure of the current
	//     phase (CREATE_FAILED before AWAITING_BUILD, BUILD_FAILED during the
	//     build states, DEPLOY_FAILED after) with the error's text as
	//     status_message.
	//
	// ctx is cancelled, with cause ErrLeaseLost, when the lease is lost,
	// and when Run stops: work stopped so is resumed later (by this or
	// another replica), so Deploy must be safe to call again for the same
	// revision. It is cancelled with a cause matching ErrRevisionEnded
	// (and ErrLeaseLost) when the revision ended without the deployer:
	// INTERRUPTED (InterruptRevision, or a delete of the deployment),
	// SKIPPED (superseded by a newer revision) or removed with its
	// deployment; at once when this ControlPlane's Run drives it, at the
	// next lease renewal otherwise. Nobody resumes such a revision: Deploy
	// stops what it does (a build, a rollout), removes what it made for
	// that revision alone and puts the active revision back, as after a
	// failure of the revision, and returns.
	// A report that fails with apierr.ErrInvalidState (the revision was superseded
	// and SKIPPED, interrupted, or the deployment is being deleted or
	// removed; the error matches ErrRevisionEnded too then) means: stop
	// (IsRefusal).
	//
	// Deploy reports BUILDING before it builds anything of the
	// deployment's (an image) and DEPLOYING before it creates anything
	// that runs (containers, objects, databases), and fails a revision it
	// cannot start from the status before (AWAITING_BUILD,
	// AWAITING_DEPLOY): a deployment none of whose revisions ever entered
	// BUILDING, DEPLOYING, DEPLOYED or UNKNOWN is removed at once when
	// deleted, without Teardown (DeleteDeploymentWith).
	Deploy(ctx context.Context, w *Work, r Reporter) error
	// Teardown removes everything Deploy made for a deployment being
	// deleted (status AWAITING_DELETE). Once it returns nil the control
	// plane removes every record of the deployment; an error becomes the
	// deployment's status_message (logged once per distinct error) and
	// Teardown is called again after a backoff (2 s, doubling up to
	// 5 min). It must be idempotent.
	Teardown(ctx context.Context, tenant string, d *Deployment) error
}

// Work is what a Deployer receives: the revision's immutable snapshot
// (including secrets, which the wire never shows) and the deployment as
// stored when the work was claimed. ResourceSpec is as the client sent it;
// ResourceSpec.WithDefaults fills the documented defaults. InstallCommand
// and BuildCommand are the deployment's when the revision was created
// (in-place fields: a redeploy takes the deployment's current ones). Its
// JSON (an agent's, in AgentWork) carries the secrets.
type Work struct {
	Tenant     string     `json:"tenant"`
	Deployment Deployment `json:"deployment"`
	Revision   Revision   `json:"revision"`
	Secrets    []Secret   `json:"secrets"`
	// SecretReferences are the revision's secret_references: variables
	// the deployer takes from secrets its compute holds (a Deployer that
	// cannot resolve one fails the revision, naming it).
	SecretReferences []SecretReference `json:"secret_references"`
	ResourceSpec     *ResourceSpec     `json:"resource_spec"`
	InstallCommand   *string           `json:"install_command"`
	BuildCommand     *string           `json:"build_command"`
	// Listener is the deployment's listener (source_config.listener_id)
	// as stored when the work was claimed, nil for a deployment without
	// one: where the revision runs (wire contract section 10; a listener
	// in use cannot be deleted).
	Listener *Listener `json:"listener"`
	// ImageVersion is the image last reported for the revision
	// (Step.ImageVersion), nil until one is: a deployer that built the
	// image and is resumed after a restart finds its build's output here.
	ImageVersion *string `json:"image_version"`
	// HealthWatchSeconds, when not zero, asks the Deployer to keep
	// checking the revision's health for this many seconds after it
	// reports it DEPLOYED, and to tell an UnhealthyReporter when it fails
	// them: the deployment rolls back automatically
	// (source_config.auto_rollback, Options.AutoRollbackWindow).
	HealthWatchSeconds int `json:"health_watch_seconds,omitempty"`
}

// Reporter records a Deployer's progress on one revision. Each Report is
// checked against the transition table and written in its own store
// transaction; it also renews the lease. It is safe for concurrent use but
// reports of one revision are meant to come in order.
type Reporter interface {
	// Report records a step. Errors: apierr.ErrInvalidState (the step's
	// status is unknown or may not follow the revision's current one, the
	// revision is already terminal, or the deployment status is not one a
	// deployer may set; nothing is written), ErrLeaseLost (another worker
	// owns the revision now; nothing is written), or a store or context
	// error. IsRefusal tells the first two from the others.
	Report(ctx context.Context, s Step) error
	// Log writes lines to the revision's build and deploy logs (each
	// line's Type says which), all in one store transaction: a deployer
	// batches the lines it has (a build's output, a step's messages)
	// rather than calling Log per line. It renews the lease like Report,
	// and still writes once the revision is terminal (last words after
	// DEPLOYED). Each log keeps its newest lines within
	// Options.LogRetention; older lines are dropped and counted. Errors:
	// ErrLeaseLost (nothing is written), an error for a line of unknown
	// type or level (nothing is written), or a store or context error.
	Log(ctx context.Context, lines ...LogLine) error
}

// Step is one report of a Deployer (or of an agent: ReportAgent; its JSON
// is the one of its tags). Zero fields change nothing.
type Step struct {
	// Status is the revision's new status; "" leaves it as it is (a report
	// of build outputs or of the deployment status only).
	Status RevisionStatus `json:"status,omitempty"`
	// Message becomes the revision's status_message (meant for failures).
	Message string `json:"message,omitempty"`
	// RepoCommitSHA sets the revision's repo_commit_sha (the commit built)
	// and, when the revision is the deployment's latest, the deployment's
	// source_revision_config.repo_commit_sha, which mirrors it.
	RepoCommitSHA *string `json:"repo_commit_sha,omitempty"`
	// ImageVersion is the image the revision runs; it becomes the
	// deployment's image_version when the revision becomes active.
	ImageVersion *string `json:"image_version,omitempty"`
	// URL is where the revision answers once active (a base URL, e.g. the
	// Docker deployer's proxy address); it becomes the deployment's
	// read-only url (its custom_url instead, when it has one), and the
	// custom_url of an internal_source or internal_docker deployment, in
	// the Update that makes the revision active, so it is reported with Status
	// DEPLOYED. A step that does not make its revision
	// active (an older revision reaching DEPLOYED after a newer one) leaves
	// the url alone.
	URL *string `json:"url,omitempty"`
	// DeploymentStatus, when set, is the deployment's new status: READY
	// (only once a revision is active), UNUSED (scaled to zero while idle)
	// or UNKNOWN (the deployer cannot tell). A deployment being deleted
	// refuses it. Once the revision is terminal its Reporter refuses
	// everything; ControlPlane.ReportDeploymentStatus sets the status at
	// any time.
	DeploymentStatus DeploymentStatus `json:"deployment_status,omitempty"`
}

// ErrLeaseLost is returned by Reporter.Report when another worker (a
// replica, or this one after the lease expired and was taken) now drives
// the revision. The Deployer should stop.
var ErrLeaseLost = workqueue.ErrLeaseLost

// IsRefusal reports whether err, from a Reporter, is the control plane
// refusing a deployer's report: it matches apierr.ErrInvalidState (the
// revision was superseded and SKIPPED, interrupted, the deployment is
// being deleted, or the step may not follow the revision's current status)
// or ErrLeaseLost (another worker drives the revision now). Nothing was
// written. A Deployer that gets a refusal stops driving that revision: it
// reports nothing more for it, and returns; when the refusal matches
// ErrRevisionEnded too, nobody resumes the revision, and the Deployer
// removes what it made for that revision alone first.
// Other errors (a store or context error, a rejected value) are not
// refusals.
func IsRefusal(err error) bool {
	return errors.Is(err, apierr.ErrInvalidState) || errors.Is(err, ErrLeaseLost)
}

// Advance reports, through r, the statuses of src's happy path after from
// up to and including to, in order, with last's other fields on the final
// one: what a Deployer does to move a revision along when several steps
// pass at once. CREATING is never reported, and nothing when to is not
// after from. It returns the last status reported (from when none was)
// and the first error of r.Report, unchanged.
func Advance(ctx context.Context, r Reporter, src Source, from, to RevisionStatus, last Step) (RevisionStatus, error) {
	path := HappyPath(src)
	start, end := slices.Index(path, from), slices.Index(path, to) // -1 for a status off the path: start at the beginning
	reached := from
	for i := max(start+1, 1); i <= end; i++ {
		s := Step{Status: path[i]}
		if i == end {
			s = last
			s.Status = path[i]
		}
		if err := r.Report(ctx, s); err != nil {
			return reached, err
		}
		reached = path[i]
	}
	return reached, nil
}

// HappyPath is a source's happy path, in order: github and internal_source
// go through the two build states, external_docker and internal_docker
// skip them. Every transition of the table derives from these lists and
// the rules of Transitions. Nil for an unknown source.
func HappyPath(src Source) []RevisionStatus {
	switch src {
	case SourceGitHub, SourceInternalSource:
		return []RevisionStatus{RevisionCreating, RevisionQueued, RevisionAwaitingBuild, RevisionBuilding,
			RevisionAwaitingDeploy, RevisionDeploying, RevisionDeployed}
	case SourceExternalDocker, SourceInternalDocker:
		return []RevisionStatus{RevisionCreating, RevisionQueued, RevisionAwaitingDeploy, RevisionDeploying, RevisionDeployed}
	}
	return nil
}

// IsTerminal reports whether s is final: DEPLOYED, SKIPPED, the three
// *_FAILED statuses, and INTERRUPTED (InterruptRevision, or a delete of
// the deployment: nothing resumes an interrupted revision, so it is final
// too).
func IsTerminal(s RevisionStatus) bool {
	switch s {
	case RevisionDeployed, RevisionSkipped, RevisionCreateFailed, RevisionBuildFailed, RevisionDeployFailed, RevisionInterrupted:
		return true
	}
	return false
}

// FailureOf is the failure status of the phase a revision in status s is
// in: CREATE_FAILED for CREATING and QUEUED, BUILD_FAILED for
// AWAITING_BUILD and BUILDING, DEPLOY_FAILED otherwise (UNKNOWN included).
// It is what the control plane records when Deploy returns an error, and
// what a Deployer reports when a step fails.
func FailureOf(s RevisionStatus) RevisionStatus {
	switch s {
	case RevisionCreating, RevisionQueued:
		return RevisionCreateFailed
	case RevisionAwaitingBuild, RevisionBuilding:
		return RevisionBuildFailed
	}
	return RevisionDeployFailed
}

// skippable: a revision in these statuses is SKIPPED when a newer one of its
// deployment is created ("still before DEPLOYING"; UNKNOWN is not known to
// be).
func skippable(s RevisionStatus) bool {
	switch s {
	case RevisionCreating, RevisionQueued, RevisionAwaitingBuild, RevisionBuilding, RevisionAwaitingDeploy:
		return true
	}
	return false
}

// Transitions is the one table of legal revision status changes, for a
// source: from -> the statuses that may follow. Rules:
//
//   - along the source's happy path, each status to the next (github:
//     CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY,
//     DEPLOYING, DEPLOYED; external_docker skips the two build states);
//   - each non-terminal status to its phase's failure: CREATING and QUEUED
//     to CREATE_FAILED, AWAITING_BUILD and BUILDING to BUILD_FAILED,
//     AWAITING_DEPLOY and DEPLOYING to DEPLOY_FAILED;
//   - every status before DEPLOYING to SKIPPED (superseded);
//   - every non-terminal status to INTERRUPTED (InterruptRevision, or
//     the deployment deleted) and,
//     except UNKNOWN itself, to UNKNOWN (the deployer cannot tell);
//   - UNKNOWN to any status of the happy path after CREATING, and to
//     every *_FAILED (the deployer found out);
//   - nothing out of a terminal status (IsTerminal).
//
// The returned map is a fresh copy.
func Transitions(src Source) map[RevisionStatus][]RevisionStatus {
	path := HappyPath(src)
	t := map[RevisionStatus][]RevisionStatus{}
	if path == nil {
		return t
	}
	for i, s := range path[:len(path)-1] {
		t[s] = append(t[s], path[i+1], FailureOf(s))
		if skippable(s) {
			t[s] = append(t[s], RevisionSkipped)
		}
		t[s] = append(t[s], RevisionInterrupted, RevisionUnknown)
	}
	t[RevisionUnknown] = append(slices.Clone(path[1:]), RevisionCreateFailed, RevisionBuildFailed, RevisionDeployFailed, RevisionInterrupted)
	return t
}

// CanTransition reports whether a revision of src may move from one status
// to another (the table of Transitions).
func CanTransition(src Source, from, to RevisionStatus) bool {
	return slices.Contains(Transitions(src)[from], to)
}
