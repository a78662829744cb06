package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// get sends a GET with headers (name, value pairs) and returns the answer.
func get(t *testing.T, url string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// counter returns the value of the series of family name with the given
// labels (name, value pairs), 0 when absent.
func counter(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	mf := fams[name]
	if mf == nil {
		return 0
	}
	for _, m := range mf.Metric {
		match := len(m.Label) == len(labels)/2
		for _, l := range m.Label {
			found := false
			for i := 0; i+1 < len(labels); i += 2 {
				found = found || labels[i] == l.GetName() && labels[i+1] == l.GetValue()
			}
			match = match && found
		}
		if match && m.Counter != nil {
			return m.Counter.GetValue()
		}
	}
	return 0
}

// TestOperations runs the server with JSON logs and a metrics key: the
// health routes, a client's request id in the answer and the log, the
// reconcile loop's transitions in the log, and /metrics behind its key.
func TestOperations(t *testing.T) {
	const key, metricsKey = "ops-api-key", "ops-metrics-key"
	url, _, stderr := server(t, []string{"-db", ":memory:", "-log-format", "json", "-sim-step", "1ms"},
		map[string]string{"DEPLOYPLANE_API_KEY": key, "DEPLOYPLANE_METRICS_KEY": metricsKey})

	if status, _, body := get(t, url+"/healthz"); status != 200 || string(body) != "{\"status\":\"ok\"}\n" {
		t.Errorf("/healthz: %d %s", status, body)
	}
	// Ready once the reconcile loop runs (it starts with the server).
	for {
		status, _, body := get(t, url+"/readyz")
		if status == 200 {
			if string(body) != "{\"status\":\"ok\"}\n" {
				t.Errorf("/readyz: %s", body)
			}
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-nearDeadline(t):
			t.Fatalf("/readyz never ready: %d %s", status, body)
		}
	}

	status, d := call(t, "POST", url+"/v2/deployments", key, dockerBody, "X-Request-Id", "ci-run-42")
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	waitStatus(t, url, key, id, rev, "DEPLOYED")
	if _, h, _ := get(t, url+"/v2/deployments/"+id, "X-Api-Key", key, "X-Request-Id", "ci-run-43"); h.Get("X-Request-Id") != "ci-run-43" {
		t.Errorf("X-Request-Id %q, want the client's", h.Get("X-Request-Id"))
	}

	if status, h, body := get(t, url+"/metrics"); status != 401 || h.Get("WWW-Authenticate") == "" {
		t.Errorf("/metrics without its key: %d %s", status, body)
	}
	if status, _, body := get(t, url+"/metrics", "Authorization", "Bearer "+key); status != 401 {
		t.Errorf("/metrics with the API key: %d %s", status, body)
	}
	status, _, body := get(t, url+"/metrics", "Authorization", "Bearer "+metricsKey)
	if status != 200 {
		t.Fatalf("/metrics with its key: %d %s", status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"deployplane_http_requests_total", []string{"route", "/v2/deployments", "method", "POST", "status", "201"}},
		{"deployplane_revision_transitions_total", []string{"from", "DEPLOYING", "to", "DEPLOYED"}},
	} {
		if got := counter(fams, c.name, c.labels...); got != 1 {
			t.Errorf("%s%v = %v, want 1", c.name, c.labels, got)
		}
	}
	// (-db :memory: has no commits to time.)
	for _, name := range []string{"deployplane_revisions_waiting", "deployplane_deployer_call_duration_seconds", "go_goroutines"} {
		if fams[name] == nil {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	// Every line of the log is a JSON object; the create's request record
	// has the client's id, and the loop logged each transition.
	var created bool
	transitions := map[string]bool{}
	for line := range strings.Lines(stderr.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %v: %s", err, line)
		}
		switch rec["msg"] {
		case "request":
			if rec["request_id"] == "ci-run-42" && rec["method"] == "POST" && rec["status"] == float64(201) {
				created = true
			}
		case "revision transition":
			if rec["level"] == "INFO" && rec["deployment"] == id && rec["revision"] == rev && rec["tenant"] != "" {
				transitions[rec["from"].(string)+">"+rec["to"].(string)] = true
			}
		}
	}
	if !created {
		t.Errorf("no request record with request_id ci-run-42:\n%s", stderr.String())
	}
	for _, tr := range []string{"CREATING>QUEUED", "QUEUED>AWAITING_DEPLOY", "AWAITING_DEPLOY>DEPLOYING", "DEPLOYING>DEPLOYED"} {
		if !transitions[tr] {
			t.Errorf("the transition %s was not logged:\n%s", tr, stderr.String())
		}
	}
}

// TestOperationsFlags: the help documents the operations flags and routes,
// and wrong values are usage errors.
func TestOperationsFlags(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-log-format", "json", "-metrics-key", "DEPLOYPLANE_METRICS_KEY", "/healthz", "/readyz",
		"/metrics", "X-Request-Id", "revision transition"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-log-format", "xml"}, nil},
		{[]string{"-log-format", ""}, nil},
		{[]string{"-metrics-key", "a"}, map[string]string{"DEPLOYPLANE_METRICS_KEY": "b"}},
	} {
		err := run(context.Background(), c.args, func(k string) string { return c.env[k] }, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v %v: %v, want a usage error", c.args, c.env, err)
		}
	}
}
