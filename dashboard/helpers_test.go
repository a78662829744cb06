package dashboard_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// The tenants and keys of the tests.
const (
	tenantA = "0b4c8a55-1f5e-4d1c-9a53-6f1d8f0e7a11"
	tenantB = "7d0e3c1a-2b4f-4a6e-8c9d-0e1f2a3b4c5d"
	keyA    = "dp_test_key_tenant_a"
	keyAB   = "dp_test_key_tenants_a_b"
	keyB    = "dp_test_key_tenant_b"
)

// env is a server with the API and the dashboard over one control plane
// driven by deploysim.
type env struct {
	cp  *controlplane.ControlPlane
	srv *httptest.Server
	api *httphandler.Handler
	st  store.Store
	// start starts the reconcile loop (at once unless envOptions.paused);
	// pause stops it (work in flight is given back).
	start, pause func()
}

// envOptions adjust newEnv.
type envOptions struct {
	step     time.Duration               // deploysim's step (default 20ms)
	failAt   controlplane.RevisionStatus // deploysim's FailAt
	failMsg  string
	sessions store.Store // default: the control plane's store
	now      func() time.Time
	ttl      time.Duration
	tls      bool
	paused   bool              // the reconcile loop waits for env.start
	store    store.Store       // the control plane's (default: storemem)
	keys     []httphandler.Key // the server's key table (default: keyA, keyAB, keyB)
}

func newEnv(t testing.TB, o *envOptions) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	if o.step == 0 {
		o.step = 20 * time.Millisecond
	}
	var st store.Store = storemem.New()
	if o.store != nil {
		st = o.store
	}
	cp := controlplane.New(st, nil)
	// The reconcile loop runs between start and pause.
	var mu sync.Mutex
	var stop func()
	start := func() {
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = cp.Run(ctx, deploysim.New(&deploysim.Options{Step: o.step, FailAt: o.failAt, FailMessage: o.failMsg}))
		}()
		stop = func() { cancel(); <-done }
	}
	pause := func() {
		mu.Lock()
		defer mu.Unlock()
		if stop != nil {
			stop()
			stop = nil
		}
	}
	if !o.paused {
		start()
	}
	if o.keys == nil {
		o.keys = []httphandler.Key{
			{SHA256: httphandler.HashKey(keyA), Tenants: []string{tenantA}},
			{SHA256: httphandler.HashKey(keyAB), Tenants: []string{tenantA, tenantB}},
			{SHA256: httphandler.HashKey(keyB), Tenants: []string{tenantB}},
		}
	}
	keys, err := httphandler.NewKeyTable(o.keys)
	if err != nil {
		t.Fatal(err)
	}
	sessions := o.sessions
	if sessions == nil {
		sessions = st
	}
	api := httphandler.New(cp, &httphandler.Options{Authenticator: keys,
		Dashboard: &dashboard.Options{Sessions: sessions, Now: o.now, SessionTTL: o.ttl, EventHeartbeat: time.Second}})
	var srv *httptest.Server
	if o.tls {
		srv = httptest.NewTLSServer(api)
	} else {
		srv = httptest.NewServer(api)
	}
	t.Cleanup(func() {
		_ = api.Close()
		srv.Close()
		pause()
	})
	return &env{cp: cp, srv: srv, api: api, st: st, start: start, pause: pause}
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects.
type browser struct {
	t    testing.TB
	c    *http.Client
	base string
}

func (e *env) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	c := e.srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, c: c, base: e.srv.URL}
}

// page is an answer read whole.
type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{resp.StatusCode, resp.Header, string(body)}
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.base+path, nil)
	return b.do(req)
}

func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the first CSRF token of a page.
func csrf(t testing.TB, p page) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token in the page (status %d):\n%s", p.status, p.body)
	}
	return m[1]
}

// signIn signs b in with key (and tenant), and checks it lands on a page.
func (b *browser) signIn(key, tenant string) page {
	b.t.Helper()
	form := b.get("/ui/signin")
	return b.post("/ui/signin", url.Values{"csrf": {csrf(b.t, form)}, "api_key": {key}, "tenant": {tenant}, "next": {"/ui/deployments"}})
}

// mustSignIn signs in and fails unless a session was opened.
func (b *browser) mustSignIn(key, tenant string) {
	b.t.Helper()
	p := b.signIn(key, tenant)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/") {
		b.t.Fatalf("sign-in: status %d, Location %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
}

// token is the session's CSRF token, read from a page.
func (b *browser) token() string {
	b.t.Helper()
	return csrf(b.t, b.get("/ui/deployments/new"))
}

// createDeployment creates a deployment through the dashboard's form and
// returns its id.
func (b *browser) createDeployment(form url.Values) string {
	b.t.Helper()
	form.Set("csrf", b.token())
	p := b.post("/ui/deployments/new", form)
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/deployments/") {
		b.t.Fatalf("create: status %d, Location %q\n%s", p.status, loc, p.body)
	}
	return strings.TrimPrefix(loc, "/ui/deployments/")
}

// waitFor polls cond until it holds, failing after a generous deadline
// (only a real hang reaches it).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sseEvent is one event of a text/event-stream.
type sseEvent struct{ name, id, data string }

// readEvents reads a stream's events into a channel until the body ends.
func readEvents(body io.Reader) <-chan sseEvent {
	ch := make(chan sseEvent, 1024)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					ch <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return ch
}

type storeReader = store.Reader
