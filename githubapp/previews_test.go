package githubapp_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/githubtest"
)

func TestReportPreviewStatus(t *testing.T) {
	g := githubtest.New(t)
	a := newApp(t, g)
	ctx := context.Background()
	g.AddInstallation(7, "acme")
	s := &controlplane.PreviewStatus{InstallationID: 7, Repo: "acme/agent", Ref: "c0ffee", Environment: "preview/agent",
		State: controlplane.PreviewQueued}
	id, err := a.ReportPreviewStatus(ctx, s)
	if err != nil || id != 1 {
		t.Fatalf("first status: %d, %v", id, err)
	}
	s.GitHubDeploymentID, s.State, s.EnvironmentURL = id, controlplane.PreviewSuccess, "https://agent-pr-1.example"
	if again, err := a.ReportPreviewStatus(ctx, s); err != nil || again != id {
		t.Fatalf("second status: %d, %v", again, err)
	}
	no := false
	if diff := cmp.Diff([]githubtest.Deployment{{ID: 1, InstallationID: 7, Repo: "acme/agent", Ref: "c0ffee", Environment: "preview/agent",
		Description: "Preview of the pull request", Transient: true, AutoMerge: &no, RequiredContexts: []string{}}}, g.Deployments()); diff != "" {
		t.Errorf("deployments (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]githubtest.DeploymentStatus{{DeploymentID: 1, Repo: "acme/agent", State: "queued"},
		{DeploymentID: 1, Repo: "acme/agent", State: "success", EnvironmentURL: "https://agent-pr-1.example"}}, g.DeploymentStatuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}

	// Failures are errors: an unknown installation, a bad repository, a
	// deployment GitHub does not know.
	for _, bad := range []controlplane.PreviewStatus{
		{InstallationID: 8, Repo: "acme/agent", Ref: "c0ffee", State: controlplane.PreviewQueued},
		{InstallationID: 7, Repo: "agent", Ref: "c0ffee", State: controlplane.PreviewQueued},
		{InstallationID: 7, Repo: "acme/agent", Ref: "c0ffee", GitHubDeploymentID: 99, State: controlplane.PreviewSuccess},
	} {
		if _, err := a.ReportPreviewStatus(ctx, &bad); err == nil {
			t.Errorf("ReportPreviewStatus(%+v): no error", bad)
		}
	}
}
