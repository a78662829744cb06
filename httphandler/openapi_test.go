package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/prommetrics"
	"github.com/deployplane/deployplane/storemem"
)

// docChecker validates answers against the served OpenAPI document, with
// a JSON Schema 2020-12 validator, and records which operations it saw.
type docChecker struct {
	t        *testing.T
	s        *server
	doc      map[string]any
	compiler *jsonschema.Compiler
	seen     map[string]bool // "GET /v2/deployments 200"
}

func newDocChecker(t *testing.T, s *server) *docChecker {
	t.Helper()
	r := s.do("GET", "/openapi.json", "")
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///openapi.json", doc); err != nil {
		t.Fatal(err)
	}
	return &docChecker{t: t, s: s, doc: doc.(map[string]any), compiler: c, seen: map[string]bool{}}
}

// pointer escapes a JSON pointer token for a URL fragment.
func pointer(tok string) string {
	return url.PathEscape(strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
}

// check validates r, the answer of method on a path of pattern, against
// the document: its status must be documented, a JSON body must match its
// schema, and a 409 must carry the documented x-should-retry.
func (c *docChecker) check(method, pattern string, r reply) {
	c.t.Helper()
	status := strconv.Itoa(r.status)
	op, _ := c.doc["paths"].(map[string]any)[pattern].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if op == nil {
		c.t.Errorf("%s %s is not in the document", method, pattern)
		return
	}
	resp, _ := op["responses"].(map[string]any)[status].(map[string]any)
	if resp == nil {
		c.t.Errorf("%s %s answered %d, which the document does not list: %s", method, pattern, r.status, r.body)
		return
	}
	c.seen[method+" "+pattern+" "+status] = true
	content, _ := resp["content"].(map[string]any)
	if content == nil {
		if len(r.body) != 0 {
			c.t.Errorf("%s %s %d: a body the document does not describe: %s", method, pattern, r.status, r.body)
		}
		return
	}
	ct, _, _ := strings.Cut(r.header.Get("Content-Type"), ";")
	if content[ct] == nil {
		c.t.Errorf("%s %s %d: Content-Type %q, the document says %v", method, pattern, r.status, ct, slices.Collect(mapKeys(content)))
		return
	}
	headers, _ := resp["headers"].(map[string]any)
	for name := range headers {
		if r.header.Get(name) == "" {
			c.t.Errorf("%s %s %d: no %s header, which the document promises", method, pattern, r.status, name)
		}
	}
	if ct != "application/json" {
		return
	}
	loc := "mem:///openapi.json#/paths/" + pointer(pattern) + "/" + strings.ToLower(method) + "/responses/" + status +
		"/content/application~1json/schema"
	sch, err := c.compiler.Compile(loc)
	if err != nil {
		c.t.Fatalf("compiling the schema of %s %s %d: %v", method, pattern, r.status, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
	if err != nil {
		c.t.Errorf("%s %s %d: not JSON: %v: %s", method, pattern, r.status, err, r.body)
		return
	}
	if err := sch.Validate(v); err != nil {
		c.t.Errorf("%s %s: the answer does not match the document: %v\nanswer: %s", method, pattern, err, r.body)
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestOpenAPIDescribesAnswers: a real answer of every route, over a real
// server, matches the served document (JSON Schema 2020-12), and so do the
// usual errors: 404, 422, and 409 with its x-should-retry header. Every
// operation with a JSON success answer must be exercised here.
func TestOpenAPIDescribesAnswers(t *testing.T) {
	// A running reconcile loop (deploysim) makes /readyz answer 200 and
	// moves the revisions along while the answers are read.
	// Agents serve the listeners of compute_id edge-... (checkAgentRoutes).
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil),
		Drives: agentDrives})
	s := newServerCP(t, cp, langgraphDeployOptions(t, cp, &httphandler.Options{Metrics: prommetrics.New(nil), Registry: registryAt(cp, "127.0.0.1:5000")}))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, deploysim.New(nil)) }()
	t.Cleanup(func() { stop(); <-done })
	waitReady(t, s, http.StatusOK)
	f := newFixture(t, s)
	c := newDocChecker(t, s)
	as := func(key, method, pattern, body string, want int) reply {
		t.Helper()
		r := s.as(key, method, f.fill(pattern), body)
		if r.status != want {
			t.Errorf("%s %s: %d, want %d: %s", method, pattern, r.status, want, r.body)
		}
		c.check(method, pattern, r)
		return r
	}
	at := func(method, pattern, path, body string, want int) reply {
		t.Helper()
		r := s.as(keyA, method, path, body)
		if r.status != want {
			t.Errorf("%s %s: %d, want %d: %s", method, path, r.status, want, r.body)
		}
		c.check(method, pattern, r)
		return r
	}
	dep, rev := "/v2/deployments/{deployment_id}", "/v2/deployments/{deployment_id}/revisions/{revision_id}"
	docker := "/v2/deployments/" + f.docker.ID

	// Deployments: github and external_docker (whose deployment_type is
	// null), lists with filters, PATCH, errors.
	as(keyA, "GET", "/v2/deployments", "", 200)
	at("GET", "/v2/deployments", "/v2/deployments?deployment_type=prod&limit=1&offset=0", "", 200)
	as(keyA, "GET", dep, "", 200)
	at("GET", dep, docker, "", 200)
	as(keyA, "PATCH", dep, `{"display_name": "The agent"}`, 200)
	at("PATCH", dep, docker, `{"secrets": [{"name": "K", "value": "v"}]}`, 200)
	created := as(keyA, "POST", "/v2/deployments", dockerBody("another"), 201)
	as(keyA, "POST", "/v2/deployments", dockerBody("another"), 409)
	as(keyA, "POST", "/v2/deployments", `{"name": "-bad"}`, 422)
	at("GET", dep, "/v2/deployments/00000000-0000-7000-8000-0000000000ff", "", 404)
	at("GET", "/v2/deployments", "/v2/deployments?limit=1000", "", 422)
	// The newer fields and filters, and a JSON merge patch.
	as(keyA, "POST", "/v2/deployments", `{"name": "zero", "source": "internal_docker", "source_config": {"deployment_type": "dev_zero",
		"resource_spec": {"min_scale": 0}}, "source_revision_config": {}, "agent": {"agent_id": "ag", "environment": "production"},
		"secret_references": [{"name": "DB_PASSWORD", "secret_name": "db-creds", "secret_key": "password"}]}`, 201)
	at("GET", "/v2/deployments", "/v2/deployments?name=zero&agent_id=ag&agent_environment=production", "", 200)
	at("GET", "/v2/deployments", "/v2/deployments?agent_environment=qa", "", 422)
	mp := s.do("PATCH", docker, `{"display_name": null, "source_config": {"resource_spec": {"cpu": 2}}}`,
		"X-Api-Key", keyA, "Content-Type", "application/merge-patch+json")
	if mp.status != 200 {
		t.Errorf("merge patch: %d %s", mp.status, mp.body)
	}
	c.check("PATCH", dep, mp)

	// langgraph deploy's sources (wire contract section 10): a create
	// without a source yet, then the PATCH that brings one, with
	// revision_source and tracked_packages; the revision answers them.
	ld := as(keyA, "POST", "/v2/deployments", `{"name": "lg-docker", "source": "internal_docker", "source_config": {"deployment_type": "dev"}, "source_revision_config": {}}`, 201)
	var ldd struct{ ID string }
	_ = json.Unmarshal(ld.body, &ldd)
	lp := at("PATCH", dep, "/v2/deployments/"+ldd.ID, `{"revision_source": "internal_docker", "source_revision_config": {"image_uri": "127.0.0.1:5000/x/agent@sha256:`+strings.Repeat("ab", 32)+`"}, "tracked_packages": ["langgraph"]}`, 200)
	var lpd struct {
		LatestRevisionID string `json:"latest_revision_id"`
	}
	_ = json.Unmarshal(lp.body, &lpd)
	lr := at("GET", rev, "/v2/deployments/"+ldd.ID+"/revisions/"+lpd.LatestRevisionID, "", 200)
	if !strings.Contains(string(lr.body), `"tracked_packages":["langgraph"]`) {
		t.Errorf("the revision does not answer its tracked_packages: %s", lr.body)
	}
	at("PATCH", dep, "/v2/deployments/"+ldd.ID, `{"revision_source": "github", "tracked_packages": [""]}`, 422)
	pt := at("POST", dep+"/push-token", "/v2/deployments/"+ldd.ID+"/push-token", "", 200)
	if !strings.Contains(string(pt.body), `"registry_url":"127.0.0.1:5000/deployments/`+ldd.ID+`"`) {
		t.Errorf("push-token: %s", pt.body)
	}
	at("POST", dep+"/push-token", docker+"/push-token", "", 400)
	ls := as(keyA, "POST", "/v2/deployments", `{"name": "lg-src", "source": "internal_source", "source_revision_config": {"langgraph_config_path": "agent/langgraph.json"}}`, 201)
	var lsd struct{ ID string }
	_ = json.Unmarshal(ls.body, &lsd)
	checkLanggraphDeployRoutes(t, s, c, lsd.ID, ldd.ID, f.docker.ID)

	// Rollback: to the first of two DEPLOYED revisions; none to go back to.
	var rb controlplane.Deployment
	_ = json.Unmarshal(as(keyA, "POST", "/v2/deployments", dockerBody("rollback"), 201).body, &rb)
	waitDeployed := func(revID string) {
		t.Helper()
		r := s.as(keyA, "GET", "/v2/deployments/"+rb.ID+"/revisions/"+revID+"?wait=terminal&timeout=60", "")
		if !strings.Contains(string(r.body), `"status":"DEPLOYED"`) {
			t.Fatalf("revision %s: %s", revID, r.body)
		}
	}
	waitDeployed(*rb.LatestRevisionID)
	at("POST", dep+"/rollback", "/v2/deployments/"+rb.ID+"/rollback", "", 400)
	var rb2 controlplane.Deployment
	_ = json.Unmarshal(s.as(keyA, "PATCH", "/v2/deployments/"+rb.ID, `{"source_revision_config": {"image_uri": "registry.example/agent:2"}}`).body, &rb2)
	waitDeployed(*rb2.LatestRevisionID)
	at("POST", dep+"/rollback", "/v2/deployments/"+rb.ID+"/rollback", `{}`, 200)
	at("POST", dep+"/rollback", "/v2/deployments/"+rb.ID+"/rollback", `{"revision_id": "00000000-0000-7000-8000-0000000000ff"}`, 404)

	// Revisions and logs.
	as(keyA, "GET", "/v2/deployments/{deployment_id}/revisions", "", 200)
	at("POST", "/v2/deployments/{deployment_id}/revisions", docker+"/revisions", "", 201)
	as(keyA, "GET", rev, "", 200)
	at("GET", rev, f.fill(rev)+"?wait=terminal&timeout=0", "", 200)
	at("GET", rev, f.fill(rev)+"?wait=soon", "", 422)
	as(keyA, "POST", rev+"/redeploy", "", 200)
	at("GET", rev+"/logs", f.fill(rev+"/logs")+"?type=build", "", 200)
	as(keyA, "GET", rev+"/logs", "", 422)
	as(keyA, "POST", "/v1/projects/{project_id}/revisions/{revision_id}/build_logs", `{"limit": 10}`, 200)
	as(keyA, "POST", "/v1/projects/{project_id}/revisions/{revision_id}/deploy_logs", "", 200)
	as(keyA, "POST", "/v1/projects/{project_id}/deploy_logs", `{"order": "desc"}`, 200)
	if err := cp.AppendLogs(context.Background(), tenantA, f.docker.ID, *f.docker.LatestRevisionID,
		controlplane.LogLine{Type: controlplane.LogDeploy, Message: "listening"}); err != nil {
		t.Fatal(err)
	}
	if dl := at("GET", "/v2/deployment-logs", "/v2/deployment-logs?deployment_id="+f.docker.ID+"&page_size=1&sort_order=desc", "", 200); !strings.Contains(string(dl.body), `"items":[{`) {
		t.Errorf("deployment-logs answered no line: %s", dl.body)
	}
	at("GET", "/v2/deployment-logs", "/v2/deployment-logs?page_size=0", "", 422)
	at("GET", "/v2/deployment-logs", "/v2/deployment-logs?deployment_id=00000000-0000-7000-8000-0000000000ff", "", 404)
	as(keyA, "GET", "/v2/deployments/free-count", "", 200)

	// Listeners.
	l := as(keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "cluster-9"}`, 201)
	as(keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "cluster-9"}`, 409)
	as(keyA, "GET", "/v2/listeners", "", 200)
	as(keyA, "GET", "/v2/listeners/{listener_id}", "", 200)
	as(keyA, "PATCH", "/v2/listeners/{listener_id}", `{"version": "2"}`, 200)
	var lis struct{ ID string }
	_ = json.Unmarshal(l.body, &lis)
	at("DELETE", "/v2/listeners/{listener_id}", "/v2/listeners/"+lis.ID, "", 204)

	// Listener tokens and the agent routes.
	checkAgentRoutes(t, s, c)

	// GitHub integrations.
	as(keyA, "GET", "/v1/integrations/github", "", 200)
	as(keyA, "POST", "/v1/integrations/github", `{"installation_id": 4242, "name": "other"}`, 201)
	as(keyA, "GET", "/v1/integrations/github/install", "", 200)
	r := s.do("GET", "/v1/integrations/github/setup", "")
	c.check("GET", "/v1/integrations/github/setup", r)
	r = s.deliver("ping", `{"zen": "Keep it logically awesome."}`)
	c.check("POST", "/v1/integrations/github/webhook", r)

	// OAuth helpers.
	as(keyA, "GET", "/v2/auth/providers", "", 200)
	as(keyA, "GET", "/v2/auth/providers/{provider_id}", "", 200)
	as(keyA, "PATCH", "/v2/auth/providers/{provider_id}", `{"name": "Fake provider"}`, 200)
	as(keyA, "POST", "/v2/auth/authenticate", `{"user_id": "user-a", "provider": "fake", "scopes": ["read"]}`, 200)
	at("GET", "/v2/auth/wait/{auth_id}", f.fill("/v2/auth/wait/{auth_id}")+"?timeout=0", "", 200)
	as(keyA, "POST", "/v2/auth/providers", s.providerBody("other", false), 200)
	at("DELETE", "/v2/auth/providers/{provider_id}", "/v2/auth/providers/other", "", 200)

	// The tenants' webhooks (tenantwebhooks.go).
	wh := as(keyA, "POST", "/v2/webhooks", `{"url": "https://hooks.example.com/a", "events": ["*"], "description": "ops"}`, 201)
	as(keyA, "POST", "/v2/webhooks", `{"url": "http://hooks.example.com/a", "events": ["nope"]}`, 422)
	var whd struct{ ID string }
	_ = json.Unmarshal(wh.body, &whd)
	hook := "/v2/webhooks/" + whd.ID
	as(keyA, "GET", "/v2/webhooks", "", 200)
	at("GET", "/v2/webhooks/{webhook_id}", hook, "", 200)
	at("GET", "/v2/webhooks/{webhook_id}", "/v2/webhooks/00000000-0000-7000-8000-0000000000ff", "", 404)
	at("PATCH", "/v2/webhooks/{webhook_id}", hook, `{"enabled": false}`, 200)
	at("GET", "/v2/webhooks/{webhook_id}/deliveries", hook+"/deliveries", "", 200)
	at("GET", "/v2/webhooks/{webhook_id}/deliveries", hook+"/deliveries?limit=0", "", 422)
	at("DELETE", "/v2/webhooks/{webhook_id}", hook, "", 204)

	// Operations and the description.
	for _, p := range []string{"/openapi.json", "/healthz", "/readyz", "/metrics"} {
		r := s.do("GET", p, "")
		c.check("GET", p, r)
	}

	// Interrupts, of a revision waiting for its agent (no agent of
	// listener edge-interrupt claims it).
	el := as(keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "edge-interrupt"}`, 201)
	var elis struct{ ID string }
	_ = json.Unmarshal(el.body, &elis)
	waiting := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", agentDeploymentBody("waiting", elis.ID), 201)
	interrupt := "/v2/deployments/" + waiting.ID + "/revisions/" + *waiting.LatestRevisionID + "/interrupt"
	at("POST", rev+"/interrupt", interrupt, "", 200)
	at("POST", rev+"/interrupt", interrupt, "", 400)

	// Deletion last.
	var d struct{ ID string }
	_ = json.Unmarshal(created.body, &d)
	at("DELETE", dep, "/v2/deployments/"+d.ID, "", 204)
	at("DELETE", "/v2/deployments", "/v2/deployments?deployment_ids="+waiting.ID, "", 200)
	at("DELETE", "/v2/deployments", "/v2/deployments?deployment_ids="+waiting.ID+",nope", "", 207)
	at("DELETE", "/v2/deployments", "/v2/deployments", "", 422)

	// What the request schemas require is refused without it.
	for _, tt := range []struct{ path, body string }{
		{"/v2/deployments", `{"source": "external_docker", "source_revision_config": {"image_uri": "i"}}`},
		{"/v2/deployments", `{"name": "no-source", "source_revision_config": {"image_uri": "i"}}`},
		{"/v2/listeners", `{"compute_type": "k8s"}`},
		{"/v2/listeners", `{"compute_id": "c"}`},
		{"/v1/integrations/github", `{"name": "n"}`},
		{"/v1/integrations/github", `{"installation_id": 7}`},
	} {
		as(keyA, "POST", tt.path, tt.body, 422)
	}

	// Every operation with a JSON success answer was checked.
	for pattern, item := range c.doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			for status, resp := range op.(map[string]any)["responses"].(map[string]any) {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				content, _ := resp.(map[string]any)["content"].(map[string]any)
				if content["application/json"] != nil && !c.seen[strings.ToUpper(method)+" "+pattern+" "+status] {
					t.Errorf("%s %s %s: no answer of it was checked against the document; add one to this test",
						strings.ToUpper(method), pattern, status)
				}
			}
		}
	}
	if !c.seen["POST /v2/deployments 409"] {
		t.Error("no 409 was checked")
	}
}

// openAPIOutEnv names a file that TestOpenAPIConventions writes the served
// document to (every optional route included), for linters (.ci/run runs
// Redocly's on it).
const openAPIOutEnv = "DEPLOYPLANE_OPENAPI_OUT"

// TestOpenAPIConventions: the document is complete as generated clients
// need it: every object schema says which members are required (an answer
// requires them all but the omitted zero values), ids and times have their
// formats, every operation id is unique and FastAPI's, the list pages are
// named as the hosted service names them, the limit parameters have their
// bounds and defaults, and the server is the prefix the handler is mounted
// under.
func TestOpenAPIConventions(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	s := newServerCP(t, cp, langgraphDeployOptions(t, cp, &httphandler.Options{Metrics: prommetrics.New(nil), BasePath: "/api-host/",
		Registry: registryAt(cp, "127.0.0.1:5000")}))
	body := s.do("GET", "/openapi.json", "").body
	if out := os.Getenv(openAPIOutEnv); out != "" {
		if err := os.WriteFile(out, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/api-host" {
		t.Errorf("servers = %+v, want the one /api-host", doc.Servers)
	}
	for name, sch := range doc.Components.Schemas {
		props, _ := sch["properties"].(map[string]any)
		if sch["type"] != "object" || props == nil {
			continue
		}
		req, hasReq := sch["required"].([]any)
		input := strings.HasSuffix(name, "Input") || strings.HasSuffix(name, "Request") || strings.HasSuffix(name, "Create") ||
			strings.HasSuffix(name, "Patch") || strings.HasPrefix(name, "GitHub") && name != "GitHubInstallURL" && name != "GitHubWebhookResponse"
		switch {
		case !input && (!hasReq || len(req) == 0):
			t.Errorf("schema %s (of answers) has no required list", name)
		case input && hasReq && len(req) == 0:
			t.Errorf("schema %s has an empty required list", name)
		}
		for _, r := range req {
			if props[r.(string)] == nil {
				t.Errorf("schema %s requires %v, which it does not describe", name, r)
			}
		}
	}
	formats := map[string]string{"Deployment.id": "uuid", "Deployment.tenant_id": "uuid", "Deployment.created_at": "date-time",
		"Revision.id": "uuid", "Revision.updated_at": "date-time", "Listener.created_at": "date-time", "StatusChange.at": "date-time"}
	for key, want := range formats {
		name, member, _ := strings.Cut(key, ".")
		p, _ := doc.Components.Schemas[name]["properties"].(map[string]any)[member].(map[string]any)
		if p["format"] != want {
			t.Errorf("%s: format %v, want %s", key, p["format"], want)
		}
	}
	for _, name := range []string{"Deployment", "DeploymentsList", "Revision", "RevisionsList", "Listener", "ListenersList",
		"HTTPValidationError", "ValidationError", "ListenerCreateRequest", "ListenerComputeConfig", "CreateDeploymentRequest", "SourceConfigInput", "SourceRevisionConfigInput"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s", name)
		}
	}
	ids := map[string]string{}
	for path, item := range doc.Paths {
		for method, op := range item {
			id, _ := op["operationId"].(string)
			if prev, dup := ids[id]; dup {
				t.Errorf("operation id %s of %s %s is also %s's", id, method, path, prev)
			}
			ids[id] = method + " " + path
			if !strings.HasSuffix(id, "_"+method) {
				t.Errorf("%s %s: operation id %s does not end with its method", method, path, id)
			}
		}
	}
	for id, op := range map[string]string{
		"list_deployments_v2_deployments_get":                                     "get /v2/deployments",
		"create_deployment_v2_deployments_post":                                   "post /v2/deployments",
		"get_deployment_v2_deployments__deployment_id__get":                       "get /v2/deployments/{deployment_id}",
		"list_revisions_v2_deployments__deployment_id__revisions_get":             "get /v2/deployments/{deployment_id}/revisions",
		"get_revision_v2_deployments__deployment_id__revisions__revision_id__get": "get /v2/deployments/{deployment_id}/revisions/{revision_id}",
		"list_listeners_v2_listeners_get":                                         "get /v2/listeners",
	} {
		if ids[id] != op {
			t.Errorf("operation id %s names %q, want %s", id, ids[id], op)
		}
	}
	for _, name := range []string{"CreateDeploymentRequest", "UpdateDeploymentRequest"} {
		p := doc.Components.Schemas[name]["properties"].(map[string]any)["display_name"].(map[string]any)
		if p["minLength"] != 1.0 || p["maxLength"] != 256.0 {
			t.Errorf("%s.display_name: %v, want 1 to 256 characters", name, p)
		}
	}
	diff(t, "sources", []any{"github", "external_docker", "internal_source", "internal_docker"},
		doc.Components.Schemas["Deployment"]["properties"].(map[string]any)["source"].(map[string]any)["enum"])
	tp := doc.Components.Schemas["UpdateDeploymentRequest"]["properties"].(map[string]any)["tracked_packages"].(map[string]any)
	diff(t, "tracked_packages", []any{100.0, map[string]any{"type": "string", "minLength": 1.0, "maxLength": 214.0}}, []any{tp["maxItems"], tp["items"]})
	if p := doc.Components.Schemas["UpdateDeploymentRequest"]["properties"].(map[string]any)["revision_source"]; p == nil {
		t.Error("UpdateDeploymentRequest has no revision_source")
	}
	req := doc.Components.Schemas["CreateDeploymentRequest"]["properties"].(map[string]any)["name"].(map[string]any)
	diff(t, "a required request member is not nullable", "string", req["type"])
	param := func(path, method, name string) map[string]any {
		for _, p := range doc.Paths[path][method]["parameters"].([]any) {
			if p := p.(map[string]any); p["name"] == name {
				return p
			}
		}
		t.Fatalf("%s %s has no parameter %s", method, path, name)
		return nil
	}
	diff(t, "limit", map[string]any{"type": "integer", "minimum": 1.0, "maximum": 100.0, "default": 20.0},
		param("/v2/deployments", "get", "limit")["schema"])
	diff(t, "deployment_type", []any{"dev_free", "dev", "prod", "dev_zero", "dev_free_zero"},
		param("/v2/deployments", "get", "deployment_type")["schema"].(map[string]any)["enum"])
	logType := param("/v2/deployments/{deployment_id}/revisions/{revision_id}/logs", "get", "type")
	diff(t, "the logs type is required", true, logType["required"])
	diff(t, "409 header", map[string]any{"type": "string", "enum": []any{"false"}},
		doc.Paths["/v2/deployments"]["post"]["responses"].(map[string]any)["409"].(map[string]any)["headers"].(map[string]any)["x-should-retry"].(map[string]any)["schema"])
}

// TestOpenAPIDescribesRefusals: a 429 of the rate limit matches the
// document, headers included, on a route with a key and a public one.
func TestOpenAPIDescribesRefusals(t *testing.T) {
	clock := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s := newServer(t, &httphandler.Options{Load: &httphandler.LoadLimits{RateLimit: &httphandler.RateLimit{
		PerSecond: 0.001, Burst: 1, Now: func() time.Time { return clock }}}})
	c := newDocChecker(t, s)
	for _, path := range []string{"/v2/deployments", "/openapi.json"} {
		var r reply
		for range 2 {
			r = s.as(keyA, "GET", path, "")
		}
		if r.status != http.StatusTooManyRequests {
			t.Fatalf("GET %s after the burst: %d %s", path, r.status, r.body)
		}
		c.check("GET", path, r)
	}
	if !c.seen["GET /v2/deployments 429"] {
		t.Error("the 429 was not checked")
	}
	// No reconcile loop runs here: /readyz answers its own 503 body.
	r := s.do("GET", "/readyz", "")
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("GET /readyz without a reconcile loop: %d %s", r.status, r.body)
	}
	c.check("GET", "/readyz", r)
	if !c.seen["GET /readyz 503"] {
		t.Error("the 503 of /readyz was not checked")
	}
}

// TestOpenAPIRequiredIsWhatIsMissing: the required list of each create
// body's schema names exactly the members an empty body is refused for
// ("missing" problems at ["body", member]), so a generated client makes
// required what the server requires, and nothing else.
func TestOpenAPIRequiredIsWhatIsMissing(t *testing.T) {
	s := newServer(t, nil)
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required []string `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, schema string }{
		{"/v2/deployments", "CreateDeploymentRequest"},
		{"/v2/listeners", "ListenerCreateRequest"},
		{"/v1/integrations/github", "CreateIntegrationRequest"},
		{"/v2/auth/providers", "OAuthProviderCreate"},
		{"/v2/auth/authenticate", "AuthenticateRequest"},
		{"/v2/webhooks", "WebhookCreateRequest"},
	} {
		r := s.as(keyA, "POST", tt.path, `{}`)
		var missing []string
		for _, p := range problems(t, r) {
			if p.Type == apierr.TypeMissing && len(p.Loc) == 2 {
				missing = append(missing, p.Loc[1].(string))
			}
		}
		slices.Sort(missing)
		sch, ok := doc.Components.Schemas[tt.schema]
		if !ok {
			t.Errorf("no schema %s", tt.schema)
			continue
		}
		req := slices.Sorted(slices.Values(sch.Required))
		diff(t, tt.schema+" required, against POST "+tt.path+" {}'s missing members", missing, req)
	}
}
