package controlplane_test

import (
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// TestAgentReportDeploymentStatus: an agent sets the status of its
// listener's deployment outside a lease (UNUSED when it scaled it to
// zero, READY again), as ReportDeploymentStatus does; READY before a
// revision is active, a status a deployer may not set and a deployment
// being deleted are refused; another listener's agent, another tenant
// and a deployment on another listener are not found.
func TestAgentReportDeploymentStatus(t *testing.T) {
	inBubbleOverStores(t, testAgentReportDeploymentStatus)
}

func testAgentReportDeploymentStatus(t *testing.T, st store.Store) {
	f := newAgentFixture(t, st)
	edge, other := f.listener(tenantA, "edge-1"), f.listener(tenantA, "edge-2")
	d := f.deployment(tenantA, "remote", edge)
	elsewhere := f.deployment(tenantA, "elsewhere", other)

	wantErr(t, "READY before a revision is active",
		f.cp.AgentReportDeploymentStatus(f.ctx, tenantA, edge, d.ID, controlplane.StatusReady), apierr.ErrInvalidState)
	w := f.claim(tenantA, edge)
	for _, s := range []controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionAwaitingDeploy,
		controlplane.RevisionDeploying, controlplane.RevisionDeployed} {
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: s, URL: new("http://edge:8125/" + d.ID)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []controlplane.DeploymentStatus{controlplane.StatusUnused, controlplane.StatusUnused, controlplane.StatusReady} {
		if err := f.cp.AgentReportDeploymentStatus(f.ctx, tenantA, edge, d.ID, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := f.get(tenantA, d.ID).Status; got != s {
			t.Errorf("after %s: %s", s, got)
		}
	}
	wantErr(t, "a status deployers may not set",
		f.cp.AgentReportDeploymentStatus(f.ctx, tenantA, edge, d.ID, controlplane.StatusAwaitingDelete), apierr.ErrInvalidState)
	for _, tt := range []struct{ name, tenant, listener, dep string }{
		{"another listener's agent", tenantA, other, d.ID},
		{"another tenant", tenantB, edge, d.ID},
		{"a deployment on another listener", tenantA, edge, elsewhere.ID},
		{"not an id", tenantA, edge, "nope"},
	} {
		wantErr(t, tt.name, f.cp.AgentReportDeploymentStatus(f.ctx, tt.tenant, tt.listener, tt.dep, controlplane.StatusUnused), apierr.ErrNotFound)
	}
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a deployment being deleted",
		f.cp.AgentReportDeploymentStatus(f.ctx, tenantA, edge, d.ID, controlplane.StatusUnused), apierr.ErrInvalidState)
}
