package controlplane_test

import (
	"errors"
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

// Secret references: checked for shape, kept apart from secrets' names,
// and asked of the deployer through Options.SecretReferenceProblem.
func TestSecretReferences(t *testing.T) {
	f := newFixture(t, &controlplane.Options{SecretReferenceProblem: func(d *controlplane.Deployment, ref controlplane.SecretReference) string {
		if ref.SecretName == "unmapped" {
			return "the test deployer has no value for secret unmapped"
		}
		return ""
	}})
	refLoc := func(i int, field string) string {
		return fmt.Sprint([]any{"body", "secret_references", i, field})
	}
	for _, tc := range []struct {
		name, body, loc string
	}{
		{"bad name", `"secret_references": [{"name": "1X", "secret_name": "db", "secret_key": "k"}]`, refLoc(0, "name")},
		{"bad secret name", `"secret_references": [{"name": "A", "secret_name": "Db_Creds", "secret_key": "k"}]`, refLoc(0, "secret_name")},
		{"bad key", `"secret_references": [{"name": "A", "secret_name": "db", "secret_key": "a/b"}]`, refLoc(0, "secret_key")},
		{"missing key", `"secret_references": [{"name": "A", "secret_name": "db"}]`, refLoc(0, "secret_key")},
		{"duplicate", `"secret_references": [{"name": "A", "secret_name": "db", "secret_key": "k"}, {"name": "A", "secret_name": "db", "secret_key": "j"}]`, refLoc(1, "name")},
		{"a secret's name", `"secrets": [{"name": "A", "value": "v"}], "secret_references": [{"name": "A", "secret_name": "db", "secret_key": "k"}]`, refLoc(0, "name")},
		{"deployer refuses", `"secret_references": [{"name": "A", "secret_name": "unmapped", "secret_key": "k"}]`, refLoc(0, "secret_name")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t,
				`{"name": "r", "source": "internal_docker", "source_revision_config": {"image_uri": "r/a:1"}, `+tc.body+`}`))
			ps := problems(t, err)
			if len(ps) != 1 || fmt.Sprint(ps[0].Loc) != tc.loc {
				t.Fatalf("problems %+v, want one at %s", ps, tc.loc)
			}
		})
	}
	d := f.create(tenantA, `{"name": "r", "source": "internal_docker", "source_revision_config": {"image_uri": "r/a:1"},
		"secrets": [{"name": "S", "value": "v"}], "secret_references": [{"name": "DB_PASSWORD", "secret_name": "db-creds", "secret_key": "password"}]}`)
	want := []controlplane.SecretReference{{Name: "DB_PASSWORD", SecretName: "db-creds", SecretKey: "password"}}
	if diffRefs := fmt.Sprint(d.SecretReferences); diffRefs != fmt.Sprint(want) {
		t.Fatalf("secret_references %v, want %v", d.SecretReferences, want)
	}
	// A PATCH of secrets alone may not take a reference's name.
	_, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"secrets": [{"name": "DB_PASSWORD", "value": "x"}]}`))
	if ps := problems(t, err); len(ps) != 1 || fmt.Sprint(ps[0].Loc) != fmt.Sprint([]any{"body", "secrets", 0, "name"}) {
		t.Fatalf("problems %+v", ps)
	}
	// A new list makes a revision, which the Work of that revision carries.
	got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"secret_references": [{"name": "API_KEY", "secret_name": "api", "secret_key": "key"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if *got.LatestRevisionID == *d.LatestRevisionID || len(got.SecretReferences) != 1 || got.SecretReferences[0].Name != "API_KEY" {
		t.Fatalf("after PATCH: latest %s (was %s), references %v", *got.LatestRevisionID, *d.LatestRevisionID, got.SecretReferences)
	}
	// [] is no change.
	same, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"secret_references": []}`))
	if err != nil || *same.LatestRevisionID != *got.LatestRevisionID || len(same.SecretReferences) != 1 {
		t.Fatalf("PATCH []: %v, %+v", err, same)
	}
}

// An agent has at most one deployment per environment; the list filters
// find deployments by agent and environment, and by exact name.
func TestAgentLinks(t *testing.T) {
	f := newFixture(t, nil)
	a := f.create(tenantA, `{"name": "a", "source": "internal_docker", "agent": {"agent_id": "ag-1", "environment": "production"}}`)
	if _, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t,
		`{"name": "b", "source": "internal_docker", "agent": {"agent_id": "ag-1", "environment": "production"}}`)); !errors.Is(err, apierr.ErrConflict) {
		t.Fatalf("second deployment of ag-1 in production: %v, want a conflict", err)
	}
	b := f.create(tenantA, `{"name": "b", "source": "internal_docker", "agent": {"agent_id": "ag-1", "environment": "staging"}}`)
	// The other tenant's agents are its own.
	f.create(tenantB, `{"name": "a", "source": "internal_docker", "agent": {"agent_id": "ag-1", "environment": "production"}}`)
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, b.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"agent": {"agent_id": "ag-1", "environment": "production"}}`)); !errors.Is(err, apierr.ErrConflict) {
		t.Fatalf("PATCH into a held environment: %v, want a conflict", err)
	}
	// Moving a to development frees production for b.
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, a.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"agent": {"agent_id": "ag-1", "environment": "development"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, b.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"agent": {"agent_id": "ag-1", "environment": "production"}}`)); err != nil {
		t.Fatal(err)
	}
	f.create(tenantA, `{"name": "B", "source": "internal_docker"}`)
	for _, tc := range []struct {
		q    controlplane.ListDeploymentsQuery
		want []string
	}{
		{controlplane.ListDeploymentsQuery{AgentID: "ag-1"}, []string{"b", "a"}},
		{controlplane.ListDeploymentsQuery{AgentEnvironment: controlplane.AgentProduction}, []string{"b"}},
		{controlplane.ListDeploymentsQuery{AgentID: "ag-1", AgentEnvironment: controlplane.AgentDevelopment}, []string{"a"}},
		{controlplane.ListDeploymentsQuery{AgentID: "ag-2"}, nil},
		{controlplane.ListDeploymentsQuery{Name: "b"}, []string{"b"}},
		{controlplane.ListDeploymentsQuery{Name: "B"}, []string{"B"}},
		{controlplane.ListDeploymentsQuery{Name: "B", AgentID: "ag-1"}, nil},
		{controlplane.ListDeploymentsQuery{Name: "b", Offset: 1}, nil},
		{controlplane.ListDeploymentsQuery{DeploymentIDs: []string{a.ID, b.ID}, AgentEnvironment: controlplane.AgentDevelopment}, []string{"a"}},
	} {
		page, err := f.cp.ListDeployments(f.ctx, tenantA, &tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range page.Resources {
			got = append(got, d.Name)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("list %+v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if _, err := f.cp.ListDeployments(f.ctx, tenantA, &controlplane.ListDeploymentsQuery{AgentEnvironment: "qa"}); len(problems(t, err)) != 1 {
		t.Fatalf("agent_environment qa: %v", err)
	}
}
