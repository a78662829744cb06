package deploydocker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
)

// Reconcile makes what the daemon runs agree with the stored state, after
// a restart (or a kill -9) of the control plane. For every container of
// this instance (Options.Instance) it asks Options.State about the
// deployment and revision its labels name:
//
//   - the deployment's active revision: adopted; its running containers
//     serve the deployment's url again; a deployment that scales to zero
//     whose containers are all stopped stays asleep (not started), and
//     a request starts them (its status is set UNUSED, or READY again
//     for one running, if a restart came between the two);
//   - a revision not yet terminal: left for the Deploy that resumes it,
//     which adopts its containers (no duplicate is created);
//   - a deployment being deleted: left for its Teardown;
//   - anything else (a deleted deployment, a superseded, failed or
//     replaced revision): removed.
//
// Call it once before the control plane's Run. It needs Options.State.
func (d *Deployer) Reconcile(ctx context.Context) error {
	if d.o.State == nil {
		return errors.New("deploydocker: Reconcile needs Options.State")
	}
	all, err := d.list(ctx)
	if err != nil {
		return fmt.Errorf("deploydocker: listing containers: %w", err)
	}
	type depKeyT struct{ tenant, dep string }
	byDep := map[depKeyT][]container.Summary{}
	for _, c := range all {
		k := depKeyT{c.Labels[LabelTenant], c.Labels[LabelDeployment]}
		if k.tenant == "" || k.dep == "" {
			continue // not made by a Deployer: leave it
		}
		byDep[k] = append(byDep[k], c)
	}
	var errs []error
	for k, cs := range byDep {
		errs = append(errs, d.reconcileDeployment(ctx, k.tenant, k.dep, cs))
	}
	// The data volumes of deployments deleted meanwhile.
	errs = append(errs, d.reconcileData(ctx))
	return errors.Join(errs...)
}

func (d *Deployer) reconcileDeployment(ctx context.Context, tenant, depID string, cs []container.Summary) error {
	mu := d.lock(tenant, depID)
	mu.Lock()
	defer mu.Unlock()
	// The revisions are read before the deployment: another process (an
	// agent of the same listener, a replica) may make one of them active
	// meanwhile, in the transaction that makes it DEPLOYED. Read in this
	// order, a revision seen DEPLOYED is seen active if it still is, and
	// one seen in flight is left to its Deploy; read the other way round,
	// the containers of a revision activated between the two reads would
	// be taken for a replaced revision's and removed.
	status := map[string]controlplane.RevisionStatus{}
	for _, c := range cs {
		rid := c.Labels[LabelRevision]
		if _, ok := status[rid]; ok || isService(c.Labels) {
			continue
		}
		rev, err := d.o.State.GetRevision(ctx, tenant, depID, rid)
		switch {
		case isNotFound(err):
			status[rid] = ""
		case err != nil:
			return err
		default:
			status[rid] = rev.Status
		}
	}
	dep, err := d.o.State.GetDeployment(ctx, tenant, depID)
	if isNotFound(err) {
		d.log.Info("deploydocker: removing the containers of a deleted deployment", "deployment", depID)
		return d.removeAll(ctx, cs)
	}
	if err != nil {
		return err
	}
	if dep.Status == controlplane.StatusAwaitingDelete {
		return nil
	}
	var stale []container.Summary
	var active []*ctr
	activeAll, stopped := 0, 0
	for _, c := range cs {
		if isService(c.Labels) {
			continue // the deployment's database or Redis: it stays with the deployment
		}
		rid := c.Labels[LabelRevision]
		st := status[rid]
		switch {
		case dep.ActiveRevisionID != nil && *dep.ActiveRevisionID == rid:
			activeAll++
			if c.State == container.StateExited || c.State == container.StateCreated {
				stopped++
			}
			if c.State != container.StateRunning {
				continue // restarting or stopped: not routed; the restart policy may bring it back
			}
			res, err := d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
			if err != nil {
				return err
			}
			cc, err := d.ctrOf(res.Container)
			if err != nil {
				return err
			}
			active = append(active, cc)
		case st != "" && !controlplane.IsTerminal(st):
			// in flight: the resumed Deploy adopts it
		default:
			stale = append(stale, c)
		}
	}
	zero := ScalesToZero(dep)
	switch {
	case zero && activeAll > 0 && stopped == activeAll:
		// Scaled to zero: it stays so, and the next request starts its
		// containers.
		rt := newRoute(tenant, *dep.ActiveRevisionID, zero, nil)
		rt.asleep = true
		d.proxy.put(depID, rt)
		if dep.Status != controlplane.StatusUnused {
			d.reportStatus(ctx, tenant, depID, controlplane.StatusUnused)
		}
		d.log.Info("deploydocker: the active revision's containers are stopped (scaled to zero); a request starts them",
			"deployment", depID, "revision", *dep.ActiveRevisionID)
	case len(active) > 0 && dep.Status == controlplane.StatusUnused:
		// Started for a request just before the restart.
		d.reportStatus(ctx, tenant, depID, controlplane.StatusReady)
	}
	if len(active) > 0 {
		d.proxy.put(depID, newRoute(tenant, *dep.ActiveRevisionID, zero, backendsOf(active)))
		// Their output goes on to the active revision's deploy log, from
		// where it ends (what the earlier run wrote is there).
		rl := &revLog{d: d, w: &controlplane.Work{Tenant: tenant, Deployment: *dep,
			Revision: controlplane.Revision{ID: *dep.ActiveRevisionID}}}
		rl.deployed.Store(true)
		since := d.resumeFrom(ctx, rl.w)
		for _, c := range active {
			d.follow(rl, c, since)
		}
		d.log.Info("deploydocker: adopted the active revision's containers", "deployment", depID,
			"revision", *dep.ActiveRevisionID, "containers", strconv.Itoa(len(active)))
	}
	return d.removeAll(ctx, stale)
}

func (d *Deployer) removeAll(ctx context.Context, cs []container.Summary) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, d.remove(ctx, c.ID, false))
	}
	return errors.Join(errs...)
}
