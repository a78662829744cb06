package controlplane_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
)

// decoders are the two JSON decoders requests reach the ControlPlane
// through: encoding/json (embedders, the tests) and
// github.com/go-json-experiment/json (httphandler).
var decoders = []struct {
	name      string
	unmarshal func([]byte, any) error
}{
	{"encoding/json", json.Unmarshal},
	{"go-json-experiment", func(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }},
}

// TestSecretValueRequired: a secret's value is required (the seed's Secret
// has name and value both required). Absent or null is 422 missing at
// ["body", "secrets", i, "value"]; "" is a value. The rule holds for
// create, PATCH and POST .../revisions, whichever decoder read the body,
// and answers still carry secrets as {name, value}.
func TestSecretValueRequired(t *testing.T) {
	tests := []struct {
		secrets string
		want    []string // problems; nil means accepted
	}{
		{`[{"name": "A"}]`, []string{"body.secrets.0.value: missing"}},
		{`[{"name": "A", "value": null}]`, []string{"body.secrets.0.value: missing"}},
		{`[{"name": "A", "value": "1"}, {"name": "B"}, {"value": "3"}]`,
			[]string{"body.secrets.1.value: missing", "body.secrets.2.name: missing"}},
		{`[{"name": "A", "value": ""}]`, nil},
	}
	ops := []struct {
		name string
		call func(f *fixture, id string, body []byte, unmarshal func([]byte, any) error) (any, error)
	}{
		{"create", func(f *fixture, _ string, body []byte, unmarshal func([]byte, any) error) (any, error) {
			var req controlplane.CreateDeploymentRequest
			if err := unmarshal(body, &req); err != nil {
				f.t.Fatal(err)
			}
			return f.cp.CreateDeployment(f.ctx, tenantA, &req)
		}},
		{"patch", func(f *fixture, id string, body []byte, unmarshal func([]byte, any) error) (any, error) {
			var req controlplane.UpdateDeploymentRequest
			if err := unmarshal(body, &req); err != nil {
				f.t.Fatal(err)
			}
			return f.cp.UpdateDeployment(f.ctx, tenantA, id, &req)
		}},
		{"create revision", func(f *fixture, id string, body []byte, unmarshal func([]byte, any) error) (any, error) {
			var req controlplane.UpdateDeploymentRequest
			if err := unmarshal(body, &req); err != nil {
				f.t.Fatal(err)
			}
			return f.cp.CreateRevision(f.ctx, tenantA, id, &req)
		}},
	}
	for _, dec := range decoders {
		for _, op := range ops {
			for _, tt := range tests {
				t.Run(dec.name+"/"+op.name+"/"+tt.secrets, func(t *testing.T) {
					f := newFixture(t, nil)
					d := f.create(tenantA, dockerBody("agent"))
					body := `{"secrets": ` + tt.secrets + `}`
					if op.name == "create" {
						body = strings.Replace(dockerBody("other"), `"source": "external_docker",`,
							`"source": "external_docker", "secrets": `+tt.secrets+`,`, 1)
					}
					before := dump(t, f.st)
					_, err := op.call(f, d.ID, []byte(body), dec.unmarshal)
					if tt.want != nil {
						diff(t, "problems", tt.want, locTypes(problems(t, err)))
						diff(t, "store after a rejected request", before, dump(t, f.st))
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					id := d.ID
					if op.name == "create" {
						page, err := f.cp.ListDeployments(f.ctx, tenantA, &controlplane.ListDeploymentsQuery{NameContains: "other"})
						if err != nil || len(page.Resources) != 1 {
							t.Fatalf("list: %v, %v", page, err)
						}
						id = page.Resources[0].ID
					}
					b, err := f.cp.GetDeploymentJSON(f.ctx, tenantA, id)
					if err != nil {
						t.Fatal(err)
					}
					if !strings.Contains(string(b), `"secrets":[{"name":"A","value":""}]`) {
						t.Errorf("deployment JSON %s, want secrets [{name: A, value: \"\"}]", b)
					}
				})
			}
		}
	}
}

// TestAliasProblemLoc: a problem about the revision's graph path is
// reported at the key the client sent, graph_config_path or its input
// alias langgraph_config_path (wire contract section 1), on create and on
// PATCH, for both sources.
func TestAliasProblemLoc(t *testing.T) {
	for _, op := range []string{"create", "patch"} {
		for _, key := range []string{"graph_config_path", "langgraph_config_path"} {
			for _, src := range []controlplane.Source{controlplane.SourceGitHub, controlplane.SourceExternalDocker} {
				t.Run(fmt.Sprint(op, "/", key, "/", src), func(t *testing.T) {
					f := newFixture(t, nil)
					integ := f.integration(tenantA)
					// An external_docker deployment has no graph path (not
					// applicable); for github, "" is too short.
					value, want := `""`, "body.source_revision_config."+key+": string_too_short"
					if src == controlplane.SourceExternalDocker {
						value, want = `"g.json"`, "body.source_revision_config."+key+": not_applicable_to_source"
					}
					var err error
					switch op {
					case "create":
						body := githubBody("agent", integ)
						if src == controlplane.SourceExternalDocker {
							body = dockerBody("agent")
						}
						body = strings.Replace(body, `"source_revision_config": {`, `"source_revision_config": {"`+key+`": `+value+`, `, 1)
						body = strings.Replace(body, `, "graph_config_path": "langgraph.json"`, ``, 1)
						_, err = f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, body))
					case "patch":
						body := githubBody("agent", integ)
						if src == controlplane.SourceExternalDocker {
							body = dockerBody("agent")
						}
						d := f.create(tenantA, body)
						patch := `{"source_revision_config": {"` + key + `": ` + value + `}}`
						_, err = f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, patch))
					}
					diff(t, "problems", []string{want}, locTypes(problems(t, err)))
				})
			}
		}
	}
}

// inPlaceFields lists, from the rules table, the fields a PATCH changes in
// place for src.
func inPlaceFields(src controlplane.Source) [][]string {
	var out [][]string
	for _, r := range controlplane.FieldRules() {
		if r.Patch[src] == controlplane.PatchInPlace {
			out = append(out, r.Loc)
		}
	}
	return out
}

// patchBody is a PATCH body setting one field, at loc, to the JSON value v.
func patchBody(loc []string, v any) string {
	var m any = v
	for i := len(loc) - 1; i >= 0; i-- {
		m = map[string]any{loc[i]: m}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// field reads loc from a deployment's JSON.
func field(t tb, d *controlplane.Deployment, loc []string) any {
	t.Helper()
	var v any = toMap(t, d)
	for _, k := range loc {
		v = v.(map[string]any)[k]
	}
	return v
}

// TestRedeployKeepsInPlaceFields: a redeploy builds with the named
// revision's snapshot (source_revision_config, secrets, resource_spec), and
// every field a PATCH changes in place (the PatchInPlace rows of the rules
// table) keeps its current value, whatever PATCHes came before and
// whichever older revision is redeployed.
func TestRedeployKeepsInPlaceFields(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		f := newFixture(t, nil)
		src := rapid.SampledFrom([]controlplane.Source{controlplane.SourceGitHub, controlplane.SourceExternalDocker}).Draw(rt, "source")
		body := dockerBody("agent")
		revField, revValue := []string{"source_revision_config", "image_uri"}, func(i int) any { return fmt.Sprintf("r/agent:%d", i) }
		if src == controlplane.SourceGitHub {
			body = githubBody("agent", f.integration(tenantA))
			revField, revValue = []string{"source_revision_config", "repo_ref"}, func(i int) any { return fmt.Sprintf("branch-%d", i) }
		}
		// pinned_revision_id names the active revision, which these
		// deployments never have (TestPin covers it).
		inPlace := slices.DeleteFunc(inPlaceFields(src), func(loc []string) bool { return loc[0] == "pinned_revision_id" })
		if len(inPlace) == 0 {
			rt.Fatalf("no in-place field for %s in the rules table", src)
		}
		d := f.create(tenantA, body)
		revs := []*controlplane.Deployment{d} // the deployment as each revision left it
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0: // an in-place change
				loc := rapid.SampledFrom(inPlace).Draw(rt, "in-place field")
				var v any = fmt.Sprintf("value %d", i)
				switch loc[len(loc)-1] {
				case "build_on_push", "auto_rollback":
					v = rapid.Bool().Draw(rt, loc[len(loc)-1])
				case "custom_url":
					v = fmt.Sprintf("https://agent-%d.example.com", i)
				case "agent":
					v = map[string]any{"agent_id": fmt.Sprintf("agent-%d", i), "environment": "staging"}
				case "preview":
					v = map[string]any{"mode": "all", "idle_ttl_minutes": i + 1}
				}
				got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](rt, patchBody(loc, v)))
				if err != nil {
					rt.Fatalf("PATCH %s: %v", patchBody(loc, v), err)
				}
				if *got.LatestRevisionID != *d.LatestRevisionID {
					rt.Fatalf("PATCH %s made a revision", patchBody(loc, v))
				}
				d = got
			case 1: // a new revision
				got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](rt, patchBody(revField, revValue(i))))
				if err != nil {
					rt.Fatal(err)
				}
				d = got
				revs = append(revs, got)
			case 2: // redeploy an older revision
				k := rapid.IntRange(0, len(revs)-1).Draw(rt, "revision")
				old := revs[k]
				got, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, *old.LatestRevisionID)
				if err != nil {
					rt.Fatal(err)
				}
				for _, loc := range inPlace {
					diff(rt, "in-place field "+strings.Join(loc, ".")+" after a redeploy", field(rt, d, loc), field(rt, got, loc))
				}
				diff(rt, "the redeployed revision's "+strings.Join(revField, "."), field(rt, old, revField), field(rt, got, revField))
				d = got
				revs = append(revs, got)
			}
		}
	})
}

// TestListCapsBeforeItems: every list of a request body is checked against
// its cap before anything is done per item, so a body with 200,000 items
// in every list costs one problem per list and no work per item (the
// allocations of a call do not grow with the lists).
func TestListCapsBeforeItems(t *testing.T) {
	const n = 200_000
	f := newFixture(t, nil)
	secrets := make([]controlplane.SecretInput, n)
	tags := make([]string, n)
	for i := range tags {
		tags[i] = fmt.Sprintf("00000000-0000-7000-8000-%012X", i) // upper case: canonicalizing would allocate
		secrets[i] = controlplane.SecretInput{Name: "S"}          // duplicates, no values: per-item problems
	}
	huge := func() []string { return make([]string, n) }
	spec := &controlplane.ResourceSpec{
		ImagePullSecrets: make([]controlplane.LocalObjectReference, n),
		Volumes:          make([]controlplane.Volume, n),
		VolumeMounts:     make([]controlplane.VolumeMount, n),
		InitContainers:   make([]controlplane.Container, n),
		Sidecars: []controlplane.Container{{Name: "s", Image: "i", Command: huge(), Args: huge(),
			Env: make([]controlplane.EnvVar, n), EnvFrom: make([]map[string]any, n), VolumeMounts: make([]controlplane.VolumeMount, n)}},
	}
	create := &controlplane.CreateDeploymentRequest{Name: new("agent"), Source: new(controlplane.SourceExternalDocker),
		SourceConfig:         &controlplane.SourceConfig{ResourceSpec: spec},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")},
		Secrets:              secrets, TagValueIDs: tags}
	wantCreate := []string{
		"body.source_config.resource_spec.image_pull_secrets: too_long",
		"body.source_config.resource_spec.volumes: too_long",
		"body.source_config.resource_spec.volume_mounts: too_long",
		"body.source_config.resource_spec.init_containers: too_long",
		"body.source_config.resource_spec.sidecars.0.command: too_long",
		"body.source_config.resource_spec.sidecars.0.args: too_long",
		"body.source_config.resource_spec.sidecars.0.env: too_long",
		"body.source_config.resource_spec.sidecars.0.envFrom: too_long",
		"body.source_config.resource_spec.sidecars.0.volumeMounts: too_long",
		"body.secrets: too_long",
		"body.tag_value_ids: too_long",
	}
	d := f.create(tenantA, dockerBody("small"))
	patch := &controlplane.UpdateDeploymentRequest{SourceConfig: &controlplane.SourceConfig{ResourceSpec: spec}, Secrets: secrets}
	wantPatch := append(wantCreate[:len(wantCreate)-2:len(wantCreate)-2], "body.secrets: too_long")
	listener := &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("c"),
		ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: huge()}}

	for _, tt := range []struct {
		name string
		want []string
		call func() error
	}{
		{"create", wantCreate, func() error { _, err := f.cp.CreateDeployment(f.ctx, tenantA, create); return err }},
		{"patch", wantPatch, func() error { _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, patch); return err }},
		{"create revision", wantPatch, func() error { _, err := f.cp.CreateRevision(f.ctx, tenantA, d.ID, patch); return err }},
		{"create listener", []string{"body.compute_config.k8s_namespaces: too_long"},
			func() error { _, err := f.cp.CreateListener(f.ctx, tenantA, listener); return err }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "problems", tt.want, locTypes(problems(t, tt.call())))
			// Per-item work would allocate at least once per item.
			allocs := testing.AllocsPerRun(2, func() { _ = tt.call() })
			t.Logf("%s: %.0f allocations", tt.name, allocs)
			if allocs > 1000 {
				t.Errorf("%s allocates %.0f times for %d-item lists, want work independent of their length", tt.name, allocs, n)
			}
		})
	}
}
