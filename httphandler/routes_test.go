package httphandler_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// operation is one route, as GET /openapi.json lists it.
type operation struct {
	method, path string
	public       bool
	hasBody      bool
}

// operations reads the route table from the OpenAPI document.
// TestOpenAPIMatchesMux checks that the document is exactly what the mux
// serves, so the tests driven by this table cover every route.
func operations(t *testing.T, s *server) []operation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			Security    *[]any `json:"security"`
			RequestBody any    `json:"requestBody"`
		} `json:"paths"`
	}
	r := s.do("GET", "/openapi.json", "")
	if r.status != 200 {
		t.Fatalf("GET /openapi.json: %d", r.status)
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []operation
	for path, item := range doc.Paths {
		for method, op := range item {
			ops = append(ops, operation{method: strings.ToUpper(method), path: path,
				public: op.Security != nil && len(*op.Security) == 0, hasBody: op.RequestBody != nil})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	if len(ops) < 16 {
		t.Fatalf("only %d operations documented", len(ops))
	}
	return ops
}

// fill puts the fixture's ids into a path pattern.
func (f fixture) fill(path string) string {
	return strings.NewReplacer("{deployment_id}", f.github.ID, "{revision_id}", *f.github.LatestRevisionID,
		"{listener_id}", f.listener.ID, "{token_id}", f.token.ID, "{project_id}", f.github.ID, "{provider_id}", f.provider.ProviderID, "{auth_id}", f.authID,
		"{webhook_id}", f.webhook.ID).Replace(path)
}

// TestAuthEveryRoute: every route but the public ones answers 401 without
// credentials and with wrong ones, 403 for a tenant the key may not use, and
// 403 "requires workspace specification" for a key of several tenants sent
// without X-Tenant-Id.
func TestAuthEveryRoute(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	for _, op := range operations(t, s) {
		path := f.fill(op.path)
		body := ""
		if op.hasBody {
			body = "{}"
		}
		t.Run(op.method+" "+op.path, func(t *testing.T) {
			if op.path == "/v1/integrations/github/webhook" {
				// The signature is the proof, not an API key: a signed
				// delivery needs no key, and a key does not replace it.
				ping := `{"zen": "Keep it simple."}`
				r := s.do(op.method, path, ping, "X-GitHub-Event", "ping", "X-Hub-Signature-256", sign(webhookSecret, ping))
				diff(t, "signed ping without credentials", 202, r.status)
				r = s.do(op.method, path, ping, "X-GitHub-Event", "ping", "X-Api-Key", keyA)
				if r.status != 401 || !strings.Contains(detail(t, r), "X-Hub-Signature-256") {
					t.Errorf("unsigned ping with an API key: %d %s", r.status, r.body)
				}
				return
			}
			if op.public {
				// Served without credentials. (The OAuth callback answers
				// its 400 error page to a request without a state; the
				// OAuth tests show it succeeding without credentials.)
				// (This server runs no reconcile loop: /readyz says so
				// with its 503, health_test.go shows it ready.)
				r := s.do(op.method, path, body)
				notReady := op.path == "/readyz" && r.status == 503
				if r.status == 401 || r.status == 403 || r.status >= 500 && !notReady || op.path == "/openapi.json" && r.status != 200 {
					t.Errorf("public route without credentials: %d %s", r.status, r.body)
				}
				return
			}
			cases := []struct {
				name    string
				headers []string
				status  int
				detail  string
			}{
				{"no credentials", nil, 401, "Missing authentication credentials"},
				{"empty key", []string{"X-Api-Key", ""}, 401, "Missing authentication credentials"},
				{"wrong key", []string{"X-Api-Key", "wrong"}, 401, "Invalid authentication credentials."},
				{"wrong bearer token", []string{"Authorization", "Bearer wrong"}, 401, "Invalid authentication credentials."},
				{"basic auth", []string{"Authorization", "Basic a2V5LW9mLXRlbmFudC1hOg=="}, 401, "Missing authentication credentials"},
				{"wrong key, right bearer", []string{"X-Api-Key", "wrong", "Authorization", "Bearer " + keyA}, 401, "Invalid authentication credentials."},
				{"another tenant", []string{"X-Api-Key", keyA, "X-Tenant-Id", tenantB}, 403, "not authorized for the requested workspace"},
				{"tenant not a UUID", []string{"X-Api-Key", keyA, "X-Tenant-Id", "acme"}, 403, "not authorized for the requested workspace"},
				{"org key without tenant", []string{"X-Api-Key", keyOrg}, 403, "requires workspace specification"},
			}
			for _, c := range cases {
				r := s.do(op.method, path, body, c.headers...)
				if r.status != c.status || !strings.Contains(detail(t, r), c.detail) {
					t.Errorf("%s: %d %s, want %d with %q", c.name, r.status, r.body, c.status, c.detail)
				}
			}
		})
	}
}

// TestCredentialForms: every accepted way of presenting a key and choosing
// a tenant reaches the same tenant.
func TestCredentialForms(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	path := "/v2/deployments/" + f.github.ID
	for _, h := range [][]string{
		{"X-Api-Key", keyA},
		{"x-api-key", keyA},
		{"Authorization", "Bearer " + keyA},
		{"Authorization", "bearer " + keyA},
		{"X-Api-Key", keyA, "X-Tenant-Id", tenantA},
		{"X-Api-Key", keyOrg, "X-Tenant-ID", tenantA},
		{"X-Api-Key", keyOrg, "x-tenant-id", strings.ToUpper(tenantA)},
		{"Authorization", "Bearer " + keyOrg, "X-TENANT-ID", tenantA},
	} {
		req, err := http.NewRequest("GET", s.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(h); i += 2 {
			req.Header[h[i]] = []string{h[i+1]} // the name exactly as given
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		diff(t, strings.Join(h, " "), 200, resp.StatusCode)
	}
	// The org key reaches tenant B too, where A's deployment is not found.
	r := s.do("GET", path, "", "X-Api-Key", keyOrg, "X-Tenant-Id", tenantB)
	diff(t, "org key in tenant B", 404, r.status)
}

// TestTenantIsolation: with tenant B's key, every route that names one of
// tenant A's resources answers 404 with the usual not-found sentence, every
// list is empty, and A's resources are unchanged afterwards.
func TestTenantIsolation(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	before := snapshot(t, s, f)
	for _, op := range operations(t, s) {
		path := f.fill(op.path)
		if strings.HasSuffix(op.path, "/logs") {
			path += "?type=build" // required: without it the answer is a 422, whoever asks
		}
		namesA := strings.Contains(op.path, "{")
		if op.path == "/v2/deployment-logs" {
			path += "?deployment_id=" + f.github.ID // names A's deployment in its query
			namesA = true
		}
		body := ""
		if op.hasBody {
			body = `{"source_config": {"build_on_push": true}, "version": "9"}`
		}
		t.Run(op.method+" "+op.path, func(t *testing.T) {
			r := s.as(keyB, op.method, path, body)
			switch {
			case op.public:
				// Not tenant-scoped: the callback's state names the flow.
			case strings.HasPrefix(op.path, "/v2/auth/wait/"):
				// A flow of another tenant is not_found, like an unknown one.
				if r.status != 200 || string(r.body) != `{"status":"not_found","token":null}`+"\n" {
					t.Errorf("tenant B waits on A's flow: %d %s", r.status, r.body)
				}
			case namesA:
				d := detail(t, r)
				if r.status != 404 || !strings.HasSuffix(d, " not found.") || strings.Contains(d, tenantA) {
					t.Errorf("tenant B on A's resource: %d %s", r.status, r.body)
				}
			case op.method == "GET" && !op.public:
				if r.status != 200 || strings.Contains(string(r.body), f.github.ID) || strings.Contains(string(r.body), f.listener.ID) ||
					strings.Contains(string(r.body), f.integrationID) || strings.Contains(string(r.body), f.provider.ID) {
					t.Errorf("tenant B's list shows A's resources: %d %s", r.status, r.body)
				}
			}
		})
	}
	diff(t, "tenant A's resources after tenant B's requests", before, snapshot(t, s, f))
}

func snapshot(t *testing.T, s *server, f fixture) []string {
	t.Helper()
	var out []string
	for _, p := range []string{"/v2/deployments/" + f.github.ID, "/v2/deployments/" + f.github.ID + "/revisions",
		"/v2/listeners/" + f.listener.ID, "/v1/integrations/github",
		"/v2/auth/providers/" + f.provider.ProviderID, "/v2/auth/wait/" + f.authID, "/v2/webhooks/" + f.webhook.ID} {
		out = append(out, string(s.as(keyA, "GET", p, "").body))
	}
	return out
}

// TestOpenAPIMatchesMux: the document lists exactly what the handler
// serves. Every documented method of every documented path reaches a
// handler (not the router's 404 or 405), every other method of those paths
// is a 405 whose Allow lists exactly the documented methods, and the paths'
// neighbours (a trailing slash, one more segment) are 404s.
func TestOpenAPIMatchesMux(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	documented := map[string][]string{}
	for _, op := range operations(t, s) {
		documented[op.path] = append(documented[op.path], op.method)
	}
	all := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	for pattern, methods := range documented {
		path := f.fill(pattern)
		allowed := slices.Clone(methods)
		if slices.Contains(allowed, "GET") {
			allowed = append(allowed, "HEAD")
		}
		slices.Sort(allowed)
		for _, m := range all {
			r := s.as(keyA, m, path, "")
			if slices.Contains(allowed, m) {
				if m != "HEAD" && (r.status == 405 || r.status == 404 && string(r.body) == "{\"detail\":\"Not Found\"}\n") {
					t.Errorf("%s %s is documented but not served: %d %s", m, pattern, r.status, r.body)
				}
				continue
			}
			if r.status != 405 || r.header.Get("Allow") != strings.Join(allowed, ", ") {
				t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", m, pattern, r.status, r.header.Get("Allow"), strings.Join(allowed, ", "))
			}
		}
		for _, near := range []string{path + "/", path + "/extra"} {
			r := s.as(keyA, "GET", near, "")
			if r.status != 404 && !documentedPath(documented, near) {
				t.Errorf("GET %s: %d, want 404", near, r.status)
			}
		}
	}
	// The document is valid OpenAPI 3.1 in its essentials.
	var doc struct {
		OpenAPI    string `json:"openapi"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	diff(t, "openapi version", "3.1.0", doc.OpenAPI)
	for _, name := range []string{"Deployment", "Revision", "Listener", "Integration", "HTTPValidationError", "ResourceSpec",
		"OAuthProvider", "OAuthProviderCreate", "OAuthProviderPatch", "AuthenticateRequest", "AuthenticateResponse", "AuthWaitResponse"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s", name)
		}
	}
	var raw map[string]any
	_ = json.Unmarshal(s.do("GET", "/openapi.json", "").body, &raw)
	checkRefs(t, raw, doc.Components.Schemas)
}

// documentedPath reports whether some documented pattern matches path.
func documentedPath(documented map[string][]string, path string) bool {
	for p := range documented {
		ps, segs := strings.Split(p, "/"), strings.Split(path, "/")
		if len(ps) != len(segs) {
			continue
		}
		match := true
		for i := range ps {
			if ps[i] != segs[i] && !strings.HasPrefix(ps[i], "{") {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

// checkRefs: every $ref of the document names a schema it defines.
func checkRefs(t *testing.T, v any, schemas map[string]any) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/components/schemas/")
			if !found || schemas[name] == nil {
				t.Errorf("dangling $ref %q", ref)
			}
		}
		for _, e := range v {
			checkRefs(t, e, schemas)
		}
	case []any:
		for _, e := range v {
			checkRefs(t, e, schemas)
		}
	}
}

// TestOpenAPISchemasFollowTypes: the Deployment schema has a property for
// every member of a Deployment's JSON, so a field added to the type shows in
// the document.
func TestOpenAPISchemasFollowTypes(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"Deployment": f.github, "Listener": f.listener, "SourceConfig": f.github.SourceConfig,
		"OAuthProvider": f.provider} {
		b, _ := json.Marshal(v)
		var members map[string]any
		_ = json.Unmarshal(b, &members)
		var want, got []string
		for k := range members {
			want = append(want, k)
		}
		for k := range doc.Components.Schemas[name].Properties {
			got = append(got, k)
		}
		slices.Sort(want)
		slices.Sort(got)
		diff(t, name+" properties", want, got)
	}
}
