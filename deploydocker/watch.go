package deploydocker

import (
	"context"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of the watch of a revision after it becomes active.
const (
	DefaultWatchInterval = 5 * time.Second
	DefaultWatchFailures = 3
)

// serving reports whether dep's route serves rev's containers now (not
// asleep, not replaced by another revision's, not removed).
func (p *proxy) serving(dep, rev string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r := p.routes[dep]
	return r != nil && r.revision == rev && !r.asleep
}

// watch checks the health of w's revision, whose containers cs just became
// active, every Options.WatchInterval for w.HealthWatchSeconds
// (automatic rollback, source_config.auto_rollback), and tells
// Options.State (a controlplane.UnhealthyReporter) once
// Options.WatchFailures checks in a row have failed. It stops early when
// the route no longer serves the revision: a newer one is active, the
// deployment is torn down or asleep.
func (d *Deployer) watch(w *controlplane.Work, cs []*ctr) {
	if w.HealthWatchSeconds <= 0 {
		return
	}
	ur, ok := d.o.State.(controlplane.UnhealthyReporter)
	if !ok {
		d.log.Warn("deploydocker: automatic rollback asked, but Options.State takes no health reports: not watched",
			"deployment", w.Deployment.ID, "revision", w.Revision.ID)
		return
	}
	d.goBackground(func() {
		look := func(ctx context.Context) (string, bool) {
			if !d.proxy.serving(w.Deployment.ID, w.Revision.ID) {
				return "", false
			}
			for _, c := range cs {
				if err := d.healthCheck(ctx, c); err != nil {
					return fmt.Sprintf("container %s: health check GET %s: %v", c.name, d.o.HealthPath, err), d.proxy.serving(w.Deployment.ID, w.Revision.ID)
				}
			}
			return "", true
		}
		if err := controlplane.WatchHealth(d.bg, w, d.o.WatchInterval, d.o.WatchFailures, look, ur); err != nil {
			d.log.Warn("deploydocker: reporting an unhealthy revision", "deployment", w.Deployment.ID, "revision", w.Revision.ID, "err", err)
		}
	})
}
