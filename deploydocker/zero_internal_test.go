package deploydocker

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/testclock"
)

// The deployment types that scale to zero are the control plane's.
func TestScalesToZero(t *testing.T) {
	of := func(typ controlplane.DeploymentType) *controlplane.Deployment {
		d := &controlplane.Deployment{}
		if typ != "" {
			d.SourceConfig.DeploymentType = &typ
		}
		return d
	}
	for typ, want := range map[controlplane.DeploymentType]bool{"": false, controlplane.DeploymentTypeDev: false,
		controlplane.DeploymentTypeDevFree: false, controlplane.DeploymentTypeProd: false,
		controlplane.DeploymentTypeDevZero: true, controlplane.DeploymentTypeDevFreeZero: true} {
		if got := ScalesToZero(of(typ)); got != want {
			t.Errorf("ScalesToZero(%q) = %t", typ, got)
		}
	}
	if ScalesToZero(nil) {
		t.Error("ScalesToZero(nil)")
	}
}

// zeroProxy is the proxy of a Deployer on no daemon, serving deployment
// "dep-z", asleep, whose start is start, holding requests for at most
// hold (0: the default); the url's server and the container's (an echo of
// its path) are returned.
func zeroProxy(t *testing.T, clock *testclock.Clock, hold time.Duration, start func(dep string, rt *route) error) (d *Deployer, srv *httptest.Server, echo string, rt *route) {
	t.Helper()
	d, err := New(&Options{Host: "unix:///nonexistent.sock", ProxyURL: "http://127.0.0.1:1", Clock: clock.Now, IdleTimeout: -1,
		WakeTimeout: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "app "+r.URL.Path) }))
	t.Cleanup(app.Close)
	echo = strings.TrimPrefix(app.URL, "http://")
	d.proxy.start = start
	rt = newRoute("tenant", "rev-1", true, nil)
	rt.asleep = true
	d.proxy.put("dep-z", rt)
	srv = httptest.NewServer(d.Proxy())
	t.Cleanup(srv.Close)
	return d, srv, echo, rt
}

type answer struct {
	status     int
	body       string
	retryAfter string
	err        error
}

func fetch(ctx context.Context, url string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{err: err}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), retryAfter: resp.Header.Get("Retry-After"), err: err}
}

// Requests to a sleeping deployment are held while one start runs for all
// of them, then forwarded; a client that gives up ends only its own wait.
func TestWakeHoldsRequests(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	var starts atomic.Int32
	started, release := make(chan struct{}, 8), make(chan struct{})
	var d *Deployer
	var echo string
	d, srv, echo, rt := zeroProxy(t, clock, 0, func(dep string, rt *route) error {
		starts.Add(1)
		started <- struct{}{}
		<-release
		d.proxy.woke(dep, rt, []*backend{{addr: echo}})
		return nil
	})
	const n = 5
	answers := make(chan answer, n)
	for range n {
		go func() { answers <- fetch(context.Background(), srv.URL+"/dep-z/threads") }()
	}
	gaveUp, cancel := context.WithCancel(context.Background())
	quitter := make(chan answer, 1)
	go func() { quitter <- fetch(gaveUp, srv.URL+"/dep-z/threads") }()
	<-started
	// Every request is held: none is answered while the start runs.
	held := func() bool {
		d.proxy.mu.RLock()
		defer d.proxy.mu.RUnlock()
		return rt.waking != nil
	}
	if !held() {
		t.Fatal("no start in progress")
	}
	cancel()
	if a := <-quitter; a.err == nil {
		t.Errorf("the request whose client gave up was answered %d %q", a.status, a.body)
	}
	select {
	case a := <-answers:
		t.Fatalf("a request was answered before its deployment started: %+v", a)
	default:
	}
	close(release)
	for range n {
		if a := <-answers; a.err != nil || a.status != 200 || a.body != "app /threads" {
			t.Errorf("held request: %+v, want 200 from the container", a)
		}
	}
	if got := starts.Load(); got != 1 {
		t.Errorf("%d starts for %d requests, want 1", got, n+1)
	}
	// Served again: a request goes straight through, and counts as the
	// deployment's last.
	clock.Advance(time.Hour)
	if a := fetch(context.Background(), srv.URL+"/dep-z/ok"); a.status != 200 || starts.Load() != 1 {
		t.Errorf("after the wake: %+v, %d starts", a, starts.Load())
	}
	if idle := d.proxy.idle(clock.Now()); len(idle) != 0 {
		t.Errorf("a deployment asked for just now is idle: %v", idle)
	}
	// Idle since after its last request, once that request has ended (its
	// handler may still be returning when the client has the answer).
	for deadline := time.Now().Add(time.Minute); d.proxy.idle(clock.Now().Add(time.Nanosecond))["dep-z"] != rt; {
		if time.Now().After(deadline) {
			t.Fatal("not idle since after its last request")
		}
		time.Sleep(time.Millisecond)
	}
}

// A start that fails answers the requests it held 502, with a body that
// says so; the next request tries again. A start that outlasts
// WakeTimeout answers 503 with Retry-After.
func TestWakeFails(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	var starts atomic.Int32
	fail := make(chan bool, 1)
	fail <- true
	var d *Deployer
	var echo string
	d, srv, echo, _ := zeroProxy(t, clock, 0, func(dep string, rt *route) error {
		starts.Add(1)
		select {
		case <-fail:
			return errors.New("container exited with code 1")
		default:
		}
		d.proxy.woke(dep, rt, []*backend{{addr: echo}})
		return nil
	})
	a := fetch(context.Background(), srv.URL+"/dep-z/threads")
	if a.status != http.StatusBadGateway || !strings.Contains(a.body, "failed to start") {
		t.Errorf("a failed start: %+v, want 502 saying it failed to start", a)
	}
	if a = fetch(context.Background(), srv.URL+"/dep-z/threads"); a.status != 200 || starts.Load() != 2 {
		t.Errorf("the request after a failed start: %+v after %d starts, want 200 after 2", a, starts.Load())
	}

	block := make(chan struct{})
	_, ssrv, _, _ := zeroProxy(t, clock, time.Millisecond, func(dep string, rt *route) error {
		<-block
		return nil
	})
	a = fetch(context.Background(), ssrv.URL+"/dep-z/threads")
	close(block)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "still starting") || a.retryAfter == "" {
		t.Errorf("a start outlasting the hold: %+v, want 503", a)
	}
}

// Only a route that scales to zero, serves, has nothing in flight and was
// last asked for before the limit is idle; sleep refuses a route asked
// for meanwhile.
func TestIdleRoutes(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	d, err := New(&Options{Host: "unix:///nonexistent.sock", ProxyURL: "http://127.0.0.1:1", Clock: clock.Now, IdleTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := d.proxy
	zero := newRoute("t", "r", true, []*backend{{addr: "127.0.0.1:1"}})
	busy := newRoute("t", "r", true, []*backend{{addr: "127.0.0.1:2"}})
	busy.backends[0].inflight.Add(1)
	always := newRoute("t", "r", false, []*backend{{addr: "127.0.0.1:3"}})
	p.put("zero", zero)
	p.put("busy", busy)
	p.put("always", always)
	clock.Advance(time.Minute)
	since := clock.Now()
	idle := p.idle(since)
	if len(idle) != 1 || idle["zero"] != zero {
		t.Fatalf("idle routes %v, want zero only", idle)
	}
	zero.last.Store(since.UnixNano()) // a request came
	if p.sleep("zero", zero, since) {
		t.Error("sleep took a route asked for at the limit")
	}
	if !p.sleep("zero", zero, since.Add(time.Nanosecond)) || !zero.asleep || len(p.addrs("zero")) != 0 {
		t.Error("sleep refused an idle route, or left it backends")
	}
	if len(p.idle(since.Add(time.Hour))) != 0 {
		t.Error("a sleeping route is idle again")
	}
}
