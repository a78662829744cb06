package controlplane_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

func TestRevisionSnapshotAndRedeploy(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, `{"name": "agent", "source": "external_docker",
		"source_config": {"resource_spec": {"min_scale": 1}},
		"source_revision_config": {"image_uri": "r/agent:1"}, "secrets": [{"name": "K", "value": "v1"}]}`)
	first := *d.LatestRevisionID

	// A PATCH that creates revision 2 with new values everywhere.
	d2, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t,
		`{"source_config": {"resource_spec": {"min_scale": 2}}, "source_revision_config": {"image_uri": "r/agent:2"}, "secrets": [{"name": "K", "value": "v2"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	second := *d2.LatestRevisionID

	// The first revision still shows its own values.
	r1, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	if got := *r1.SourceRevisionConfig.ImageURI; got != "r/agent:1" {
		t.Errorf("first revision image_uri = %s, want r/agent:1", got)
	}
	// The revision wire shape: exactly these keys, no secrets.
	var keys []string
	for k := range toMap(t, r1) {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	diff(t, "revision keys", []string{"created_at", "id", "source", "source_revision_config", "status", "status_history", "status_message", "tracked_packages", "updated_at"}, keys)
	if b, _ := json.Marshal(r1); strings.Contains(string(b), "v1") {
		t.Errorf("revision JSON shows a secret: %s", b)
	}

	// Redeploy the first revision: a third revision with the first's
	// snapshot, which the deployment mirrors.
	d3, err := f.cp.RedeployRevision(f.ctx, tenantA, d.ID, first)
	if err != nil {
		t.Fatal(err)
	}
	third := *d3.LatestRevisionID
	if third == first || third == second {
		t.Fatalf("redeploy reused revision id %s", third)
	}
	diff(t, "deployment after redeploy", d.SourceRevisionConfig, d3.SourceRevisionConfig)
	diff(t, "secrets after redeploy", d.Secrets, d3.Secrets)
	diff(t, "resource_spec after redeploy", d.SourceConfig.ResourceSpec, d3.SourceConfig.ResourceSpec)
	r3, err := f.cp.GetRevision(f.ctx, tenantA, d.ID, third)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "redeployed revision", &controlplane.Revision{ID: third, CreatedAt: d3.UpdatedAt, UpdatedAt: d3.UpdatedAt,
		Status: controlplane.RevisionCreating, Source: controlplane.SourceExternalDocker, SourceRevisionConfig: r1.SourceRevisionConfig,
		StatusHistory: []controlplane.StatusChange{{Status: controlplane.RevisionCreating, At: d3.UpdatedAt}}}, r3)

	// Newest first, status filter, paging.
	page, err := f.cp.ListRevisions(f.ctx, tenantA, d.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "revision ids", []string{third, second, first}, revisionIDs(page.Resources))
	diff(t, "next offset", 3, page.Offset)
	page, err = f.cp.ListRevisions(f.ctx, tenantA, d.ID, &controlplane.ListRevisionsQuery{Limit: new(2), Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "page 2 ids", []string{second, first}, revisionIDs(page.Resources))
	diff(t, "page 2 next offset", 3, page.Offset)
	for _, q := range []*controlplane.ListRevisionsQuery{
		{Status: []controlplane.RevisionStatus{controlplane.RevisionDeployed}},
		{RemoteReconciled: new(false)},
	} {
		page, err = f.cp.ListRevisions(f.ctx, tenantA, d.ID, q)
		if err != nil || len(page.Resources) != 0 || page.Resources == nil {
			t.Errorf("ListRevisions(%+v) = %+v, %v; want an empty non-nil page", q, page, err)
		}
	}
	// Each new revision superseded the one before it, still CREATING.
	page, err = f.cp.ListRevisions(f.ctx, tenantA, d.ID, &controlplane.ListRevisionsQuery{
		Status: []controlplane.RevisionStatus{controlplane.RevisionSkipped}, RemoteReconciled: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "skipped revisions", []string{second, first}, revisionIDs(page.Resources))
	page, err = f.cp.ListRevisions(f.ctx, tenantA, d.ID, &controlplane.ListRevisionsQuery{
		Status: []controlplane.RevisionStatus{controlplane.RevisionQueued, controlplane.RevisionCreating}, RemoteReconciled: new(true)})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "creating revisions", []string{third}, revisionIDs(page.Resources))
	_, err = f.cp.ListRevisions(f.ctx, tenantA, d.ID, &controlplane.ListRevisionsQuery{Status: []controlplane.RevisionStatus{"DONE"}, Limit: new(0)})
	diff(t, "bad revision query", []string{"query.limit: greater_than_equal", "query.status: literal_error"}, locTypes(problems(t, err)))
}

func revisionIDs(rs []controlplane.Revision) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestCreateRevision(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, githubBody("agent", f.integration(tenantA)))
	// An empty body still creates a revision, a copy of the current values.
	rev, err := f.cp.CreateRevision(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.cp.GetDeployment(f.ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *got.LatestRevisionID != rev.ID || rev.ID == *d.LatestRevisionID {
		t.Errorf("latest_revision_id = %s, want the new revision %s", *got.LatestRevisionID, rev.ID)
	}
	diff(t, "revision config", d.SourceRevisionConfig, rev.SourceRevisionConfig)
	// With a body it applies it like a PATCH.
	rev, err = f.cp.CreateRevision(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"source_revision_config": {"repo_ref": "dev"}}`))
	if err != nil || *rev.SourceRevisionConfig.RepoRef != "dev" {
		t.Fatalf("CreateRevision = %+v, %v; want repo_ref dev", rev, err)
	}
	_, err = f.cp.CreateRevision(f.ctx, tenantA, d.ID, decode[controlplane.UpdateDeploymentRequest](t, `{"name": "renamed"}`))
	diff(t, "problems", []string{"body.name: immutable_field"}, locTypes(problems(t, err)))
}

func TestRevisionNotFound(t *testing.T) {
	f := newFixture(t, nil)
	a := f.create(tenantA, dockerBody("a"))
	b := f.create(tenantA, dockerBody("b"))
	other := f.create(tenantB, dockerBody("a"))
	tests := []struct {
		name             string
		tenant, dep, rev string
		wantKind, wantID string
	}{
		{"revision of another deployment", tenantA, a.ID, *b.LatestRevisionID, apierr.KindRevision, *b.LatestRevisionID},
		{"unknown revision", tenantA, a.ID, "00000000-0000-7000-8000-0000000000ff", apierr.KindRevision, "00000000-0000-7000-8000-0000000000ff"},
		{"malformed revision id", tenantA, a.ID, "zzz", apierr.KindRevision, "zzz"},
		{"deployment of another tenant", tenantA, other.ID, *other.LatestRevisionID, apierr.KindDeployment, other.ID},
		{"unknown deployment", tenantA, "00000000-0000-7000-8000-0000000000ff", *a.LatestRevisionID, apierr.KindDeployment, "00000000-0000-7000-8000-0000000000ff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				var nf *apierr.NotFoundError
				if !errors.As(err, &nf) || !errors.Is(err, apierr.ErrNotFound) {
					t.Fatalf("%s: %v, want a *NotFoundError", op, err)
				}
				diff(t, op, apierr.NotFoundError{Kind: tt.wantKind, ID: tt.wantID}, *nf)
			}
			before := dump(t, f.st)
			_, err := f.cp.GetRevision(f.ctx, tt.tenant, tt.dep, tt.rev)
			check("GetRevision", err)
			_, err = f.cp.RedeployRevision(f.ctx, tt.tenant, tt.dep, tt.rev)
			check("RedeployRevision", err)
			diff(t, "store", before, dump(t, f.st))
		})
	}
	_, err := f.cp.ListRevisions(f.ctx, tenantB, a.ID, nil)
	if !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("ListRevisions of another tenant's deployment: %v, want ErrNotFound", err)
	}
}
