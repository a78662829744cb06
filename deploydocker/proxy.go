package deploydocker

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// backend is one container the proxy forwards to.
type backend struct {
	addr     string
	inflight atomic.Int64
}

// route is a deployment's backends, taken in turn.
type route struct {
	backends []*backend
	next     atomic.Uint64
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
type proxy struct {
	mu     sync.RWMutex
	routes map[string]*route
	rp     *httputil.ReverseProxy
	base   string // the path of Options.ProxyURL, without its last '/'
}

type ctxKey struct{}

// newProxy returns the proxy of the deployments whose urls are
// proxyURL/{deployment id}.
func newProxy(proxyURL string) *proxy {
	p := &proxy{routes: map[string]*route{}}
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.routes[dep]; r != nil {
		old = r.backends
	}
	p.routes[dep] = &route{backends: bs}
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

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/")
	dep, path, _ := strings.Cut(rest, "/")
	path = "/" + path
	p.mu.RLock()
	rt := p.routes[dep]
	var b *backend
	if rt != nil && len(rt.backends) > 0 {
		b = rt.backends[rt.next.Add(1)%uint64(len(rt.backends))]
		b.inflight.Add(1)
	}
	p.mu.RUnlock()
	if rt == nil {
		writeDetail(w, http.StatusNotFound, "No deployment serves here.")
		return
	}
	if b == nil {
		writeDetail(w, http.StatusServiceUnavailable, "The deployment has no running container.")
		return
	}
	defer b.inflight.Add(-1)
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, &target{addr: b.addr, path: path, prefix: p.base + "/" + dep}))
	p.rp.ServeHTTP(w, r)
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
