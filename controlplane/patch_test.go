package controlplane_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// TestPatchRules has one row per PATCH rule (wire contract section 6 and
// the seed's revision triggers): a stored deployment, a PATCH body, and
// either the problems it must produce (nothing changes then) or whether a
// revision is created and how the deployment's JSON changes.
func TestPatchRules(t *testing.T) {
	const (
		github = "github"
		docker = "docker"
	)
	tests := []struct {
		rule     string
		base     string // github or docker
		tagRef   bool   // the stored github repo_ref is refs/tags/v1
		patch    string
		want     []string          // problems; nil means accepted
		revision bool              // a new revision is created
		changes  map[string]string // JSON path in the deployment -> new JSON value
	}{
		{rule: "empty body changes nothing", base: github, patch: `{}`},
		{rule: "nulls change nothing", base: github, patch: `{"source_config": null, "source_revision_config": null, "secrets": null}`},
		{rule: "name equal is accepted", base: github, patch: `{"name": "agent"}`},
		{rule: "name different is immutable", base: github, patch: `{"name": "other"}`, want: []string{"body.name: immutable_field"}},
		{rule: "display_name changes in place", base: github, patch: `{"display_name": "My agent ✓"}`,
			changes: map[string]string{"display_name": `"My agent ✓"`}},
		{rule: "display_name changes in place for external_docker", base: docker, patch: `{"display_name": "` + strings.Repeat("é", 256) + `"}`,
			changes: map[string]string{"display_name": `"` + strings.Repeat("é", 256) + `"`}},
		{rule: "display_name null changes nothing", base: github, patch: `{"display_name": null}`},
		{rule: "display_name cannot be cleared with an empty string", base: github, patch: `{"display_name": ""}`,
			want: []string{"body.display_name: string_too_short"}},
		{rule: "display_name of 257 characters is too long", base: github, patch: `{"display_name": "` + strings.Repeat("é", 257) + `"}`,
			want: []string{"body.display_name: string_too_long"}},
		{rule: "source equal is accepted", base: docker, patch: `{"source": "external_docker"}`},
		{rule: "source different is immutable", base: docker, patch: `{"source": "github"}`, want: []string{"body.source: immutable_field"}},
		{rule: "integration_id different is immutable", base: github, patch: `{"source_config": {"integration_id": "00000000-0000-7000-8000-0000000000ff"}}`,
			want: []string{"body.source_config.integration_id: immutable_field"}},
		{rule: "repo_url equal is accepted", base: github, patch: `{"source_config": {"repo_url": "https://github.com/acme/agent"}}`},
		{rule: "repo_url different is immutable", base: github, patch: `{"source_config": {"repo_url": "https://github.com/acme/other"}}`,
			want: []string{"body.source_config.repo_url: immutable_field"}},
		{rule: "deployment_type equal (the default) is accepted", base: github, patch: `{"source_config": {"deployment_type": "prod"}}`},
		{rule: "deployment_type different is immutable", base: github, patch: `{"source_config": {"deployment_type": "dev"}}`,
			want: []string{"body.source_config.deployment_type: immutable_field"}},
		{rule: "listener_id different is immutable", base: docker, patch: `{"source_config": {"listener_id": "00000000-0000-7000-8000-0000000000ff"}}`,
			want: []string{"body.source_config.listener_id: immutable_field"}},
		{rule: "listener_config different is immutable", base: docker, patch: `{"source_config": {"listener_config": {"k8s_namespace": "ns-b"}}}`,
			want: []string{"body.source_config.listener_config: immutable_field"}},
		{rule: "listener_config equal is accepted", base: docker, patch: `{"source_config": {"listener_config": {"k8s_namespace": "ns-a"}}}`},
		{rule: "custom_url is read-only for github", base: github, patch: `{"source_config": {"custom_url": "https://x"}}`,
			want: []string{"body.source_config.custom_url: read_only_field"}},
		{rule: "custom_url must be http or https", base: docker, patch: `{"source_config": {"custom_url": "javascript:alert(1)"}}`,
			want: []string{"body.source_config.custom_url: url_scheme"}},
		{rule: "custom_url changes in place for external_docker", base: docker, patch: `{"source_config": {"custom_url": "https://new.example.com"}}`,
			changes: map[string]string{"source_config.custom_url": `"https://new.example.com"`}},
		{rule: "build_on_push changes in place", base: github, patch: `{"source_config": {"build_on_push": true}}`,
			changes: map[string]string{"source_config.build_on_push": `true`}},
		{rule: "build_on_push cannot be enabled with a stored tag ref", base: github, tagRef: true, patch: `{"source_config": {"build_on_push": true}}`,
			want: []string{"body.source_config.build_on_push: build_on_push_with_tag"}},
		{rule: "build_on_push and a tag ref in one PATCH", base: github, patch: `{"source_config": {"build_on_push": true}, "source_revision_config": {"repo_ref": "refs/tags/v2"}}`,
			want: []string{"body.source_config.build_on_push: build_on_push_with_tag"}},
		{rule: "install_command and build_command change in place", base: github, patch: `{"source_config": {"install_command": "yarn", "build_command": "yarn build"}}`,
			changes: map[string]string{"source_config.install_command": `"yarn"`, "source_config.build_command": `"yarn build"`}},
		{rule: "repo_ref triggers a revision", base: github, patch: `{"source_revision_config": {"repo_ref": "release"}}`, revision: true,
			changes: map[string]string{"source_revision_config.repo_ref": `"release"`}},
		{rule: "repo_ref equal to the current value still triggers", base: github, patch: `{"source_revision_config": {"repo_ref": "main"}}`, revision: true},
		{rule: "graph_config_path triggers (alias accepted)", base: github, patch: `{"source_revision_config": {"langgraph_config_path": "g2.json"}}`, revision: true,
			changes: map[string]string{"source_revision_config.graph_config_path": `"g2.json"`, "source_revision_config.langgraph_config_path": `"g2.json"`}},
		{rule: "image_uri triggers", base: docker, patch: `{"source_revision_config": {"image_uri": "r/agent:2"}}`, revision: true,
			changes: map[string]string{"source_revision_config.image_uri": `"r/agent:2"`}},
		{rule: "image_uri does not apply to github", base: github, patch: `{"source_revision_config": {"image_uri": "r/agent:2"}}`,
			want: []string{"body.source_revision_config.image_uri: not_applicable_to_source"}},
		{rule: "repo_ref does not apply to external_docker", base: docker, patch: `{"source_revision_config": {"repo_ref": "main"}}`,
			want: []string{"body.source_revision_config.repo_ref: not_applicable_to_source"}},
		{rule: "a tag ref with build_on_push false is accepted", base: github, patch: `{"source_revision_config": {"repo_ref": "refs/tags/v2"}}`, revision: true,
			changes: map[string]string{"source_revision_config.repo_ref": `"refs/tags/v2"`}},
		{rule: "repo_commit_sha is ignored", base: github, patch: `{"source_revision_config": {"repo_commit_sha": "abc"}}`},
		{rule: "secrets [] changes nothing", base: github, patch: `{"secrets": []}`},
		{rule: "secrets replace the whole list and trigger", base: github, patch: `{"secrets": [{"name": "B", "value": "2"}]}`, revision: true,
			changes: map[string]string{"secrets": `[{"name":"B","value":"2"}]`}},
		{rule: "secrets equal to the current ones still trigger", base: github, patch: `{"secrets": [{"name": "A", "value": "1"}]}`, revision: true},
		{rule: "resource_spec replaces the whole object and triggers", base: docker, patch: `{"source_config": {"resource_spec": {"min_scale": 2}}}`, revision: true,
			changes: map[string]string{"source_config.resource_spec.min_scale": `2`, "source_config.resource_spec.max_scale": `null`}},
		{rule: "resource_spec does not apply to github", base: github, patch: `{"source_config": {"resource_spec": {"min_scale": 2}}}`,
			want: []string{"body.source_config.resource_spec: not_applicable_to_source"}},
		{rule: "resource_spec values are checked", base: docker, patch: `{"source_config": {"resource_spec": {"min_scale": 3, "max_scale": 2}}}`,
			want: []string{"body.source_config.resource_spec.min_scale: less_than_equal"}},
		{rule: "values are checked with the rules", base: github, patch: `{"name": "x y", "source_revision_config": {"repo_ref": ""}}`,
			want: []string{"body.name: immutable_field", "body.name: string_pattern_mismatch", "body.source_revision_config.repo_ref: string_too_short"}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			f := newFixture(t, nil)
			var d *controlplane.Deployment
			if tt.base == github {
				body := githubBody("agent", f.integration(tenantA))
				body = strings.Replace(body, `"langgraph.json"}`, `"langgraph.json"}, "secrets": [{"name": "A", "value": "1"}]`, 1)
				if tt.tagRef {
					body = strings.Replace(body, `"main"`, `"refs/tags/v1"`, 1)
				}
				d = f.create(tenantA, body)
			} else {
				lis := f.listener(tenantA, "ns-a")
				d = f.create(tenantA, `{"name": "agent", "source": "external_docker",
					"source_config": {"custom_url": "https://agent.example.com", "listener_id": "`+lis+`",
						"listener_config": {"k8s_namespace": "ns-a"}, "resource_spec": {"min_scale": 1, "max_scale": 3}},
					"source_revision_config": {"image_uri": "r/agent:1"}}`)
			}
			before := dump(t, f.st)
			got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, tt.patch))
			if tt.want != nil {
				diff(t, "problems", tt.want, locTypes(problems(t, err)))
				diff(t, "store after a rejected PATCH", before, dump(t, f.st))
				return
			}
			if err != nil {
				t.Fatalf("PATCH: %v", err)
			}
			// Build the expected deployment from the stored one and the
			// row's changes, as JSON.
			want := toMap(t, d)
			for path, v := range tt.changes {
				setPath(t, want, path, v)
			}
			if tt.revision {
				if *got.LatestRevisionID == *d.LatestRevisionID {
					t.Fatalf("latest_revision_id unchanged, want a new revision")
				}
				want["latest_revision_id"] = *got.LatestRevisionID
			}
			if tt.revision || len(tt.changes) > 0 {
				want["updated_at"] = toMap(t, got)["updated_at"]
				if !got.UpdatedAt.After(d.UpdatedAt) {
					t.Errorf("updated_at %v not after %v", got.UpdatedAt, d.UpdatedAt)
				}
			} else {
				diff(t, "store after a PATCH that changes nothing", before, dump(t, f.st))
			}
			diff(t, "deployment", want, toMap(t, got))
			again, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "deployment read back", got, again)
		})
	}
}

func toMap(t tb, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// setPath sets a dotted path of a decoded JSON object to a JSON value.
func setPath(t tb, m map[string]any, path, value string) {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			t.Fatalf("path %s: %s is not an object", path, p)
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func TestPatchErrors(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, dockerBody("agent"))
	patch := decode[controlplane.UpdateDeploymentRequest](t, `{"source_revision_config": {"image_uri": "r/agent:2"}}`)

	for _, tt := range []struct{ tenant, id string }{
		{tenantB, d.ID}, // another tenant's id
		{tenantA, "00000000-0000-7000-8000-0000000000ff"},
		{tenantA, "not-a-uuid"},
	} {
		_, err := f.cp.UpdateDeployment(f.ctx, tt.tenant, tt.id, patch)
		var nf *apierr.NotFoundError
		if !errors.As(err, &nf) || nf.Kind != apierr.KindDeployment || err.Error() != "Deployment ID "+tt.id+" not found." {
			t.Errorf("PATCH %s as %s: %v, want Deployment not found", tt.id, tt.tenant, err)
		}
	}

	f.reachEngine() // else the delete removes it at once
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	before := dump(t, f.st)
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, patch); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("PATCH while AWAITING_DELETE: %v, want ErrInvalidState", err)
	}
	if _, err := f.cp.CreateRevision(f.ctx, tenantA, d.ID, patch); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("create revision while AWAITING_DELETE: %v, want ErrInvalidState", err)
	}
	if _, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("redeploy while AWAITING_DELETE: %v, want ErrInvalidState", err)
	}
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Errorf("second delete: %v, want nil", err)
	}
	diff(t, "store", before, dump(t, f.st))
	got, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	if err != nil || got.Status != controlplane.StatusAwaitingDelete {
		t.Errorf("GET after delete: %v, %v; want AWAITING_DELETE", got, err)
	}
}

// TestClockGoingBackwards: a change stamped by a clock behind the stored
// updated_at still moves updated_at forward and makes the newest revision.
func TestClockGoingBackwards(t *testing.T) {
	now := t0
	f := newFixture(t, nil)
	f.cp = controlplane.New(f.st, &controlplane.Options{Clock: func() time.Time { return now }})
	d := f.create(tenantA, dockerBody("agent"))
	now = t0.Add(-time.Hour)
	got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"source_revision_config": {"image_uri": "r/a:2"}}`))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "updated_at", d.UpdatedAt.Add(time.Microsecond), got.UpdatedAt)
	page, err := f.cp.ListRevisions(f.ctx, tenantA, d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "newest revision", *got.LatestRevisionID, page.Resources[0].ID)
	f.reachEngine() // else the delete removes it at once
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	deleted, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "updated_at after delete", got.UpdatedAt.Add(time.Microsecond), deleted.UpdatedAt)
}
