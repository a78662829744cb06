package deployk8s

import (
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// events follows the cluster's Events, one informer per namespace in
// use, and hands those about a deployment's objects (their names begin
// with "dp-<deployment id>") to the Deploy that subscribed to it.
type events struct {
	d *Deployer

	mu    sync.Mutex
	subs  map[string]*subscriber // namespace/deployment
	feeds map[string]chan struct{}
}

type subscriber struct {
	since time.Time
	f     func(*corev1.Event)
	seen  map[string]int32 // event uid -> count written (under events.mu)

	// call is held while f runs: once unsubscribe has set done under it,
	// f is not running and never runs again.
	call sync.Mutex
	done bool
}

func newEvents(d *Deployer) *events {
	return &events{d: d, subs: map[string]*subscriber{}, feeds: map[string]chan struct{}{}}
}

// subscribe hands the Events of the deployment's objects from now on to
// f (never two at once) until the returned function is called; once it
// returns, f is not running and is not called again (so that a
// revision's failure can be the last line of its deploy log). It may be
// called more than once.
func (e *events) subscribe(ns, dep string, f func(*corev1.Event)) (unsubscribe func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &subscriber{since: time.Now().Add(-time.Second), f: f, seen: map[string]int32{}}
	k := ns + "/" + dep
	e.subs[k] = s
	if e.feeds[ns] == nil {
		stop := make(chan struct{})
		e.feeds[ns] = stop
		inf := informers.NewSharedInformerFactoryWithOptions(e.d.cli, 0, informers.WithNamespace(ns)).Core().V1().Events().Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { e.dispatch(ns, o) },
			UpdateFunc: func(_, o any) { e.dispatch(ns, o) },
		})
		go inf.Run(stop)
	}
	return func() {
		e.mu.Lock()
		if e.subs[k] == s {
			delete(e.subs, k)
		}
		e.mu.Unlock()
		s.call.Lock()
		s.done = true
		s.call.Unlock()
	}
}

// deploymentOf is the deployment id in an object's name, or "".
func deploymentOf(name string) string {
	name = strings.TrimPrefix(name, "data-") // a database's claim
	if !strings.HasPrefix(name, "dp-") || len(name) < 39 {
		return ""
	}
	return name[3:39]
}

func (e *events) dispatch(ns string, o any) {
	ev, ok := o.(*corev1.Event)
	if !ok {
		return
	}
	dep := deploymentOf(ev.InvolvedObject.Name)
	if dep == "" {
		return
	}
	e.mu.Lock()
	s := e.subs[ns+"/"+dep]
	if s == nil || eventTime(ev).Before(s.since) || s.seen[string(ev.UID)] >= max(ev.Count, 1) {
		e.mu.Unlock()
		return
	}
	s.seen[string(ev.UID)] = max(ev.Count, 1)
	e.mu.Unlock()
	s.call.Lock()
	defer s.call.Unlock()
	if !s.done {
		s.f(ev)
	}
}

func eventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

func (e *events) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ns, stop := range e.feeds {
		close(stop)
		delete(e.feeds, ns)
	}
}
