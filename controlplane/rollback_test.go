package controlplane_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
)

// A rollback goes back to the newest DEPLOYED revision older than the
// active one (or the one named) through a new revision that copies its
// snapshot and image and skips the build; what cannot be rolled back to is
// refused.
func TestRollback(t *testing.T) {
	f := newFixture(t, nil)
	drain := f.drainer(deploysim.New(&deploysim.Options{Step: 1}))
	in := f.integration(tenantA)
	d := f.create(tenantA, githubBody("agent", in))
	first := *d.LatestRevisionID
	if _, err := f.cp.Rollback(f.ctx, tenantA, d.ID, nil); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("rollback with no active revision: %v, want invalid state", err)
	}
	drain()
	patch := func(ref string) string {
		t.Helper()
		got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
			`{"source_revision_config": {"repo_ref": "`+ref+`"}, "secrets": [{"name": "S", "value": "`+ref+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		drain()
		return *got.LatestRevisionID
	}
	second := patch("release")
	if _, err := f.cp.Rollback(f.ctx, tenantA, d.ID, &controlplane.RollbackRequest{RevisionID: &second}); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("rollback to the active revision: %v, want invalid state", err)
	}
	firstRev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, first)
	if err != nil {
		t.Fatal(err)
	}

	got, err := f.cp.Rollback(f.ctx, tenantA, d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	back := *got.LatestRevisionID
	if back == second || deref(got.SourceRevisionConfig.RepoRef) != "main" || len(got.Secrets) != 0 {
		t.Fatalf("after the rollback: latest %s, repo_ref %s, secrets %v; want a new revision of the first's snapshot", back,
			deref(got.SourceRevisionConfig.RepoRef), got.Secrets)
	}
	rev, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, back)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Status != controlplane.RevisionAwaitingDeploy || deref(rev.SourceRevisionConfig.RepoCommitSHA) != deref(firstRev.SourceRevisionConfig.RepoCommitSHA) {
		t.Fatalf("the rollback's revision: %s at %s, want AWAITING_DEPLOY at the first's commit %s", rev.Status,
			deref(rev.SourceRevisionConfig.RepoCommitSHA), deref(firstRev.SourceRevisionConfig.RepoCommitSHA))
	}
	drain()
	rev, _ = f.cp.GetRevision(f.ctx, tenantA, d.ID, back)
	var statuses []controlplane.RevisionStatus
	for _, h := range rev.StatusHistory {
		statuses = append(statuses, h.Status)
	}
	if slices.Contains(statuses, controlplane.RevisionBuilding) || rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("the rollback's revision went %v, want DEPLOYED without a build", statuses)
	}
	now, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	firstDep := deref(firstRev.SourceRevisionConfig.RepoCommitSHA)
	if deref(now.ActiveRevisionID) != back || firstDep == "" {
		t.Fatalf("active %s, want the rollback's revision %s", deref(now.ActiveRevisionID), back)
	}

	// Named: forward again to the second revision.
	got, err = f.cp.Rollback(f.ctx, tenantA, d.ID, &controlplane.RollbackRequest{RevisionID: &second})
	if err != nil || deref(got.SourceRevisionConfig.RepoRef) != "release" || got.Secrets[0].Value != "release" {
		t.Fatalf("rollback to the second revision: %v %+v", err, got)
	}
	// Refusals: another deployment's revision, an unfinished one.
	other := f.create(tenantA, githubBody("other", in))
	if _, err := f.cp.Rollback(f.ctx, tenantA, d.ID, &controlplane.RollbackRequest{RevisionID: other.LatestRevisionID}); !errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("another deployment's revision: %v, want not found", err)
	}
	pending := *got.LatestRevisionID
	if _, err := f.cp.Rollback(f.ctx, tenantA, d.ID, &controlplane.RollbackRequest{RevisionID: &pending}); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("a revision not DEPLOYED: %v, want invalid state", err)
	}
}
