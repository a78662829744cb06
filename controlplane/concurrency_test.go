package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// TestConcurrentUse races creates of the same names and PATCHes of one
// deployment (run it with -race): each name is created once, and every
// accepted PATCH leaves exactly one revision.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	target, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("target")))
	if err != nil {
		t.Fatal(err)
	}
	const workers, names = 8, 5
	var mu sync.Mutex
	created, conflicts, patches := 0, 0, 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range names {
				_, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody(fmt.Sprint("n", i))))
				_, perr := cp.UpdateDeployment(ctx, tenantA, target.ID, &controlplane.UpdateDeploymentRequest{
					SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(fmt.Sprintf("r/a:%d.%d", w, i))}})
				mu.Lock()
				switch {
				case err == nil:
					created++
				case errors.Is(err, apierr.ErrConflict):
					conflicts++
				default:
					t.Errorf("create: %v", err)
				}
				if perr != nil {
					t.Errorf("patch: %v", perr)
				} else {
					patches++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if created != names || conflicts != workers*names-names {
		t.Errorf("created %d, conflicts %d; want %d and %d", created, conflicts, names, workers*names-names)
	}
	page, err := cp.ListRevisions(ctx, tenantA, target.ID, &controlplane.ListRevisionsQuery{Limit: new(100)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Resources) != patches+1 {
		t.Errorf("%d revisions after %d PATCHes, want %d", len(page.Resources), patches, patches+1)
	}
	got, err := cp.GetDeployment(ctx, tenantA, target.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *got.LatestRevisionID != page.Resources[0].ID {
		t.Errorf("latest_revision_id %s is not the newest revision %s", *got.LatestRevisionID, page.Resources[0].ID)
	}
	all, err := cp.ListDeployments(ctx, tenantA, &controlplane.ListDeploymentsQuery{Limit: new(100)})
	if err != nil || len(all.Resources) != names+1 {
		t.Errorf("list: %d deployments, %v; want %d", len(all.Resources), err, names+1)
	}
}
