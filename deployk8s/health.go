package deployk8s

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of the watch of a revision after it becomes active.
const (
	DefaultWatchInterval = 5 * time.Second
	DefaultWatchFailures = 3
)

// watchHealth looks at w's revision, just active in namespace ns, every
// Options.WatchInterval for w.HealthWatchSeconds (automatic rollback,
// source_config.auto_rollback), and tells Options.State (a
// controlplane.UnhealthyReporter) once Options.WatchFailures looks in a
// row found it failing: a container of its pods terminated with an error
// or cannot run (podFailure), or a pod not ready. It stops early when the
// Deployment runs another revision or is gone, and when the Deployer is
// closed.
func (d *Deployer) watchHealth(w *controlplane.Work, ns string) {
	if w.HealthWatchSeconds <= 0 {
		return
	}
	ur, ok := d.o.State.(controlplane.UnhealthyReporter)
	if !ok {
		d.log.Warn("deployk8s: automatic rollback asked, but Options.State takes no health reports: not watched",
			"deployment", w.Deployment.ID, "revision", w.Revision.ID)
		return
	}
	d.mu.Lock() // Close's Wait comes after stopBG: no Add after it returns
	if d.bg.Err() != nil {
		d.mu.Unlock()
		return
	}
	d.watches.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.watches.Done()
		look := func(ctx context.Context) (string, bool) {
			return d.revisionHealth(ctx, ns, w.Deployment.ID, w.Revision.ID)
		}
		if err := controlplane.WatchHealth(d.bg, w, d.o.WatchInterval, d.o.WatchFailures, look, ur); err != nil {
			d.log.Warn("deployk8s: reporting an unhealthy revision", "deployment", w.Deployment.ID, "revision", w.Revision.ID, "err", err)
		}
	}()
}

// revisionHealth looks at the pods of revision rev of deployment dep: msg
// says how one fails ("" when none does); live is false once the
// Deployment runs another revision or is gone (nothing to watch).
func (d *Deployer) revisionHealth(ctx context.Context, ns, dep, rev string) (msg string, live bool) {
	var r reader = liveReader{d}
	if c := d.cache.reader(ns); c != nil {
		r = c
	}
	dp, err := r.deployment(ctx, ns, apiName(dep))
	switch {
	case k8serrors.IsNotFound(err):
		return "", false
	case err != nil:
		return "", true // no answer: looked at again
	case dp.Spec.Template.Labels[LabelRevision] != rev:
		return "", false
	}
	for _, c := range []string{componentAPI, componentQueue} {
		if m := d.podFailure(ctx, r, ns, dep, rev, c); m != "" {
			return m, true
		}
	}
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep, LabelRevision: rev, LabelComponent: componentAPI})
	for _, p := range r.pods(ctx, ns, dep, sel) {
		if p.DeletionTimestamp == nil && !podReady(p) {
			return fmt.Sprintf("pod %s is not ready", p.Name), true
		}
	}
	return "", true
}

// podReady reports whether p's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
