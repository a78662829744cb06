package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// TestDeploymentFlow walks every deployment and revision route through its
// success status, in the order a CI/CD client uses them.
func TestDeploymentFlow(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	s := newServerCP(t, cp, nil)
	f := newFixture(t, s)
	g := f.github

	if g.Source != controlplane.SourceGitHub || g.LatestRevisionID == nil || g.Status != controlplane.StatusAwaitingDatabase {
		t.Fatalf("created deployment: %+v", g)
	}
	got := must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+g.ID, "", 200)
	diff(t, "GET after POST", g, got)

	page := must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments", "", 200)
	diff(t, "list, newest first", []string{f.docker.ID, g.ID}, ids(page.Resources))
	diff(t, "next offset", 2, page.Offset)
	page = must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments?limit=1&offset=1", "", 200)
	diff(t, "second page", []string{g.ID}, ids(page.Resources))
	diff(t, "offset after the second page", 2, page.Offset)
	page = must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments?remote_reconciled=true&name_contains=AGENT", "", 200)
	diff(t, "remote_reconciled", []string{f.docker.ID}, ids(page.Resources))
	page = must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments?deployment_ids="+strings.ToUpper(g.ID)+","+f.docker.ID+"&deployment_type=prod", "", 200)
	diff(t, "deployment_ids and deployment_type", []string{g.ID}, ids(page.Resources))

	// PATCH in place: no revision.
	p := must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+g.ID, `{"source_config": {"build_on_push": true}}`, 200)
	diff(t, "build_on_push", true, *p.SourceConfig.BuildOnPush)
	diff(t, "latest revision after an in-place PATCH", *g.LatestRevisionID, *p.LatestRevisionID)
	// PATCH with a revision field: a new revision.
	p = must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+g.ID, `{"source_revision_config": {"repo_ref": "release"}}`, 200)
	if *p.LatestRevisionID == *g.LatestRevisionID {
		t.Fatal("a PATCH of repo_ref made no revision")
	}
	rev := must[controlplane.Revision](t, s, keyA, "GET", "/v2/deployments/"+g.ID+"/revisions/"+*p.LatestRevisionID, "", 200)
	diff(t, "revision repo_ref", "release", *rev.SourceRevisionConfig.RepoRef)
	diff(t, "revision status", controlplane.RevisionCreating, rev.Status)

	created := must[controlplane.Revision](t, s, keyA, "POST", "/v2/deployments/"+g.ID+"/revisions", "", 201)
	// A revision still before DEPLOYING becomes SKIPPED when a newer one is
	// created (wire contract section 7).
	revs := must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+g.ID+"/revisions?status=CREATING,QUEUED", "", 200)
	diff(t, "open revisions", []string{created.ID}, revIDs(revs.Resources))
	revs = must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+g.ID+"/revisions", "", 200)
	diff(t, "revisions, newest first", []string{created.ID, *p.LatestRevisionID, *g.LatestRevisionID}, revIDs(revs.Resources))
	revs = must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+g.ID+"/revisions?status=SKIPPED", "", 200)
	diff(t, "superseded revisions", []string{*p.LatestRevisionID, *g.LatestRevisionID}, revIDs(revs.Resources))

	re := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments/"+g.ID+"/revisions/"+*g.LatestRevisionID+"/redeploy", "", 200)
	diff(t, "redeployed repo_ref", "main", *re.SourceRevisionConfig.RepoRef)
	if *re.LatestRevisionID == created.ID {
		t.Error("redeploy made no revision")
	}

	reachEngine(t, cp) // else the DELETE removes it at once
	r := s.as(keyA, "DELETE", "/v2/deployments/"+g.ID, "")
	diff(t, "DELETE status", 204, r.status)
	diff(t, "DELETE body", "", string(r.body))
	got = must[controlplane.Deployment](t, s, keyA, "GET", "/v2/deployments/"+g.ID, "", 200)
	diff(t, "status after DELETE", controlplane.StatusAwaitingDelete, got.Status)
	r = s.as(keyA, "PATCH", "/v2/deployments/"+g.ID, `{"source_config": {"build_on_push": false}}`)
	diff(t, "PATCH while deleting", 400, r.status)
	diff(t, "PATCH while deleting: detail", "Deployment ID "+g.ID+" is being deleted.", detail(t, r))
	r = s.as(keyA, "POST", "/v2/deployments/"+g.ID+"/revisions/"+*g.LatestRevisionID+"/redeploy", "")
	diff(t, "redeploy while deleting", 400, r.status)
}

func ids(ds []controlplane.Deployment) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func revIDs(rs []controlplane.Revision) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// TestListenersAndIntegrations covers the listener and integration routes.
func TestListenersAndIntegrations(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)

	l := must[controlplane.Listener](t, s, keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "cluster-2"}`, 201)
	page := must[controlplane.ListenerPage](t, s, keyA, "GET", "/v2/listeners?limit=10", "", 200)
	diff(t, "listeners", []string{l.ID, f.listener.ID}, []string{page.Resources[0].ID, page.Resources[1].ID})
	diff(t, "GET listener", l, must[controlplane.Listener](t, s, keyA, "GET", "/v2/listeners/"+l.ID, "", 200))
	up := must[controlplane.Listener](t, s, keyA, "PATCH", "/v2/listeners/"+l.ID, `{"version": "2", "compute_config": {"k8s_namespaces": ["a"]}}`, 200)
	diff(t, "patched listener", []any{"2", []string{"a"}}, []any{up.Version, up.ComputeConfig.K8sNamespaces})
	r := s.as(keyA, "DELETE", "/v2/listeners/"+l.ID, "")
	diff(t, "DELETE listener", []any{204, ""}, []any{r.status, string(r.body)})
	r = s.as(keyA, "GET", "/v2/listeners/"+l.ID, "")
	diff(t, "deleted listener", []any{404, "Listener ID " + l.ID + " not found."}, []any{r.status, detail(t, r)})
	r = s.as(keyA, "DELETE", "/v2/listeners/"+f.listener.ID, "")
	diff(t, "DELETE a listener in use", 400, r.status)
	r = s.as(keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "cluster-1"}`)
	diff(t, "duplicate compute_id", 409, r.status)
	detail(t, r)

	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 7, "name": "other"}`, 201)
	list := must[[]controlplane.Integration](t, s, keyA, "GET", "/v1/integrations/github", "", 200)
	diff(t, "integrations", []controlplane.Integration{{ID: f.integrationID, InstallationID: 42, Name: "acme"}, in}, list)
	empty := s.as(keyB, "GET", "/v1/integrations/github", "")
	diff(t, "another tenant's integrations", "[]\n", string(empty.body))
	r = s.as(keyA, "POST", "/v1/integrations/github", `{"installation_id": 0}`)
	diff(t, "bad integration", []string{"installation_id", "name"}, []string{
		problems(t, r)[0].Loc[1].(string), problems(t, r)[1].Loc[1].(string)})
}

// TestErrors pins the status and body of every error path.
func TestErrors(t *testing.T) {
	s := newServer(t, &httphandler.Options{MaxBodyBytes: 4096})
	f := newFixture(t, s)
	g := f.github
	other := "0194c0de-0000-7000-8000-0000000000ff"
	tests := []struct {
		name, method, path, body string
		status                   int
		detail                   string           // for {"detail": "..."} answers
		problems                 []apierr.Problem // for 422, compared without msg
		allow                    string
	}{
		{name: "unknown path", method: "GET", path: "/v2/nothing", status: 404, detail: "Not Found"},
		{name: "root", method: "GET", path: "/", status: 404, detail: "Not Found"},
		{name: "wrong method", method: "PUT", path: "/v2/deployments", status: 405, detail: "Method Not Allowed", allow: "DELETE, GET, HEAD, POST"},
		{name: "wrong method on an id", method: "POST", path: "/v2/deployments/" + g.ID, status: 405,
			detail: "Method Not Allowed", allow: "DELETE, GET, HEAD, PATCH"},
		{name: "wrong method, bad id", method: "PUT", path: "/v2/listeners/x", status: 405,
			detail: "Method Not Allowed", allow: "DELETE, GET, HEAD, PATCH"},
		{name: "unknown deployment", method: "GET", path: "/v2/deployments/" + other, status: 404,
			detail: "Deployment ID " + other + " not found."},
		{name: "unknown deployment, upper case", method: "GET", path: "/v2/deployments/" + strings.ToUpper(other), status: 404,
			detail: "Deployment ID " + other + " not found."},
		{name: "unknown revision", method: "GET", path: "/v2/deployments/" + g.ID + "/revisions/" + other, status: 404,
			detail: "Revision ID " + other + " not found."},
		{name: "revision of another deployment", method: "GET", path: "/v2/deployments/" + g.ID + "/revisions/" + *f.docker.LatestRevisionID,
			status: 404, detail: "Revision ID " + *f.docker.LatestRevisionID + " not found."},
		{name: "redeploy of another deployment's revision", method: "POST",
			path:   "/v2/deployments/" + g.ID + "/revisions/" + *f.docker.LatestRevisionID + "/redeploy",
			status: 404, detail: "Revision ID " + *f.docker.LatestRevisionID + " not found."},
		{name: "unknown listener", method: "DELETE", path: "/v2/listeners/" + other, status: 404, detail: "Listener ID " + other + " not found."},
		{name: "PATCH unknown deployment", method: "PATCH", path: "/v2/deployments/" + other, body: `{}`, status: 404,
			detail: "Deployment ID " + other + " not found."},
		{name: "name taken", method: "POST", path: "/v2/deployments", body: dockerBody("agent"), status: 409,
			detail: "A deployment named 'agent' already exists."},
		{name: "body too large", method: "POST", path: "/v2/deployments", body: `{"name": "` + strings.Repeat("a", 5000) + `"}`,
			status: 413, detail: "Request body is larger than the limit of 4096 bytes."},
		{name: "bad path id", method: "GET", path: "/v2/deployments/nope", status: 422,
			problems: []apierr.Problem{{Loc: []any{"path", "deployment_id"}, Type: "uuid_parsing"}}},
		{name: "two bad path ids", method: "POST", path: "/v2/deployments/1/revisions/2/redeploy", status: 422,
			problems: []apierr.Problem{{Loc: []any{"path", "deployment_id"}, Type: "uuid_parsing"},
				{Loc: []any{"path", "revision_id"}, Type: "uuid_parsing"}}},
		{name: "bad path id and bad body", method: "PATCH", path: "/v2/deployments/nope", body: `{"secrets": 3}`, status: 422,
			problems: []apierr.Problem{{Loc: []any{"path", "deployment_id"}, Type: "uuid_parsing"},
				{Loc: []any{"body", "secrets"}, Type: "list_type"}}},
		{name: "malformed JSON", method: "POST", path: "/v2/deployments", body: `{"name": `, status: 422,
			problems: []apierr.Problem{{Loc: []any{"body", "name"}, Type: "json_invalid"}}},
		{name: "malformed JSON at the top", method: "POST", path: "/v2/deployments", body: `nonsense`, status: 422,
			problems: []apierr.Problem{{Loc: []any{"body"}, Type: "json_invalid"}}},
		{name: "trailing garbage", method: "POST", path: "/v2/deployments", body: `{} {}`, status: 422,
			problems: []apierr.Problem{{Loc: []any{"body"}, Type: "json_invalid"}}},
		{name: "no body", method: "POST", path: "/v2/deployments", status: 422,
			problems: []apierr.Problem{{Loc: []any{"body"}, Type: "missing"}}},
		{name: "null body", method: "PATCH", path: "/v2/deployments/" + g.ID, body: "null", status: 422,
			problems: []apierr.Problem{{Loc: []any{"body"}, Type: "missing"}}},
		{name: "not an object", method: "POST", path: "/v2/listeners", body: `[1]`, status: 422,
			problems: []apierr.Problem{{Loc: []any{"body"}, Type: "dict_type"}}},
		{name: "wrong type deep inside", method: "POST", path: "/v2/deployments",
			body:   `{"source_config": {"resource_spec": {"sidecars": [{"name": "a", "image": "b"}, {"name": 7}]}}}`,
			status: 422, problems: []apierr.Problem{{Loc: []any{"body", "source_config", "resource_spec", "sidecars", 1, "name"}, Type: "string_type"},
				// and the rule checks of what decoded
				{Loc: []any{"body", "source"}, Type: "missing"}, {Loc: []any{"body", "name"}, Type: "missing"},
				{Loc: []any{"body", "source_config", "resource_spec", "sidecars", 1, "image"}, Type: "missing"}}},
		{name: "map value of the wrong type", method: "POST", path: "/v2/deployments",
			body:   `{"source_config": {"resource_spec": {"labels": {"0": 1}}}}`,
			status: 422, problems: []apierr.Problem{{Loc: []any{"body", "source_config", "resource_spec", "labels", "0"}, Type: "string_type"},
				{Loc: []any{"body", "source"}, Type: "missing"}, {Loc: []any{"body", "name"}, Type: "missing"}}},
		{name: "invalid UTF-8", method: "POST", path: "/v2/listeners", body: "{\"compute_id\": \"\xff\"}", status: 422,
			problems: []apierr.Problem{{Loc: []any{"body", "compute_id"}, Type: "json_invalid"}}},
		{name: "domain validation", method: "POST", path: "/v2/deployments", body: `{"source": "svn"}`, status: 422,
			problems: []apierr.Problem{{Loc: []any{"body", "source"}, Type: "literal_error"}, {Loc: []any{"body", "name"}, Type: "missing"}}},
		{name: "query problems, all of them", method: "GET", path: "/v2/deployments?limit=abc&offset=-1&status=BAD&deployment_ids=x&remote_reconciled=maybe",
			status: 422, problems: []apierr.Problem{
				{Loc: []any{"query", "limit"}, Type: "int_parsing"},
				{Loc: []any{"query", "remote_reconciled"}, Type: "bool_parsing"},
				{Loc: []any{"query", "offset"}, Type: "greater_than_equal"},
				{Loc: []any{"query", "status"}, Type: "literal_error"},
				{Loc: []any{"query", "deployment_ids"}, Type: "uuid_parsing"}}},
		{name: "limit out of range", method: "GET", path: "/v2/listeners?limit=101", status: 422,
			problems: []apierr.Problem{{Loc: []any{"query", "limit"}, Type: "less_than_equal"}}},
		{name: "malformed query", method: "GET", path: "/v2/listeners?limit=%zz", status: 422,
			problems: []apierr.Problem{{Loc: []any{"query"}, Type: "value_error"}}},
		{name: "revision query and path", method: "GET", path: "/v2/deployments/x/revisions?status=NOPE", status: 422,
			problems: []apierr.Problem{{Loc: []any{"path", "deployment_id"}, Type: "uuid_parsing"},
				{Loc: []any{"query", "status"}, Type: "literal_error"}}},
		{name: "immutable field", method: "PATCH", path: "/v2/deployments/" + g.ID, body: `{"name": "renamed"}`, status: 422,
			problems: []apierr.Problem{{Loc: []any{"body", "name"}, Type: "immutable_field"}}},
		{name: "alias clash", method: "PATCH", path: "/v2/deployments/" + g.ID,
			body:   `{"source_revision_config": {"graph_config_path": "a.json", "langgraph_config_path": "b.json"}}`,
			status: 422, problems: []apierr.Problem{{Loc: []any{"body", "source_revision_config", "langgraph_config_path"}, Type: "value_error"}}},
		{name: "alias at the key sent", method: "PATCH", path: "/v2/deployments/" + f.docker.ID,
			body:   `{"source_revision_config": {"langgraph_config_path": "a.json"}}`,
			status: 422, problems: []apierr.Problem{{Loc: []any{"body", "source_revision_config", "langgraph_config_path"}, Type: "not_applicable_to_source"}}},
		{name: "secret without a value", method: "PATCH", path: "/v2/deployments/" + g.ID,
			body:   `{"secrets": [{"name": "A", "value": ""}, {"name": "B"}, {"name": "C", "value": null}]}`,
			status: 422, problems: []apierr.Problem{{Loc: []any{"body", "secrets", 1, "value"}, Type: "missing"},
				{Loc: []any{"body", "secrets", 2, "value"}, Type: "missing"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.as(keyA, tt.method, tt.path, tt.body)
			diff(t, "status", tt.status, r.status)
			if tt.problems != nil {
				got := problems(t, r)
				for i := range got {
					got[i].Msg = ""
				}
				diff(t, "problems", tt.problems, got)
			} else {
				diff(t, "detail", tt.detail, detail(t, r))
			}
			diff(t, "Allow", tt.allow, r.header.Get("Allow"))
			retry := ""
			if tt.status == 409 {
				retry = "false"
			}
			diff(t, "x-should-retry", retry, r.header.Get("X-Should-Retry"))
		})
	}
}

// TestInternalError: a failure of the store is a bare 500; the cause is in
// the log, with the request id the answer carries.
func TestInternalError(t *testing.T) {
	st := storemem.New()
	s := newServerCP(t, controlplane.New(st, nil), nil)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	r := s.as(keyA, "GET", "/v2/deployments", "")
	diff(t, "status", 500, r.status)
	diff(t, "detail", "Internal Server Error", detail(t, r))
	id := r.header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("no X-Request-Id")
	}
	found := false
	for line := range strings.Lines(s.logs()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["level"] == "ERROR" && rec["request_id"] == id && strings.Contains(rec["err"].(string), "closed") {
			found = true
		}
	}
	if !found {
		t.Errorf("no error record with the cause for request %s in:\n%s", id, s.logs())
	}
}

// TestDecodingCannotReachReadOnlyFields: member names match exactly, so no
// letter-case variant or duplicate can set a read-only or immutable field,
// unknown members are ignored, null is absent, and the alias works.
func TestDecodingCannotReachReadOnlyFields(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	forged := "0194c0de-0000-7000-8000-0000000000ee"

	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{
		"name": "cased", "source": "external_docker",
		"ID": "`+forged+`", "Id": "`+forged+`", "id": "`+forged+`", "STATUS": "READY", "status": "READY",
		"Created_At": "2000-01-01T00:00:00Z", "latest_revision_id": "`+forged+`",
		"tracked_packages": ["x"], "revision_source": "cli",
		"source_config": {"custom_url": null, "Listener_ID": "`+forged+`"},
		"source_revision_config": {"image_uri": "img:1", "Repo_Commit_SHA": "abc", "repo_commit_sha": "abc", "IMAGE_URI": "img:2"},
		"secrets": null}`, 201)
	if d.ID == forged || *d.LatestRevisionID == forged || d.Status != controlplane.StatusAwaitingDatabase ||
		d.CreatedAt.Time().Year() == 2000 || d.SourceConfig.ListenerID != nil || d.SourceRevisionConfig.RepoCommitSHA != nil {
		t.Errorf("a request field reached a read-only field: %+v", d)
	}
	diff(t, "image_uri (IMAGE_URI ignored)", "img:1", *d.SourceRevisionConfig.ImageURI)
	diff(t, "secrets null", []controlplane.Secret{}, d.Secrets)

	// "NAME", "Name" and "SOURCE" are unknown members: ignored, never
	// compared with the stored name or source.
	p := must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+f.github.ID,
		`{"NAME": "other", "Name": "other", "SOURCE": "external_docker", "Source_Config": {"repo_url": "x"}}`, 200)
	diff(t, "name after case variants", "agent", p.Name)
	diff(t, "source after case variants", controlplane.SourceGitHub, p.Source)
	diff(t, "updated_at unchanged", f.github.UpdatedAt, p.UpdatedAt)

	// A duplicate member is an error, whichever copy comes last.
	for _, body := range []string{
		`{"name": "agent", "name": "renamed"}`,
		`{"source_config": {"repo_url": "https://github.com/acme/agent", "repo_url": "https://evil.example"}}`,
		`{"source_revision_config": {"repo_ref": "main"}, "source_revision_config": {"repo_ref": "x"}}`,
	} {
		r := s.as(keyA, "PATCH", "/v2/deployments/"+f.github.ID, body)
		ps := problems(t, r)
		diff(t, "duplicate member "+body, "json_invalid", ps[0].Type)
	}
	r := s.as(keyA, "POST", "/v2/deployments", `{"name": "dup", "name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "i"}}`)
	diff(t, "duplicate on create", []any{"body", "name"}, problems(t, r)[0].Loc)

	// The hosted service's alias, and null meaning absent.
	p = must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+f.github.ID,
		`{"source_revision_config": {"langgraph_config_path": "graphs/langgraph.json", "repo_ref": null}, "source_config": null, "secrets": null}`, 200)
	diff(t, "alias", "graphs/langgraph.json", *p.SourceRevisionConfig.GraphConfigPath)
	diff(t, "repo_ref null keeps the value", "main", *p.SourceRevisionConfig.RepoRef)
	// Answers carry the alias beside graph_config_path, equal (section 9).
	if body := string(s.as(keyA, "GET", "/v2/deployments/"+f.github.ID, "").body); !strings.Contains(body,
		`"graph_config_path":"graphs/langgraph.json","langgraph_config_path":"graphs/langgraph.json"`) {
		t.Errorf("the answer does not carry both paths, equal: %s", body)
	}
}

// TestLogs: one record per request, with its method, path, status and
// request id, and never a key, a bearer token, a secret value or a query.
func TestLogs(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	s.do("GET", "/v2/deployments?name_contains=query-secret", "", "Authorization", "Bearer "+keyA)
	s.do("GET", "/v2/deployments", "", "X-Api-Key", "wrong-key-value")
	r := s.as(keyA, "PATCH", "/v2/deployments/"+f.github.ID, `{"secrets": [{"name": "TOKEN", "value": "another-secret"}]}`)
	diff(t, "status", 200, r.status)

	logs := s.logs()
	for _, secret := range []string{keyA, keyB, "wrong-key-value", "sk-secret-value", "another-secret", "query-secret", f.token.Token, f.webhook.Secret} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs)
		}
	}
	var last map[string]any
	n := 0
	for line := range strings.Lines(logs) {
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Fatal(err)
		}
		if last["msg"] == "request" {
			n++
		}
	}
	diff(t, "request records", 12, n) // 9 of the fixture (6 + 3 of its OAuth flow), 3 here
	want := map[string]any{"method": "PATCH", "path": "/v2/deployments/" + f.github.ID, "status": float64(200),
		"request_id": r.header.Get("X-Request-Id"), "tenant": tenantA}
	for k, v := range want {
		diff(t, "log field "+k, v, last[k])
	}
	if _, ok := last["duration"]; !ok {
		t.Error("no duration")
	}
}

// TestNilAuthenticator: without an Authenticator nothing but the public
// routes answers.
func TestNilAuthenticator(t *testing.T) {
	h := httphandler.New(controlplane.New(storemem.New(), nil), nil)
	for _, path := range []string{"/v2/deployments", "/openapi.json"} {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", path, nil)
		req.Header.Set("X-Api-Key", keyA)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		want := 401
		if path == "/openapi.json" {
			want = 200
		}
		diff(t, path, want, w.Code)
	}
}

// TestQueryUsesTheControlPlaneLimits: list queries are checked with the
// ControlPlane's own limits, not the defaults.
func TestQueryUsesTheControlPlaneLimits(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{Limits: controlplane.Limits{MaxFilterIDs: 200}})
	s := newServerCP(t, cp, nil)
	list := func(n int) string {
		var ids []string
		for i := range n {
			ids = append(ids, fmt.Sprintf("0194c0de-0000-7000-8000-%012d", i))
		}
		return "/v2/deployments?deployment_ids=" + strings.Join(ids, ",")
	}
	diff(t, "150 ids, limit 200", 200, s.as(keyA, "GET", list(150), "").status)
	ps := problems(t, s.as(keyA, "GET", list(201)+"&limit=x", ""))
	diff(t, "201 ids and a bad limit", []string{"limit", "deployment_ids"}, []string{ps[0].Loc[1].(string), ps[1].Loc[1].(string)})

	// Limits below the defaults: a query that parses only in part is
	// checked, in the same 422, with the ControlPlane's limits too.
	cp = controlplane.New(storemem.New(), &controlplane.Options{Limits: controlplane.Limits{MaxFilterIDs: 2, MaxStringBytes: 8}})
	s = newServerCP(t, cp, nil)
	diff(t, "3 ids, limit 2", []string{"query.deployment_ids: too_long"}, locTypes(problems(t, s.as(keyA, "GET", list(3), ""))))
	diff(t, "3 ids, limit 2, a long image_version and a bad limit",
		[]string{"query.deployment_ids: too_long", "query.image_version: string_too_long", "query.limit: int_parsing"},
		locTypes(problems(t, s.as(keyA, "GET", list(3)+"&limit=x&image_version=0123456789", ""))))
	diff(t, "listeners: a bad limit and a negative offset", []string{"query.limit: int_parsing", "query.offset: greater_than_equal"},
		locTypes(problems(t, s.as(keyA, "GET", "/v2/listeners?limit=x&offset=-1", ""))))
	diff(t, "revisions: a bad path, a bad limit and a bad status",
		[]string{"path.deployment_id: uuid_parsing", "query.limit: int_parsing", "query.status: literal_error"},
		locTypes(problems(t, s.as(keyA, "GET", "/v2/deployments/x/revisions?limit=x&status=NOPE", ""))))
}

// locTypes renders problems as "loc.joined: type", sorted.
func locTypes(ps []apierr.Problem) []string {
	var out []string
	for _, p := range ps {
		var loc []string
		for _, l := range p.Loc {
			loc = append(loc, fmt.Sprint(l))
		}
		out = append(out, strings.Join(loc, ".")+": "+p.Type)
	}
	slices.Sort(out)
	return out
}

// TestGetDeploymentBytes: GET /v2/deployments/{id} answers the wire JSON
// of ControlPlane.AppendDeploymentJSON with exactly the bytes and headers
// of encoding the deployment like every other answer: json.Marshal of
// GetDeployment's result (HTML characters escaped) and a newline, with
// Content-Type, Content-Length and X-Request-Id; the same when read again
// (the answer the ControlPlane kept, in a reused buffer).
func TestGetDeploymentBytes(t *testing.T) {
	cp := controlplane.New(storemem.New(), nil)
	s := newServerCP(t, cp, nil)
	f := newFixture(t, s)
	tricky := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "tricky", "source": "external_docker",
		"source_revision_config": {"image_uri": "registry.example/a<b>&c:1"},
		"secrets": [{"name": "S", "value": "<&>\"\\ ünï \u2028 <script>"}]}`, 201)
	ids := []string{f.github.ID, f.docker.ID, tricky.ID}
	for _, id := range append(ids, ids...) {
		d, err := cp.GetDeployment(context.Background(), tenantA, id)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(d); err != nil {
			t.Fatal(err)
		}
		r := s.as(keyA, "GET", "/v2/deployments/"+id, "")
		diff(t, "status", 200, r.status)
		diff(t, "body of "+d.Name, want.String(), string(r.body))
		diff(t, "Content-Type", "application/json", r.header.Get("Content-Type"))
		diff(t, "Content-Length", strconv.Itoa(want.Len()), r.header.Get("Content-Length"))
		if r.header.Get("X-Request-Id") == "" {
			t.Error("no X-Request-Id")
		}
	}
	const unknown = "0194c0de-0000-7000-8000-0000000000ff"
	r := s.as(keyA, "GET", "/v2/deployments/"+unknown, "")
	diff(t, "unknown id", 404, r.status)
	diff(t, "unknown id: detail", "Deployment ID "+unknown+" not found.", detail(t, r))
	diff(t, "another tenant's deployment", 404, s.as(keyB, "GET", "/v2/deployments/"+f.github.ID, "").status)
}

// authFunc adapts a function to httphandler.Authenticator.
type authFunc func(httphandler.Credentials) (*httphandler.Principal, error)

func (f authFunc) Authenticate(_ context.Context, c httphandler.Credentials) (*httphandler.Principal, error) {
	return f(c)
}

// TestAuthenticatorFailures: an Authenticator's own failure is a 500 (its
// cause logged), a panic is a 500 too, and a principal without tenants is
// a 403.
func TestAuthenticatorFailures(t *testing.T) {
	tests := []struct {
		name   string
		auth   authFunc
		status int
		detail string
		log    string
	}{
		{"error", func(httphandler.Credentials) (*httphandler.Principal, error) {
			return nil, errors.New("identity provider down")
		},
			500, "Internal Server Error", "identity provider down"},
		{"wrapped ErrUnauthenticated", func(httphandler.Credentials) (*httphandler.Principal, error) {
			return nil, fmt.Errorf("token expired: %w", httphandler.ErrUnauthenticated)
		}, 401, "Invalid authentication credentials.", ""},
		{"panic", func(httphandler.Credentials) (*httphandler.Principal, error) { panic("authenticator bug") },
			500, "Internal Server Error", "authenticator bug"},
		{"no tenants", func(httphandler.Credentials) (*httphandler.Principal, error) {
			return &httphandler.Principal{ID: "p"}, nil
		},
			403, "The credentials are not authorized for the requested workspace.", ""},
		{"nil principal", func(httphandler.Credentials) (*httphandler.Principal, error) { return nil, nil },
			403, "The credentials are not authorized for the requested workspace.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, &httphandler.Options{Authenticator: tt.auth})
			r := s.as("any-key", "GET", "/v2/deployments", "")
			diff(t, "status", tt.status, r.status)
			diff(t, "detail", tt.detail, detail(t, r))
			if tt.log != "" && !strings.Contains(s.logs(), tt.log) {
				t.Errorf("the log lacks %q:\n%s", tt.log, s.logs())
			}
		})
	}
}

// TestBodyLimitWithoutLength: a body of unknown length is cut at the limit
// (413) as well as one whose Content-Length says it is too large.
func TestBodyLimitWithoutLength(t *testing.T) {
	s := newServer(t, &httphandler.Options{MaxBodyBytes: 1000})
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"name": "` + strings.Repeat("a", 5000) + `"}`))
		pw.Close()
	}()
	req, err := http.NewRequest("POST", s.url+"/v2/deployments", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	diff(t, "status", 413, resp.StatusCode)
	diff(t, "body", `{"detail":"Request body is larger than the limit of 1000 bytes."}`+"\n", string(b))
	if req.ContentLength != -1 && req.ContentLength != 0 {
		t.Fatalf("the request had a length: %d", req.ContentLength)
	}
}

// TestHead: HEAD works wherever GET does, without a body.
func TestHead(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	r := s.as(keyA, "HEAD", "/v2/deployments/"+f.github.ID, "")
	diff(t, "status", 200, r.status)
	diff(t, "body", "", string(r.body))
	if r.header.Get("Content-Length") == "" || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", r.header)
	}
}
