package controlplane_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
)

// mirror reads a deployment three ways (GetDeployment, GetDeploymentJSON,
// the list) and its latest revision, checks that the three agree and that
// the deployment's source_revision_config is the latest revision's, and
// returns the deployment's repo_commit_sha ("" for null).
func (f *fixture) mirror(t *testing.T, tenant, id string) string {
	t.Helper()
	d, err := f.cp.GetDeployment(f.ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.cp.GetDeploymentJSON(f.ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d)
	diff(t, "GetDeploymentJSON", string(want), string(raw))
	page, err := f.cp.ListDeployments(f.ctx, tenant, &controlplane.ListDeploymentsQuery{DeploymentIDs: []string{id}})
	if err != nil || len(page.Resources) != 1 {
		t.Fatalf("list by id: %v, %v", page, err)
	}
	diff(t, "listed deployment", *d, page.Resources[0])
	rev, err := f.cp.GetRevision(f.ctx, tenant, id, *d.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "deployment's source_revision_config against its latest revision's", rev.SourceRevisionConfig, d.SourceRevisionConfig)
	return deref(d.SourceRevisionConfig.RepoCommitSHA)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestDeploymentMirrorsTheLatestCommit: the commit a Deployer reports for
// the latest revision shows on the deployment at once; a new revision from
// a PATCH clears it (its build has not said which commit it builds); a
// report for an older revision leaves the deployment alone.
func TestDeploymentMirrorsTheLatestCommit(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, githubBody("agent", f.integration(tenantA)))
	diff(t, "commit after create", "", f.mirror(t, tenantA, d.ID))
	var second *controlplane.Deployment
	ok, err := f.cp.Process(f.ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		for _, s := range []controlplane.Step{{Status: "QUEUED"}, {Status: "AWAITING_BUILD"}, {Status: "BUILDING", RepoCommitSHA: new("c1")}} {
			if err := r.Report(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		diff(t, "commit reported for the latest revision", "c1", f.mirror(t, tenantA, d.ID))
		for _, s := range []controlplane.Step{{Status: "AWAITING_DEPLOY"}, {Status: "DEPLOYING"}} {
			if err := r.Report(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		second, err = f.cp.UpdateDeployment(ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("dev")}})
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "commit after a PATCH's new revision", "", f.mirror(t, tenantA, d.ID))
		// The first revision, DEPLOYING, is not superseded; its late
		// commit report is its own, not the deployment's.
		if err := r.Report(ctx, controlplane.Step{RepoCommitSHA: new("c1-late")}); err != nil {
			t.Fatal(err)
		}
		diff(t, "commit after a report for an older revision", "", f.mirror(t, tenantA, d.ID))
		return r.Report(ctx, controlplane.Step{Status: "DEPLOYED"})
	}})
	if !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	first, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the older revision's own commit", "c1-late", deref(first.SourceRevisionConfig.RepoCommitSHA))
	before, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	ok, err = f.cp.Process(f.ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		diff(t, "revision worked on", *second.LatestRevisionID, w.Revision.ID)
		return r.Report(ctx, controlplane.Step{Status: "QUEUED", RepoCommitSHA: new("c2")})
	}})
	if !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	diff(t, "commit reported for the new latest revision", "c2", f.mirror(t, tenantA, d.ID))
	after, _ := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	if !after.UpdatedAt.After(before.UpdatedAt) {
		t.Errorf("updated_at %v did not move past %v when the commit changed", after.UpdatedAt, before.UpdatedAt)
	}
}

// TestRedeployKeepsTheCommit: a redeploy copies the named revision's
// repo_commit_sha, whether a push gave it or the build reported it, so the
// copy builds that commit and not the branch's head; deploysim keeps it.
func TestRedeployKeepsTheCommit(t *testing.T) {
	f := newFixture(t, nil)
	const inst, pushedSHA = 77, "0123456789abcdef0123456789abcdef01234567"
	in, err := f.cp.CreateIntegration(f.ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(inst)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	d := f.create(tenantA, `{"name": "agent", "source": "github",
		"source_config": {"integration_id": "`+in.ID+`", "repo_url": "https://github.com/acme/agent", "build_on_push": true},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`)
	drain := f.drainer(deploysim.New(&deploysim.Options{Step: 1}))
	drain()
	built, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *d.LatestRevisionID) // deploysim reported its commit
	if err != nil {
		t.Fatal(err)
	}
	builtSHA := deref(built.SourceRevisionConfig.RepoCommitSHA)
	if len(builtSHA) != 40 || builtSHA == pushedSHA {
		t.Fatalf("the built revision's commit is %q", builtSHA)
	}
	diff(t, "deployment's commit after the build", builtSHA, f.mirror(t, tenantA, d.ID))

	pushed, err := f.cp.HandleGitHubPush(f.ctx, &controlplane.PushEvent{InstallationID: inst, RepoURL: "https://github.com/acme/agent",
		Ref: "refs/heads/main", After: pushedSHA})
	if err != nil || len(pushed) != 1 {
		t.Fatalf("push = %v, %v", pushed, err)
	}
	diff(t, "deployment's commit after the push", pushedSHA, f.mirror(t, tenantA, d.ID))
	drain()

	for _, tc := range []struct {
		name, revision, sha string
	}{
		{"a pushed revision", pushed[0].Revision.ID, pushedSHA},
		{"a revision deploysim built", built.ID, builtSHA},
	} {
		r, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, tc.revision)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, tc.name+": the deployment redeploy answers", tc.sha, deref(r.SourceRevisionConfig.RepoCommitSHA))
		copied, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, *r.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, tc.name+": the copy's commit before any build", tc.sha, deref(copied.SourceRevisionConfig.RepoCommitSHA))
		diff(t, tc.name+": deployment's commit", tc.sha, f.mirror(t, tenantA, d.ID))
		drain()
		got, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		copied, _ = f.cp.GetRevision(f.ctx, tenantA, d.ID, *r.LatestRevisionID)
		if copied.Status != controlplane.RevisionDeployed || *got.ActiveRevisionID != copied.ID || *got.ImageVersion != "git-"+tc.sha[:12] {
			t.Errorf("%s: copy %s, active %s, image %s; want the copy DEPLOYED, active, image git-%s",
				tc.name, copied.Status, *got.ActiveRevisionID, *got.ImageVersion, tc.sha[:12])
		}
		diff(t, tc.name+": the copy's commit once DEPLOYED", tc.sha, deref(copied.SourceRevisionConfig.RepoCommitSHA))
		diff(t, tc.name+": deployment's commit once DEPLOYED", tc.sha, f.mirror(t, tenantA, d.ID))
	}
}
