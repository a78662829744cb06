package controlplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// expand replaces the placeholders of a test body with ids made in setup:
// {{int}} an integration of tenantA, {{intB}} one of tenantB, {{lis}} a k8s
// listener with namespaces ns-a and ns-b, {{lisAny}} one with no
// namespaces.
func (f *fixture) expand(body string) string {
	if strings.Contains(body, "{{int}}") {
		body = strings.ReplaceAll(body, "{{int}}", f.integration(tenantA))
	}
	if strings.Contains(body, "{{intB}}") {
		body = strings.ReplaceAll(body, "{{intB}}", f.integration(tenantB))
	}
	if strings.Contains(body, "{{lis}}") {
		body = strings.ReplaceAll(body, "{{lis}}", f.listener(tenantA, "ns-a", "ns-b"))
	}
	if strings.Contains(body, "{{lisAny}}") {
		body = strings.ReplaceAll(body, "{{lisAny}}", f.listener(tenantA))
	}
	return body
}

const ghBase = `"name": "agent", "source": "github",
	"source_config": {"integration_id": "{{int}}", "repo_url": "https://github.com/acme/agent"%s},
	"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"%s}`

func gh(sc, src string) string {
	return "{" + strings.Replace(strings.Replace(ghBase, "%s", sc, 1), "%s", src, 1) + "}"
}

const dkBase = `"name": "agent", "source": "external_docker",
	"source_config": {%s},
	"source_revision_config": {"image_uri": "registry.example.com/agent:1"%s}`

func dk(sc, src string) string {
	return "{" + strings.Replace(strings.Replace(dkBase, "%s", sc, 1), "%s", src, 1) + "}"
}

// TestCreateRules has one row per create rule of the seed and the wire
// contract (section 6): a body and the problems it must produce (none means
// the create succeeds).
func TestCreateRules(t *testing.T) {
	tests := []struct {
		rule    string
		opts    *controlplane.Options
		body    string
		want    []string // "loc: type" of every problem
		wantErr error    // instead of problems
	}{
		{rule: "github: minimal valid body", body: gh("", "")},
		{rule: "github: integration_id, repo_url, repo_ref, graph_config_path required",
			body: `{"name": "agent", "source": "github"}`,
			want: []string{"body.source_config.integration_id: missing", "body.source_config.repo_url: missing",
				"body.source_revision_config.repo_ref: missing", "body.source_revision_config.graph_config_path: missing"}},
		{rule: "github: image_uri, listener_id, listener_config, resource_spec must be null",
			body: gh(`, "listener_id": "00000000-0000-7000-8000-0000000000ff", "listener_config": {"k8s_namespace": "x"}, "resource_spec": {"cpu": 1}`,
				`, "image_uri": "x:1"`),
			want: []string{"body.source_config.resource_spec: not_applicable_to_source", "body.source_config.listener_id: not_applicable_to_source",
				"body.source_config.listener_config: not_applicable_to_source", "body.source_revision_config.image_uri: not_applicable_to_source"}},
		{rule: "github: custom_url is read-only", body: gh(`, "custom_url": "https://x"`, ""),
			want: []string{"body.source_config.custom_url: read_only_field"}},
		{rule: "github: build_on_push cannot be true with a tag ref",
			body: strings.Replace(gh(`, "build_on_push": true`, ""), `"main"`, `"refs/tags/v1"`, 1),
			want: []string{"body.source_config.build_on_push: build_on_push_with_tag"}},
		{rule: "github: build_on_push false with a tag ref", body: strings.Replace(gh(`, "build_on_push": false`, ""), `"main"`, `"refs/tags/v1"`, 1)},
		{rule: "github: build_on_push true with a branch", body: gh(`, "build_on_push": true`, "")},
		{rule: "github: deployment_type enum", body: gh(`, "deployment_type": "huge"`, ""),
			want: []string{"body.source_config.deployment_type: literal_error"}},
		{rule: "github: deployment_type dev_free", body: gh(`, "deployment_type": "dev_free"`, "")},
		{rule: "github: integration_id must be a UUID", body: strings.Replace(gh("", ""), "{{int}}", "nope", 1),
			want: []string{"body.source_config.integration_id: uuid_parsing"}},
		{rule: "github: integration_id must be a known integration",
			body: strings.Replace(gh("", ""), "{{int}}", "00000000-0000-7000-8000-0000000000ff", 1),
			want: []string{"body.source_config.integration_id: unknown_reference"}},
		{rule: "github: an integration of another tenant is unknown", body: strings.Replace(gh("", ""), "{{int}}", "{{intB}}", 1),
			want: []string{"body.source_config.integration_id: unknown_reference"}},
		{rule: "github: install_command and build_command accepted", body: gh(`, "install_command": "pnpm i", "build_command": "pnpm build"`, "")},
		{rule: "alias: langgraph_config_path accepted for graph_config_path",
			body: strings.Replace(gh("", ""), `"graph_config_path"`, `"langgraph_config_path"`, 1)},
		{rule: "alias: both names with different values", body: gh("", `, "langgraph_config_path": "other.json"`),
			want: []string{"body.source_revision_config.langgraph_config_path: value_error"}},
		{rule: "alias: both names with the same value", body: gh("", `, "langgraph_config_path": "langgraph.json"`)},
		{rule: "read-only repo_commit_sha is ignored", body: gh("", `, "repo_commit_sha": "abc"`)},

		{rule: "external_docker: minimal valid body", body: dk("", "")},
		{rule: "display_name of 1 character", body: strings.Replace(dk("", ""), `"name": "agent",`, `"name": "agent", "display_name": "A",`, 1)},
		{rule: "display_name of 256 characters (not bytes)", body: strings.Replace(gh("", ""), `"name": "agent",`, `"name": "agent", "display_name": "`+strings.Repeat("é", 256)+`",`, 1)},
		{rule: "display_name empty", body: strings.Replace(dk("", ""), `"name": "agent",`, `"name": "agent", "display_name": "",`, 1),
			want: []string{"body.display_name: string_too_short"}},
		{rule: "display_name of 257 characters", body: strings.Replace(gh("", ""), `"name": "agent",`, `"name": "agent", "display_name": "`+strings.Repeat("x", 257)+`",`, 1),
			want: []string{"body.display_name: string_too_long"}},
		{rule: "display_name null", body: strings.Replace(dk("", ""), `"name": "agent",`, `"name": "agent", "display_name": null,`, 1)},
		{rule: "external_docker: image_uri required", body: `{"name": "agent", "source": "external_docker"}`,
			want: []string{"body.source_revision_config.image_uri: missing"}},
		{rule: "external_docker: github-only fields must be null",
			body: dk(`"integration_id": "00000000-0000-7000-8000-0000000000ff", "repo_url": "u", "deployment_type": "prod", "build_on_push": false, "install_command": "i", "build_command": "b"`,
				`, "repo_ref": "main", "graph_config_path": "g.json"`),
			want: []string{"body.source_config.integration_id: not_applicable_to_source", "body.source_config.repo_url: not_applicable_to_source",
				"body.source_config.deployment_type: not_applicable_to_source", "body.source_config.build_on_push: not_applicable_to_source",
				"body.source_config.install_command: not_applicable_to_source", "body.source_config.build_command: not_applicable_to_source",
				"body.source_revision_config.repo_ref: not_applicable_to_source", "body.source_revision_config.graph_config_path: not_applicable_to_source"}},
		{rule: "external_docker: custom_url settable", body: dk(`"custom_url": "https://agent.example.com"`, "")},
		{rule: "external_docker: custom_url http", body: dk(`"custom_url": "http://agent.internal:8080/x"`, "")},
		{rule: "external_docker: custom_url only http or https", body: dk(`"custom_url": "javascript:alert(1)"`, ""),
			want: []string{"body.source_config.custom_url: url_scheme"}},
		{rule: "external_docker: custom_url not data:", body: dk(`"custom_url": "data:text/html,<script>x</script>"`, ""),
			want: []string{"body.source_config.custom_url: url_scheme"}},
		{rule: "external_docker: custom_url absolute with a host", body: dk(`"custom_url": "https:///path"`, ""),
			want: []string{"body.source_config.custom_url: url_parsing"}},
		{rule: "external_docker: custom_url relative", body: dk(`"custom_url": "//agent.example.com"`, ""),
			want: []string{"body.source_config.custom_url: url_parsing"}},
		{rule: "external_docker: custom_url without credentials", body: dk(`"custom_url": "https://u:p@agent.example.com"`, ""),
			want: []string{"body.source_config.custom_url: url_parsing"}},
		{rule: "external_docker: listener must be the tenant's", body: dk(`"listener_id": "00000000-0000-7000-8000-0000000000ff"`, ""),
			want: []string{"body.source_config.listener_id: unknown_reference"}},
		{rule: "external_docker: namespace among the listener's", body: dk(`"listener_id": "{{lis}}", "listener_config": {"k8s_namespace": "ns-b"}`, "")},
		{rule: "external_docker: namespace not among the listener's", body: dk(`"listener_id": "{{lis}}", "listener_config": {"k8s_namespace": "ns-c"}`, ""),
			want: []string{"body.source_config.listener_config.k8s_namespace: namespace_not_of_listener"}},
		{rule: "external_docker: any namespace when the listener lists none", body: dk(`"listener_id": "{{lisAny}}", "listener_config": {"k8s_namespace": "ns-c"}`, "")},
		{rule: "external_docker: namespace needs a listener", body: dk(`"listener_config": {"k8s_namespace": "ns-a"}`, ""),
			want: []string{"body.source_config.listener_config.k8s_namespace: value_error"}},
		{rule: "external_docker: namespace is a DNS label", body: dk(`"listener_id": "{{lisAny}}", "listener_config": {"k8s_namespace": "Bad_NS"}`, ""),
			want: []string{"body.source_config.listener_config.k8s_namespace: string_pattern_mismatch"}},

		{rule: "name required", body: strings.Replace(dk("", ""), `"name": "agent", `, "", 1),
			want: []string{"body.name: missing"}},
		{rule: "name starts with a letter or digit", body: strings.Replace(dk("", ""), `"agent"`, `"-agent"`, 1),
			want: []string{"body.name: string_pattern_mismatch"}},
		{rule: "name charset", body: strings.Replace(dk("", ""), `"agent"`, `"my agent"`, 1),
			want: []string{"body.name: string_pattern_mismatch"}},
		{rule: "name of 63 characters with . _ -", body: strings.Replace(dk("", ""), `"agent"`, `"A`+strings.Repeat("b._-", 15)+`xy"`, 1)},
		{rule: "name of 64 characters", body: strings.Replace(dk("", ""), `"agent"`, `"`+strings.Repeat("a", 64)+`"`, 1),
			want: []string{"body.name: string_pattern_mismatch"}},
		{rule: "source required", body: `{"name": "agent"}`, want: []string{"body.source: missing"}},
		{rule: "source enum", body: `{"name": "agent", "source": "gitlab"}`, want: []string{"body.source: literal_error"}},
		{rule: "source not offered (cloud offers github only)", opts: &controlplane.Options{Sources: []controlplane.Source{controlplane.SourceGitHub}},
			body: dk("", ""), want: []string{"body.source: source_not_offered"}},
		{rule: "source not offered (self-hosted offers external_docker only)",
			opts: &controlplane.Options{Sources: []controlplane.Source{controlplane.SourceExternalDocker}},
			body: gh("", ""), want: []string{"body.source: source_not_offered"}},

		{rule: "secrets: names are C identifiers, unique", body: dk("", "")[:len(dk("", ""))-1] + `, "secrets": [{"name": "A_B", "value": "1"}, {"name": "1X", "value": ""}, {"name": "A_B", "value": "2"}, {"value": "3"}]}`,
			want: []string{"body.secrets.1.name: string_pattern_mismatch", "body.secrets.2.name: duplicate", "body.secrets.3.name: missing"}},
		{rule: "secrets: capped", opts: &controlplane.Options{Limits: controlplane.Limits{MaxSecrets: 1}},
			body: dk("", "")[:len(dk("", ""))-1] + `, "secrets": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}`,
			want: []string{"body.secrets: too_long"}},
		{rule: "strings: capped", opts: &controlplane.Options{Limits: controlplane.Limits{MaxStringBytes: 8}},
			body: dk("", ""), want: []string{"body.source_revision_config.image_uri: string_too_long"}},
		{rule: "strings: empty refused", body: gh("", "")[:0] + strings.Replace(gh("", ""), `"main"`, `""`, 1),
			want: []string{"body.source_revision_config.repo_ref: string_too_short"}},
		{rule: "tag_value_ids are UUIDs", body: dk("", "")[:len(dk("", ""))-1] + `, "tag_value_ids": ["x"]}`,
			want: []string{"body.tag_value_ids.0: uuid_parsing"}},
		{rule: "every problem is listed",
			body: `{"name": "-", "source": "github", "source_config": {"deployment_type": "x", "resource_spec": {}}}`,
			want: []string{"body.source_config.integration_id: missing", "body.source_config.repo_url: missing",
				"body.source_config.resource_spec: not_applicable_to_source", "body.source_revision_config.repo_ref: missing",
				"body.source_revision_config.graph_config_path: missing", "body.name: string_pattern_mismatch",
				"body.source_config.deployment_type: literal_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			f := newFixture(t, tt.opts)
			body := f.expand(tt.body)
			before := dump(t, f.st)
			d, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, body))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("CreateDeployment: %v", err)
				}
				if d.Status != controlplane.StatusAwaitingDatabase || d.LatestRevisionID == nil {
					t.Errorf("status %s, latest revision %v; want AWAITING_DATABASE and a revision", d.Status, d.LatestRevisionID)
				}
				return
			}
			diff(t, "problems", tt.want, locTypes(problems(t, err)))
			diff(t, "store after a rejected create", before, dump(t, f.st))
		})
	}
}

// TestCreateDefaults pins the values the service fills in on create.
func TestCreateDefaults(t *testing.T) {
	f := newFixture(t, &controlplane.Options{CustomURLTemplate: "https://{name}-{id}.{tenant}.example"})
	intID := f.integration(tenantA)
	got := f.create(tenantA, strings.Replace(githubBody("My_Agent.v2", intID), `"main"`, `"main", "repo_commit_sha": "ignored"`, 1))
	want := &controlplane.Deployment{
		ID: "00000000-0000-7000-8000-000000000002", Name: "My_Agent.v2", TenantID: tenantA, Source: controlplane.SourceGitHub,
		SourceConfig: controlplane.SourceConfig{
			IntegrationID: &intID, RepoURL: new("https://github.com/acme/agent"),
			DeploymentType: new(controlplane.DeploymentTypeProd), BuildOnPush: new(false),
			CustomURL: new("https://my-agent-v2-00000000-0000-7000-8000-000000000002." + tenantA + ".example"),
		},
		SourceRevisionConfig: controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json"),
			LanggraphConfigPath: new("langgraph.json")},
		Secrets:          []controlplane.Secret{},
		SecretReferences: []controlplane.SecretReference{},
		CreatedAt:        wiretime.New(t0.Add(2 * time.Second)), UpdatedAt: wiretime.New(t0.Add(2 * time.Second)),
		Status:           controlplane.StatusAwaitingDatabase,
		LatestRevisionID: new("00000000-0000-7000-8000-000000000003"),
	}
	diff(t, "github deployment", want, got)
	rev, err := f.cp.GetRevision(f.ctx, tenantA, got.ID, *got.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "first revision", &controlplane.Revision{ID: *got.LatestRevisionID, CreatedAt: got.CreatedAt, UpdatedAt: got.CreatedAt,
		Status: controlplane.RevisionCreating, Source: controlplane.SourceGitHub, SourceRevisionConfig: got.SourceRevisionConfig,
		StatusHistory: []controlplane.StatusChange{{Status: controlplane.RevisionCreating, At: got.CreatedAt}}}, rev)

	d := f.create(tenantA, dockerBody("docker"))
	diff(t, "external_docker source_config", controlplane.SourceConfig{}, d.SourceConfig)
}

func TestCreateNameUniqueness(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, dockerBody("agent"))
	_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if !errors.Is(err, apierr.ErrConflict) || err.Error() != "A deployment named 'agent' already exists." {
		t.Fatalf("second create: %v, want ErrConflict with the detail sentence", err)
	}
	f.create(tenantB, dockerBody("agent")) // another tenant may use the name
	f.create(tenantA, dockerBody("Agent")) // names are case-sensitive
	f.reachEngine()                        // else the delete removes it, and frees its name, at once
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if !errors.Is(err, apierr.ErrConflict) {
		t.Fatalf("create while the namesake is AWAITING_DELETE: %v, want ErrConflict", err)
	}
}

type failingHook struct{ calls int }

func (h *failingHook) CreateTracingProject(ctx context.Context, tx store.Tx, p controlplane.TracingProject) error {
	h.calls++
	if err := tx.Put("hook", p.DeploymentID, []byte(p.Name)); err != nil {
		return err
	}
	return errors.New("tracing service unavailable")
}

func TestTracingProject(t *testing.T) {
	t.Run("default keeps a record in the store", func(t *testing.T) {
		f := newFixture(t, nil)
		d := f.create(tenantA, dockerBody("agent"))
		var got controlplane.TracingProject
		err := f.st.View(f.ctx, func(r store.Reader) error {
			var err error
			got, err = controlplane.StoreTracingProjects{}.Get(r, tenantA, d.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "tracing project", controlplane.TracingProject{Tenant: tenantA, DeploymentID: d.ID, Name: "agent", CreatedAt: d.CreatedAt.Time()}, got)
	})
	t.Run("a failing hook leaves nothing behind", func(t *testing.T) {
		h := &failingHook{}
		f := newFixture(t, &controlplane.Options{TracingProjects: h})
		before := dump(t, f.st)
		_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
		if err == nil || h.calls == 0 {
			t.Fatalf("create: %v after %d hook calls, want the hook's error", err, h.calls)
		}
		diff(t, "store", before, dump(t, f.st))
	})
}

func TestHookErrorIsKept(t *testing.T) {
	h := &failingHook{}
	f := newFixture(t, &controlplane.Options{TracingProjects: h})
	_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err == nil || !strings.Contains(err.Error(), "tracing service unavailable") {
		t.Fatalf("create: %v, want the hook's error", err)
	}
	f.st.Close()
	_, err = f.cp.GetDeployment(f.ctx, tenantA, "00000000-0000-7000-8000-000000000001")
	if err == nil || errors.Is(err, store.ErrClosed) || errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("get over a closed store: %v, want an error that is neither a store sentinel nor a domain error", err)
	}
}
