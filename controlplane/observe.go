package controlplane

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
)

// Observer is told what the reconcile loop does, for metrics: every
// revision status change it records, every lease it takes over, and how
// long each Deployer call took. Package prommetrics implements it with
// Prometheus. Its methods are called from Run's workers, many at once, after
// the change has committed (never for a closure that may still run again),
// so they must be safe for concurrent use and quick: they run on the
// worker's time.
type Observer interface {
	// RevisionTransition is called once a revision's status change
	// recorded by the reconcile loop (a Deployer's report, or the failure
	// of Deploy's error) has committed.
	RevisionTransition(t Transition)
	// LeaseTakenOver is called when this ControlPlane claims work that
	// another claim still held when its lease expired: a worker that
	// stopped renewing it (a replica that crashed or lost the store). Work
	// given back (at shutdown, or after a Deploy that returned before the
	// revision was terminal) is not taken over when claimed again.
	LeaseTakenOver()
	// DeployerCall is called after each call of Deployer.Deploy or
	// Deployer.Teardown returns, with op DeployerDeploy or
	// DeployerTeardown, the time it took by Options.Clock, and its error.
	DeployerCall(op string, took time.Duration, err error)
}

// The ops of Observer.DeployerCall.
const (
	DeployerDeploy   = "deploy"
	DeployerTeardown = "teardown"
)

// Transition is a revision's status change, as Observer.RevisionTransition
// receives it.
type Transition struct {
	Tenant       string
	DeploymentID string
	RevisionID   string
	From, To     RevisionStatus
	// Step is how long the Deployer worked in From before this report, by
	// Options.Clock: since its previous status report in the same Deploy
	// call, or since the call began for the first one. A revision resumed
	// by a later call (after a restart, a takeover or a Deploy that
	// returned early) starts counting again at that call.
	Step time.Duration
}

// noObserver is the Observer of a ControlPlane configured without one.
type noObserver struct{}

func (noObserver) RevisionTransition(Transition)             {}
func (noObserver) LeaseTakenOver()                           {}
func (noObserver) DeployerCall(string, time.Duration, error) {}

// observeTransition tells the observer and the log about a committed
// status change of the job's revision.
func (cp *ControlPlane) observeTransition(ctx context.Context, j *job, from, to RevisionStatus, now time.Time) {
	start := time.Unix(0, j.stepStart.Swap(now.UnixNano()))
	t := Transition{Tenant: j.tenant, DeploymentID: j.deployment, RevisionID: j.revision, From: from, To: to,
		Step: max(0, now.Sub(start))}
	cp.log.LogAttrs(ctx, slog.LevelInfo, "revision transition", slog.String("tenant", t.Tenant),
		slog.String("deployment", t.DeploymentID), slog.String("revision", t.RevisionID),
		slog.String("from", string(from)), slog.String("to", string(to)), slog.Duration("step", t.Step))
	cp.obs.RevisionTransition(t)
	cp.previewTransition(ctx, t) // previews.go
}

// ReadinessChecker is implemented by a Deployer that can tell whether the
// engine it drives (Docker, a cluster) is reachable now. ControlPlane.Ready
// calls it on the Deployer Run drives; a Deployer that does not implement it
// is taken to be ready.
type ReadinessChecker interface {
	// Ready returns nil when the engine answers, an error saying why not
	// otherwise. It is called for every readiness probe, so it should be
	// cheap (a ping) and return by ctx's deadline.
	Ready(ctx context.Context) error
}

// ClusterHealthReporter is implemented by a Deployer that drives
// Kubernetes clusters (deployroute.Router). Readiness is about this
// process: a cluster that does not answer does not make it unready, and
// ClusterHealth reports each cluster's state instead (GET /readyz shows it
// beside its verdict).
type ClusterHealthReporter interface {
	// ClusterHealth returns each cluster's state by name: nil when it
	// answers, an error saying why not otherwise. Like Ready it is called
	// per probe and returns by ctx's deadline.
	ClusterHealth(ctx context.Context) map[string]error
}

// ClusterHealth returns the state of each cluster the Deployer Run drives
// (when it is a ClusterHealthReporter), nil when there is none.
func (cp *ControlPlane) ClusterHealth(ctx context.Context) map[string]error {
	d := cp.deployer.Load()
	if d == nil {
		return nil
	}
	if hr, ok := (*d).(ClusterHealthReporter); ok {
		return hr.ClusterHealth(ctx)
	}
	return nil
}

// The components Ready checks, as NotReadyError names them.
const (
	ComponentStore     = "store"
	ComponentReconcile = "reconcile"
	ComponentDeployer  = "deployer"
)

// NotReadyError is Ready's error: each component that is not ready, and
// why.
type NotReadyError struct {
	Problems []NotReady
}

// NotReady is a component that is not ready: ComponentStore,
// ComponentReconcile or ComponentDeployer, and the cause.
type NotReady struct {
	Component string
	Err       error
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	b.WriteString("controlplane: not ready: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Component + ": " + p.Err.Error())
	}
	return b.String()
}

// Unwrap returns the causes.
func (e *NotReadyError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p.Err
	}
	return errs
}

// ErrNotRunning is the cause of ComponentReconcile when Run is not running.
var ErrNotRunning = errors.New("controlplane: the reconcile loop (Run) is not running")

// readyProbeKey is the key Ready reads to see that the store answers; it
// is never written, so the read finds nothing.
const readyProbeKey = "readiness-probe"

// Ready reports whether this ControlPlane can do its work: the store
// answers a read, Run is running, and the Deployer Run drives is reachable
// (when it implements ReadinessChecker). It returns nil, or a
// *NotReadyError naming every component that is not ready. It reads no
// tenant's data. ctx bounds the checks; give it a deadline.
func (cp *ControlPlane) Ready(ctx context.Context) error {
	var problems []NotReady
	err := cp.st.View(ctx, func(r store.Reader) error {
		_, err := r.Get(workqueue.Collection, readyProbeKey)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		problems = append(problems, NotReady{ComponentStore, err})
	}
	d := cp.deployer.Load()
	if !cp.running.Load() || d == nil {
		problems = append(problems, NotReady{ComponentReconcile, ErrNotRunning})
	} else if rc, ok := (*d).(ReadinessChecker); ok {
		if err := rc.Ready(ctx); err != nil {
			problems = append(problems, NotReady{ComponentDeployer, err})
		}
	}
	if problems != nil {
		return &NotReadyError{Problems: problems}
	}
	return nil
}

// PendingWork counts the units of work not yet done, as PendingWork
// returns them.
type PendingWork struct {
	// RevisionsWaiting are revisions not yet terminal that no worker holds:
	// new ones, ones given back, and ones whose lease expired.
	RevisionsWaiting int
	// RevisionsInProgress are revisions not yet terminal that a worker
	// holds (or that a Deployer asked to look at again after
	// PollInterval).
	RevisionsInProgress int
	// DeletionsWaiting and DeletionsInProgress are the same for
	// deployments AWAITING_DELETE (in progress too: a teardown that
	// failed, until its backoff ends).
	DeletionsWaiting, DeletionsInProgress int
}

// PendingWork counts the pending work of every tenant, in one read of the
// pending records: its cost follows the work not yet done, never the
// revisions stored. The work of agents (ClaimAgentWork) counts too, held
// while an agent's lease holds it. Over a store shared by replicas, every
// replica sees the same counts.
func (cp *ControlPlane) PendingWork(ctx context.Context) (PendingWork, error) {
	now := cp.now()
	var c workqueue.Counts
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		c, err = workqueue.Count(r, now)
		return err
	})
	return PendingWork{RevisionsWaiting: c.RevisionsWaiting, RevisionsInProgress: c.RevisionsHeld,
		DeletionsWaiting: c.TeardownsWaiting, DeletionsInProgress: c.TeardownsHeld}, cp.storeErr("count pending work", err)
}
