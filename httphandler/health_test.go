package httphandler_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// engineDeployer is the simulated deployer with an engine that can be
// made unreachable: a controlplane.ReadinessChecker.
type engineDeployer struct {
	*deploysim.Deployer
	mu   sync.Mutex
	down error
}

func (d *engineDeployer) Ready(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.down
}

func (d *engineDeployer) setDown(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = err
}

type healthReply struct {
	Status   string   `json:"status"`
	Detail   string   `json:"detail"`
	NotReady []string `json:"not_ready"`
}

func decodeHealth(t *testing.T, r reply) healthReply {
	t.Helper()
	var h healthReply
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return h
}

// waitReady polls GET /readyz until it answers want, for at most a minute
// (only a hang takes that long).
func waitReady(t *testing.T, s *server, want int) reply {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := s.do("GET", "/readyz", "")
		if r.status == want || time.Now().After(deadline) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHealthz(t *testing.T) {
	s := newServer(t, nil)
	for _, method := range []string{"GET", "HEAD"} {
		r := s.do(method, "/healthz", "")
		if r.status != http.StatusOK {
			t.Fatalf("%s /healthz: %d %s", method, r.status, r.body)
		}
		if method == "GET" {
			diff(t, "GET /healthz", healthReply{Status: "ok"}, decodeHealth(t, r))
		}
	}
	if r := s.do("POST", "/healthz", ""); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /healthz: %d, Allow %q", r.status, r.header.Get("Allow"))
	}
}

// TestReadyz: /readyz is ready only while the store answers, the reconcile
// loop runs and the deployer reaches its engine; otherwise 503 names what
// is not ready, without the causes, which go to the log.
func TestReadyz(t *testing.T) {
	st := storemem.New()
	cp := controlplane.New(st, nil)
	s := newServerCP(t, cp, nil)

	r := s.do("GET", "/readyz", "")
	diff(t, "status before Run", http.StatusServiceUnavailable, r.status)
	diff(t, "before Run", healthReply{Status: "unavailable", Detail: "Not ready: the reconcile loop is not running.",
		NotReady: []string{"reconcile"}}, decodeHealth(t, r))

	d := &engineDeployer{Deployer: deploysim.New(nil)}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, d) }()
	t.Cleanup(func() { stop(); <-done })
	r = waitReady(t, s, http.StatusOK)
	diff(t, "status once running", http.StatusOK, r.status)
	diff(t, "once running", healthReply{Status: "ok"}, decodeHealth(t, r))

	secret := "dial unix /var/run/secret-docker.sock: connection refused"
	d.setDown(errors.New(secret))
	r = s.do("GET", "/readyz", "")
	diff(t, "status with the engine down", http.StatusServiceUnavailable, r.status)
	diff(t, "engine down", healthReply{Status: "unavailable", Detail: "Not ready: the deployer cannot reach its engine.",
		NotReady: []string{"deployer"}}, decodeHealth(t, r))
	if strings.Contains(string(r.body), "secret-docker") {
		t.Errorf("the public answer shows the cause: %s", r.body)
	}
	d.setDown(nil)
	diff(t, "engine back", http.StatusOK, s.do("GET", "/readyz", "").status)

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Run returns once its store is closed; until then only the store is
	// not ready.
	r = s.do("GET", "/readyz", "")
	h := decodeHealth(t, r)
	if r.status != http.StatusServiceUnavailable || len(h.NotReady) == 0 || h.NotReady[0] != "store" {
		t.Errorf("store closed: %d %s", r.status, r.body)
	}

	// The log tells each change once, with the causes.
	logs := s.logs()
	if n := strings.Count(logs, `"msg":"httphandler: not ready"`); n < 3 {
		t.Errorf("%d not-ready records, want one per change (3 or more):\n%s", n, logs)
	}
	if !strings.Contains(logs, "secret-docker") {
		t.Errorf("the log lacks the deployer's cause:\n%s", logs)
	}
}

// TestHealthUnderLoad: /healthz and /readyz answer while the in-flight
// cap is full.
func TestHealthUnderLoad(t *testing.T) {
	s := newLoadServer(t, &httphandler.LoadLimits{MaxInFlight: 1})
	held := s.hold("/v2/deployments")
	wantDetail(t, "an ordinary request", s.get(loadKeyA, "/v2/deployments"), http.StatusServiceUnavailable, "Retry-After", "1")
	if r := s.get("", "/healthz"); r.status != http.StatusOK {
		t.Errorf("/healthz at the cap: %d %s", r.status, r.body)
	}
	// No reconcile loop runs here: 503, but not the load's.
	if r := s.get("", "/readyz"); r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), "reconcile") {
		t.Errorf("/readyz at the cap: %d %s", r.status, r.body)
	}
	s.letGo()
	<-held
}

// gatedDeployer is a deployer whose readiness check blocks until the test
// lets it answer, counting the checks.
type gatedDeployer struct {
	*deploysim.Deployer
	checks atomic.Int32
	gate   chan struct{}
}

func (d *gatedDeployer) Ready(ctx context.Context) error {
	d.checks.Add(1)
	select {
	case <-d.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestReadyzProbesShareACheck: probes that arrive while a readiness check
// runs wait for it and share its verdict; the next probe checks again.
func TestReadyzProbesShareACheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &gatedDeployer{Deployer: sim(nil), gate: make(chan struct{})}
		s := newLiveServer(t, d, nil)
		synctest.Wait() // Run is running
		const probes = 5
		codes := make(chan int, probes)
		for range probes {
			go func() { codes <- s.do("GET", "/readyz", "").status }()
		}
		synctest.Wait() // one probe in the check, the others waiting for it
		if n := d.checks.Load(); n != 1 {
			t.Fatalf("%d checks under way for %d probes, want 1", n, probes)
		}
		close(d.gate)
		for range probes {
			if code := <-codes; code != http.StatusOK {
				t.Errorf("probe: %d", code)
			}
		}
		if r := s.do("GET", "/readyz", ""); r.status != http.StatusOK || d.checks.Load() != 2 {
			t.Errorf("a later probe: %d after %d checks, want 200 after 2", r.status, d.checks.Load())
		}
	})
}

// clusterDeployer is an engineDeployer that also drives clusters: a
// controlplane.ClusterHealthReporter.
type clusterDeployer struct {
	*engineDeployer
	clusters map[string]error
}

func (d *clusterDeployer) ClusterHealth(context.Context) map[string]error { return d.clusters }

// TestReadyzClusters: a cluster that does not answer leaves /readyz 200;
// both answers carry each cluster's state in words, without the cause.
func TestReadyzClusters(t *testing.T) {
	cp := controlplane.New(storemem.New(), nil)
	s := newServerCP(t, cp, nil)
	cause := "dial tcp 127.0.0.1:6443: connect: connection refused"
	d := &clusterDeployer{engineDeployer: &engineDeployer{Deployer: deploysim.New(nil)},
		clusters: map[string]error{"east": nil, "west": errors.New(cause)}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, d) }()
	t.Cleanup(func() { stop(); <-done })
	type body struct {
		Status   string            `json:"status"`
		NotReady []string          `json:"not_ready"`
		Clusters map[string]string `json:"clusters"`
	}
	decode := func(r reply) body {
		var b body
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatalf("%v: %s", err, r.body)
		}
		return b
	}
	clusters := map[string]string{"east": "ok", "west": "unreachable"}
	r := waitReady(t, s, http.StatusOK)
	diff(t, "one cluster unreachable", body{Status: "ok", Clusters: clusters}, decode(r))
	if strings.Contains(string(r.body), "6443") {
		t.Errorf("the public answer shows the cause: %s", r.body)
	}
	d.setDown(errors.New("engine down"))
	r = s.do("GET", "/readyz", "")
	diff(t, "engine down too", body{Status: "unavailable", NotReady: []string{"deployer"}, Clusters: clusters}, decode(r))
}
