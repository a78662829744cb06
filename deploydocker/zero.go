package deploydocker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of the Options of scaling to zero.
const (
	DefaultIdleTimeout       = 15 * time.Minute
	DefaultIdleCheckInterval = 30 * time.Second
	DefaultWakeTimeout       = 2 * time.Minute
)

// StatusReporter sets a deployment's status outside any revision's work:
// UNUSED once its containers were stopped for idleness, READY once they
// serve again. (*controlplane.ControlPlane).ReportDeploymentStatus is one,
// and so is the agent's (*agent.Client).ReportDeploymentStatus.
type StatusReporter func(ctx context.Context, tenant, deploymentID string, s controlplane.DeploymentStatus) error

// ScalesToZero reports whether the Deployer stops a deployment's
// containers while nobody asks for it: its deployment_type is one that
// scales to zero (controlplane.DeploymentType.ScalesToZero: dev_zero,
// dev_free_zero).
func ScalesToZero(dep *controlplane.Deployment) bool {
	return dep != nil && dep.SourceConfig.DeploymentType != nil && dep.SourceConfig.DeploymentType.ScalesToZero()
}

// newRoute is the route of a deployment's active revision.
func newRoute(tenant, revision string, zero bool, bs []*backend) *route {
	rt := &route{backends: bs, tenant: tenant, revision: revision}
	rt.zero.Store(zero)
	return rt
}

// goBackground runs f under the Deployer's life (Close waits for it), or
// at once, in the caller, once the Deployer is closed (f then finds d.bg
// done).
func (d *Deployer) goBackground(f func()) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		f()
		return
	}
	d.background.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.background.Done()
		f()
	}()
}

// idleLoop puts idle deployments to sleep every Options.IdleCheckInterval
// until the Deployer is closed.
func (d *Deployer) idleLoop() {
	t := time.NewTicker(d.o.IdleCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-d.bg.Done():
			return
		case <-t.C:
			since := d.o.Clock().Add(-d.o.IdleTimeout)
			for dep, rt := range d.proxy.idle(since) {
				if d.bg.Err() != nil {
					return
				}
				d.sleep(d.bg, dep, rt, since)
			}
		}
	}
}

// activeLog is where the lines about an active revision go outside its
// Deploy: its deploy log, through Options.State.
func (d *Deployer) activeLog(tenant, dep, rev string) *revLog {
	rl := &revLog{d: d, w: &controlplane.Work{Tenant: tenant, Deployment: controlplane.Deployment{ID: dep},
		Revision: controlplane.Revision{ID: rev}}}
	rl.deployed.Store(true)
	return rl
}

// sleep stops the containers of a deployment that nobody asked for since
// since, if it still scales to zero and rt is still its active revision's
// route, and reports it UNUSED. Requests from then on wait for wake.
func (d *Deployer) sleep(ctx context.Context, dep string, rt *route, since time.Time) {
	mu := d.lock(rt.tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	if d.isRemoved(rt.tenant, dep) {
		return
	}
	if d.o.State != nil {
		cur, err := d.o.State.GetDeployment(ctx, rt.tenant, dep)
		switch {
		case err != nil:
			if !isNotFound(err) && ctx.Err() == nil {
				d.log.Warn("deploydocker: reading an idle deployment", "deployment", dep, "err", err)
			}
			return
		case !ScalesToZero(cur):
			rt.zero.Store(false) // its type changed in place
			return
		case cur.Status == controlplane.StatusAwaitingDelete || cur.ActiveRevisionID == nil || *cur.ActiveRevisionID != rt.revision:
			return // being deleted, or a newer revision is taking over
		}
	}
	if !d.proxy.sleep(dep, rt, since) {
		return // asked for meanwhile
	}
	rl := d.activeLog(rt.tenant, dep, rt.revision)
	ctx = context.WithValue(ctx, revLogKey{}, rl)
	n, err := d.stopRevision(ctx, rt.tenant, dep, rt.revision)
	if err != nil {
		// What still runs is started again (a no-op) by the next request.
		d.log.Warn("deploydocker: stopping an idle deployment's containers", "deployment", dep, "err", err)
	}
	d.logLine(ctx, rl.w, controlplane.LogDeploy, controlplane.LevelInfo, fmt.Sprintf(
		"no request for %s: stopped %d container(s) (scaled to zero); the next request to the url starts them", d.o.IdleTimeout, n))
	d.reportStatus(ctx, rt.tenant, dep, controlplane.StatusUnused)
}

// stopRevision stops (without removing) the containers of one revision,
// its database and Redis left running, and returns how many it stopped.
func (d *Deployer) stopRevision(ctx context.Context, tenant, dep, rev string) (int, error) {
	cs, err := d.list(ctx, LabelTenant+"="+tenant, LabelDeployment+"="+dep, LabelRevision+"="+rev)
	if err != nil {
		return 0, err
	}
	secs := int(d.o.StopTimeout / time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	n := 0
	for _, c := range cs {
		if isService(c.Labels) {
			continue
		}
		n++
		wg.Go(func() {
			_, err := d.cli.ContainerStop(ctx, c.ID, client.ContainerStopOptions{Timeout: &secs})
			if err != nil && !cerrdefs.IsNotFound(err) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stopping container %s: %w", c.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// wake starts the stopped containers of a sleeping deployment's route for
// the requests the proxy holds, waits until each passes its health check
// and makes them the route's backends again, reporting the deployment
// READY. A start that fails leaves the containers stopped, says why in
// the revision's deploy log and returns the error (the held requests get
// 502; the next request tries again). When the route was replaced or
// removed meanwhile (a new revision, a delete), it returns nil: the
// requests look again.
func (d *Deployer) wake(dep string, rt *route) error {
	ctx, cancel := context.WithTimeout(d.bg, d.o.HealthTimeout+time.Minute)
	defer cancel()
	rl := d.activeLog(rt.tenant, dep, rt.revision)
	ctx = context.WithValue(ctx, revLogKey{}, rl)
	since := d.resumeFrom(ctx, rl.w) // before this wake writes a line
	began := time.Now()
	cs, err := d.startRevision(ctx, dep, rt)
	if err == nil {
		for _, c := range cs {
			d.follow(rl, c, since)
		}
		for _, c := range cs {
			if err = d.waitHealthy(ctx, c); err != nil {
				break
			}
		}
	}
	mu := d.lock(rt.tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	if !d.proxy.current(dep, rt) || d.isRemoved(rt.tenant, dep) {
		return nil // replaced or deleted: whatever serves now answers
	}
	if err != nil && d.bg.Err() != nil {
		return err // closing: what started is adopted after a restart
	}
	if err != nil {
		rctx := context.WithoutCancel(ctx)
		if _, serr := d.stopRevision(rctx, rt.tenant, dep, rt.revision); serr != nil {
			d.log.Warn("deploydocker: stopping the containers of a failed wake", "deployment", dep, "err", serr)
		}
		d.logLine(rctx, rl.w, controlplane.LogDeploy, controlplane.LevelError,
			fmt.Sprintf("starting the containers of the deployment, scaled to zero, for a request failed: %v", err))
		return err
	}
	d.proxy.woke(dep, rt, backendsOf(cs))
	d.logLine(ctx, rl.w, controlplane.LogDeploy, controlplane.LevelInfo,
		fmt.Sprintf("a request woke the deployment: %d container(s) healthy in %s", len(cs), time.Since(began).Round(time.Millisecond)))
	d.reportStatus(ctx, rt.tenant, dep, controlplane.StatusReady)
	return nil
}

// startRevision starts the stopped containers of rt's revision, under the
// deployment's lock, and returns them.
func (d *Deployer) startRevision(ctx context.Context, dep string, rt *route) ([]*ctr, error) {
	mu := d.lock(rt.tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	if !d.proxy.current(dep, rt) || d.isRemoved(rt.tenant, dep) {
		return nil, nil
	}
	have, err := d.list(ctx, LabelTenant+"="+rt.tenant, LabelDeployment+"="+dep, LabelRevision+"="+rt.revision)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	var cs []*ctr
	for _, s := range have {
		if isService(s.Labels) {
			continue
		}
		if _, err := d.cli.ContainerStart(ctx, s.ID, client.ContainerStartOptions{}); err != nil {
			return nil, fmt.Errorf("starting container %s: %w", firstName(s.Names), err)
		}
		res, err := d.cli.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspecting container %s: %w", firstName(s.Names), err)
		}
		c, err := d.ctrOf(res.Container)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("revision %s has no container left to start", rt.revision)
	}
	d.logLine(ctx, &controlplane.Work{Tenant: rt.tenant, Deployment: controlplane.Deployment{ID: dep}, Revision: controlplane.Revision{ID: rt.revision}},
		controlplane.LogDeploy, controlplane.LevelInfo, fmt.Sprintf("a request came for the deployment, scaled to zero: started %d container(s)", len(cs)))
	return cs, nil
}

// reportStatus sets the deployment's status through
// Options.StatusReporter, if any. A refusal (the deployment is being
// deleted) or a deployment gone is not worth a warning.
func (d *Deployer) reportStatus(ctx context.Context, tenant, dep string, s controlplane.DeploymentStatus) {
	if d.o.StatusReporter == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logWriteTimeout)
	defer cancel()
	err := d.o.StatusReporter(rctx, tenant, dep, s)
	if err != nil && !controlplane.IsRefusal(err) && !isNotFound(err) {
		d.log.Warn("deploydocker: reporting a deployment's status", "deployment", dep, "status", string(s), "err", err)
	}
}
