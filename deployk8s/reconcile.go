package deployk8s

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/deployplane/deployplane/controlplane"
)

// Reconcile makes the cluster agree with the stored state after a
// restart (or a kill -9) of the control plane. For every deployment of
// this instance on the cluster (its owner ConfigMap, in any namespace) it
// asks Options.State:
//
//   - a deployment that no longer exists: its owner is deleted, and with
//     it, by garbage collection, every object it owns;
//   - a deployment being deleted: left to Teardown;
//   - otherwise the revision Secrets of revisions that are neither active
//     nor in flight are deleted; when the API server's Deployment runs a
//     revision that is neither (a failed one left by a crash), the active
//     revision's objects are applied again (restoreActive);
//   - and when no revision is in flight, the objects of the active
//     revision (from its record, active.go) that were changed or deleted
//     by hand are applied again: those whose fields this package manages
//     differ from the record's, or that are missing. The autoscaler's
//     replicas are not a change. One list per kind, of the whole
//     cluster, finds them: an unchanged deployment costs no request.
//
// Pull Secrets whose token nears its expiry get a new one
// (RefreshPullSecrets).
//
// In-flight revisions are left to the Deploy that resumes them, which
// applies the same objects again (server-side apply is idempotent): no
// duplicate is made. Call it before the control plane's Run, or use
// Start, which also repeats it.
func (d *Deployer) Reconcile(ctx context.Context) error {
	if d.o.State == nil {
		return errors.New("deployk8s: Reconcile needs Options.State")
	}
	live, err := d.listLive(ctx)
	if err != nil {
		return fmt.Errorf("deployk8s: cluster %s: listing objects: %w", d.o.Cluster, err)
	}
	return d.reconcile(ctx, ownersOf(live), live)
}

// ReconcileCached is Reconcile over the Deployer's caches of the cluster
// (see the package documentation), which it starts when they are not
// running: it asks the API server only for the kinds they do not hold
// (HTTPRoutes, and PodDisruptionBudgets and Ingresses where the grant
// lacks them). While the caches cannot be trusted (not yet synced, or a
// watch refused) it is Reconcile. A change made a moment before may not
// be seen yet: the next call sees it.
func (d *Deployer) ReconcileCached(ctx context.Context) error {
	if d.o.State == nil {
		return errors.New("deployk8s: Reconcile needs Options.State")
	}
	d.cache.start()
	live, ok, err := d.cache.snapshot(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("deployk8s: cluster %s: listing objects: %w", d.o.Cluster, err)
	case !ok:
		return d.Reconcile(ctx)
	}
	return d.reconcile(ctx, ownersOf(live), live)
}

// reconcile reconciles each deployment of owners over the cluster's
// objects live, and refreshes the pull Secrets among them.
func (d *Deployer) reconcile(ctx context.Context, owners []*corev1.ConfigMap, live liveObjects) error {
	var errs []error
	for _, o := range owners {
		errs = append(errs, d.reconcileDeployment(ctx, o, live))
	}
	errs = append(errs, d.refreshPullSecrets(ctx, ofComponent[corev1.Secret](live, "Secret", componentPull))) // pullsecret.go
	return errors.Join(errs...)
}

// ownersOf are the owner ConfigMaps among live's, by namespace and name.
func ownersOf(live liveObjects) []*corev1.ConfigMap {
	return ofComponent[corev1.ConfigMap](live, "ConfigMap", componentOwner)
}

// ofComponent are live's objects of a kind and component (LabelComponent),
// by namespace and name.
func ofComponent[T any, PT interface {
	*T
	metav1.Object
}](live liveObjects, kind, component string) []PT {
	var out []PT
	for _, key := range slices.Sorted(maps.Keys(live[kind])) {
		if o, ok := live[kind][key].(PT); ok && o.GetLabels()[LabelComponent] == component {
			out = append(out, o)
		}
	}
	return out
}

func (d *Deployer) reconcileDeployment(ctx context.Context, owner *corev1.ConfigMap, live liveObjects) error {
	tenant, dep, ns := owner.Annotations[AnnotationTenant], owner.Labels[LabelDeployment], owner.Namespace
	if tenant == "" || dep == "" {
		return nil
	}
	cur, err := d.o.State.GetDeployment(ctx, tenant, dep)
	switch {
	case isNotFound(err):
		d.log.Info("deployk8s: removing the objects of a deleted deployment", "cluster", d.o.Cluster, "deployment", dep)
		return d.deleteOwner(ctx, ns, dep)
	case err != nil:
		return err
	case cur.Status == controlplane.StatusAwaitingDelete:
		return nil
	}
	keep := func(rev string) (bool, error) {
		if cur.ActiveRevisionID != nil && *cur.ActiveRevisionID == rev {
			return true, nil
		}
		r, err := d.o.State.GetRevision(ctx, tenant, dep, rev)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return !controlplane.IsTerminal(r.Status), nil
	}
	var errs []error
	for _, s := range ofComponent[corev1.Secret](live, "Secret", componentSecrets) {
		if s.Namespace != ns || s.Labels[LabelDeployment] != dep {
			continue
		}
		ok, err := keep(s.Labels[LabelRevision])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			if err := d.cli.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !k8serrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if api := get[appsv1.Deployment](live, "Deployment", ns, apiName(dep)); api != nil {
		rev := api.Spec.Template.Labels[LabelRevision]
		if ok, err := keep(rev); err != nil || !ok {
			if err == nil {
				errs = append(errs, d.restoreActive(ctx, ns, tenant, dep, rev))
			}
			return errors.Join(append(errs, err)...)
		}
	}
	errs = append(errs, d.repairDeployment(ctx, ns, tenant, dep, live))
	return errors.Join(errs...)
}

// repairDeployment repairs the objects of the deployment's active
// revision when no revision of it is in flight.
func (d *Deployer) repairDeployment(ctx context.Context, ns, tenant, dep string, live liveObjects) error {
	rec := activeOf(get[corev1.Secret](live, "Secret", ns, activeName(dep)))
	if rec == nil {
		return nil
	}
	mu := d.lock(tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	cur, err := d.o.State.GetDeployment(ctx, tenant, dep)
	if err != nil {
		if isNotFound(err) {
			return nil
		}
		return err
	}
	if cur.Status == controlplane.StatusAwaitingDelete || cur.ActiveRevisionID == nil || *cur.ActiveRevisionID != rec.Revision {
		return nil
	}
	if cur.LatestRevisionID != nil && *cur.LatestRevisionID != rec.Revision {
		latest, err := d.o.State.GetRevision(ctx, tenant, dep, *cur.LatestRevisionID)
		if err != nil && !isNotFound(err) {
			return err
		}
		if err == nil && !controlplane.IsTerminal(latest.Status) {
			return nil // in flight: its Deploy applies its objects
		}
	}
	repaired, err := d.repair(ctx, ns, rec, live)
	if len(repaired) > 0 {
		d.log.Info("deployk8s: repaired objects of the active revision", "cluster", d.o.Cluster, "deployment", dep,
			"revision", rec.Revision, "objects", repaired)
	}
	if err != nil {
		return fmt.Errorf("deployk8s: cluster %s: repairing deployment %s: %w", d.o.Cluster, dep, err)
	}
	return nil
}

// Start reconciles at once, starts the Deployer's caches of the cluster
// (watch.go; Close stops them), and then reconciles every
// Options.ReconcileEvery until ctx ends, over the caches, logging
// failures. It returns the first Reconcile's error (and keeps going in
// the background either way).
func (d *Deployer) Start(ctx context.Context) error {
	err := d.Reconcile(ctx)
	d.cache.start()
	go func() {
		t := time.NewTicker(d.o.ReconcileEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := d.ReconcileCached(ctx); err != nil && ctx.Err() == nil {
					d.log.Warn("deployk8s: reconcile", "cluster", d.o.Cluster, "err", err)
				}
			}
		}
	}()
	return err
}

// Teardown removes every object of a deployment being deleted, in any
// namespace, claims included, and returns nil only once the cluster
// confirms that none is left. It implements controlplane.Deployer.
func (d *Deployer) Teardown(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
	mu := d.lock(tenant, dep.ID)
	mu.Lock()
	defer mu.Unlock()
	owners, err := d.listOwners(ctx, labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep.ID, LabelComponent: componentOwner})
	if err != nil {
		return fmt.Errorf("deployk8s: cluster %s: %w", d.o.Cluster, err)
	}
	for _, o := range owners {
		if err := d.deleteOwner(ctx, o.Namespace, dep.ID); err != nil {
			return err
		}
	}
	// Wait for garbage collection: every object labelled for the
	// deployment gone, claims included.
	t := time.NewTicker(d.o.PollInterval)
	defer t.Stop()
	for {
		left, err := d.remaining(ctx, dep.ID)
		if err != nil {
			return err
		}
		if left == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployk8s: cluster %s still has %s of deployment %s: %w", d.o.Cluster, left, dep.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// listOwners lists the owner ConfigMaps that match set in the namespaces
// the Deployer works in.
func (d *Deployer) listOwners(ctx context.Context, set labels.Set) ([]corev1.ConfigMap, error) {
	lo := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(set).String()}
	var out []corev1.ConfigMap
	for _, ns := range d.scopes() {
		l, err := d.cli.CoreV1().ConfigMaps(ns).List(ctx, lo)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
	}
	return out, nil
}

// deleteOwner deletes a deployment's owner ConfigMap in the foreground:
// the garbage collector deletes what it owns first. Its HTTPRoute is
// deleted by name too (a garbage collector that has not yet seen the
// Gateway API's CRDs would leave it a while), and so is the Secret
// cert-manager made for its Ingress, which nothing owns.
func (d *Deployer) deleteOwner(ctx context.Context, ns, dep string) error {
	fg := metav1.DeletePropagationForeground
	err := d.cli.CoreV1().ConfigMaps(ns).Delete(ctx, ownerName(dep), metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !k8serrors.IsNotFound(err) {
		return fmt.Errorf("deployk8s: cluster %s: deleting the objects of deployment %s: %w", d.o.Cluster, dep, err)
	}
	err = errors.Join(d.deleteHTTPRoute(ctx, ns, exposeName(dep)),
		absentOK(d.cli.CoreV1().Secrets(ns).Delete(ctx, tlsSecretName(dep), metav1.DeleteOptions{})))
	if err != nil {
		return fmt.Errorf("deployk8s: cluster %s: deleting the objects of deployment %s: %w", d.o.Cluster, dep, err)
	}
	return nil
}

// remaining names an object of the deployment that still exists, or "".
func (d *Deployer) remaining(ctx context.Context, dep string) (string, error) {
	for _, ns := range d.scopes() {
		if left, err := d.remainingIn(ctx, ns, dep); err != nil || left != "" {
			return left, err
		}
	}
	return "", nil
}

// remainingIn names an object of the deployment that still exists in
// namespace all (every namespace when ""), or "".
func (d *Deployer) remainingIn(ctx context.Context, all, dep string) (string, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep}).String()
	lo := metav1.ListOptions{LabelSelector: sel, Limit: 1}
	checks := []struct {
		kind string
		list func() (int, error)
	}{
		{"ConfigMap", func() (int, error) { l, err := d.cli.CoreV1().ConfigMaps(all).List(ctx, lo); return lenOf(l, err) }},
		{"Deployment", func() (int, error) { l, err := d.cli.AppsV1().Deployments(all).List(ctx, lo); return lenOf(l, err) }},
		{"ReplicaSet", func() (int, error) { l, err := d.cli.AppsV1().ReplicaSets(all).List(ctx, lo); return lenOf(l, err) }},
		{"StatefulSet", func() (int, error) { l, err := d.cli.AppsV1().StatefulSets(all).List(ctx, lo); return lenOf(l, err) }},
		{"Pod", func() (int, error) { l, err := d.cli.CoreV1().Pods(all).List(ctx, lo); return lenOf(l, err) }},
		{"PersistentVolumeClaim", func() (int, error) {
			l, err := d.cli.CoreV1().PersistentVolumeClaims(all).List(ctx, lo)
			return lenOf(l, err)
		}},
		{"Secret", func() (int, error) { l, err := d.cli.CoreV1().Secrets(all).List(ctx, lo); return lenOf(l, err) }},
		{"Service", func() (int, error) { l, err := d.cli.CoreV1().Services(all).List(ctx, lo); return lenOf(l, err) }},
		{"HorizontalPodAutoscaler", func() (int, error) {
			l, err := d.cli.AutoscalingV2().HorizontalPodAutoscalers(all).List(ctx, lo)
			return lenOf(l, err)
		}},
		{"PodDisruptionBudget", func() (int, error) {
			l, err := d.cli.PolicyV1().PodDisruptionBudgets(all).List(ctx, lo)
			return lenOf(l, absentOK(err))
		}},
		{"Ingress", func() (int, error) {
			l, err := d.cli.NetworkingV1().Ingresses(all).List(ctx, lo)
			return lenOf(l, absentOK(err))
		}},
		{"HTTPRoute", func() (int, error) {
			l, err := d.listHTTPRoutes(ctx, all, sel, 1)
			return len(l), err
		}},
	}
	for _, c := range checks {
		n, err := c.list()
		if err != nil {
			return "", err
		}
		if n > 0 {
			return c.kind + "s", nil
		}
	}
	return "", nil
}

// lenOf is the number of items of a list answer.
func lenOf(l runtime.Object, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	if l == nil || reflect.ValueOf(l).IsNil() { // an error absentOK took
		return 0, nil
	}
	return meta.LenList(l), nil
}
