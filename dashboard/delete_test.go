package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// Deleting a deployment that never ran removes it at once: the page sends
// the browser back to the list, not to a page that is gone.
func TestDeleteOfWhatNeverRanGoesToTheList(t *testing.T) {
	e := newEnv(t, &envOptions{paused: true}) // nothing runs: the revision stays CREATING
	ctx := context.Background()
	d, err := e.cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("docker.io/acme/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	p := b.post("/ui/deployments/"+d.ID+"/delete", url.Values{"csrf": {b.token()}, "confirm": {"agent"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/deployments" {
		t.Fatalf("delete: %d to %q, want 303 to the list", p.status, p.header.Get("Location"))
	}
	if _, err := e.cp.GetDeployment(ctx, tenantA, d.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("after the delete: %v, want removed", err)
	}
}
