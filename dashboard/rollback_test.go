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

// The deployment page shows its secret references (names, never values)
// and its agent.
func TestDeploymentPageNewerFields(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	name, src, img := "fields", controlplane.SourceExternalDocker, "docker.io/acme/a:1"
	d, err := e.cp.CreateDeployment(context.Background(), tenantA, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img},
		SecretReferences:     []controlplane.SecretReference{{Name: "DB_PASSWORD", SecretName: "db-creds", SecretKey: "password"}},
		Agent:                &controlplane.DeploymentAgent{AgentID: "ag-1", Environment: controlplane.AgentStaging}})
	if err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/deployments/" + d.ID)
	for _, want := range []string{`<code>DB_PASSWORD</code> from <code>db-creds/password</code>`, `<dt>Agent</dt><dd><code>ag-1</code> · staging</dd>`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
}

// The deployment page pins the active revision and unpins it; while
// pinned, no Roll back link is offered.
func TestPinButtons(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	id := b.createDeployment(url.Values{"name": {"pin"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	var d *controlplane.Deployment
	waitFor(t, "the first revision to be active", func() bool {
		var err error
		d, err = e.cp.GetDeployment(ctx, tenantA, id)
		return err == nil && d.ActiveRevisionID != nil
	})
	if r := b.post("/ui/deployments/"+id+"/pin", url.Values{"csrf": {b.token()}, "revision_id": {*d.ActiveRevisionID}}); r.status != http.StatusSeeOther {
		t.Fatalf("POST pin: %d\n%s", r.status, r.body)
	}
	if got, _ := e.cp.GetDeployment(ctx, tenantA, id); got.PinnedRevisionID == nil || *got.PinnedRevisionID != *d.ActiveRevisionID {
		t.Fatalf("pinned_revision_id after the pin: %v", got.PinnedRevisionID)
	}
	if p := b.get("/ui/deployments/" + id); !strings.Contains(p.body, `/ui/deployments/`+id+`/unpin"`) || strings.Contains(p.body, `/rollback"`) {
		t.Fatalf("a pinned deployment's page: no Unpin button, or a Roll back link:\n%s", p.body)
	}
	if r := b.post("/ui/deployments/"+id+"/unpin", url.Values{"csrf": {b.token()}}); r.status != http.StatusSeeOther {
		t.Fatalf("POST unpin: %d\n%s", r.status, r.body)
	}
	if got, _ := e.cp.GetDeployment(ctx, tenantA, id); got.PinnedRevisionID != nil {
		t.Fatalf("pinned_revision_id after the unpin: %v", *got.PinnedRevisionID)
	}
}
