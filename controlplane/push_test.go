package controlplane_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

func TestHandleGitHubPush(t *testing.T) {
	f := newFixture(t, nil)
	const inst, instB = 4242, 4343
	integ := func(tenant string, inst int64) string {
		in, err := f.cp.CreateIntegration(f.ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(inst), Name: new("acme")})
		if err != nil {
			t.Fatal(err)
		}
		return in.ID
	}
	// Both tenants track the same repository, each through its own
	// installation: a push reaches the installation's owner only.
	inA, inB, other := integ(tenantA, inst), integ(tenantB, instB), f.integration(tenantA)
	gh := func(tenant, name, integration, repo, ref string, bop bool) string {
		return f.create(tenant, fmt.Sprintf(`{"name": %q, "source": "github",
			"source_config": {"integration_id": %q, "repo_url": %q, "build_on_push": %v},
			"source_revision_config": {"repo_ref": %q, "graph_config_path": "langgraph.json"}}`, name, integration, repo, bop, ref)).ID
	}
	mainA := gh(tenantA, "main-a", inA, "https://github.com/Acme/Agent", "main", true)
	mainB := gh(tenantB, "main-b", inB, "https://github.com/acme/agent.git", "refs/heads/main", true)
	devA := gh(tenantA, "dev-a", inA, "https://github.com/acme/agent/", "dev", true)
	gh(tenantA, "off", inA, "https://github.com/acme/agent", "main", false)
	gh(tenantA, "other-repo", inA, "https://github.com/acme/agent2", "main", true)
	gh(tenantA, "other-install", other, "https://github.com/acme/agent", "main", true)
	gone := gh(tenantA, "gone", inA, "https://github.com/acme/agent", "main", true)
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, gone); err != nil {
		t.Fatal(err)
	}
	f.create(tenantA, dockerBody("docker"))

	for _, tc := range []struct {
		name string
		ev   controlplane.PushEvent
		want []string
	}{
		{"https clone url", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent.git", Ref: "refs/heads/main"}, []string{mainA}},
		{"ssh url, case", controlplane.PushEvent{InstallationID: inst, RepoURL: "git@GitHub.com:ACME/agent.git", Ref: "refs/heads/main"}, []string{mainA}},
		{"other tenant's installation", controlplane.PushEvent{InstallationID: instB, RepoURL: "https://github.com/acme/agent.git", Ref: "refs/heads/main"}, []string{mainB}},
		{"html url, trailing slash", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent/", Ref: "refs/heads/dev"}, []string{devA}},
		{"other branch", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent", Ref: "refs/heads/feature"}, nil},
		{"tag", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent", Ref: "refs/tags/main"}, nil},
		{"not a ref", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent", Ref: "main"}, nil},
		{"unknown installation", controlplane.PushEvent{InstallationID: 1, RepoURL: "https://github.com/acme/agent", Ref: "refs/heads/main"}, nil},
		{"other repository", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent3", Ref: "refs/heads/main"}, nil},
		{"branch deleted", controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent", Ref: "refs/heads/main",
			After: "0000000000000000000000000000000000000000"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			if ev.After == "" {
				ev.After = "c0ffee" + tc.name
			}
			before := dump(t, f.st)
			pushed, err := f.cp.HandleGitHubPush(f.ctx, &ev)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range pushed {
				got = append(got, p.DeploymentID)
				tenant := tenantA
				if p.DeploymentID == mainB {
					tenant = tenantB
				}
				diff(t, "tenant", tenant, p.Tenant)
				d, err := f.cp.GetDeployment(f.ctx, p.Tenant, p.DeploymentID)
				if err != nil {
					t.Fatal(err)
				}
				rev, err := f.cp.GetRevision(f.ctx, p.Tenant, p.DeploymentID, *d.LatestRevisionID)
				if err != nil {
					t.Fatal(err)
				}
				diff(t, "new revision", p.Revision, *rev)
				if rev.Status != controlplane.RevisionCreating || rev.SourceRevisionConfig.RepoCommitSHA == nil || *rev.SourceRevisionConfig.RepoCommitSHA != ev.After {
					t.Errorf("pushed revision %s with sha %v, want CREATING with %s", rev.Status, rev.SourceRevisionConfig.RepoCommitSHA, ev.After)
				}
				diff(t, "the deployment's source_revision_config (the mirror of its latest revision)", rev.SourceRevisionConfig, d.SourceRevisionConfig)
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			diff(t, "deployments with a new revision", want, got)
			if len(tc.want) == 0 {
				diff(t, "store after a push that matches nothing", before, dump(t, f.st))
			}
		})
	}

	_, err := f.cp.HandleGitHubPush(f.ctx, &controlplane.PushEvent{Ref: "refs/heads/main"})
	diff(t, "push without installation, repository, commit",
		[]string{"body.installation.id: greater_than", "body.repository.clone_url: missing", "body.after: missing"}, locTypes(problems(t, err)))
	if _, err := f.cp.HandleGitHubPush(f.ctx, &controlplane.PushEvent{Ref: "refs/tags/v1"}); err != nil {
		t.Errorf("a tag push with nothing else: %v, want nil (ignored)", err)
	}

	// A PATCH that turns build_on_push off takes the deployment out of the
	// push index.
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, mainA, &controlplane.UpdateDeploymentRequest{
		SourceConfig: &controlplane.SourceConfig{BuildOnPush: new(false)}}); err != nil {
		t.Fatal(err)
	}
	pushed, err := f.cp.HandleGitHubPush(f.ctx, &controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent", Ref: "refs/heads/main", After: "abc"})
	if err != nil || len(pushed) != 0 {
		t.Errorf("push after build_on_push off = %+v, %v; want nothing", pushed, err)
	}
}
