package httphandler_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/httphandler"
)

// metricsLog is an httphandler.Metrics that keeps each observation and
// serves them as text.
type metricsLog struct {
	mu   sync.Mutex
	seen []observed
}

type observed struct {
	Route, Method string
	Status        int
}

func (m *metricsLog) ObserveRequest(route, method string, status int, took time.Duration) {
	if took < 0 {
		panic("negative duration")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen = append(m.seen, observed{route, method, status})
}

func (m *metricsLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	n := len(m.seen)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "requests_seen %d\n", n)
}

func (m *metricsLog) take() []observed {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.seen
	m.seen = nil
	return s
}

// TestMetricsObservesEveryRequest: each request is observed once, by route
// pattern (never by id), method and status; paths no route matches have
// the empty route.
func TestMetricsObservesEveryRequest(t *testing.T) {
	m := &metricsLog{}
	s := newServer(t, &httphandler.Options{Metrics: m})
	d := must[struct{ ID string }](t, s, keyA, "POST", "/v2/deployments", dockerBody("observed"), http.StatusCreated)
	s.as(keyA, "GET", "/v2/deployments/"+d.ID, "")
	s.as(keyA, "GET", "/v2/deployments/00000000-0000-7000-8000-000000000000", "")
	s.do("GET", "/v2/deployments", "")
	s.do("GET", "/no/such/path", "")
	s.do("DELETE", "/healthz", "")
	s.do("BREW", "/healthz", "")
	s.do("GET", "/healthz", "")
	want := []observed{
		{"/v2/deployments", "POST", 201},
		{"/v2/deployments/{deployment_id}", "GET", 200},
		{"/v2/deployments/{deployment_id}", "GET", 404},
		{"/v2/deployments", "GET", 401},
		{"", "GET", 404},
		{"", "DELETE", 405},
		{"", "BREW", 405},
		{"/healthz", "GET", 200},
	}
	if diff := cmp.Diff(want, m.take()); diff != "" {
		t.Errorf("observations (-want +got):\n%s", diff)
	}
	r := s.do("GET", "/metrics", "")
	if r.status != http.StatusOK || string(r.body) != "requests_seen 0\n" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Errorf("GET /metrics: %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	diff(t, "the scrape itself", []observed{{"/metrics", "GET", 200}}, m.take())
}

// TestMetricsKey: with a metrics key, /metrics answers only a bearer of
// that key; API keys do not open it, and it opens nothing else.
func TestMetricsKey(t *testing.T) {
	const key = "metrics-key-of-the-tests"
	s := newServer(t, &httphandler.Options{Metrics: &metricsLog{}, MetricsKey: key})
	cases := []struct {
		name    string
		headers []string
		status  int
	}{
		{"no key", nil, 401},
		{"wrong key", []string{"Authorization", "Bearer " + key + "x"}, 401},
		{"a prefix", []string{"Authorization", "Bearer " + key[:5]}, 401},
		{"an API key", []string{"X-Api-Key", keyA, "Authorization", "Bearer " + keyA}, 401},
		{"as X-Api-Key", []string{"X-Api-Key", key}, 401},
		{"bearer", []string{"Authorization", "Bearer " + key}, 200},
		{"bearer, any case", []string{"Authorization", "bearer " + key}, 200},
	}
	for _, c := range cases {
		r := s.do("GET", "/metrics", "", c.headers...)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
		if r.status == 401 && (!strings.Contains(detail(t, r), "metrics key") || r.header.Get("WWW-Authenticate") == "") {
			t.Errorf("%s: 401 %s, WWW-Authenticate %q", c.name, r.body, r.header.Get("WWW-Authenticate"))
		}
	}
	if r := s.do("GET", "/v2/deployments", "", "Authorization", "Bearer "+key); r.status != 401 {
		t.Errorf("the metrics key opened the API: %d %s", r.status, r.body)
	}
}

// TestMetricsRouteOnlyWithMetrics: without Options.Metrics, /metrics is
// neither served nor documented.
func TestMetricsRouteOnlyWithMetrics(t *testing.T) {
	for _, withMetrics := range []bool{false, true} {
		var o httphandler.Options
		if withMetrics {
			o.Metrics = &metricsLog{}
		}
		s := newServer(t, &o)
		want := 404
		if withMetrics {
			want = 200
		}
		if r := s.do("GET", "/metrics", ""); r.status != want {
			t.Errorf("metrics %v: GET /metrics %d, want %d", withMetrics, r.status, want)
		}
		doc := string(s.do("GET", "/openapi.json", "").body)
		if got := strings.Contains(doc, `"/metrics"`); got != withMetrics {
			t.Errorf("metrics %v: /metrics documented: %v", withMetrics, got)
		}
		for _, p := range []string{`"/healthz"`, `"/readyz"`} {
			if !strings.Contains(doc, p) {
				t.Errorf("%s is not documented", p)
			}
		}
	}
}
