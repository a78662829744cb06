package controlplane_test

import (
	"errors"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/wiretime"
)

func TestListeners(t *testing.T) {
	f := newFixture(t, nil)
	l, err := f.cp.CreateListener(f.ctx, tenantA, decode[controlplane.CreateListenerRequest](t,
		`{"compute_type": "k8s", "compute_id": "cluster-1", "compute_config": {"k8s_namespaces": ["prod", "staging"]}, "version": "0.3.1"}`))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "listener", &controlplane.Listener{ID: "00000000-0000-7000-8000-000000000001", ComputeType: "k8s", ComputeID: "cluster-1",
		ComputeConfig: controlplane.ComputeConfig{K8sNamespaces: []string{"prod", "staging"}}, Version: "0.3.1",
		CreatedAt: wiretime.New(t0.Add(time.Second)), UpdatedAt: wiretime.New(t0.Add(time.Second)),
		Status: controlplane.ListenerDisconnected}, l)

	bare, err := f.cp.CreateListener(f.ctx, tenantA, decode[controlplane.CreateListenerRequest](t, `{"compute_type": "k8s", "compute_id": "cluster-2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if bare.ComputeConfig.K8sNamespaces == nil {
		t.Errorf("k8s_namespaces is nil, want [] on the wire")
	}

	// compute_id is unique per tenant.
	_, err = f.cp.CreateListener(f.ctx, tenantA, decode[controlplane.CreateListenerRequest](t, `{"compute_type": "k8s", "compute_id": "cluster-1"}`))
	if !errors.Is(err, apierr.ErrConflict) {
		t.Errorf("duplicate compute_id: %v, want ErrConflict", err)
	}
	if _, err := f.cp.CreateListener(f.ctx, tenantB, decode[controlplane.CreateListenerRequest](t, `{"compute_type": "k8s", "compute_id": "cluster-1"}`)); err != nil {
		t.Errorf("same compute_id in another tenant: %v", err)
	}

	// Validation.
	_, err = f.cp.CreateListener(f.ctx, tenantA, decode[controlplane.CreateListenerRequest](t, `{"compute_type": "ecs", "compute_config": {"k8s_namespaces": ["ok", "Not OK", "ok"]}}`))
	diff(t, "create problems", []string{"body.compute_type: literal_error", "body.compute_id: missing",
		"body.compute_config.k8s_namespaces.1: string_pattern_mismatch", "body.compute_config.k8s_namespaces.2: duplicate"}, locTypes(problems(t, err)))

	// Get, list newest first, tenant isolation.
	got, err := f.cp.GetListener(f.ctx, tenantA, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "get", l, got)
	if _, err := f.cp.GetListener(f.ctx, tenantB, l.ID); !errors.Is(err, apierr.ErrNotFound) || err.Error() != "Listener ID "+l.ID+" not found." {
		t.Errorf("get from another tenant: %v", err)
	}
	page, err := f.cp.ListListeners(f.ctx, tenantA, nil)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "list", &controlplane.ListenerPage{Resources: []controlplane.Listener{*bare, *l}, Offset: 2}, page)
	page, err = f.cp.ListListeners(f.ctx, tenantA, &controlplane.ListListenersQuery{Limit: new(1), Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "second page", &controlplane.ListenerPage{Resources: []controlplane.Listener{*l}, Offset: 2}, page)
	_, err = f.cp.ListListeners(f.ctx, tenantA, &controlplane.ListListenersQuery{Limit: new(101), Offset: -1})
	diff(t, "list problems", []string{"query.limit: less_than_equal", "query.offset: greater_than_equal"}, locTypes(problems(t, err)))

	// PATCH.
	before := dump(t, f.st)
	_, err = f.cp.UpdateListener(f.ctx, tenantA, l.ID, decode[controlplane.UpdateListenerRequest](t, `{"compute_type": "ecs", "compute_id": "cluster-9"}`))
	diff(t, "patch problems", []string{"body.compute_type: immutable_field", "body.compute_id: immutable_field"}, locTypes(problems(t, err)))
	diff(t, "store after a rejected PATCH", before, dump(t, f.st))
	same, err := f.cp.UpdateListener(f.ctx, tenantA, l.ID, decode[controlplane.UpdateListenerRequest](t, `{"compute_type": "k8s", "compute_id": "cluster-1", "version": "0.3.1"}`))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "PATCH with equal values", l, same)
	patched, err := f.cp.UpdateListener(f.ctx, tenantA, l.ID, decode[controlplane.UpdateListenerRequest](t, `{"compute_config": {"k8s_namespaces": ["prod"]}, "version": "0.4.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := *l
	want.ComputeConfig.K8sNamespaces = []string{"prod"}
	want.Version = "0.4.0"
	want.UpdatedAt = patched.UpdatedAt
	diff(t, "patched", &want, patched)
	if !patched.UpdatedAt.After(l.UpdatedAt) {
		t.Errorf("updated_at did not move")
	}

	// A listener in use cannot be deleted; a free one can.
	d := f.create(tenantA, `{"name": "agent", "source": "external_docker", "source_config": {"listener_id": "`+l.ID+`"},
		"source_revision_config": {"image_uri": "r/a:1"}}`)
	if err := f.cp.DeleteListener(f.ctx, tenantA, l.ID); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("delete a listener in use: %v, want ErrInvalidState", err)
	}
	f.reachEngine() // else the delete removes it at once
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.DeleteListener(f.ctx, tenantA, l.ID); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("delete a listener of a deployment being deleted: %v, want ErrInvalidState", err)
	}
	if err := f.cp.DeleteListener(f.ctx, tenantA, bare.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp.GetListener(f.ctx, tenantA, bare.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("get after delete: %v, want ErrNotFound", err)
	}
	if err := f.cp.DeleteListener(f.ctx, tenantA, bare.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	// Its compute id is free again.
	if _, err := f.cp.CreateListener(f.ctx, tenantA, decode[controlplane.CreateListenerRequest](t, `{"compute_type": "k8s", "compute_id": "cluster-2"}`)); err != nil {
		t.Errorf("reuse a deleted listener's compute_id: %v", err)
	}
}

func TestIntegrations(t *testing.T) {
	f := newFixture(t, nil)
	a, err := f.cp.CreateIntegration(f.ctx, tenantA, decode[controlplane.CreateIntegrationRequest](t, `{"installation_id": 42, "name": "acme"}`))
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "integration", &controlplane.Integration{ID: "00000000-0000-7000-8000-000000000001", InstallationID: 42, Name: "acme"}, a)
	b, err := f.cp.CreateIntegration(f.ctx, tenantA, decode[controlplane.CreateIntegrationRequest](t, `{"installation_id": 7, "name": "beta"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp.CreateIntegration(f.ctx, tenantA, decode[controlplane.CreateIntegrationRequest](t, `{"installation_id": 42, "name": "again"}`)); !errors.Is(err, apierr.ErrConflict) {
		t.Errorf("duplicate installation: %v, want ErrConflict", err)
	}
	_, err = f.cp.CreateIntegration(f.ctx, tenantA, decode[controlplane.CreateIntegrationRequest](t, `{"installation_id": 0, "name": ""}`))
	diff(t, "problems", []string{"body.installation_id: greater_than", "body.name: string_too_short"}, locTypes(problems(t, err)))
	_, err = f.cp.CreateIntegration(f.ctx, tenantA, decode[controlplane.CreateIntegrationRequest](t, `{}`))
	diff(t, "problems", []string{"body.installation_id: missing", "body.name: missing"}, locTypes(problems(t, err)))

	got, err := f.cp.ListIntegrations(f.ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "list", []controlplane.Integration{*a, *b}, got)
	got, err = f.cp.ListIntegrations(f.ctx, tenantB)
	if err != nil || got == nil || len(got) != 0 {
		t.Errorf("another tenant's integrations = %v, %v; want empty", got, err)
	}
}

func TestInvalidTenant(t *testing.T) {
	f := newFixture(t, nil)
	for _, tenant := range []string{"", "a/b", string(make([]byte, 65))} {
		if _, err := f.cp.ListDeployments(f.ctx, tenant, nil); !errors.Is(err, apierr.ErrInvalidTenant) {
			t.Errorf("tenant %q: %v, want ErrInvalidTenant", tenant, err)
		}
	}
}
