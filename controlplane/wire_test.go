package controlplane_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// TestWireShapes pins the JSON of every response type: names, nulls that
// stay null, [] for empty lists, RFC 3339 UTC timestamps with six fractional digits.
func TestWireShapes(t *testing.T) {
	f := newFixture(t, nil)
	intID := f.integration(tenantA)
	d := f.create(tenantA, githubBody("agent", intID))
	rev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := f.cp.ListDeployments(f.ctx, tenantB, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := f.listener(tenantA)
	lis, err := f.cp.GetListener(f.ctx, tenantA, l)
	if err != nil {
		t.Fatal(err)
	}
	_, verr := f.cp.CreateDeployment(f.ctx, tenantA, &controlplane.CreateDeploymentRequest{})
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"deployment", d, `{"id":"00000000-0000-7000-8000-000000000002","name":"agent",
			"tenant_id":"0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b","display_name":null,"source":"github",
			"source_config":{"integration_id":"00000000-0000-7000-8000-000000000001","repo_url":"https://github.com/acme/agent",
				"deployment_type":"prod","build_on_push":false,
				"custom_url":"https://agent-00000000-0000-7000-8000-000000000002.deployplane.local",
				"resource_spec":null,"listener_id":null,"listener_config":null,"install_command":null,"build_command":null,"auto_rollback":null,"preview":null},
			"source_revision_config":{"repo_ref":"main","graph_config_path":"langgraph.json","langgraph_config_path":"langgraph.json",
				"image_uri":null,"source_tarball_path":null,"repo_commit_sha":null},
			"secrets":[],"secret_references":[],"created_at":"2026-11-21T10:00:02.000000Z","updated_at":"2026-11-21T10:00:02.000000Z","status":"AWAITING_DATABASE",
			"latest_revision_id":"00000000-0000-7000-8000-000000000003","active_revision_id":null,"image_version":null,"url":null,"remote_reconciled":false,
			"status_message":null,"agent":null,"is_preview":false,"pinned_revision_id":null}`},
		{"revision", rev, `{"id":"00000000-0000-7000-8000-000000000003","created_at":"2026-11-21T10:00:02.000000Z","updated_at":"2026-11-21T10:00:02.000000Z",
			"status":"CREATING","source":"github",
			"source_revision_config":{"repo_ref":"main","graph_config_path":"langgraph.json","langgraph_config_path":"langgraph.json",
				"image_uri":null,"source_tarball_path":null,"repo_commit_sha":null},
			"status_message":null,"tracked_packages":null,"status_history":[{"status":"CREATING","at":"2026-11-21T10:00:02.000000Z"}]}`},
		{"empty page", empty, `{"resources":[],"offset":0}`},
		{"listener", lis, `{"id":"00000000-0000-7000-8000-000000000004","compute_type":"k8s","compute_id":"cluster-3",
			"compute_config":{"k8s_namespaces":[]},"version":"","created_at":"2026-11-21T10:00:03.000000Z","updated_at":"2026-11-21T10:00:03.000000Z",
			"status":"DISCONNECTED","last_heartbeat_at":null}`},
		{"validation problems", problems(t, verr), `[{"loc":["body","source"],"msg":"Field required","type":"missing"},
			{"loc":["body","name"],"msg":"Field required","type":"missing"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(tt.want)); err != nil {
				t.Fatal(err)
			}
			diff(t, "JSON", want.String(), string(got))
		})
	}
}

// TestDecodeCompatibility: the hosted service's alias and unknown keys;
// answers carry the alias beside graph_config_path, equal (section 9).
func TestDecodeCompatibility(t *testing.T) {
	f := newFixture(t, nil)
	intID := f.integration(tenantA)
	d := f.create(tenantA, `{"name": "agent", "source": "github", "tracked_packages": ["x"], "revision_source": "cli",
		"source_config": {"integration_id": "`+intID+`", "repo_url": "u"},
		"source_revision_config": {"repo_ref": "main", "langgraph_config_path": "graphs/langgraph.json"}}`)
	diff(t, "graph_config_path", "graphs/langgraph.json", *d.SourceRevisionConfig.GraphConfigPath)
	diff(t, "langgraph_config_path", "graphs/langgraph.json", *d.SourceRevisionConfig.LanggraphConfigPath)
	// A display name is kept as sent; an external_docker deployment
	// answers both paths null.
	named := f.create(tenantA, `{"name": "named", "display_name": "Named agent ✓", "source": "external_docker",
		"source_revision_config": {"image_uri": "r/a:1"}}`)
	b, _ := json.Marshal(named)
	for _, want := range []string{`"display_name":"Named agent ✓"`, `"graph_config_path":null,"langgraph_config_path":null`, `"tenant_id":"` + tenantA + `"`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("answer %s lacks %s", b, want)
		}
	}
	// Ids in upper case name the same integration.
	for !strings.ContainsAny(intID, "abcdef") {
		intID = f.integration(tenantA)
	}
	upper := f.create(tenantA, githubBody("agent2", strings.ToUpper(intID)))
	diff(t, "integration id", intID, *upper.SourceConfig.IntegrationID)
}
