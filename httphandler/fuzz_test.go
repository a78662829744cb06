package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// The fuzz targets send arbitrary bodies and queries to every decoder. The
// handler must not panic (a recovered panic would be a 500), must never
// answer 5xx, and every rejection must be a well-formed JSON error: a 422
// listing problems with loc, msg and type, or {"detail": "..."}. Their seed
// corpora run in every `go test`.

// fuzzTarget is a handler over storemem with one deployment and one
// listener of tenant A.
type fuzzTarget struct {
	h            http.Handler
	deploymentID string
	listenerID   string
	// webhookSecret, when set, signs every body as a GitHub push delivery.
	webhookSecret string
}

func newFuzzTarget(t testing.TB) *fuzzTarget {
	cp := controlplane.New(storemem.New(), nil)
	ft := &fuzzTarget{h: httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(t), MaxBodyBytes: 64 << 10})}
	ctx := context.Background()
	d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{
		Name: new("agent"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("img:1")}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := cp.CreateListener(ctx, tenantA, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("c")})
	if err != nil {
		t.Fatal(err)
	}
	ft.deploymentID, ft.listenerID = d.ID, l.ID
	return ft
}

// check sends one request and checks the answer's form.
func (ft *fuzzTarget) check(t *testing.T, method, path, rawQuery string, body []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.URL.RawQuery = rawQuery
	req.Header.Set("X-Api-Key", keyA)
	if ft.webhookSecret != "" {
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-Hub-Signature-256", sign(ft.webhookSecret, string(body)))
	}
	w := httptest.NewRecorder()
	ft.h.ServeHTTP(w, req)
	if w.Code >= 500 {
		t.Fatalf("%s %s?%s %q: %d %s", method, path, rawQuery, body, w.Code, w.Body)
	}
	if w.Code < 400 {
		if !json.Valid(w.Body.Bytes()) && w.Code != http.StatusNoContent {
			t.Fatalf("%d with a body that is not JSON: %s", w.Code, w.Body)
		}
		return
	}
	if w.Code != http.StatusUnprocessableEntity {
		var b struct {
			Detail *string `json:"detail"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Detail == nil || *b.Detail == "" {
			t.Fatalf("%d with a malformed body: %s", w.Code, w.Body)
		}
		return
	}
	var b struct {
		Detail []struct {
			Loc  []any   `json:"loc"`
			Msg  *string `json:"msg"`
			Type *string `json:"type"`
		} `json:"detail"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || len(b.Detail) == 0 {
		t.Fatalf("malformed 422: %v: %s", err, w.Body)
	}
	for _, p := range b.Detail {
		if len(p.Loc) == 0 || p.Msg == nil || *p.Msg == "" || p.Type == nil || *p.Type == "" {
			t.Fatalf("malformed problem in %s", w.Body)
		}
		if first, _ := p.Loc[0].(string); first != "body" && first != "path" && first != "query" {
			t.Fatalf("loc %v in %s", p.Loc, w.Body)
		}
		for _, l := range p.Loc[1:] {
			switch l := l.(type) {
			case string:
			case float64:
				if l < 0 || l != float64(int(l)) {
					t.Fatalf("loc %v holds a bad index", p.Loc)
				}
			default:
				t.Fatalf("loc %v holds %T", p.Loc, l)
			}
		}
	}
}

var bodySeeds = []string{
	``, `null`, `{}`, `[]`, `"x"`, `{"name": `, `{"a":1}{}`, "{\"name\": \"\xff\"}",
	`{"name": "a", "name": "b"}`, `{"NAME": "a", "ID": "x", "Status": "READY"}`,
	githubBody("agent-x", "0194c0de-0000-7000-8000-000000000001"),
	dockerBody("docker-x"),
	`{"name": "r", "source": "external_docker", "source_revision_config": {"image_uri": "i"},
	  "source_config": {"resource_spec": {"min_scale": 1, "max_scale": 0, "cpu": 0.5, "labels": {"a": "b"},
	  "sidecars": [{"name": "s", "image": "i", "env": [{"name": "A", "value": "1", "valueFrom": {}}]}],
	  "volumes": [{"name": "v", "emptyDir": {}}], "volume_mounts": [{"name": "w", "mountPath": "/x"}]}}}`,
	`{"source_config": {"resource_spec": {"min_scale": 1e400, "cpu": "1"}}}`,
	`{"source_revision_config": {"langgraph_config_path": "a", "graph_config_path": "b"}}`,
	`{"secrets": [{"name": "A", "value": "b"}, {"name": 1}]}`,
	`{"compute_type": "k8s", "compute_id": "c2", "compute_config": {"k8s_namespaces": ["a", 1]}}`,
	`{"installation_id": 9007199254740993, "name": "n"}`, `{"installation_id": -1, "name": ""}`,
	`{"installation_id": 1.5}`, `{"version": null, "compute_id": "c"}`,
}

func fuzzBody(f *testing.F, method string, path func(*fuzzTarget) string) {
	for _, s := range bodySeeds {
		f.Add([]byte(s))
	}
	ft := newFuzzTarget(f)
	p := path(ft)
	f.Fuzz(func(t *testing.T, body []byte) { ft.check(t, method, p, "", body) })
}

func FuzzCreateDeploymentBody(f *testing.F) {
	fuzzBody(f, "POST", func(*fuzzTarget) string { return "/v2/deployments" })
}

func FuzzUpdateDeploymentBody(f *testing.F) {
	fuzzBody(f, "PATCH", func(ft *fuzzTarget) string { return "/v2/deployments/" + ft.deploymentID })
}

func FuzzCreateRevisionBody(f *testing.F) {
	fuzzBody(f, "POST", func(ft *fuzzTarget) string { return "/v2/deployments/" + ft.deploymentID + "/revisions" })
}

func FuzzCreateListenerBody(f *testing.F) {
	fuzzBody(f, "POST", func(*fuzzTarget) string { return "/v2/listeners" })
}

func FuzzUpdateListenerBody(f *testing.F) {
	fuzzBody(f, "PATCH", func(ft *fuzzTarget) string { return "/v2/listeners/" + ft.listenerID })
}

func FuzzCreateIntegrationBody(f *testing.F) {
	fuzzBody(f, "POST", func(*fuzzTarget) string { return "/v1/integrations/github" })
}

var querySeeds = []string{
	"", "limit=1", "limit=0", "limit=101", "limit=abc", "offset=-1", "offset=99999999999999999999",
	"name_contains=AG", "name_contains=" + strings.Repeat("x", 100), "status=READY", "status=nope",
	"remote_reconciled=true", "remote_reconciled=maybe", "tag_value_ids=0194c0de-0000-7000-8000-000000000001,x",
	"deployment_ids=,,", "deployment_type=dev", "deployment_type=big", "image_version=1.2", "%zz", "a;b", "status=CREATING,QUEUED",
	"limit=2&limit=3&offset=1", "status=DEPLOYED,bad",
}

func fuzzQuery(f *testing.F, path func(*fuzzTarget) string) {
	for _, s := range querySeeds {
		f.Add(s)
	}
	ft := newFuzzTarget(f)
	p := path(ft)
	f.Fuzz(func(t *testing.T, q string) { ft.check(t, "GET", p, q, nil) })
}

func FuzzListDeploymentsQuery(f *testing.F) {
	fuzzQuery(f, func(*fuzzTarget) string { return "/v2/deployments" })
}

func FuzzListRevisionsQuery(f *testing.F) {
	fuzzQuery(f, func(ft *fuzzTarget) string { return "/v2/deployments/" + ft.deploymentID + "/revisions" })
}

func FuzzListListenersQuery(f *testing.F) {
	fuzzQuery(f, func(*fuzzTarget) string { return "/v2/listeners" })
}

// FuzzPathIDs: any path segment in the place of an id is a 404 (another
// resource), a 422 at ["path", ...] or a success.
func FuzzPathIDs(f *testing.F) {
	for _, s := range []string{"x", "0194c0de-0000-7000-8000-000000000001", "0194C0DE-0000-7000-8000-000000000001",
		"{0194c0de-0000-7000-8000-000000000001}", "urn:uuid:0194c0de-0000-7000-8000-000000000001", "%00", "..", ""} {
		f.Add(s)
	}
	ft := newFuzzTarget(f)
	f.Fuzz(func(t *testing.T, id string) {
		if strings.ContainsAny(id, "/?#") || !validPathSegment(id) {
			return
		}
		ft.check(t, "GET", "/v2/deployments/"+id, "", nil)
		ft.check(t, "GET", "/v2/deployments/"+ft.deploymentID+"/revisions/"+id, "", nil)
		ft.check(t, "DELETE", "/v2/listeners/"+id, "", nil)
	})
}

func validPathSegment(s string) bool {
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || c == '%' {
			return false
		}
	}
	return true
}
