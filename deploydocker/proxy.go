package deploydocker

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// backend is one container the proxy forwards to.
type backend struct {
	addr     string
	inflight atomic.Int64
}

// route is a deployment's backends, taken in turn, and what scaling it to
// zero needs: whose it is, which revision's containers serve it, when it
// was last asked for, and whether its containers are stopped.
type route struct {
	backends []*backend
	next     atomic.Uint64

	tenant   string
	revision string // the active revision, whose containers these are
	// zero: it scales to zero (ScalesToZero) when idle; cleared when the
	// deployment no longer does.
	zero atomic.Bool
	// last is when a request last began or ended (Options.Clock, Unix
	// nanoseconds).
	last atomic.Int64
	// told is the minute (Unix seconds / 60) of the last request
	// the proxy's activity was told of.
	told atomic.Int64
	// asleep: its containers are stopped (backends is empty); a request
	// starts them (waking) and waits. Both are guarded by proxy.mu.
	asleep bool
	waking *wake
}

// wake is one start of a sleeping deployment's containers, which every
// request that comes meanwhile waits for: done is closed when it ended,
// with err nil when the route serves again (or was replaced).
type wake struct {
	done chan struct{}
	err  error
}

// busy reports whether a request is in flight to one of the route's
// containers. The caller holds proxy.mu.
func (rt *route) busy() bool {
	for _, b := range rt.backends {
		if b.inflight.Load() > 0 {
			return true
		}
	}
	return false
}

// proxy forwards /{deployment id}/... to the deployment's active
// containers, telling them where they are mounted: X-Forwarded-Prefix is
// the path of the deployment's url (the path of Options.ProxyURL, then
// /{deployment id}), so that an app's absolute links stay under it;
// X-Forwarded-Host and X-Forwarded-Proto are the host and scheme the
// request came to the proxy with, and X-Forwarded-For its client's
// address (headers of these names a client sent are replaced, not passed
// on). Switching a deployment to new backends is atomic: a request
// picks its backend and counts itself in flight under the read lock, so
// once set returns, every request still on an old backend is counted and
// drain can wait for it.
//
// A request for a deployment whose containers are stopped (asleep) is
// held while start, run once for every request that comes meanwhile,
// starts them; it is then forwarded, or answered 502 when the start
// failed, or 503 after hold if the start takes longer. A client that
// goes away stops only its own wait.
type proxy struct {
	mu     sync.RWMutex
	routes map[string]*route
	rp     *httputil.ReverseProxy
	base   string // the path of Options.ProxyURL, without its last '/'

	now   func() time.Time // Options.Clock: when a request was last seen
	hold  time.Duration    // Options.WakeTimeout
	start func(dep string, rt *route) error
	// spawn runs a start in the background, under the Deployer's life.
	spawn func(f func())
	// activity, when set, is told of a served request, at most once a
	// minute per route, through spawn (Options.ActivityRecorder).
	activity func(tenant, dep string, at time.Time)
}

type ctxKey struct{}

// newProxy returns the proxy of the deployments whose urls are
// proxyURL/{deployment id}.
func newProxy(proxyURL string) *proxy {
	p := &proxy{routes: map[string]*route{}, now: time.Now, hold: DefaultWakeTimeout,
		spawn: func(f func()) { go f() }}
	if u, err := url.Parse(proxyURL); err == nil {
		p.base = strings.TrimRight(u.EscapedPath(), "/")
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			b := pr.In.Context().Value(ctxKey{}).(*target)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = b.addr
			pr.Out.URL.Path = b.path
			pr.Out.URL.RawPath = ""
			pr.Out.Host = ""
			pr.SetXForwarded() // Rewrite gets Out without the client's X-Forwarded-* headers
			pr.Out.Header.Set("X-Forwarded-Prefix", b.prefix)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeDetail(w, http.StatusBadGateway, "The deployment's container did not answer.")
		},
	}
	return p
}

// target is where one request goes: the container's address, the path
// there, and the prefix the proxy took off it.
type target struct {
	addr   string
	path   string
	prefix string
}

func backendsOf(cs []*ctr) []*backend {
	sortByReplica(cs)
	bs := make([]*backend, 0, len(cs))
	for _, c := range cs {
		if c.addr != "" {
			bs = append(bs, &backend{addr: c.addr})
		}
	}
	return bs
}

// set makes bs the deployment's backends and returns the ones it replaced.
func (p *proxy) set(dep string, bs []*backend) (old []*backend) {
	return p.put(dep, &route{backends: bs})
}

// put makes rt the deployment's route, last asked for now, and returns the
// backends of the route it replaced.
func (p *proxy) put(dep string, rt *route) (old []*backend) {
	rt.last.Store(p.now().UnixNano())
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.routes[dep]; r != nil {
		old = r.backends
	}
	p.routes[dep] = rt
	return old
}

func (p *proxy) remove(dep string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.routes, dep)
}

// addrs lists the addresses a deployment's url forwards to (for tests and
// debugging).
func (p *proxy) addrs(dep string) []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []string
	if r := p.routes[dep]; r != nil {
		for _, b := range r.backends {
			out = append(out, b.addr)
		}
	}
	return out
}

// idle lists the routes that scale to zero, serve, have no request in
// flight and were last asked for before since.
func (p *proxy) idle(since time.Time) map[string]*route {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := map[string]*route{}
	for dep, rt := range p.routes {
		if rt.zero.Load() && !rt.asleep && len(rt.backends) > 0 && !rt.busy() && rt.last.Load() < since.UnixNano() {
			out[dep] = rt
		}
	}
	return out
}

// sleep marks rt asleep if it is still the deployment's route, serving,
// idle since before since: from then on its requests wait for a start.
// It reports whether it did.
func (p *proxy) sleep(dep string, rt *route, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes[dep] != rt || rt.asleep || rt.busy() || rt.last.Load() >= since.UnixNano() {
		return false
	}
	rt.asleep, rt.backends = true, nil
	return true
}

// woke makes bs the backends of rt, asleep until now, if it is still the
// deployment's route; it reports whether it was.
func (p *proxy) woke(dep string, rt *route, bs []*backend) bool {
	rt.last.Store(p.now().UnixNano())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes[dep] != rt {
		return false
	}
	rt.asleep, rt.backends = false, bs
	return true
}

// current reports whether rt is the deployment's route.
func (p *proxy) current(dep string, rt *route) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.routes[dep] == rt
}

// wakeOf returns the start that a request for rt waits for, beginning one
// when none runs; nil when rt serves again or is no longer the
// deployment's route (the request looks again).
func (p *proxy) wakeOf(dep string, rt *route) *wake {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes[dep] != rt || !rt.asleep {
		return nil
	}
	if rt.waking == nil {
		wk := &wake{done: make(chan struct{})}
		rt.waking = wk
		p.spawn(func() {
			err := p.start(dep, rt)
			p.mu.Lock()
			rt.waking = nil
			p.mu.Unlock()
			wk.err = err
			close(wk.done)
		})
	}
	return rt.waking
}

// maxWaits bounds the starts one request waits for: a deployment put to
// sleep again at once after it woke is answered 503 rather than waited on
// forever.
const maxWaits = 3

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/")
	dep, path, _ := strings.Cut(rest, "/")
	path = "/" + path
	for waits := 0; ; waits++ {
		p.mu.RLock()
		rt := p.routes[dep]
		var b *backend
		asleep := false
		if rt != nil {
			rt.last.Store(p.now().UnixNano())
			asleep = rt.asleep
			if !asleep && len(rt.backends) > 0 {
				b = rt.backends[rt.next.Add(1)%uint64(len(rt.backends))]
				b.inflight.Add(1)
			}
		}
		p.mu.RUnlock()
		switch {
		case rt == nil:
			writeDetail(w, http.StatusNotFound, "No deployment serves here.")
			return
		case asleep && waits < maxWaits:
			if !p.await(w, r, dep, rt) {
				return
			}
			continue
		case asleep:
			w.Header().Set("Retry-After", "5")
			writeDetail(w, http.StatusServiceUnavailable, "The deployment is starting; try again shortly.")
			return
		case b == nil:
			writeDetail(w, http.StatusServiceUnavailable, "The deployment has no running container.")
			return
		}
		defer func() {
			b.inflight.Add(-1)
			rt.last.Store(p.now().UnixNano())
		}()
		if p.activity != nil {
			now := p.now()
			if m := now.Unix() / 60; rt.told.Load() < m && rt.told.Swap(m) < m {
				p.spawn(func() { p.activity(rt.tenant, dep, now) })
			}
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, &target{addr: b.addr, path: path, prefix: p.base + "/" + dep}))
		p.rp.ServeHTTP(w, r)
		return
	}
}

// await holds a request for a sleeping deployment until its containers
// have started. It reports whether the request should look for the
// deployment's backends again; otherwise it has answered (502 when the
// start failed, 503 when it outlasted the hold) or its client went away.
func (p *proxy) await(w http.ResponseWriter, r *http.Request, dep string, rt *route) bool {
	wk := p.wakeOf(dep, rt)
	if wk == nil {
		return true
	}
	t := time.NewTimer(p.hold)
	defer t.Stop()
	select {
	case <-wk.done:
		if wk.err != nil {
			writeDetail(w, http.StatusBadGateway, "The deployment was scaled to zero and its containers failed to start; its deploy log says why.")
			return false
		}
		return true
	case <-r.Context().Done():
		return false
	case <-t.C:
		w.Header().Set("Retry-After", "5")
		writeDetail(w, http.StatusServiceUnavailable, "The deployment was scaled to zero and is still starting; try again shortly.")
		return false
	}
}

func writeDetail(w http.ResponseWriter, code int, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write([]byte(`{"detail":"` + detail + `"}`))
}

func (p *proxy) has(dep string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	_, ok := p.routes[dep]
	return ok
}

// Proxies is the handler that serves the urls of several Deployers on one
// listener, when they share one Options.ProxyURL (a server with several
// Docker engines: a deployment runs on one of them, and its url and
// custom_url do not say which). A request for /{deployment id}/... goes to
// the Proxy of the Deployer whose table has the deployment; any other to
// the first Deployer's (which answers 404). Deployers that share a daemon
// must have distinct Options.Instance, so that each adopts only its own
// containers.
func Proxies(ds ...*Deployer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dep, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		for _, d := range ds {
			if d.proxy.has(dep) {
				d.proxy.ServeHTTP(w, r)
				return
			}
		}
		if len(ds) == 0 {
			writeDetail(w, http.StatusNotFound, "No deployment serves here.")
			return
		}
		ds[0].proxy.ServeHTTP(w, r)
	})
}
