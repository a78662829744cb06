package controlplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
)

// watched is a Deployer that records the Work it is given and deploys it
// as deploysim does.
type watched struct {
	controlplane.Deployer
	works []*controlplane.Work
}

func (w *watched) Deploy(ctx context.Context, work *controlplane.Work, r controlplane.Reporter) error {
	w.works = append(w.works, work)
	return w.Deployer.Deploy(ctx, work, r)
}

// A deployment with auto_rollback asks its deployer to watch each revision
// for the window, and a revision reported unhealthy within it is rolled
// back to the previous DEPLOYED one, saying why; outside the window, with
// auto_rollback off, for a revision no longer active, or with nothing to
// go back to, nothing rolls back.
func TestAutoRollback(t *testing.T) {
	f := newFixture(t, &controlplane.Options{AutoRollbackWindow: 5 * time.Minute})
	dep := &watched{Deployer: deploysim.New(&deploysim.Options{Step: 1})}
	drain := f.drainer(dep)
	d, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t,
		`{"name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "r/agent:1"},
		  "source_config": {"auto_rollback": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	first := *d.LatestRevisionID
	drain()
	if len(dep.works) != 1 || dep.works[0].HealthWatchSeconds != 300 {
		t.Fatalf("the deployer's work: %+v, want one asking for a 300 s watch", dep.works)
	}
	// With nothing earlier to go back to, the failure is recorded only.
	if err := f.cp.ReportUnhealthy(f.ctx, tenantA, d.ID, first, "GET /ok answered 503"); err != nil {
		t.Fatal(err)
	}
	rev := func(id string) *controlplane.Revision {
		t.Helper()
		r, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	get := func() *controlplane.Deployment {
		t.Helper()
		got, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if msg := deref(rev(first).StatusMessage); !strings.Contains(msg, "no earlier DEPLOYED revision") || *get().LatestRevisionID != first {
		t.Fatalf("unhealthy with nothing to go back to: %q, latest %s; want the failure recorded, no new revision", msg, *get().LatestRevisionID)
	}

	patch := func(body string) {
		t.Helper()
		if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, body)); err != nil {
			t.Fatal(err)
		}
		drain()
	}
	patch(`{"source_revision_config": {"image_uri": "r/agent:2"}}`)
	second := *get().ActiveRevisionID
	if err := f.cp.ReportUnhealthy(f.ctx, tenantA, d.ID, first, "late"); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("a report of a revision no longer active: %v, want invalid state", err)
	}
	if err := f.cp.ReportUnhealthy(f.ctx, tenantA, d.ID, second, "GET /ok answered 503 three times"); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.ReportUnhealthy(f.ctx, tenantA, d.ID, second, "again"); err != nil {
		t.Fatalf("a repeated report: %v, want nothing done", err)
	}
	back := *get().LatestRevisionID
	if back == second || deref(get().SourceRevisionConfig.ImageURI) != "r/agent:1" {
		t.Fatalf("after the report: latest %s, image %s; want a new revision of the first's image", back, deref(get().SourceRevisionConfig.ImageURI))
	}
	if msg := deref(rev(second).StatusMessage); !strings.HasPrefix(msg, "Rolled back automatically: GET /ok answered 503 three times") {
		t.Fatalf("the failed revision's status_message: %q", msg)
	}
	if msg := deref(rev(back).StatusMessage); !strings.Contains(msg, "Automatic rollback to revision "+first) {
		t.Fatalf("the rollback's status_message: %q", msg)
	}
	logs, err := f.cp.ListLogs(f.ctx, tenantA, d.ID, second, &controlplane.LogQuery{Type: controlplane.LogDeploy})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(logs.Logs); n == 0 || !strings.Contains(logs.Logs[n-1].Message, "Rolled back automatically") {
		t.Fatalf("the failed revision's deploy log does not say it was rolled back: %+v", logs.Logs)
	}
	drain()
	if got := get(); *got.ActiveRevisionID != back {
		t.Fatalf("active %s, want the rollback's %s", *got.ActiveRevisionID, back)
	}

	// Past the window, nothing rolls back.
	patch(`{"source_revision_config": {"image_uri": "r/agent:3"}}`)
	third := *get().ActiveRevisionID
	f.now = f.now.Add(6 * time.Minute)
	if err := f.cp.ReportUnhealthy(f.ctx, tenantA, d.ID, third, "late"); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("a report past the window: %v, want invalid state", err)
	}
	// Nor with auto_rollback off, and the deployer is not asked to watch.
	patch(`{"source_config": {"auto_rollback": false}, "source_revision_config": {"image_uri": "r/agent:4"}}`)
	if w := dep.works[len(dep.works)-1]; w.HealthWatchSeconds != 0 {
		t.Fatalf("work with auto_rollback off asks for a %d s watch", w.HealthWatchSeconds)
	}
	if err := f.cp.ReportUnhealthy(f.ctx, tenantA, d.ID, *get().ActiveRevisionID, "x"); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("a report with auto_rollback off: %v, want invalid state", err)
	}
}
