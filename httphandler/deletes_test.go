package httphandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// removedProjects is the default tracing hook, remembering what each
// removal was told (deployment name -> delete_tracing_project).
type removedProjects struct {
	controlplane.StoreTracingProjects
	mu      sync.Mutex
	removed map[string]bool
}

func (p *removedProjects) RemoveTracingProject(ctx context.Context, tx store.Tx, tp controlplane.TracingProject, deleteProject bool) error {
	p.mu.Lock()
	p.removed[tp.Name] = deleteProject
	p.mu.Unlock()
	return p.StoreTracingProjects.RemoveTracingProject(ctx, tx, tp, deleteProject)
}

// The wire details of the deletes: force and delete_tracing_project on
// DELETE /v2/deployments/{id}, force on DELETE /v2/listeners/{id}; bad
// values are 422 at ["query", name] (with the path's problems), a forced
// delete of a deployment not being deleted is 400 with a detail, and every
// answer is one the OpenAPI document lists.
func TestDeleteQueries(t *testing.T) {
	projects := &removedProjects{removed: map[string]bool{}}
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil),
		TracingProjects: projects})
	s := newServerCP(t, cp, nil)
	doc := newDocChecker(t, s)
	create := func(name, sourceConfig string) controlplane.Deployment {
		return must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "`+name+`", "source": "external_docker",
			"source_config": {`+sourceConfig+`}, "source_revision_config": {"image_uri": "registry.example/agent:1"}}`, 201)
	}
	ran, waiting := create("ran", ""), create("waiting", "")
	reachEngine(t, cp)
	never, kept := create("never", ""), create("kept", "")
	busy := must[controlplane.Listener](t, s, keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "gone"}`, 201)
	onBusy := create("on-busy", `"listener_id": "`+busy.ID+`"`)
	if r := s.as(keyA, "DELETE", "/v2/deployments/"+waiting.ID, ""); r.status != 204 {
		t.Fatalf("DELETE of a deployment that ran: %d %s", r.status, r.body)
	}
	const unknown = "00000000-0000-7000-8000-0000000000ff"

	for _, tc := range []struct {
		name, method, path, pattern string
		status                      int
		problems                    []string // 422: "loc: type"
		detail                      string   // 400, 404: a part of the detail
	}{
		{name: "force not a boolean", path: "/v2/deployments/" + ran.ID + "?force=maybe", status: 422,
			problems: []string{"query.force: bool_parsing"}},
		{name: "delete_tracing_project not a boolean", path: "/v2/deployments/" + ran.ID + "?delete_tracing_project=nah", status: 422,
			problems: []string{"query.delete_tracing_project: bool_parsing"}},
		{name: "path and query problems together", path: "/v2/deployments/not-a-uuid?force=maybe&delete_tracing_project=", status: 422,
			problems: []string{"path.deployment_id: uuid_parsing", "query.delete_tracing_project: bool_parsing", "query.force: bool_parsing"}},
		{name: "force for a deployment not being deleted", path: "/v2/deployments/" + ran.ID + "?force=true", status: 400,
			detail: "Deployment ID " + ran.ID + " is not being deleted"},
		{name: "force for an unknown deployment", path: "/v2/deployments/" + unknown + "?force=true", status: 404,
			detail: "Deployment ID " + unknown + " not found."},
		{name: "another tenant's deployment", path: "/v2/deployments/" + ran.ID + "?force=true", status: 404},
		{name: "a deployment that never ran", path: "/v2/deployments/" + never.ID, status: 204},
		{name: "keeping the tracing project", path: "/v2/deployments/" + kept.ID + "?delete_tracing_project=false", status: 204},
		{name: "force for a deployment AWAITING_DELETE", path: "/v2/deployments/" + waiting.ID + "?force=true&delete_tracing_project=0", status: 204},
		{name: "listener: force not a boolean", path: "/v2/listeners/" + busy.ID + "?force=perhaps", status: 422,
			problems: []string{"query.force: bool_parsing"}},
		{name: "listener: path and query problems", path: "/v2/listeners/nope?force=perhaps", status: 422,
			problems: []string{"path.listener_id: uuid_parsing", "query.force: bool_parsing"}},
		{name: "listener in use, without force", path: "/v2/listeners/" + busy.ID, status: 400, detail: "force=true"},
		{name: "listener in use, with force", path: "/v2/listeners/" + busy.ID + "?force=1", status: 204},
		{name: "listener gone", path: "/v2/listeners/" + busy.ID + "?force=true", status: 404, detail: "Listener ID " + busy.ID + " not found."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := keyA
			if strings.HasPrefix(tc.name, "another tenant") {
				key = keyB
			}
			r := s.as(key, "DELETE", tc.path, "")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			pattern := "/v2/deployments/{deployment_id}"
			if strings.HasPrefix(tc.path, "/v2/listeners/") {
				pattern = "/v2/listeners/{listener_id}"
			}
			doc.check("DELETE", pattern, r)
			switch {
			case tc.status == 204:
				diff(t, "body", "", string(r.body))
			case tc.problems != nil:
				var body struct{ Detail []apierr.Problem }
				if err := json.Unmarshal(r.body, &body); err != nil {
					t.Fatal(err)
				}
				diff(t, "problems", tc.problems, locTypes(body.Detail))
			case !strings.Contains(detail(t, r), tc.detail):
				t.Errorf("detail %q, want it to say %q", detail(t, r), tc.detail)
			}
		})
	}

	for _, d := range []controlplane.Deployment{never, kept, waiting, onBusy} {
		if r := s.as(keyA, "GET", "/v2/deployments/"+d.ID, ""); r.status != 404 {
			t.Errorf("GET %s after its delete: %d, want 404", d.Name, r.status)
		}
		create(d.Name, "") // the name is free
	}
	if r := s.as(keyA, "GET", "/v2/deployments/"+ran.ID, ""); r.status != 200 {
		t.Errorf("GET of the deployment a refused force left alone: %d", r.status)
	}
	if r := s.as(keyA, "GET", "/v2/listeners/"+busy.ID, ""); r.status != 404 {
		t.Errorf("GET of the listener after its forced delete: %d, want 404", r.status)
	}
	projects.mu.Lock()
	defer projects.mu.Unlock()
	diff(t, "delete_tracing_project as the tracing hook heard it",
		map[string]bool{"never": true, "kept": false, "waiting": false, "on-busy": true}, projects.removed)
}

// /openapi.json lists the query parameters of the deletes, with their
// defaults, the 400 of a forced delete, and the bulk delete's 207.
func TestOpenAPIListsDeleteQueries(t *testing.T) {
	s := newServer(t, nil)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name, In string
				Schema   struct {
					Type    string
					Default any
				}
			}
			Responses map[string]any
		}
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	type q struct {
		Name, Type string
		Default    any
	}
	for path, want := range map[string][]q{
		"/v2/deployments/{deployment_id}": {{"force", "boolean", false}, {"delete_tracing_project", "boolean", true}},
		"/v2/listeners/{listener_id}":     {{"force", "boolean", false}},
		"/v2/deployments":                 {{"deployment_ids", "string", nil}, {"force", "boolean", false}, {"delete_tracing_project", "boolean", true}},
	} {
		op := doc.Paths[path]["delete"]
		var got []q
		for _, p := range op.Parameters {
			if p.In == "query" {
				got = append(got, q{p.Name, p.Schema.Type, p.Schema.Default})
			}
		}
		diff(t, "query parameters of DELETE "+path, want, got)
		statuses := []string{"204", "400", "404", "422"}
		if path == "/v2/deployments" { // each id's 400 and 404 are in its result
			statuses = []string{"200", "207", "422"}
		}
		for _, status := range statuses {
			if op.Responses[status] == nil {
				t.Errorf("DELETE %s: no %s answer in the document", path, status)
			}
		}
	}
}

// bulkAnswer is the body of DELETE /v2/deployments.
type bulkAnswer struct {
	Results []struct {
		ID     string          `json:"id"`
		Status int             `json:"status"`
		Detail json.RawMessage `json:"detail"`
	} `json:"results"`
}

// TestBulkDelete: DELETE /v2/deployments?deployment_ids=... deletes each
// id as the single DELETE does, with its force and
// delete_tracing_project: 200 with a 204 result for each when all were
// deleted, 207 otherwise, each result with the status and detail its own
// DELETE would answer (404 for an unknown id or another tenant's, 400 for
// a refused force, 422 with the problems for an id that is no UUID). No
// ids, or more than 100, is a 422 for the request, listed with the
// options' problems. It answers under /api-host too, and every answer is
// one the OpenAPI document lists.
func TestBulkDelete(t *testing.T) {
	projects := &removedProjects{removed: map[string]bool{}}
	cp := controlplane.New(storemem.New(), &controlplane.Options{TracingProjects: projects})
	s := newServerCP(t, cp, nil)
	doc := newDocChecker(t, s)
	create := func(key, name string) controlplane.Deployment {
		return must[controlplane.Deployment](t, s, key, "POST", "/v2/deployments", dockerBody(name), 201)
	}
	ran := create(keyA, "ran")
	reachEngine(t, cp)
	never, kept, theirs := create(keyA, "never"), create(keyA, "kept"), create(keyB, "theirs")
	const unknown = "00000000-0000-7000-8000-0000000000ff"
	bulk := func(key, query string, want int) bulkAnswer {
		t.Helper()
		r := s.as(key, "DELETE", "/v2/deployments"+query, "")
		if r.status != want {
			t.Fatalf("DELETE /v2/deployments%s: %d, want %d: %s", query, r.status, want, r.body)
		}
		doc.check("DELETE", "/v2/deployments", r)
		var a bulkAnswer
		if want < 300 {
			if err := json.Unmarshal(r.body, &a); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}
	results := func(a bulkAnswer) []string {
		var out []string
		for _, r := range a.Results {
			out = append(out, fmt.Sprintf("%s %d %s", r.ID, r.Status, r.Detail))
		}
		return out
	}

	a := bulk(keyA, "?deployment_ids="+never.ID+","+strings.ToUpper(ran.ID), 200)
	diff(t, "all deleted", []string{never.ID + " 204 ", ran.ID + " 204 "}, results(a))
	r := s.as(keyA, "DELETE", "/v2/deployments?deployment_ids="+never.ID, "")
	if !strings.Contains(string(r.body), `"status":404`) || strings.Contains(string(r.body), `"detail":null`) {
		t.Errorf("a deleted id again: %d %s", r.status, r.body)
	}

	a = bulk(keyA, "?deployment_ids="+ran.ID+",nope,"+unknown+","+theirs.ID+","+kept.ID+"&force=true&delete_tracing_project=false", 207)
	diff(t, "some failed", []string{
		ran.ID + " 204 ",
		`nope 422 [{"loc":["query","deployment_ids",1],"msg":"` + apierr.MsgInvalidUUID + `","type":"uuid_parsing"}]`,
		unknown + ` 404 "Deployment ID ` + unknown + ` not found."`,
		theirs.ID + ` 404 "Deployment ID ` + theirs.ID + ` not found."`,
		kept.ID + ` 400 "Deployment ID ` + kept.ID + ` is not being deleted: force=true removes only a deployment whose teardown is awaited (AWAITING_DELETE). Delete it without force first."`,
	}, results(a))
	if r := s.as(keyA, "GET", "/v2/deployments/"+ran.ID, ""); r.status != 404 {
		t.Errorf("GET of a deployment a forced bulk delete removed: %d", r.status)
	}
	if r := s.as(keyB, "GET", "/v2/deployments/"+theirs.ID, ""); r.status != 200 {
		t.Errorf("another tenant's deployment after the bulk delete: %d", r.status)
	}
	bulk(keyA, "?deployment_ids="+kept.ID+"&delete_tracing_project=false", 200)
	projects.mu.Lock()
	diff(t, "delete_tracing_project as the tracing hook heard it", map[string]bool{"never": true, "ran": false, "kept": false}, projects.removed)
	projects.mu.Unlock()

	prefixed := s.do("DELETE", httphandler.APIHostPrefix+"/v2/deployments?deployment_ids="+theirs.ID, "", "X-Api-Key", keyB)
	doc.check("DELETE", "/v2/deployments", prefixed)
	if prefixed.status != 200 {
		t.Errorf("bulk delete under /api-host: %d %s", prefixed.status, prefixed.body)
	}

	many := strings.TrimSuffix(strings.Repeat(unknown+",", 101), ",")
	for _, tc := range []struct{ query, want string }{
		{"", "[query.deployment_ids: missing]"},
		{"?deployment_ids=", "[query.deployment_ids: missing]"},
		{"?deployment_ids=" + many, "[query.deployment_ids: too_long]"},
		{"?force=maybe", "[query.deployment_ids: missing query.force: bool_parsing]"},
	} {
		r := s.as(keyA, "DELETE", "/v2/deployments"+tc.query, "")
		doc.check("DELETE", "/v2/deployments", r)
		var body struct{ Detail []apierr.Problem }
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != 422 {
			t.Fatalf("DELETE /v2/deployments%s: %d %s", tc.query, r.status, r.body)
		}
		diff(t, "problems of DELETE /v2/deployments"+tc.query, tc.want, fmt.Sprint(locTypes(body.Detail)))
	}
}
