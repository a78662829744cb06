package httphandler_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// TestAPIHostPrefix: every route answers under /api-host as at the root
// (the prefix the Go CLI and the Terraform provider derive from
// LANGSMITH_ENDPOINT), with the same credentials, limits and errors.
func TestAPIHostPrefix(t *testing.T) {
	s := newServer(t, nil)
	created := s.do("POST", "/api-host/v2/deployments", dockerBody("prefixed"), "X-Api-Key", keyA)
	if created.status != http.StatusCreated {
		t.Fatalf("POST under /api-host: %d %s", created.status, created.body)
	}
	var d struct{ ID string }
	if err := json.Unmarshal(created.body, &d); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v2/deployments/" + d.ID, "/v2/deployments?name_contains=prefixed"} {
		root, prefixed := s.do("GET", path, "", "X-Api-Key", keyA), s.do("GET", httphandler.APIHostPrefix+path, "", "X-Api-Key", keyA)
		if root.status != 200 || prefixed.status != 200 || string(root.body) != string(prefixed.body) {
			t.Errorf("GET %s: %d %s, under /api-host %d %s", path, root.status, root.body, prefixed.status, prefixed.body)
		}
	}
	cases := []struct {
		path, key string
		status    int
		body      string
	}{
		{"/api-host/v2/deployments", "", 401, "Missing authentication credentials"},
		{"/api-host/v2/deployments", "wrong", 401, ""},
		{"/api-host/v2/deployments/" + d.ID, keyB, 404, "not found"},
		{"/api-host/v2/nope", keyA, 404, `{"detail":"Not Found"}`},
		{"/api-host", keyA, 404, `{"detail":"Not Found"}`},
		{"/api-host/api-host/v2/deployments", keyA, 404, `{"detail":"Not Found"}`},
		{"/api-host/openapi.json", "", 200, `"/api-host"`},
	}
	for _, c := range cases {
		var r reply
		if c.key == "" {
			r = s.do("GET", c.path, "")
		} else {
			r = s.do("GET", c.path, "", "X-Api-Key", c.key)
		}
		if r.status != c.status || !strings.Contains(string(r.body), c.body) {
			t.Errorf("GET %s: %d %s, want %d with %q", c.path, r.status, r.body, c.status, c.body)
		}
	}
}

// TestViewStatusLink: the Go CLI's "View status" link,
// /o/{tenant_id}/host/deployments/{deployment_id}, redirects to the
// deployment's dashboard page, and is not found without a dashboard.
func TestViewStatusLink(t *testing.T) {
	const id = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ui := newServer(t, &httphandler.Options{Dashboard: &dashboard.Options{Sessions: storemem.New()}})
	ui.client = client
	for _, c := range []struct{ path, location string }{
		{"/o/" + tenantA + "/host/deployments/" + id, "/ui/deployments/" + id},
		{"/o/" + tenantA + "/host/deployments/" + strings.ToUpper(id), "/ui/deployments/" + id},
		{"/api-host/o/" + tenantA + "/host/deployments/" + id, "/ui/deployments/" + id},
	} {
		r := ui.do("GET", c.path, "")
		if r.status != http.StatusFound || r.header.Get("Location") != c.location {
			t.Errorf("GET %s: %d Location %q, want 302 to %s", c.path, r.status, r.header.Get("Location"), c.location)
		}
	}
	if r := ui.do("GET", "/o/"+tenantA+"/host/deployments/not-an-id", ""); r.status != http.StatusNotFound {
		t.Errorf("a malformed id: %d, want 404", r.status)
	}
	plain := newServer(t, nil)
	plain.client = client
	if r := plain.do("GET", "/o/"+tenantA+"/host/deployments/"+id, ""); r.status != http.StatusNotFound {
		t.Errorf("without a dashboard: %d, want 404", r.status)
	}
}
