package deployk8s

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The Deployer's caches of the cluster: a shared informer per kind it
// reads again and again (kinds, those with a watch), per namespace scope
// (every namespace at once, or each of Options.Namespaces), listing and
// watching only this instance's objects (LabelInstance). They start with
// Start or the first rollout Deploy waits for, and stop with Close.
// Rollouts wait on them: a change of a deployment's Deployments,
// StatefulSet or Pods wakes the Deploy waiting for that deployment (no
// timer per deployment), which reads them from the cache. Start's
// reconciliations after the first read them too, so that a cluster whose
// deployments do not change is asked for nothing but the watches' renewals
// and the kinds that are not watched (HTTPRoutes, and PodDisruptionBudgets
// and Ingresses where the grant lacks them).
//
// Where the caches cannot be trusted, the cluster is read directly as it
// was before them: until they have synced, while a watch is refused
// (Forbidden: a grant without the watch verb), after Close. While the API
// server does not answer the watches, the rollouts waiting on them say
// so in their deploy logs, as a direct read would.

// kindOps is how one kind of this instance's objects is listed, and
// watched.
type kindOps struct {
	kind string
	// example is an object of the kind, for the informer.
	example runtime.Object
	// optional: a grant may lack the kind (Forbidden, or not served: 404),
	// which reads as none of it (absentOK).
	optional bool
	// wakes: a change of an object of the kind wakes the rollouts of its
	// deployment.
	wakes bool
	list  func(d *Deployer, ctx context.Context, ns string, lo metav1.ListOptions) (runtime.Object, error)
	// watch is nil for the kinds that are listed at each reconciliation
	// instead (HTTPRoutes, which the typed client cannot watch).
	watch func(d *Deployer, ctx context.Context, ns string, lo metav1.ListOptions) (watch.Interface, error)
}

// typedClient is what a typed client of one kind in a namespace offers
// the caches: its List (of list type L) and Watch.
type typedClient[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// typed is the kindOps of a kind that client gives the typed client of,
// in a namespace.
func typed[L runtime.Object](kind string, example runtime.Object, client func(d *Deployer, ns string) typedClient[L]) kindOps {
	return kindOps{kind: kind, example: example,
		list: func(d *Deployer, ctx context.Context, ns string, lo metav1.ListOptions) (runtime.Object, error) {
			return client(d, ns).List(ctx, lo)
		},
		watch: func(d *Deployer, ctx context.Context, ns string, lo metav1.ListOptions) (watch.Interface, error) {
			return client(d, ns).Watch(ctx, lo)
		}}
}

// withFlags is k with its optional and wakes flags set.
func (k kindOps) withFlags(optional, wakes bool) kindOps {
	k.optional, k.wakes = optional, wakes
	return k
}

// kinds are the kinds listLive lists and the caches watch, in that order.
var kinds = []kindOps{
	typed("ConfigMap", &corev1.ConfigMap{}, func(d *Deployer, ns string) typedClient[*corev1.ConfigMapList] {
		return d.cli.CoreV1().ConfigMaps(ns)
	}),
	typed("Secret", &corev1.Secret{}, func(d *Deployer, ns string) typedClient[*corev1.SecretList] {
		return d.cli.CoreV1().Secrets(ns)
	}),
	typed("Service", &corev1.Service{}, func(d *Deployer, ns string) typedClient[*corev1.ServiceList] {
		return d.cli.CoreV1().Services(ns)
	}),
	typed("Deployment", &appsv1.Deployment{}, func(d *Deployer, ns string) typedClient[*appsv1.DeploymentList] {
		return d.cli.AppsV1().Deployments(ns)
	}).withFlags(false, true),
	typed("StatefulSet", &appsv1.StatefulSet{}, func(d *Deployer, ns string) typedClient[*appsv1.StatefulSetList] {
		return d.cli.AppsV1().StatefulSets(ns)
	}).withFlags(false, true),
	typed("HorizontalPodAutoscaler", &autoscalingv2.HorizontalPodAutoscaler{}, func(d *Deployer, ns string) typedClient[*autoscalingv2.HorizontalPodAutoscalerList] {
		return d.cli.AutoscalingV2().HorizontalPodAutoscalers(ns)
	}),
	typed("PodDisruptionBudget", &policyv1.PodDisruptionBudget{}, func(d *Deployer, ns string) typedClient[*policyv1.PodDisruptionBudgetList] {
		return d.cli.PolicyV1().PodDisruptionBudgets(ns)
	}).withFlags(true, false),
	typed("Ingress", &networkingv1.Ingress{}, func(d *Deployer, ns string) typedClient[*networkingv1.IngressList] {
		return d.cli.NetworkingV1().Ingresses(ns)
	}).withFlags(true, false),
	{kind: "HTTPRoute", optional: true,
		list: func(d *Deployer, ctx context.Context, ns string, lo metav1.ListOptions) (runtime.Object, error) {
			items, err := d.listHTTPRoutes(ctx, ns, lo.LabelSelector, lo.Limit)
			if err != nil {
				return nil, err
			}
			return &unstructured.UnstructuredList{Items: items}, nil
		}},
	// Read by rollouts only; not among Reconcile's objects.
	typed("Pod", &corev1.Pod{}, func(d *Deployer, ns string) typedClient[*corev1.PodList] {
		return d.cli.CoreV1().Pods(ns)
	}).withFlags(false, true),
}

// reconciled: Reconcile reads objects of the kind (liveObjects).
func (k *kindOps) reconciled() bool { return k.kind != "Pod" }

// caches are the Deployer's informers (see above).
type caches struct {
	d *Deployer

	mu      sync.Mutex
	state   int // cachesIdle, cachesRunning or cachesClosed
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	scopes  map[string]*scopeCache            // by namespace; "" is every namespace
	waiters map[string]map[chan struct{}]bool // by namespace/deployment
	// down is when the API server stopped answering the watches (zero:
	// it answers), downErr why.
	down    time.Time
	downErr error
}

// The states of caches.
const (
	cachesIdle = iota
	cachesRunning
	cachesClosed
)

// scopeCache is the informers of one namespace scope.
type scopeCache struct {
	ns    string
	kinds map[string]*cached
	// probed: the optional kinds were probed and their informers started
	// (or left out).
	probed atomic.Bool
}

// cached is the informer of one kind in one scope.
type cached struct {
	ops *kindOps
	inf cache.SharedIndexInformer
	// absent: an optional kind the grant lacks (or the cluster does not
	// serve): not watched, listed at each reconciliation.
	absent bool
	// refused: the API server refused to list or watch it (Forbidden):
	// the cache may be stale.
	refused atomic.Bool
	warned  atomic.Bool
}

// indexDeployment indexes objects by namespace/deployment (LabelDeployment).
const indexDeployment = "deployment"

func newCaches(d *Deployer) *caches {
	return &caches{d: d, waiters: map[string]map[chan struct{}]bool{}}
}

// start starts the informers, once: those of the optional kinds after a
// list shows the grant has them. It does not wait for them to sync.
func (c *caches) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != cachesIdle {
		return
	}
	c.state = cachesRunning
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.scopes = map[string]*scopeCache{}
	for _, ns := range c.d.scopes() {
		s := &scopeCache{ns: ns, kinds: map[string]*cached{}}
		c.scopes[ns] = s
		for i := range kinds {
			if k := &kinds[i]; k.watch != nil {
				s.kinds[k.kind] = &cached{ops: k}
			}
		}
		c.wg.Go(func() { c.run(ctx, s) })
	}
}

// run starts a scope's informers, the optional kinds' once a list of
// each has told whether the grant has it, and returns when ctx ends.
func (c *caches) run(ctx context.Context, s *scopeCache) {
	var wg sync.WaitGroup
	defer wg.Wait()
	launch := func(k *cached) {
		k.inf = c.informer(s.ns, k)
		wg.Go(func() { k.inf.RunWithContext(ctx) })
	}
	for _, k := range s.kinds {
		if !k.ops.optional {
			launch(k)
		}
	}
	wait := retryFirst
	for _, k := range s.kinds {
		if !k.ops.optional {
			continue
		}
		for {
			_, err := k.ops.list(c.d, ctx, s.ns, metav1.ListOptions{LabelSelector: c.selector(), Limit: 1})
			if err == nil {
				launch(k)
				break
			}
			if absentOK(err) == nil {
				k.absent = true
				break
			}
			if !c.note(k, err, false) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, retryMax)
		}
	}
	s.probed.Store(true)
	// The rollouts reading the API server meanwhile read the caches
	// from now on.
	var synced []cache.InformerSynced
	for _, k := range s.kinds {
		if k.inf != nil {
			synced = append(synced, k.inf.HasSynced)
		}
	}
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		c.wakeAll()
	}
	<-ctx.Done()
}

// selector selects this instance's objects.
func (c *caches) selector() string {
	return labels.SelectorFromSet(labels.Set{LabelInstance: c.d.o.Instance}).String()
}

// informer is the informer of a kind in namespace ns, its calls noted.
func (c *caches) informer(ns string, k *cached) cache.SharedIndexInformer {
	sel := c.selector()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			lo.LabelSelector = sel
			obj, err := k.ops.list(c.d, ctx, ns, lo)
			c.note(k, err, false)
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.LabelSelector = sel
			w, err := k.ops.watch(c.d, ctx, ns, lo)
			c.note(k, err, true)
			return w, err
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, k.ops.example, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, indexDeployment: byDeployment}})
	// The calls' errors are noted (note); the reflector's own log would
	// repeat them on the standard error.
	_ = inf.SetWatchErrorHandlerWithContext(func(context.Context, *cache.Reflector, error) {})
	if k.ops.wakes {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.changed(o) },
			UpdateFunc: func(_, o any) { c.changed(o) },
			DeleteFunc: func(o any) { c.changed(o) },
		})
	}
	return inf
}

// byDeployment is the indexDeployment index function.
func byDeployment(o any) ([]string, error) {
	m, err := meta.Accessor(o)
	if err != nil {
		return nil, nil
	}
	if dep := m.GetLabels()[LabelDeployment]; dep != "" {
		return []string{m.GetNamespace() + "/" + dep}, nil
	}
	return nil, nil
}

// note follows the answers to the informers' calls: an answer means the
// API server answers (and, for a watch, that the kind may be watched);
// a transient error that it does not; a refusal that the kind's cache
// cannot be trusted. It returns false when err is the informers' end.
func (c *caches) note(k *cached, err error, watched bool) bool {
	switch {
	case err == nil:
		if watched {
			k.refused.Store(false)
		}
		c.setDown(nil)
	case errors.Is(err, context.Canceled):
		return false
	case isTransient(err):
		c.setDown(err)
	default:
		if !k.refused.Swap(true) {
			c.wakeAll()
		}
		if !k.warned.Swap(true) {
			c.d.log.Warn("deployk8s: the cluster refuses a watch the deployer's cache needs; it reads the cluster directly instead "+
				"(grant list and watch on the kind)", "cluster", c.d.o.Cluster, "kind", k.ops.kind, "err", err)
		}
	}
	return true
}

// setDown records whether the API server answers (err nil) or not, and
// wakes the rollouts when that changes.
func (c *caches) setDown(err error) {
	c.mu.Lock()
	changed := (err == nil) != c.down.IsZero()
	switch {
	case err == nil:
		c.down, c.downErr = time.Time{}, nil
	case c.down.IsZero():
		c.down, c.downErr = time.Now(), err
	}
	c.mu.Unlock()
	if changed {
		c.wakeAll()
	}
}

// unanswered is since when the API server has not answered the watches
// (zero: it answers), and the error.
func (c *caches) unanswered() (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down, c.downErr
}

// changed wakes the rollouts of an object's deployment.
func (c *caches) changed(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return
	}
	dep := m.GetLabels()[LabelDeployment]
	if dep == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for ch := range c.waiters[m.GetNamespace()+"/"+dep] {
		wake(ch)
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// wakeAll wakes every rollout.
func (c *caches) wakeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.waiters {
		for ch := range m {
			wake(ch)
		}
	}
}

// subscribe returns a channel that receives when an object of the
// deployment changes, or the caches' state does, until cancel.
func (c *caches) subscribe(ns, dep string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	k := ns + "/" + dep
	c.mu.Lock()
	if c.waiters[k] == nil {
		c.waiters[k] = map[chan struct{}]bool{}
	}
	c.waiters[k][ch] = true
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.waiters[k], ch)
		if len(c.waiters[k]) == 0 {
			delete(c.waiters, k)
		}
	}
}

// scope is the running scope whose caches hold namespace ns, or nil.
func (c *caches) scope(ns string) *scopeCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != cachesRunning {
		return nil
	}
	if s := c.scopes[metav1.NamespaceAll]; s != nil {
		return s
	}
	return c.scopes[ns]
}

// ready: the scope's caches may be read: every informer synced, none
// refused.
func (s *scopeCache) ready() bool {
	if s == nil || !s.probed.Load() {
		return false
	}
	for _, k := range s.kinds {
		if k.absent {
			continue
		}
		if k.inf == nil || !k.inf.HasSynced() || k.refused.Load() {
			return false
		}
	}
	return true
}

// reader is the cache of namespace ns as a reader, or nil when it cannot
// be trusted now (ready).
func (c *caches) reader(ns string) reader {
	s := c.scope(ns)
	if !s.ready() {
		return nil
	}
	return cacheReader{s}
}

// close stops the informers and waits for them.
func (c *caches) close() {
	c.mu.Lock()
	state := c.state
	c.state = cachesClosed
	c.mu.Unlock()
	if state == cachesRunning {
		c.cancel()
		c.wg.Wait()
	}
	c.wakeAll()
}

// snapshot is this instance's objects from the caches, the kinds they do
// not hold listed from the API server; ok false when a cache cannot be
// trusted now (the caller lists everything instead). Its objects are the
// caches': never changed.
func (c *caches) snapshot(ctx context.Context) (live liveObjects, ok bool, err error) {
	c.mu.Lock()
	var scopes []*scopeCache
	if c.state == cachesRunning {
		for _, ns := range c.d.scopes() {
			scopes = append(scopes, c.scopes[ns])
		}
	}
	c.mu.Unlock()
	if len(scopes) == 0 {
		return nil, false, nil
	}
	for _, s := range scopes {
		if !s.ready() {
			return nil, false, nil
		}
	}
	live = liveObjects{}
	lo := metav1.ListOptions{LabelSelector: c.selector()}
	for _, s := range scopes {
		for i := range kinds {
			k := &kinds[i]
			if !k.reconciled() {
				continue
			}
			ck := s.kinds[k.kind]
			if ck == nil || ck.absent {
				if err := c.d.listKind(ctx, k, s.ns, lo, live); err != nil {
					return nil, false, err
				}
				continue
			}
			for _, o := range ck.inf.GetStore().List() {
				if m, err := meta.Accessor(o); err == nil {
					live.add(k.kind, m, o)
				}
			}
		}
	}
	return live, true, nil
}

// reader reads the objects a rollout follows: from the API server
// (liveReader) or from the caches (cacheReader). An object that does
// not exist is a NotFound error.
type reader interface {
	deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error)
	statefulSet(ctx context.Context, ns, name string) (*appsv1.StatefulSet, error)
	// pods are the pods of a deployment in ns that sel selects; an error
	// is returned as none.
	pods(ctx context.Context, ns, dep string, sel labels.Selector) []*corev1.Pod
}

// liveReader reads from the API server.
type liveReader struct{ d *Deployer }

func (r liveReader) deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return r.d.cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

func (r liveReader) statefulSet(ctx context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	return r.d.cli.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (r liveReader) pods(ctx context.Context, ns, _ string, sel labels.Selector) []*corev1.Pod {
	l, err := r.d.cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out
}

// cacheReader reads from a scope's caches. Its objects are the caches':
// never changed.
type cacheReader struct{ s *scopeCache }

func cachedGet[T any](s *scopeCache, kind, ns, name string) (*T, error) {
	o, ok, err := s.kinds[kind].inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil {
		return nil, err
	}
	v, _ := o.(*T)
	if !ok || v == nil {
		return nil, k8serrors.NewNotFound(schemaOf(kind), name)
	}
	return v, nil
}

func (r cacheReader) deployment(_ context.Context, ns, name string) (*appsv1.Deployment, error) {
	return cachedGet[appsv1.Deployment](r.s, "Deployment", ns, name)
}

func (r cacheReader) statefulSet(_ context.Context, ns, name string) (*appsv1.StatefulSet, error) {
	return cachedGet[appsv1.StatefulSet](r.s, "StatefulSet", ns, name)
}

func (r cacheReader) pods(_ context.Context, ns, dep string, sel labels.Selector) []*corev1.Pod {
	objs, err := r.s.kinds["Pod"].inf.GetIndexer().ByIndex(indexDeployment, ns+"/"+dep)
	if err != nil {
		return nil
	}
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// schemaOf is the group and resource of a kind the caches hold, for
// their NotFound errors.
func schemaOf(kind string) schema.GroupResource {
	switch kind {
	case "Deployment":
		return appsv1.Resource("deployments")
	case "StatefulSet":
		return appsv1.Resource("statefulsets")
	}
	return corev1.Resource(kind)
}

// listKind adds the objects of one kind in namespace ns (every namespace
// when "") to live; an optional kind the grant lacks adds none.
func (d *Deployer) listKind(ctx context.Context, k *kindOps, ns string, lo metav1.ListOptions, live liveObjects) error {
	l, err := k.list(d, ctx, ns, lo)
	if err != nil {
		if k.optional && absentOK(err) == nil {
			return nil
		}
		return err
	}
	return meta.EachListItem(l, func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return fmt.Errorf("deployk8s: listing %ss: %w", k.kind, err)
		}
		live.add(k.kind, m, o)
		return nil
	})
}
