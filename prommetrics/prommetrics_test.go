package prommetrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/prommetrics"
	"github.com/deployplane/deployplane/storebolt"
)

const (
	tenant     = "0194c0de-0000-7000-8000-00000000000a"
	apiKey     = "api-key-of-the-tests"
	metricsKey = "metrics-key-of-the-tests"
)

var (
	_ httphandler.Metrics   = (*prommetrics.Metrics)(nil)
	_ controlplane.Observer = (*prommetrics.Metrics)(nil)
)

// families is one scrape, parsed.
type families map[string]*dto.MetricFamily

// scrape GETs url with the metrics key (if any) and parses the text format
// with expfmt.
func scrape(t *testing.T, url, key string) families {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return fams
}

// get returns the value of the series of name with exactly labels: a
// counter's or gauge's value, a histogram's sample count; 0 when absent.
func (f families) get(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	mf := f[name]
	if mf == nil {
		return 0
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range mf.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		match := true
		for _, l := range m.Label {
			if want[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// sum returns a histogram series' sample sum.
func (f families) sum(name string) float64 {
	mf := f[name]
	if mf == nil || len(mf.Metric) != 1 || mf.Metric[0].Histogram == nil {
		return 0
	}
	return mf.Metric[0].Histogram.GetSampleSum()
}

// stack is a whole server: storebolt, a ControlPlane, the HTTP API, all
// reporting to one Metrics, over a real httptest.Server.
type stack struct {
	m   *prommetrics.Metrics
	st  *storebolt.Store
	cp  *controlplane.ControlPlane
	url string
}

func newStack(t *testing.T, log *slog.Logger) *stack {
	t.Helper()
	s := &stack{m: prommetrics.New(&prommetrics.Options{Logger: log})}
	var err error
	s.st, err = storebolt.Open(t.TempDir()+"/db", &storebolt.Options{OnCommit: s.m.ObserveCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.st.Close() })
	s.cp = controlplane.New(s.st, &controlplane.Options{Observer: s.m, PollInterval: 10 * time.Millisecond})
	if err := s.m.WatchPendingWork(s.cp); err != nil {
		t.Fatal(err)
	}
	if err := s.m.WatchPendingWork(s.cp); err == nil {
		t.Error("a second WatchPendingWork succeeded")
	}
	if err := s.m.WatchClusters(s.cp); err != nil {
		t.Fatal(err)
	}
	if err := s.m.WatchClusters(s.cp); err == nil {
		t.Error("a second WatchClusters succeeded")
	}
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(apiKey), Tenants: []string{tenant}}})
	if err != nil {
		t.Fatal(err)
	}
	api := httphandler.New(s.cp, &httphandler.Options{Authenticator: keys, Metrics: s.m, MetricsKey: metricsKey})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// do sends a request and returns its status.
func (s *stack) do(t *testing.T, method, path, key, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (s *stack) create(t *testing.T, name string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+"/v2/deployments", strings.NewReader(
		`{"name": "`+name+`", "source": "external_docker", "source_revision_config": {"image_uri": "registry.example/agent:1"}}`))
	req.Header.Set("X-Api-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	_, rest, _ := strings.Cut(string(b), `"id":"`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}

// TestScrapeCountsKnownTraffic sends known requests through a real server
// and reconciles two revisions with the simulated deployer, then checks
// that each metric moved by exactly what that traffic makes.
func TestScrapeCountsKnownTraffic(t *testing.T) {
	s := newStack(t, nil)
	ctx := context.Background()
	metricsURL := s.url + "/metrics"
	if code := s.do(t, "GET", "/metrics", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the key: %d", code)
	}
	before := scrape(t, metricsURL, metricsKey)

	ids := []string{s.create(t, "first"), s.create(t, "second")}
	waiting := scrape(t, metricsURL, metricsKey)
	if got := waiting.get(t, "deployplane_revisions_waiting"); got != 2 {
		t.Errorf("revisions_waiting %v before the loop runs, want 2", got)
	}
	if got := waiting.get(t, "deployplane_store_commit_batch_size") - before.get(t, "deployplane_store_commit_batch_size"); got < 2 {
		t.Errorf("%v commits for two creations", got)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.cp.Run(runCtx, deploysim.New(&deploysim.Options{Step: time.Millisecond})) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(time.Minute)
	for _, id := range ids {
		for {
			d, err := s.cp.GetDeployment(ctx, tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			rev, err := s.cp.GetRevision(ctx, tenant, id, *d.LatestRevisionID)
			if err != nil {
				t.Fatal(err)
			}
			if rev.Status == controlplane.RevisionDeployed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("revision %s still %s", rev.ID, rev.Status)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range 3 {
		s.do(t, "GET", "/v2/deployments/"+ids[0], apiKey, "")
	}
	s.do(t, "GET", "/v2/deployments/00000000-0000-7000-8000-000000000000", apiKey, "")
	s.do(t, "GET", "/v2/deployments", "", "")
	s.do(t, "BREW", "/v2/deployments", apiKey, "")
	after := scrape(t, metricsURL, metricsKey)

	delta := func(name string, labels ...string) float64 {
		return after.get(t, name, labels...) - before.get(t, name, labels...)
	}
	const req = "deployplane_http_requests_total"
	const byID = "/v2/deployments/{deployment_id}"
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{req, []string{"route", "/v2/deployments", "method", "POST", "status", "201"}, 2},
		{req, []string{"route", byID, "method", "GET", "status", "200"}, 3},
		{req, []string{"route", byID, "method", "GET", "status", "404"}, 1},
		{req, []string{"route", "/v2/deployments", "method", "GET", "status", "401"}, 1},
		{req, []string{"route", "unmatched", "method", "OTHER", "status", "405"}, 1},
		{req, []string{"route", "unmatched", "method", "GET", "status", "401"}, 0},
		// The two scrapes before this one (each is counted once answered).
		{req, []string{"route", "/metrics", "method", "GET", "status", "200"}, 2},
		{"deployplane_http_request_duration_seconds", []string{"route", byID, "method", "GET"}, 4},
		{"deployplane_revision_transitions_total", []string{"from", "CREATING", "to", "QUEUED"}, 2},
		{"deployplane_revision_transitions_total", []string{"from", "QUEUED", "to", "AWAITING_DEPLOY"}, 2},
		{"deployplane_revision_transitions_total", []string{"from", "AWAITING_DEPLOY", "to", "DEPLOYING"}, 2},
		{"deployplane_revision_transitions_total", []string{"from", "DEPLOYING", "to", "DEPLOYED"}, 2},
		{"deployplane_deployer_step_duration_seconds", []string{"status", "CREATING"}, 2},
		{"deployplane_deployer_step_duration_seconds", []string{"status", "DEPLOYING"}, 2},
		{"deployplane_deployer_call_duration_seconds", []string{"op", "deploy", "result", "ok"}, 2},
		{"deployplane_lease_takeovers_total", nil, 0},
		{"deployplane_revisions_waiting", nil, 0},
		{"deployplane_revisions_in_progress", nil, 0},
	} {
		if got := delta(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := after.get(t, req, "route", "/metrics", "method", "GET", "status", "401") - before.get(t, req, "route", "/metrics", "method", "GET", "status", "401"); got != 0 {
		t.Errorf("401s of /metrics moved by %v after the first scrape", got)
	}
	// Each of the 8 reports and the 2 claims is a commit of its own
	// Update, at least (other Updates may share their commits).
	if got := delta("deployplane_store_commit_batch_size"); got < 1 {
		t.Errorf("%v commits while reconciling", got)
	}
	if got := after.sum("deployplane_store_commit_batch_size") - waiting.sum("deployplane_store_commit_batch_size"); got < 10 {
		t.Errorf("%v Updates committed while reconciling, want at least 10", got)
	}
	if after["go_goroutines"] == nil || after["process_cpu_seconds_total"] == nil {
		t.Error("the runtime and process metrics are missing")
	}
}

// TestScrapeObservations calls each observation directly and scrapes the
// Metrics served on their own.
func TestScrapeObservations(t *testing.T) {
	m := prommetrics.New(&prommetrics.Options{Namespace: "dp", NoRuntimeMetrics: true})
	srv := httptest.NewServer(m)
	defer srv.Close()
	m.LeaseTakenOver()
	m.LeaseTakenOver()
	m.ObserveRequest("/x", "GET", 200, time.Millisecond)
	m.ObserveRequest("/x", "get", 200, time.Millisecond)
	m.ObserveRequest("/x", "PROPFIND", 999, time.Millisecond)
	m.ObserveCommit(5, time.Millisecond, nil)
	m.ObserveCommit(3, time.Millisecond, nil)
	m.ObserveCommit(1, time.Second, errors.New("disk full"))
	m.DeployerCall(controlplane.DeployerTeardown, time.Second, errors.New("engine down"))
	m.RevisionTransition(controlplane.Transition{From: controlplane.RevisionBuilding, To: controlplane.RevisionBuildFailed, Step: 90 * time.Second})
	f := scrape(t, srv.URL, "")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"dp_lease_takeovers_total", nil, 2},
		{"dp_http_requests_total", []string{"route", "/x", "method", "GET", "status", "200"}, 1},
		{"dp_http_requests_total", []string{"route", "/x", "method", "OTHER", "status", "200"}, 1},
		{"dp_http_requests_total", []string{"route", "/x", "method", "OTHER", "status", "other"}, 1},
		{"dp_store_commit_duration_seconds", []string{"result", "ok"}, 2},
		{"dp_store_commit_duration_seconds", []string{"result", "error"}, 1},
		{"dp_store_commit_batch_size", nil, 2},
		{"dp_deployer_call_duration_seconds", []string{"op", "teardown", "result", "error"}, 1},
		{"dp_revision_transitions_total", []string{"from", "BUILDING", "to", "BUILD_FAILED"}, 1},
		{"dp_deployer_step_duration_seconds", []string{"status", "BUILDING"}, 1},
	} {
		if got := f.get(t, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := f.sum("dp_store_commit_batch_size"); got != 8 {
		t.Errorf("batch sizes add up to %v, want 8", got)
	}
	if f["go_goroutines"] != nil {
		t.Error("runtime metrics despite NoRuntimeMetrics")
	}
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestScrapeWithTheStoreDown: the pending-work gauges fail with the
// store, and the scrape still answers every other metric (the error goes
// to the log).
func TestScrapeWithTheStoreDown(t *testing.T) {
	var logs lockedBuffer
	s := newStack(t, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := s.st.Close(); err != nil {
		t.Fatal(err)
	}
	f := scrape(t, s.url+"/metrics", metricsKey)
	if f["deployplane_revisions_waiting"] != nil {
		t.Error("revisions_waiting answered with the store closed")
	}
	if f["deployplane_http_requests_total"] == nil && f["deployplane_http_request_duration_seconds"] == nil && f["go_goroutines"] == nil {
		t.Error("the other metrics are missing")
	}
	if !strings.Contains(logs.String(), "prommetrics: scrape") {
		t.Errorf("the failure was not logged: %q", logs.String())
	}
}

// BenchmarkObserveRequest: the cost a request pays for metrics, from 2
// goroutines per processor at once (as requests arrive).
func BenchmarkObserveRequest(b *testing.B) {
	m := prommetrics.New(nil)
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveRequest("/v2/deployments/{deployment_id}", "GET", 200, 1234*time.Microsecond)
		}
	})
}

// clusterSim is the simulated deployer driving two clusters, one of which
// does not answer: a controlplane.ClusterHealthReporter.
type clusterSim struct{ *deploysim.Deployer }

func (clusterSim) ClusterHealth(context.Context) map[string]error {
	return map[string]error{"east": nil, "west": errors.New("connection refused")}
}

// TestClusterUp: cluster_up is 1 for a cluster that answers and 0 for one
// that does not, asked at the scrape.
func TestClusterUp(t *testing.T) {
	s := newStack(t, nil)
	if m := scrape(t, s.url+"/metrics", metricsKey); m["deployplane_cluster_up"] != nil {
		t.Errorf("cluster_up before the loop runs a deployer: %v", m["deployplane_cluster_up"])
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.cp.Run(runCtx, clusterSim{deploysim.New(nil)}) }()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(time.Minute)
	for {
		m := scrape(t, s.url+"/metrics", metricsKey)
		if m["deployplane_cluster_up"] != nil {
			if east, west := m.get(t, "deployplane_cluster_up", "cluster", "east"), m.get(t, "deployplane_cluster_up", "cluster", "west"); east != 1 || west != 0 {
				t.Errorf("cluster_up east %v west %v, want 1 and 0", east, west)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no cluster_up while the loop runs")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
