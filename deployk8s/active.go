package deployk8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	asv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	"github.com/deployplane/deployplane/controlplane"
)

// The active revision's record: Deploy writes, before it reports a
// revision DEPLOYED, what its objects are built from into the Secret
// "dp-<id>-active" (component "active", owned like the others). A failed
// revision puts every object of the active one back from it, and
// Reconcile repairs from it the objects changed or deleted by hand. It is
// a Secret because it holds the revision's secrets, which its Secret
// "dp-<id>-<revision id>" (also put back) gives the containers.

// componentActive is the record's LabelComponent.
const componentActive = "active"

// activeKey is the record's key in the Secret's data.
const activeKey = "revision.json"

func activeName(dep string) string { return "dp-" + dep + "-active" }

// activeRecord is what a rolled-out revision's objects are built from.
type activeRecord struct {
	Tenant     string `json:"tenant"`
	Deployment string `json:"deployment"`
	// Name is the deployment's, for its address (Options.Expose).
	Name         string                     `json:"name,omitempty"`
	Revision     string                     `json:"revision"`
	Image        string                     `json:"image"`
	ResourceSpec *controlplane.ResourceSpec `json:"resource_spec,omitempty"`
	Secrets      []controlplane.Secret      `json:"secrets"`
	// SecretReferences are the revision's, read from Secrets in place.
	SecretReferences []controlplane.SecretReference `json:"secret_references,omitempty"`
	// PullSecret: the pods pull through the pull Secret (pullsecret.go).
	PullSecret bool `json:"pull_secret,omitempty"`
}

// recordActive writes o's revision as the deployment's active one.
func (d *Deployer) recordActive(ctx context.Context, o *objects) error {
	rec := activeRecord{Tenant: o.w.Tenant, Deployment: o.w.Deployment.ID, Name: o.w.Deployment.Name, Revision: o.w.Revision.ID, Image: o.image,
		ResourceSpec: o.w.ResourceSpec, Secrets: o.w.Secrets, SecretReferences: o.w.SecretReferences, PullSecret: o.pullSecret != ""}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	s := withMeta(o, corev1ac.Secret(activeName(o.w.Deployment.ID), o.ns), componentActive, true).
		WithType(corev1.SecretTypeOpaque).WithData(map[string][]byte{activeKey: b})
	_, err = d.cli.CoreV1().Secrets(o.ns).Apply(ctx, s, d.applyOptions())
	return err
}

// activeOf reads the record of a Secret; nil when it holds none.
func activeOf(s *corev1.Secret) *activeRecord {
	if s == nil {
		return nil
	}
	var rec activeRecord
	if err := json.Unmarshal(s.Data[activeKey], &rec); err != nil || rec.Revision == "" {
		return nil
	}
	return &rec
}

// objectsOf builds the objects of a recorded revision in ns.
func (d *Deployer) objectsOf(ns string, rec *activeRecord) *objects {
	w := &controlplane.Work{Tenant: rec.Tenant, Deployment: controlplane.Deployment{ID: rec.Deployment, Name: rec.Name},
		Revision: controlplane.Revision{ID: rec.Revision}, Secrets: rec.Secrets, SecretReferences: rec.SecretReferences,
		ResourceSpec: rec.ResourceSpec}
	o := d.newObjects(ns, w, rec.Image)
	o.exposeUnknown = rec.Name == "" && d.expose != nil && (d.expose.host.uses("name") || d.expose.path.uses("name"))
	return o
}

// newObjects starts the objects of a revision.
func (d *Deployer) newObjects(ns string, w *controlplane.Work, image string) *objects {
	spec := controlplane.ResourceSpec{}
	if w.ResourceSpec != nil {
		spec = *w.ResourceSpec
	}
	return &objects{d: d, w: w, ns: ns, spec: spec.WithDefaults(), image: image, dbEnabled: !d.o.NoServices}
}

// item is one object of a revision: its kind, name and apply
// configuration (nil: it must not exist), and how to apply (or delete)
// it.
type item struct {
	kind, name string
	ac         any
	// note follows the object's name in the message of its refusal.
	note string
	// autoscaled: the replicas are the autoscaler's too, not a drift.
	autoscaled bool
	apply      func(ctx context.Context) error
}

// items are the objects of o's revision after its owner and pull Secret,
// in the order they are applied: the Ingress or HTTPRoute (first, so that
// a host the API server refuses fails the revision before anything else
// changed), Secrets, the database and Redis, the API server's and queue's
// Deployments and autoscalers, the API server's PodDisruptionBudget, the
// Service.
func (o *objects) items() ([]item, error) {
	d, ns := o.d, o.ns
	opts := d.applyOptions()
	secret := func(ac *corev1ac.SecretApplyConfiguration) item {
		return item{kind: "Secret", name: *ac.Name, ac: ac, apply: func(ctx context.Context) error {
			_, err := d.cli.CoreV1().Secrets(ns).Apply(ctx, ac, opts)
			return err
		}}
	}
	service := func(ac *corev1ac.ServiceApplyConfiguration) item {
		return item{kind: "Service", name: *ac.Name, ac: ac, apply: func(ctx context.Context) error {
			_, err := d.cli.CoreV1().Services(ns).Apply(ctx, ac, opts)
			return err
		}}
	}
	deployment := func(ac *appsv1ac.DeploymentApplyConfiguration, autoscaled bool) item {
		return item{kind: "Deployment", name: *ac.Name, ac: ac, autoscaled: autoscaled, apply: func(ctx context.Context) error {
			dp, err := d.cli.AppsV1().Deployments(ns).Apply(ctx, ac, opts)
			if err == nil {
				o.applied(dp.Name, dp.Generation)
			}
			return err
		}}
	}
	out := append(o.exposeItems(), secret(o.secret()))
	if o.dbEnabled {
		st, sv := o.database()
		rd, rsv := o.redis()
		out = append(out, secret(o.servicesSecret()),
			item{kind: "StatefulSet", name: *st.Name, ac: st, apply: func(ctx context.Context) error {
				s, err := d.cli.AppsV1().StatefulSets(ns).Apply(ctx, st, opts)
				if err == nil {
					o.applied(s.Name, s.Generation)
				}
				return err
			}},
			service(sv), deployment(rd, false), service(rsv))
	}
	for _, c := range []string{componentAPI, componentQueue} {
		dp, err := o.deployment(c)
		if err != nil {
			return nil, err
		}
		out = append(out, deployment(dp, o.autoscaled(c)))
		name := *dp.Name
		if o.hpaScaled(c) {
			h := o.hpa(c)
			out = append(out, item{kind: "HorizontalPodAutoscaler", name: name, ac: h, apply: func(ctx context.Context) error {
				_, err := d.cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Apply(ctx, h, opts)
				return err
			}})
		} else {
			out = append(out, item{kind: "HorizontalPodAutoscaler", name: name, apply: func(ctx context.Context) error {
				err := d.cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, name, metav1.DeleteOptions{})
				if k8serrors.IsNotFound(err) {
					return nil
				}
				return err
			}})
		}
		if c == componentAPI {
			out = append(out, o.pdbItem())
		}
	}
	return append(out, service(o.service())), nil
}

// pdbItem is the API server's PodDisruptionBudget while min_scale is 2 or
// more, else its deletion.
func (o *objects) pdbItem() item {
	d, ns, name, opts := o.d, o.ns, apiName(o.w.Deployment.ID), o.d.applyOptions()
	if !o.disrupted() {
		return item{kind: "PodDisruptionBudget", name: name, apply: func(ctx context.Context) error {
			return absentOK(d.cli.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, name, metav1.DeleteOptions{}))
		}}
	}
	p := o.pdb()
	return item{kind: "PodDisruptionBudget", name: name, ac: p, apply: func(ctx context.Context) error {
		_, err := d.cli.PolicyV1().PodDisruptionBudgets(ns).Apply(ctx, p, opts)
		return err
	}}
}

// exposeItems are the deployment's Ingress and HTTPRoute: the one
// Options.Expose asks for applied, the other deleted (both without
// Expose). An Ingress deleted takes its certificate's Secret with it.
func (o *objects) exposeItems() []item {
	if o.exposeUnknown {
		return nil
	}
	d, ns, dep, opts := o.d, o.ns, o.w.Deployment.ID, o.d.applyOptions()
	name := exposeName(dep)
	ingress := item{kind: "Ingress", name: name, apply: func(ctx context.Context) error {
		err := d.cli.NetworkingV1().Ingresses(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil {
			return absentOK(err)
		}
		return absentOK(d.cli.CoreV1().Secrets(ns).Delete(ctx, tlsSecretName(dep), metav1.DeleteOptions{}))
	}}
	route := item{kind: "HTTPRoute", name: name, apply: func(ctx context.Context) error {
		return d.deleteHTTPRoute(ctx, ns, name)
	}}
	switch {
	case d.expose == nil:
	case d.expose.Kind == ExposeIngress:
		in := o.ingress()
		ingress.ac, ingress.note = in, o.exposeNote()
		ingress.apply = func(ctx context.Context) error {
			_, err := d.cli.NetworkingV1().Ingresses(ns).Apply(ctx, in, opts)
			return err
		}
	default:
		r := o.httpRoute()
		route.ac, route.note = r, o.exposeNote()
		route.apply = func(ctx context.Context) error { return d.applyHTTPRoute(ctx, ns, r) }
	}
	return []item{ingress, route}
}

// current reads, with one Get each, the objects a revision's objects
// keep something of (objects.observe).
func (d *Deployer) current(ctx context.Context, o *objects) error {
	dep := o.w.Deployment.ID
	api, err := getOrNil(d.cli.AppsV1().Deployments(o.ns).Get(ctx, apiName(dep), metav1.GetOptions{}))
	if err != nil {
		return err
	}
	queue, err := getOrNil(d.cli.AppsV1().Deployments(o.ns).Get(ctx, queueName(dep), metav1.GetOptions{}))
	if err != nil {
		return err
	}
	var db *appsv1.StatefulSet
	var services *corev1.Secret
	if o.dbEnabled {
		if db, err = getOrNil(d.cli.AppsV1().StatefulSets(o.ns).Get(ctx, dbName(dep), metav1.GetOptions{})); err != nil {
			return err
		}
		if services, err = getOrNil(d.cli.CoreV1().Secrets(o.ns).Get(ctx, servicesName(dep), metav1.GetOptions{})); err != nil {
			return err
		}
	}
	o.observe(api, queue, db, services)
	return nil
}

// getOrNil turns a Get's not found into nil.
func getOrNil[T any](v *T, err error) (*T, error) {
	if k8serrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

// applyOwner applies o's owner ConfigMap and keeps its UID for the
// others' owner references.
func (d *Deployer) applyOwner(ctx context.Context, o *objects) error {
	owner, err := d.cli.CoreV1().ConfigMaps(o.ns).Apply(ctx, o.ownerConfigMap(), d.applyOptions())
	if err != nil {
		return err
	}
	o.owner = owner.UID
	return nil
}

// restoreActive puts the deployment's active revision back after revision
// failed (or was left applied by a crash): every object, from the active
// revision's record. A deployment whose record is missing or of another
// revision gets the active revision's pod templates back in its API
// server's and queue's Deployments (the newest ReplicaSet of that
// revision, as kubectl rollout undo does). Without an active revision it
// does nothing, and nothing for a deployment being deleted either (its
// Teardown removes every object).
func (d *Deployer) restoreActive(ctx context.Context, ns, tenant, dep, failed string) error {
	if d.o.State == nil {
		return nil
	}
	cur, err := d.o.State.GetDeployment(ctx, tenant, dep)
	if err != nil || cur.ActiveRevisionID == nil || *cur.ActiveRevisionID == failed || cur.Status == controlplane.StatusAwaitingDelete {
		return nil
	}
	active := *cur.ActiveRevisionID
	mu := d.lock(tenant, dep)
	mu.Lock()
	defer mu.Unlock()
	rs, err := getOrNil(d.cli.CoreV1().Secrets(ns).Get(ctx, activeName(dep), metav1.GetOptions{}))
	if err != nil {
		return err
	}
	if rec := activeOf(rs); rec != nil && rec.Revision == active {
		return d.reapply(ctx, d.objectsOf(ns, rec))
	}
	var errs []error
	for _, c := range []string{componentAPI, componentQueue} {
		errs = append(errs, d.restoreTemplate(ctx, ns, dep, active, c))
	}
	return errors.Join(errs...)
}

// reapply applies every object of a recorded revision again.
func (d *Deployer) reapply(ctx context.Context, o *objects) error {
	if err := d.applyOwner(ctx, o); err != nil {
		return err
	}
	if err := d.current(ctx, o); err != nil {
		return err
	}
	var err error
	if o.pullSecret, err = d.applyPullSecret(ctx, o); err != nil {
		return err
	}
	items, err := o.items()
	if err != nil {
		return err
	}
	var errs []error
	for _, it := range items {
		if err := it.apply(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", it.kind, it.name, err))
		}
	}
	return errors.Join(errs...)
}

// liveObjects are this instance's objects in the cluster, by kind and
// namespace/name, listed once per Reconcile.
type liveObjects map[string]map[string]any

// listLive lists this instance's objects of the kinds Reconcile reads
// (kinds) in the namespaces the Deployer works in.
func (d *Deployer) listLive(ctx context.Context) (liveObjects, error) {
	live := liveObjects{}
	lo := metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance}).String()}
	for _, ns := range d.scopes() {
		for i := range kinds {
			if k := &kinds[i]; k.reconciled() {
				if err := d.listKind(ctx, k, ns, lo, live); err != nil {
					return nil, err
				}
			}
		}
	}
	return live, nil
}

// add adds an object of kind.
func (live liveObjects) add(kind string, m metav1.Object, obj any) {
	if live[kind] == nil {
		live[kind] = map[string]any{}
	}
	live[kind][m.GetNamespace()+"/"+m.GetName()] = obj
}

// get returns a listed object, or nil.
func get[T any](live liveObjects, kind, ns, name string) *T {
	v, _ := live[kind][ns+"/"+name].(*T)
	return v
}

// repair applies again the objects of the deployment's active revision
// (its record, rec) that differ from what the cluster has in the fields
// this package manages, or that are missing, and deletes an autoscaler
// the revision does not have. It returns what it repaired.
func (d *Deployer) repair(ctx context.Context, ns string, rec *activeRecord, live liveObjects) ([]string, error) {
	o := d.objectsOf(ns, rec)
	dep := rec.Deployment
	owner := get[corev1.ConfigMap](live, "ConfigMap", ns, ownerName(dep))
	if owner == nil {
		return nil, nil
	}
	o.owner = owner.UID
	o.observe(get[appsv1.Deployment](live, "Deployment", ns, apiName(dep)), get[appsv1.Deployment](live, "Deployment", ns, queueName(dep)),
		get[appsv1.StatefulSet](live, "StatefulSet", ns, dbName(dep)), get[corev1.Secret](live, "Secret", ns, servicesName(dep)))
	var repaired []string
	// The pull Secret: its credential is refreshed by RefreshPullSecrets;
	// here it is only put back when it is gone.
	if rec.PullSecret {
		o.pullSecret = pullSecretName(dep)
	}
	if o.pullSecret != "" && get[corev1.Secret](live, "Secret", ns, o.pullSecret) == nil {
		name, err := d.applyPullSecret(ctx, o)
		if err != nil {
			return repaired, err
		}
		o.pullSecret = name
		repaired = append(repaired, "Secret "+pullSecretName(dep))
	}
	items, err := o.items()
	if err != nil {
		return repaired, err
	}
	var errs []error
	for _, it := range items {
		ok, err := d.matches(live, ns, it)
		if err == nil && ok {
			continue
		}
		if err := it.apply(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", it.kind, it.name, err))
			continue
		}
		repaired = append(repaired, it.kind+" "+it.name)
	}
	return repaired, errors.Join(errs...)
}

// matches: the cluster has it as its apply configuration says, in the
// fields this package manages (those a new apply would change).
func (d *Deployer) matches(live liveObjects, ns string, it item) (bool, error) {
	if it.ac == nil { // it must not exist
		_, ok := live[it.kind][ns+"/"+it.name]
		return !ok, nil
	}
	var cur any
	var err error
	fm := d.o.FieldManager
	switch it.kind {
	case "Secret":
		if v := get[corev1.Secret](live, it.kind, ns, it.name); v != nil {
			cur, err = corev1ac.ExtractSecret(v, fm)
		}
	case "Service":
		if v := get[corev1.Service](live, it.kind, ns, it.name); v != nil {
			cur, err = corev1ac.ExtractService(v, fm)
		}
	case "Deployment":
		if v := get[appsv1.Deployment](live, it.kind, ns, it.name); v != nil {
			cur, err = appsv1ac.ExtractDeployment(v, fm)
		}
	case "StatefulSet":
		if v := get[appsv1.StatefulSet](live, it.kind, ns, it.name); v != nil {
			cur, err = appsv1ac.ExtractStatefulSet(v, fm)
		}
	case "HorizontalPodAutoscaler":
		if v := get[autoscalingv2.HorizontalPodAutoscaler](live, it.kind, ns, it.name); v != nil {
			cur, err = asv2ac.ExtractHorizontalPodAutoscaler(v, fm)
		}
	case "PodDisruptionBudget":
		if v := get[policyv1.PodDisruptionBudget](live, it.kind, ns, it.name); v != nil {
			cur, err = policyv1ac.ExtractPodDisruptionBudget(v, fm)
		}
	case "Ingress":
		if v := get[networkingv1.Ingress](live, it.kind, ns, it.name); v != nil {
			cur, err = networkingv1ac.ExtractIngress(v, fm)
		}
	case "HTTPRoute":
		// The whole object: it holds more than was applied (the
		// defaults), which within allows.
		if v := get[unstructured.Unstructured](live, it.kind, ns, it.name); v != nil {
			cur = v.Object
		}
	default:
		return false, fmt.Errorf("deployk8s: no comparison for %s", it.kind)
	}
	if err != nil || cur == nil || reflect.ValueOf(cur).IsNil() {
		return false, err
	}
	want, err := generic(it.ac)
	if err != nil {
		return false, err
	}
	have, err := generic(cur)
	if err != nil {
		return false, err
	}
	if it.autoscaled {
		for _, m := range []any{want, have} {
			if spec, ok := m.(map[string]any)["spec"].(map[string]any); ok {
				delete(spec, "replicas")
			}
		}
	}
	return within(want, have), nil
}

// generic is v as JSON values (maps, slices, strings, numbers, bools).
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// within: every field of want is in have with the same value; lists
// have the same length. have may hold more: the keys of list items (a
// port's protocol) that the API server adds.
func within(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if !within(w[k], h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return len(w) == 0 && have == nil
		}
		for i := range w {
			if !within(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}

// restoreTemplate puts the active revision's pod template back in the
// component's Deployment: the template of the revision's newest
// ReplicaSet.
func (d *Deployer) restoreTemplate(ctx context.Context, ns, dep, active, component string) error {
	name := apiName(dep)
	if component == componentQueue {
		name = queueName(dep)
	}
	cur, err := d.cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || cur.Spec.Template.Labels[LabelRevision] == active {
		return nil
	}
	sel := labels.SelectorFromSet(labels.Set{LabelInstance: d.o.Instance, LabelDeployment: dep, LabelRevision: active, LabelComponent: component})
	rss, err := d.cli.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil || len(rss.Items) == 0 {
		return err
	}
	rs := slices.MaxFunc(rss.Items, func(a, b appsv1.ReplicaSet) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	tmpl := rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	t, err := convert[corev1ac.PodTemplateSpecApplyConfiguration](tmpl)
	if err != nil {
		return err
	}
	ac, err := appsv1ac.ExtractDeployment(cur, d.o.FieldManager)
	if err != nil {
		return err
	}
	if ac.Spec == nil {
		ac.WithSpec(appsv1ac.DeploymentSpec())
	}
	ac.Spec.Template = t
	ac.WithLabels(map[string]string{LabelRevision: active})
	_, err = d.cli.AppsV1().Deployments(ns).Apply(ctx, ac, d.applyOptions())
	return err
}
