// Package deployroute is the one place that decides where a deployment
// runs (wire contract section 10, "Where a revision runs"): a
// controlplane.Deployer that hands each deployment to the Deployer of the
// cluster or engine its listener names.
//
//   - A deployment without a listener goes to Options.Default (the
//     server's -deployer).
//   - A listener with compute_type "k8s" names a Kubernetes cluster by its
//     compute_id, a kubeconfig context: Options.Clusters[compute_id] (a
//     deployk8s.Deployer, which runs it in the listener's namespace).
//   - A listener with compute_type "docker" names a Docker engine of the
//     server's configuration: Options.Docker[compute_id].
//
// A listener's compute_type and compute_id cannot change and a listener in
// use cannot be deleted, so a deployment never moves: its revisions and
// its Teardown all go to the same Deployer.
//
// Router.Drives tells which listeners the Router drives; a server gives it
// to the control plane (controlplane.Options.Drives), and the deployments
// of the other listeners are served by their agents (package agent), which
// never reach the Router. A deployment that reaches it all the same, its
// listener naming a cluster or engine the Router does not have (its work
// was queued while the server was configured otherwise), ends its
// revision DEPLOY_FAILED (BUILD_FAILED for a source that builds) with a
// status_message that says so, also in its deploy (build) log, from
// AWAITING_DEPLOY (AWAITING_BUILD): never DEPLOYING or BUILDING, which
// would say that an engine may have made something for it. So a delete of
// a deployment that never ran anywhere removes it at once, without a
// Teardown. The Teardown of one that did run (on a target since removed
// from the server's configuration) fails, and is retried with backoff,
// until the server is configured with it again or a forced delete
// removes the deployment's records.
package deployroute

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/deployplane/deployplane/controlplane"
)

// Listeners gives a deployment's listener to Teardown (Work carries it
// for Deploy): *controlplane.ControlPlane implements it.
type Listeners interface {
	GetListener(ctx context.Context, tenant, id string) (*controlplane.Listener, error)
}

// Options configure a Router.
type Options struct {
	// Default runs deployments without a listener. Nil: such a
	// deployment's revisions fail saying no default deployer is set.
	Default controlplane.Deployer
	// Clusters are the Kubernetes clusters by name (kubeconfig context),
	// for listeners with compute_type k8s.
	Clusters map[string]controlplane.Deployer
	// Docker are the Docker engines by name, for listeners with
	// compute_type docker.
	Docker map[string]controlplane.Deployer
	// Listeners is needed by Teardown for deployments with a listener.
	Listeners Listeners
}

// Router is a controlplane.Deployer that dispatches on the deployment's
// listener (see the package documentation).
type Router struct{ o Options }

// New returns a Router. The maps are not copied: do not change them once
// the Router is in use.
func New(o *Options) *Router {
	r := &Router{}
	if o != nil {
		r.o = *o
	}
	return r
}

// ErrUnknownTarget is returned (wrapped) when a listener names a cluster
// or engine the Router has no Deployer for.
var ErrUnknownTarget = errors.New("deployroute: unknown compute target")

// For returns the Deployer that runs deployments of listener l (nil: no
// listener).
func (r *Router) For(l *controlplane.Listener) (controlplane.Deployer, error) {
	var d controlplane.Deployer
	switch {
	case l == nil:
		if r.o.Default == nil {
			return nil, fmt.Errorf("%w: this server has no default deployer for deployments without a listener", ErrUnknownTarget)
		}
		return r.o.Default, nil
	case l.ComputeType == controlplane.ComputeTypeK8s:
		d = r.o.Clusters[l.ComputeID]
	case l.ComputeType == controlplane.ComputeTypeDocker:
		d = r.o.Docker[l.ComputeID]
	}
	if d == nil {
		return nil, fmt.Errorf("%w: listener %s names %s %q, which this server is not configured with",
			ErrUnknownTarget, l.ID, l.ComputeType, l.ComputeID)
	}
	return d, nil
}

// Drives reports whether the Router has a Deployer for the deployments of
// listener l: its compute_type and compute_id name a cluster or engine the
// Router was given (nil, no listener: whether it has a Default). A server
// sets controlplane.Options.Drives to it, so that the deployments of a
// listener it does not drive are served by that listener's agents instead
// (package agent). Drives does no I/O and is safe for concurrent use.
func (r *Router) Drives(l *controlplane.Listener) bool {
	_, err := r.For(l)
	return err == nil
}

// Deploy hands the revision to its listener's Deployer. A listener this
// server cannot serve ends the revision failed with the reason.
func (r *Router) Deploy(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter) error {
	l := w.Listener
	if l == nil && w.Deployment.SourceConfig.ListenerID != nil {
		var err error
		if l, err = r.listener(ctx, w.Tenant, *w.Deployment.SourceConfig.ListenerID); err != nil {
			return err
		}
	}
	d, err := r.For(l)
	if errors.Is(err, ErrUnknownTarget) {
		return fail(ctx, w, rep, l)
	}
	if err != nil {
		return err
	}
	return d.Deploy(ctx, w, rep)
}

// fail ends a revision that cannot run, its listener (or, without one,
// the default) naming no Deployer of this server: the revision's first
// phase that needs one, the build for a source that builds and the deploy
// for the others, fails (BUILD_FAILED, DEPLOY_FAILED) with a
// status_message that names the listener and what it points at, written
// to that phase's log too. It fails from the status that waits for the
// phase (AWAITING_BUILD, AWAITING_DEPLOY), not from BUILDING or
// DEPLOYING: no engine made anything for it (controlplane's delete rule).
func fail(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter, l *controlplane.Listener) error {
	msg := "This server has no default deployer for deployments without a listener."
	if l != nil {
		msg = fmt.Sprintf("The deployment's listener %s names %s %q, which this server is not configured with: "+
			"no revision of it can run until the server is given that %s.", l.ID, l.ComputeType, l.ComputeID, targetKind(l.ComputeType))
	}
	path := controlplane.HappyPath(w.Revision.Source)
	if path == nil {
		return errors.New(msg) // the control plane records its phase's failure with this text
	}
	to := controlplane.RevisionAwaitingDeploy
	if slices.Contains(path, controlplane.RevisionBuilding) {
		to = controlplane.RevisionAwaitingBuild
	}
	reached, err := controlplane.Advance(ctx, rep, w.Revision.Source, w.Revision.Status, to, controlplane.Step{})
	if err != nil {
		return err
	}
	log := controlplane.LogDeploy
	if controlplane.FailureOf(reached) == controlplane.RevisionBuildFailed {
		log = controlplane.LogBuild
	}
	if err := rep.Log(ctx, controlplane.LogLine{Type: log, Level: controlplane.LevelError, Message: msg}); err != nil {
		return err
	}
	return rep.Report(ctx, controlplane.Step{Status: controlplane.FailureOf(reached), Message: msg})
}

func targetKind(computeType string) string {
	switch computeType {
	case controlplane.ComputeTypeK8s:
		return "cluster (a context of its kubeconfig)"
	case controlplane.ComputeTypeDocker:
		return "Docker endpoint"
	}
	return "compute target"
}

// Teardown hands the deployment to its listener's Deployer.
func (r *Router) Teardown(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
	var l *controlplane.Listener
	if id := dep.SourceConfig.ListenerID; id != nil {
		var err error
		if l, err = r.listener(ctx, tenant, *id); err != nil {
			return err
		}
	}
	d, err := r.For(l)
	if err != nil {
		return err
	}
	return d.Teardown(ctx, tenant, dep)
}

func (r *Router) listener(ctx context.Context, tenant, id string) (*controlplane.Listener, error) {
	if r.o.Listeners == nil {
		return nil, errors.New("deployroute: Options.Listeners is needed for deployments with a listener")
	}
	return r.o.Listeners.GetListener(ctx, tenant, id)
}

// Ready is ready when the default Deployer and the Docker engines that
// can tell are: the Router is a controlplane.ReadinessChecker. The
// clusters are not part of it: one that does not answer leaves the others
// (and the process) serving; ClusterHealth reports them.
func (r *Router) Ready(ctx context.Context) error {
	var errs []error
	check := func(d controlplane.Deployer) {
		if rc, ok := d.(controlplane.ReadinessChecker); ok {
			errs = append(errs, rc.Ready(ctx))
		}
	}
	if r.o.Default != nil {
		check(r.o.Default)
	}
	for _, d := range r.o.Docker {
		check(d)
	}
	return errors.Join(errs...)
}

// ClusterHealth asks every cluster whose Deployer can tell
// (controlplane.ReadinessChecker), all at once, whether it answers: the
// Router is a controlplane.ClusterHealthReporter.
func (r *Router) ClusterHealth(ctx context.Context) map[string]error {
	out := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, d := range r.o.Clusters {
		rc, ok := d.(controlplane.ReadinessChecker)
		if !ok {
			continue
		}
		wg.Go(func() {
			err := rc.Ready(ctx)
			mu.Lock()
			out[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
