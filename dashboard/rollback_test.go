package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// An earlier DEPLOYED revision has a Roll back link; its page shows what
// changes before the button that rolls back.
func TestRollbackPage(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	deployed := func(id string) *controlplane.Deployment {
		t.Helper()
		var d *controlplane.Deployment
		waitFor(t, "the latest revision to be active", func() bool {
			var err error
			d, err = e.cp.GetDeployment(ctx, tenantA, id)
			return err == nil && d.ActiveRevisionID != nil && *d.ActiveRevisionID == *d.LatestRevisionID
		})
		return d
	}
	id := b.createDeployment(url.Values{"name": {"rb"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	first := deployed(id)
	b.post("/ui/deployments/"+id+"/image", url.Values{"csrf": {b.token()}, "image_uri": {"docker.io/acme/a:2"}})
	deployed(id)
	rid := *first.ActiveRevisionID
	link := `/ui/deployments/` + id + `/revisions/` + rid + `/rollback"`
	if p := b.get("/ui/deployments/" + id); !strings.Contains(p.body, link) {
		t.Fatalf("the earlier revision has no Roll back link:\n%s", p.body)
	}
	p := b.get("/ui/deployments/" + id + "/revisions/" + rid + "/rollback")
	if p.status != http.StatusOK || !strings.Contains(p.body, `<th scope="row">image_uri</th><td class="wrap">docker.io/acme/a:2</td><td class="wrap">docker.io/acme/a:1</td>`) {
		t.Fatalf("the rollback page does not show the image's change: %d\n%s", p.status, p.body)
	}
	if r := b.post("/ui/deployments/"+id+"/revisions/"+rid+"/rollback", url.Values{"csrf": {b.token()}}); r.status != http.StatusSeeOther {
		t.Fatalf("POST rollback: %d\n%s", r.status, r.body)
	}
	d := deployed(id)
	if *d.SourceRevisionConfig.ImageURI != "docker.io/acme/a:1" || d.Status != controlplane.StatusReady || *d.ActiveRevisionID == rid {
		t.Fatalf("after the rollback: image %s, status %s, active %s", *d.SourceRevisionConfig.ImageURI, d.Status, *d.ActiveRevisionID)
	}
}
