package controlplane_test

import (
	"fmt"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// min_scale 0 is allowed only for the deployment types that scale to zero,
// on the sources that have a deployment_type; external_docker, which has
// none, keeps scales >= 0.
func TestMinScaleZeroNeedsZeroType(t *testing.T) {
	minLoc := fmt.Sprint([]any{"body", "source_config", "resource_spec", "min_scale"})
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"internal_docker default type", `{"source": "internal_docker", "source_config": {"resource_spec": {"min_scale": 0}}}`, false},
		{"internal_docker dev", `{"source": "internal_docker", "source_config": {"deployment_type": "dev", "resource_spec": {"min_scale": 0}}}`, false},
		{"internal_docker prod", `{"source": "internal_docker", "source_config": {"deployment_type": "prod", "resource_spec": {"min_scale": 0}}}`, false},
		{"internal_docker dev_free", `{"source": "internal_docker", "source_config": {"deployment_type": "dev_free", "resource_spec": {"min_scale": 0}}}`, false},
		{"internal_docker dev_zero", `{"source": "internal_docker", "source_config": {"deployment_type": "dev_zero", "resource_spec": {"min_scale": 0}}}`, true},
		{"internal_source dev_free_zero", `{"source": "internal_source", "source_config": {"deployment_type": "dev_free_zero", "resource_spec": {"min_scale": 0}}}`, true},
		{"internal_docker dev min 1", `{"source": "internal_docker", "source_config": {"deployment_type": "dev", "resource_spec": {"min_scale": 1}}}`, true},
		{"dev_zero without a spec", `{"source": "internal_docker", "source_config": {"deployment_type": "dev_zero"}}`, true},
		{"external_docker", `{"source": "external_docker", "source_config": {"resource_spec": {"min_scale": 0}}, "source_revision_config": {"image_uri": "r/a:1"}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			req := decode[controlplane.CreateDeploymentRequest](t, `{"name": "a", `+tc.body[1:])
			d, err := f.cp.CreateDeployment(f.ctx, tenantA, req)
			if tc.ok {
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				return
			}
			ps := problems(t, err)
			if len(ps) != 1 || fmt.Sprint(ps[0].Loc) != minLoc || ps[0].Type != apierr.TypeGreaterThanEqual {
				t.Fatalf("problems %+v, want one greater_than_equal at %s (deployment %v)", ps, minLoc, d)
			}
		})
	}
}

// A PATCH of resource_spec is checked against the stored type.
func TestMinScaleZeroPatch(t *testing.T) {
	f := newFixture(t, nil)
	dev := f.create(tenantA, `{"name": "dev", "source": "internal_docker", "source_config": {"deployment_type": "dev"}}`)
	zero := f.create(tenantA, `{"name": "zero", "source": "internal_docker", "source_config": {"deployment_type": "dev_zero"}}`)
	patch := decode[controlplane.UpdateDeploymentRequest](t, `{"source_config": {"resource_spec": {"min_scale": 0, "max_scale": 2}}}`)
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, dev.ID, patch); len(problems(t, err)) != 1 {
		t.Fatalf("PATCH of a dev deployment to min_scale 0: %v", err)
	}
	got, err := f.cp.UpdateDeployment(f.ctx, tenantA, zero.ID, patch)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.SourceConfig.ResourceSpec; s == nil || *s.MinScale != 0 {
		t.Fatalf("resource_spec %+v, want min_scale 0", s)
	}
	if !controlplane.DeploymentTypeDevZero.ScalesToZero() || controlplane.DeploymentTypeDev.ScalesToZero() {
		t.Fatal("ScalesToZero")
	}
}
