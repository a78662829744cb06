package httphandler_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/netutil"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storemem"
)

// TestBurstLoad is an opt-in load test (it measures, and asserts nothing
// about time): set DEPLOYPLANE_LOADTEST=1.
//
//	DEPLOYPLANE_LOADTEST=1 go test -run TestBurstLoad -v -count 1 ./httphandler/
//
// The server runs in a child process (this test binary again), so that the
// clients' goroutines do not share its Go scheduler; both share the
// machine. The test measures the server's capacity for GET
// /v2/deployments?limit=100 (a page of all 100 deployments over storemem,
// CPU-bound) with a closed loop of 16 clients, each request on a new
// connection, then sends a burst at several times that rate
// (DEPLOYPLANE_LOADTEST_TIMES, default 4), open loop: each request at its
// scheduled time on a new connection, whatever became of the earlier ones,
// as independent clients do. It does so against servers without shedding,
// with the default caps, and with tighter caps, each behind
// netutil.LimitListener at cmd/deployplane's default 1024 connections
// except the first, and reports the latency of admitted (200) and refused
// (503) requests, counted from the scheduled send time, and the most
// connections the server had open at once. Everything is on loopback.
func TestBurstLoad(t *testing.T) {
	if os.Getenv(burstServeEnv) != "" {
		serveBurst(t)
		return
	}
	if os.Getenv("DEPLOYPLANE_LOADTEST") == "" {
		t.Skip("set DEPLOYPLANE_LOADTEST=1 to run the load test")
	}
	times := 4.0
	if v, err := strconv.ParseFloat(os.Getenv("DEPLOYPLANE_LOADTEST_TIMES"), 64); err == nil && v > 0 {
		times = v
	}
	const burst = 2 * time.Second
	const maxRequests = 20_000

	capacity := burstCapacity(t)
	rate := times * capacity
	n := min(int(rate*burst.Seconds()), maxRequests)
	t.Logf("capacity %.0f req/s (closed loop, 16 clients); burst %d requests at %.0f req/s (%.1fx) for %v; GOMAXPROCS %d",
		capacity, n, rate, times, burst, runtime.GOMAXPROCS(0))
	t.Logf("%-28s %6s %6s %6s %8s %8s %8s %8s %8s %6s", "server", "sent", "200", "503", "200 p50", "200 p99", "200 max",
		"503 p50", "503 p99", "conns")
	for _, c := range []struct {
		name string
		cfg  string // MaxInFlight,maxConns
	}{
		{"no shedding, no conn cap", "-1,0"},
		{"MaxInFlight default (" + strconv.Itoa(httphandler.DefaultMaxInFlight()) + ")", "0,1024"},
		{"MaxInFlight 16", "16,1024"},
		{"MaxInFlight 8", "8,1024"},
	} {
		r := runBurst(t, c.cfg, rate, n)
		t.Logf("%-28s %6d %6d %6d %8s %8s %8s %8s %8s %6s", c.name, n, len(r.ok), len(r.refused),
			pct(r.ok, 50), pct(r.ok, 99), pct(r.ok, 100), pct(r.refused, 50), pct(r.refused, 99), r.maxConns)
		if r.failed > 0 {
			t.Logf("%-28s %d requests failed (connection errors or the 30 s client timeout); first: %v", "", r.failed, r.firstErr)
		}
	}
}

// burstServeEnv set makes TestBurstLoad the server: "MaxInFlight,maxConns".
const burstServeEnv = "DEPLOYPLANE_LOADTEST_SERVE"

// serveBurst is the child process: it serves until its standard input
// closes, writing its URL first and the most connections it had open last.
func serveBurst(t *testing.T) {
	var inFlight, maxConns int
	if _, err := fmt.Sscanf(os.Getenv(burstServeEnv), "%d,%d", &inFlight, &maxConns); err != nil {
		t.Fatal(err)
	}
	// Every request is of one tenant: no share, so that the cap itself is
	// what is measured.
	s := newBurstServer(t, &httphandler.LoadLimits{MaxInFlight: inFlight, MaxInFlightPerTenant: -1}, maxConns)
	fmt.Printf("url %s\n", s.url)
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Printf("conns %d\n", s.mostOpen.Load())
	s.close()
}

// startBurstServer runs the server in a child process; stop ends it and
// returns the most connections it had open.
func startBurstServer(t *testing.T, cfg string) (url string, stop func() string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBurstLoad$", "-test.v")
	cmd.Env = append(os.Environ(), burstServeEnv+"="+cfg)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "url "); ok {
			url = u
			break
		}
	}
	if url == "" {
		_ = cmd.Process.Kill()
		t.Fatalf("the server process did not start")
	}
	return url, func() string {
		in.Close()
		conns := "?"
		for sc.Scan() {
			if c, ok := strings.CutPrefix(sc.Text(), "conns "); ok {
				conns = c
			}
		}
		_ = cmd.Wait()
		return conns
	}
}

// burstServer is a server of 100 deployments in tenant A, with load
// limits, its listener capped at maxConns (0: no cap), counting the
// connections open at once.
type burstServer struct {
	url            string
	open, mostOpen atomic.Int64
	close          func()
}

func newBurstServer(t *testing.T, load *httphandler.LoadLimits, maxConns int) *burstServer {
	t.Helper()
	cp := controlplane.New(storemem.New(), nil)
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(loadKeyA), Tenants: []string{loadTenant}}})
	if err != nil {
		t.Fatal(err)
	}
	h := httphandler.New(cp, &httphandler.Options{Authenticator: keys, Load: load})
	s := &burstServer{}
	srv := httptest.NewUnstartedServer(h)
	if maxConns > 0 {
		srv.Listener = netutil.LimitListener(srv.Listener, maxConns)
	}
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			n := s.open.Add(1)
			for {
				m := s.mostOpen.Load()
				if n <= m || s.mostOpen.CompareAndSwap(m, n) {
					break
				}
			}
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	srv.Start()
	s.url = srv.URL
	s.close = srv.Close
	seedBurst(t, s.url)
	return s
}

// seedBurst creates the 100 deployments over HTTP.
func seedBurst(t *testing.T, url string) {
	t.Helper()
	for i := range 100 {
		req, _ := http.NewRequest("POST", url+"/v2/deployments", strings.NewReader(fmt.Sprintf(
			`{"name": "agent-%d", "source": "external_docker", "source_revision_config": {"image_uri": "registry.example/agent:1"}}`, i)))
		req.Header.Set("X-Api-Key", loadKeyA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("seeding: %d", resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

const burstPath = "/v2/deployments?limit=100"

// burstCapacity is the requests per second a server without shedding
// answers to a closed loop of 16 clients, each request on a new
// connection, measured over 3000 requests.
func burstCapacity(t *testing.T) float64 {
	url, stop := startBurstServer(t, "-1,0")
	defer stop()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	const total, clients = 3000, 16
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= total {
				if _, err := burstGet(c, url); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return total / time.Since(start).Seconds()
}

// burstGet sends one request and returns its status.
func burstGet(c *http.Client, url string) (int, error) {
	req, err := http.NewRequest("GET", url+burstPath, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Api-Key", loadKeyA)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

type burstResult struct {
	ok, refused []time.Duration
	failed      int
	firstErr    error
	maxConns    string
}

// runBurst sends n requests at rate a second to a server of cfg, each at
// its scheduled time whatever became of the earlier ones, and waits for
// every answer.
func runBurst(t *testing.T, cfg string, rate float64, n int) burstResult {
	url, stop := startBurstServer(t, cfg)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	s := struct{ url string }{url}

	var mu sync.Mutex
	var res burstResult
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			status, err := burstGet(c, s.url)
			took := time.Since(at)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				res.failed++
				if res.firstErr == nil {
					res.firstErr = err
				}
			case status == http.StatusOK:
				res.ok = append(res.ok, took)
			case status == http.StatusServiceUnavailable:
				res.refused = append(res.refused, took)
			default:
				res.failed++
				if res.firstErr == nil {
					res.firstErr = fmt.Errorf("status %d", status)
				}
			}
		})
	}
	wg.Wait()
	res.maxConns = stop()
	return res
}

// pct is the p-th percentile of ds, formatted ("-" when empty).
func pct(ds []time.Duration, p int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	d := s[max(i, 0)]
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// BenchmarkRefused: what a request refused by the in-flight cap costs the
// handler (ServeHTTP on a recorder, the cap held full by a request parked
// in authentication), against the same request served: GET
// /v2/deployments?limit=100 of 100 deployments over storemem. x-baseline
// is how many times cheaper a refusal is than the answer.
func BenchmarkRefused(b *testing.B) {
	keys, err := httphandler.NewKeyTable([]httphandler.Key{
		{SHA256: httphandler.HashKey(loadKeyA), Tenants: []string{loadTenant}},
		{SHA256: httphandler.HashKey(loadHoldKey), Tenants: []string{loadTenant}},
	})
	if err != nil {
		b.Fatal(err)
	}
	auth := &holdingAuth{keys: keys, entered: make(chan struct{}), release: make(chan struct{})}
	cp := controlplane.New(storemem.New(), nil)
	served := httphandler.New(cp, &httphandler.Options{Authenticator: keys})
	capped := httphandler.New(cp, &httphandler.Options{Authenticator: auth, Load: &httphandler.LoadLimits{MaxInFlight: 1}})
	for i := range 100 {
		req := httptest.NewRequest("POST", "/v2/deployments", strings.NewReader(fmt.Sprintf(
			`{"name": "agent-%d", "source": "external_docker", "source_revision_config": {"image_uri": "registry.example/agent:1"}}`, i)))
		req.Header.Set("X-Api-Key", loadKeyA)
		rec := httptest.NewRecorder()
		served.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("seeding: %d %s", rec.Code, rec.Body)
		}
	}
	held := httptest.NewRequest("GET", burstPath, nil)
	held.Header.Set("X-Api-Key", loadHoldKey)
	done := make(chan struct{})
	go func() {
		defer close(done)
		capped.ServeHTTP(httptest.NewRecorder(), held)
	}()
	<-auth.entered
	defer func() { close(auth.release); <-done }()

	run := func(h http.Handler, want int) func(b *testing.B) {
		return func(b *testing.B) {
			req := httptest.NewRequest("GET", burstPath, nil)
			req.Header.Set("X-Api-Key", loadKeyA)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != want {
					b.Fatalf("status %d, want %d", rec.Code, want)
				}
			}
		}
	}
	benchcmp.CompareNamed(b, "served", run(served, http.StatusOK), "refused", run(capped, http.StatusServiceUnavailable))
}
