package controlplane_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// fuzzSeeds are bodies from the rule tables, valid and invalid.
var fuzzSeeds = []string{
	gh("", ""), dk("", ""), gh(`, "build_on_push": true`, ""),
	dk(`"resource_spec": {"min_scale": 1, "max_scale": 2, "cpu": 0.5, "labels": {"a": "b"}, "volumes": [{"name": "v", "emptyDir": {}}],
		"volume_mounts": [{"name": "v", "mountPath": "/v"}], "sidecars": [{"name": "s", "image": "x", "env": [{"name": "A", "valueFrom": {}}]}]}`, ""),
	`{"name": "-", "source": "github", "source_config": {"deployment_type": "x"}}`,
	`{"source_config": {"resource_spec": {"init_containers": [{}], "volume_mounts": [{}]}}, "secrets": [{}]}`,
	`{"source_revision_config": {"langgraph_config_path": "a", "graph_config_path": "b"}}`,
}

// FuzzCreateAndPatch feeds any JSON body to CreateDeployment, then to
// UpdateDeployment of an existing deployment: no panic, only the documented
// errors, and a successful call's result is what a GET returns.
func FuzzCreateAndPatch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req controlplane.CreateDeploymentRequest
		if json.Unmarshal([]byte(body), &req) != nil {
			return
		}
		fx := newFixture(t, nil)
		body = strings.ReplaceAll(body, "{{int}}", "00000000-0000-7000-8000-000000000001")
		fx.integration(tenantA)
		check := func(op string, d *controlplane.Deployment, err error) {
			t.Helper()
			var ve *apierr.ValidationError
			switch {
			case err == nil:
				got, gerr := fx.cp.GetDeployment(fx.ctx, tenantA, d.ID)
				if gerr != nil {
					t.Fatalf("%s: GET after success: %v", op, gerr)
				}
				diff(t, op, d, got)
			case errors.As(err, &ve):
				if len(ve.Problems) == 0 {
					t.Fatalf("%s: a ValidationError without problems", op)
				}
				for _, p := range ve.Problems {
					if len(p.Loc) < 2 || p.Loc[0] != "body" || p.Type == "" || p.Msg == "" {
						t.Fatalf("%s: malformed problem %+v", op, p)
					}
				}
			case errors.Is(err, apierr.ErrConflict):
			default:
				t.Fatalf("%s: unexpected error %v", op, err)
			}
		}
		d, err := fx.cp.CreateDeployment(fx.ctx, tenantA, &req)
		check("create", d, err)

		var patch controlplane.UpdateDeploymentRequest
		if json.Unmarshal([]byte(body), &patch) != nil {
			return
		}
		for _, base := range []string{dockerBody("docker-base"), githubBody("github-base", "00000000-0000-7000-8000-000000000001")} {
			b := fx.create(tenantA, base)
			d, err = fx.cp.UpdateDeployment(fx.ctx, tenantA, b.ID, &patch)
			check("patch", d, err)
		}
	})
}
