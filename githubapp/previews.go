package githubapp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v88/github"

	"github.com/deployplane/deployplane/controlplane"
)

var _ controlplane.PreviewStatusReporter = (*App)(nil)

// ReportPreviewStatus tells a pull request about its preview, as the
// installation: it makes a GitHub Deployment of s.Ref in s.Environment
// when s.GitHubDeploymentID is 0 (POST /repos/{owner}/{repo}/deployments:
// transient, no auto merge, no required contexts, so that GitHub neither
// merges the base in nor waits for checks), then adds the status (POST
// .../deployments/{id}/statuses with the state and the preview's url).
// It returns the Deployment's id. The App needs the Deployments
// permission (read and write).
func (a *App) ReportPreviewStatus(ctx context.Context, s *controlplane.PreviewStatus) (int64, error) {
	owner, repo, ok := strings.Cut(s.Repo, "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return 0, fmt.Errorf("githubapp: repository %q is not owner/name", s.Repo)
	}
	if s.InstallationID <= 0 {
		return 0, errors.New("githubapp: a preview status needs an installation")
	}
	gh, err := github.NewClient(github.WithHTTPClient(a.InstallationClient(s.InstallationID)), github.WithURLs(&a.api, nil))
	if err != nil {
		return 0, fmt.Errorf("githubapp: %w", err)
	}
	id := s.GitHubDeploymentID
	if id == 0 {
		d, _, err := gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{
			Ref: &s.Ref, Environment: &s.Environment, Description: new("Preview of the pull request"),
			TransientEnvironment: new(true), ProductionEnvironment: new(false),
			AutoMerge: new(false), RequiredContexts: &[]string{}})
		if err != nil {
			return 0, fmt.Errorf("githubapp: creating the deployment of %s in %s: %w", s.Ref, s.Repo, stripURLError(err))
		}
		id = d.GetID()
	}
	req := &github.DeploymentStatusRequest{State: new(string(s.State)), Environment: &s.Environment}
	if s.EnvironmentURL != "" {
		req.EnvironmentURL = &s.EnvironmentURL
	}
	if s.Description != "" {
		req.Description = &s.Description
	}
	if _, _, err := gh.Repositories.CreateDeploymentStatus(ctx, owner, repo, id, req); err != nil {
		return id, fmt.Errorf("githubapp: status %s of deployment %d in %s: %w", s.State, id, s.Repo, stripURLError(err))
	}
	return id, nil
}
