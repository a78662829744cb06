package httphandler_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// TestSlowPublicBodyTimesOut: a public route's body that does not arrive
// within LoadLimits.PublicReadTimeout is answered 408, and its connection
// closed; a body that does arrive is served.
func TestSlowPublicBodyTimesOut(t *testing.T) {
	s := newServer(t, &httphandler.Options{Dashboard: &dashboard.Options{Sessions: storemem.New()},
		Load: &httphandler.LoadLimits{PublicReadTimeout: 50 * time.Millisecond}})
	for _, c := range []struct {
		path    string
		headers []string
	}{
		{"/ui/signin", []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"/v1/integrations/github/webhook", []string{"X-Hub-Signature-256", "sha256=00", "X-GitHub-Event", "push"}},
	} {
		st := stall(t, s.url, "POST", c.path, 1000, c.headers...)
		select {
		case <-st.done:
		case <-time.After(pollDeadline):
			t.Fatalf("POST %s: no answer while its body stalls", c.path)
		}
		if st.status != http.StatusRequestTimeout {
			t.Errorf("POST %s with a stalled body: %d, want 408", c.path, st.status)
		}
	}
	// A webhook delivery that arrives at once is read and checked.
	r := s.do("POST", "/v1/integrations/github/webhook", `{"zen": "hi"}`, "X-Hub-Signature-256", "sha256=00", "X-GitHub-Event", "ping")
	if r.status != http.StatusUnauthorized {
		t.Errorf("a webhook delivery with a bad signature: %d %s", r.status, r.body)
	}
}

// TestPublicBodyLimit: a public route's body beyond
// LoadLimits.PublicMaxBodyBytes is a 413, whether its Content-Length says
// so or it is chunked; the GitHub webhook has its own, larger limit.
func TestPublicBodyLimit(t *testing.T) {
	s := newServer(t, &httphandler.Options{Dashboard: &dashboard.Options{Sessions: storemem.New()},
		Load: &httphandler.LoadLimits{PublicMaxBodyBytes: 100}})
	big := "api_key=" + strings.Repeat("k", 200)
	r := s.do("POST", "/ui/signin", big, "Content-Type", "application/x-www-form-urlencoded")
	diff(t, "status of a long sign-in form", 413, r.status)
	diff(t, "detail", "Request body is larger than the limit of 100 bytes.", detail(t, r))
	// Chunked: no Content-Length, the limit is found while reading.
	req, _ := http.NewRequest("POST", s.url+"/ui/signin", io.MultiReader(strings.NewReader(big)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	diff(t, "status of a chunked long sign-in form", 413, resp.StatusCode)
	// The webhook reads a delivery beyond 100 bytes (and refuses its
	// signature).
	r = s.do("POST", "/v1/integrations/github/webhook", `{"zen": "`+strings.Repeat("z", 500)+`"}`,
		"X-Hub-Signature-256", "sha256=00", "X-GitHub-Event", "ping")
	diff(t, "status of a long webhook delivery", 401, r.status)
	// Authenticated routes keep Options.MaxBodyBytes.
	r = s.as(keyA, "POST", "/v2/deployments", `{"name": "`+strings.Repeat("n", 200)+`"}`)
	if r.status == 413 {
		t.Errorf("an API body of 200 bytes: %d %s", r.status, r.body)
	}
}

// TestStalledUploadIsCut: an upload that sends less than
// LoadLimits.MinUploadRate is cut, and the log says so; one that keeps
// the rate is stored.
func TestStalledUploadIsCut(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	opts := langgraphDeployOptions(t, cp, &httphandler.Options{
		Load: &httphandler.LoadLimits{MinUploadRate: 1000, UploadRateWindow: 50 * time.Millisecond},
	})
	s := newServerWith(t, serverSetup{cp: cp, opts: opts})
	puts := uploadURLs(t, s, keyA, 2)

	st := stall(t, s.url, "PUT", puts[0], 1000, "Content-Type", "application/gzip")
	select {
	case <-st.done:
	case <-time.After(pollDeadline):
		t.Fatal("a stalled upload was not cut")
	}
	if st.status != http.StatusBadRequest {
		t.Errorf("the stalled upload: %d, want 400", st.status)
	}
	logs := s.logs()
	var cut map[string]any
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "upload cut: below the minimum rate" {
			cut = rec
		}
	}
	if cut == nil {
		t.Fatalf("no record of the cut upload in the log:\n%s", logs)
	}
	if cut["level"] != "WARN" || cut["received"] != 1.0 || cut["tenant"] != tenantA || cut["path"] != strings.Split(puts[0], "?")[0] {
		t.Errorf("the record of the cut upload: %v", cut)
	}
	if strings.Contains(logs, "signature=") {
		t.Error("the log holds an upload URL's signature")
	}

	// A whole body at once is stored.
	r := s.do("PUT", puts[1], strings.Repeat("t", 5000), "Content-Type", "application/gzip")
	diff(t, "status of an upload sent at once", 200, r.status)
}

// TestBodyOnUncappedRoute: a body sent to a route under no cap (the
// health routes) is read like any other.
func TestBodyOnUncappedRoute(t *testing.T) {
	s := newServer(t, nil)
	r := s.do("GET", "/healthz", `{"ignored": true}`)
	diff(t, "status of GET /healthz with a body", 200, r.status)
}
