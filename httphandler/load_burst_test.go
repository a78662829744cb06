package httphandler_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/deployplane/deployplane/storemem"
)

// TestBurstLoad is an opt-in load test (it measures, and asserts nothing
// about time): set DEPLOYPLANE_LOADTEST=1.
//
//	DEPLOYPLANE_LOADTEST=1 go test -run TestBurstLoad -v -count 1 ./httphandler/
//
// It measures the server's capacity for GET /v2/deployments (a page of 20
// of 100 deployments over storemem, CPU-bound) with a closed loop of 16
// clients, then sends a burst at several times that rate, open loop (each
// request at its scheduled time, on a new connection when no idle one is
// free, as independent clients do), to three servers in turn: without
// shedding, with the default caps (and netutil.LimitListener at
// cmd/deployplane's default 1024 connections), and with a tight cap. For
// each it reports the latency of admitted (200) and refused (503)
// requests, counted from the scheduled send time, and the most
// connections open at once. Everything is on loopback; the clients share
// the machine with the server.
func TestBurstLoad(t *testing.T) {
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
	t.Logf("%-34s %8s %8s %8s %9s %9s %9s %9s %9s %6s", "server", "sent", "200", "503", "200 p50", "200 p99", "200 max",
		"503 p50", "503 p99", "conns")
	for _, c := range []struct {
		name     string
		load     *httphandler.LoadLimits
		maxConns int
	}{
		{"no shedding", &httphandler.LoadLimits{MaxInFlight: -1, MaxLongPolls: -1}, 0},
		{"default caps, 1024 connections", nil, 1024},
		{"MaxInFlight 32, 1024 connections", &httphandler.LoadLimits{MaxInFlight: 32}, 1024},
	} {
		r := runBurst(t, c.load, c.maxConns, rate, n)
		t.Logf("%-34s %8d %8d %8d %9s %9s %9s %9s %9s %6d", c.name, n, len(r.ok), len(r.refused),
			pct(r.ok, 50), pct(r.ok, 99), pct(r.ok, 100), pct(r.refused, 50), pct(r.refused, 99), r.maxConns)
		if r.failed > 0 {
			t.Logf("%-34s %d requests failed (connection errors or the 30 s client timeout); first: %v", "", r.failed, r.firstErr)
		}
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

const burstPath = "/v2/deployments?limit=20"

// burstCapacity is the requests per second a server without shedding
// answers to a closed loop of 16 clients over keep-alive connections,
// measured over 3000 requests.
func burstCapacity(t *testing.T) float64 {
	s := newBurstServer(t, &httphandler.LoadLimits{MaxInFlight: -1}, 0)
	defer s.close()
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	const total, clients = 3000, 16
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= total {
				if _, err := burstGet(c, s.url); err != nil {
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
	maxConns    int64
}

// runBurst sends n requests at rate a second, each at its scheduled time
// whatever became of the earlier ones, and waits for every answer.
func runBurst(t *testing.T, load *httphandler.LoadLimits, maxConns int, rate float64, n int) burstResult {
	s := newBurstServer(t, load, maxConns)
	defer s.close()
	tr := &http.Transport{MaxIdleConnsPerHost: 100_000, MaxIdleConns: 100_000}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	s.mostOpen.Store(s.open.Load())

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
	res.maxConns = s.mostOpen.Load()
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
