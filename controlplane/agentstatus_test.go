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

// TestAgentReportUnhealthy: an agent's work asks it to watch a revision of
// a deployment with auto_rollback, and its report that the revision failed
// rolls the deployment back; another listener's agent, another tenant and
// a deployment on another listener are not found.
func TestAgentReportUnhealthy(t *testing.T) {
	inBubbleOverStores(t, testAgentReportUnhealthy)
}

func testAgentReportUnhealthy(t *testing.T, st store.Store) {
	f := newAgentFixture(t, st)
	edge, other := f.listener(tenantA, "edge-1"), f.listener(tenantA, "edge-2")
	d := f.deployment(tenantA, "remote", edge)
	elsewhere := f.deployment(tenantA, "elsewhere", other)
	deploy := func() *controlplane.AgentWork {
		t.Helper()
		w := f.claim(tenantA, edge)
		for _, s := range []controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionAwaitingDeploy,
			controlplane.RevisionDeploying, controlplane.RevisionDeployed} {
			if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: s}); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	if w := deploy(); w.Work.HealthWatchSeconds != 0 {
		t.Fatalf("work without auto_rollback asks for a %d s watch", w.Work.HealthWatchSeconds)
	}
	first := *f.get(tenantA, d.ID).ActiveRevisionID
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"source_config": {"auto_rollback": true}, "source_revision_config": {"image_uri": "registry.example.com/agent:2"}}`)); err != nil {
		t.Fatal(err)
	}
	w := deploy()
	if w.Work.HealthWatchSeconds != int(controlplane.DefaultAutoRollbackWindow.Seconds()) {
		t.Fatalf("work with auto_rollback asks for a %d s watch, want the window", w.Work.HealthWatchSeconds)
	}
	second := w.Work.Revision.ID
	for _, tt := range []struct{ name, tenant, listener, dep string }{
		{"another listener's agent", tenantA, other, d.ID},
		{"another tenant", tenantB, edge, d.ID},
		{"a deployment on another listener", tenantA, edge, elsewhere.ID},
		{"not an id", tenantA, edge, "nope"},
	} {
		wantErr(t, tt.name, f.cp.AgentReportUnhealthy(f.ctx, tt.tenant, tt.listener, tt.dep, second, "503"), apierr.ErrNotFound)
	}
	if err := f.cp.AgentReportUnhealthy(f.ctx, tenantA, edge, d.ID, second, "GET /ok answered 503"); err != nil {
		t.Fatal(err)
	}
	got := f.get(tenantA, d.ID)
	if *got.LatestRevisionID == second || deref(got.SourceRevisionConfig.ImageURI) != "registry.example.com/agent:1" {
		t.Fatalf("after the report: latest %s on %s, want a rollback to %s", *got.LatestRevisionID, deref(got.SourceRevisionConfig.ImageURI), first)
	}
}

// TestAgentPinnedHold: an agent's report of DEPLOYING for a revision of a
// pinned deployment is refused as held (and as a lost lease), nobody can
// claim the revision while the pin stays, and the unpin gives it back to
// the listener's agents where it waited.
func TestAgentPinnedHold(t *testing.T) {
	inBubbleOverStores(t, testAgentPinnedHold)
}

func testAgentPinnedHold(t *testing.T, st store.Store) {
	f := newAgentFixture(t, st)
	edge := f.listener(tenantA, "edge-1")
	d := f.deployment(tenantA, "remote", edge)
	w := f.claim(tenantA, edge)
	for _, s := range []controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionAwaitingDeploy,
		controlplane.RevisionDeploying, controlplane.RevisionDeployed} {
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	first := *f.get(tenantA, d.ID).ActiveRevisionID
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{PinnedRevisionID: &first}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"source_revision_config": {"image_uri": "registry.example.com/agent:2"}}`)); err != nil {
		t.Fatal(err)
	}
	w = f.claim(tenantA, edge)
	if w == nil {
		t.Fatal("no work for the new revision")
	}
	for _, s := range []controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionAwaitingDeploy} {
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	err := f.cp.ReportAgent(f.ctx, tenantA, edge, w.Lease, controlplane.Step{Status: controlplane.RevisionDeploying})
	wantErr(t, "DEPLOYING while pinned", err, controlplane.ErrRevisionHeld)
	wantErr(t, "DEPLOYING while pinned", err, controlplane.ErrLeaseLost)
	if again := f.claim(tenantA, edge); again != nil {
		t.Fatalf("a held revision was claimed: %+v", again.Work.Revision)
	}
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{Remove: []string{"pinned_revision_id"}}); err != nil {
		t.Fatal(err)
	}
	again := f.claim(tenantA, edge)
	if again == nil || again.Work.Revision.ID != w.Work.Revision.ID || again.Work.Revision.Status != controlplane.RevisionAwaitingDeploy {
		t.Fatalf("after the unpin: %+v, want the held revision back at AWAITING_DEPLOY", again)
	}
	for _, s := range []controlplane.RevisionStatus{controlplane.RevisionDeploying, controlplane.RevisionDeployed} {
		if err := f.cp.ReportAgent(f.ctx, tenantA, edge, again.Lease, controlplane.Step{Status: s}); err != nil {
			t.Fatal(err)
		}
	}
	if got := *f.get(tenantA, d.ID).ActiveRevisionID; got != w.Work.Revision.ID {
		t.Fatalf("active %s, want the revision the pin held", got)
	}
}
