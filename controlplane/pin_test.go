package controlplane_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
)

// A pinned deployment keeps serving its pinned revision: pushes and PATCHes
// still make and build revisions, but the newest waits before DEPLOYING
// (saying why) until the pin is removed, and then deploys without a
// rebuild. Only the active revision can be pinned, a rollback waits for
// the unpin, and so does a pin while a revision is DEPLOYING.
func TestPin(t *testing.T) {
	f := newFixture(t, nil)
	drain := f.drainer(deploysim.New(&deploysim.Options{Step: 1}))
	d := f.create(tenantA, githubBody("agent", f.integration(tenantA)))
	first := *d.LatestRevisionID
	pin := func(id string) error {
		_, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{PinnedRevisionID: &id})
		return err
	}
	if err := pin(first); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("pinning a revision not yet active: %v, want invalid state", err)
	}
	drain()
	patch := func(ref string) string {
		t.Helper()
		got, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
			`{"source_revision_config": {"repo_ref": "`+ref+`"}}`))
		if err != nil {
			t.Fatal(err)
		}
		drain()
		return *got.LatestRevisionID
	}
	rev := func(id string) *controlplane.Revision {
		t.Helper()
		r, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	active := func() string {
		t.Helper()
		got, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		return deref(got.ActiveRevisionID)
	}
	if err := pin("00000000-0000-4000-8000-00000000abcd"); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("pinning an unknown revision: %v, want invalid state", err)
	}
	if err := pin(first); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.cp.GetDeployment(f.ctx, tenantA, d.ID); deref(got.PinnedRevisionID) != first {
		t.Fatalf("pinned_revision_id %v, want %s", got.PinnedRevisionID, first)
	}

	second := patch("release")
	r := rev(second)
	if r.Status != controlplane.RevisionAwaitingDeploy || !strings.Contains(deref(r.StatusMessage), "pinned to revision "+first) {
		t.Fatalf("a revision of a pinned deployment: %s (%q), want AWAITING_DEPLOY, saying it waits for the pin", r.Status, deref(r.StatusMessage))
	}
	if active() != first {
		t.Fatalf("active %s, want the pinned %s", active(), first)
	}
	if ok, err := f.cp.Process(f.ctx, deploysim.New(nil)); ok || err != nil {
		t.Fatalf("Process found work (%v, %v): a held revision is claimed by nobody", ok, err)
	}
	if _, err := f.cp.Rollback(f.ctx, tenantA, d.ID, nil); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("rollback while pinned: %v, want invalid state", err)
	}

	third := patch("release-2")
	if s := rev(second).Status; s != controlplane.RevisionSkipped {
		t.Fatalf("the held revision after a newer one: %s, want SKIPPED", s)
	}
	if r := rev(third); r.Status != controlplane.RevisionAwaitingDeploy {
		t.Fatalf("the newest revision of a pinned deployment: %s, want AWAITING_DEPLOY", r.Status)
	}

	// Unpinned by a merge patch's null: the newest deploys, from where it
	// waited.
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{Remove: []string{"pinned_revision_id"}}); err != nil {
		t.Fatal(err)
	}
	if r := rev(third); r.StatusMessage != nil {
		t.Fatalf("status_message after the unpin: %q, want none", *r.StatusMessage)
	}
	drain()
	r = rev(third)
	var statuses []controlplane.RevisionStatus
	for _, h := range r.StatusHistory {
		statuses = append(statuses, h.Status)
	}
	if r.Status != controlplane.RevisionDeployed || active() != third ||
		len(slices.DeleteFunc(slices.Clone(statuses), func(s controlplane.RevisionStatus) bool { return s != controlplane.RevisionBuilding })) != 1 {
		t.Fatalf("after the unpin: %v, active %s; want DEPLOYED and active, built once", statuses, active())
	}

	// A revision DEPLOYING would become active past a pin.
	if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"source_revision_config": {"repo_ref": "release-3"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp.Process(f.ctx, stopAt{controlplane.RevisionDeploying}); err != nil {
		t.Fatal(err)
	}
	if err := pin(third); !errors.Is(err, apierr.ErrInvalidState) {
		t.Fatalf("pinning while a revision is DEPLOYING: %v, want invalid state", err)
	}
}

// stopAt is a Deployer that takes a revision to one status and leaves it
// there.
type stopAt struct{ status controlplane.RevisionStatus }

func (s stopAt) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	_, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, s.status, controlplane.Step{})
	return err
}

func (stopAt) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }
