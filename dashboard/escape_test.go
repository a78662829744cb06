package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
)

// markup is what the tests put in every free-text field: it must reach
// the pages escaped, never as markup.
const markup = `<script>alert("x")</script><img src=x onerror=alert(1)>`

func TestMarkupIsEscapedEverywhere(t *testing.T) {
	e := newEnv(t, &envOptions{failAt: controlplane.RevisionDeploying, failMsg: "failed: " + markup})
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	const secretValue = "SECRET-VALUE-" + "d41d8cd98f00b204"
	id := b.createDeployment(url.Values{"name": {"agent"}, "display_name": {markup}, "source": {"external_docker"},
		"image_uri": {"docker.io/acme/a:1"}, "secret_name_0": {"TOKEN"}, "secret_value_0": {secretValue}})
	d, err := e.cp.GetDeployment(ctx, tenantA, id)
	if err != nil {
		t.Fatal(err)
	}
	rev := *d.LatestRevisionID
	if err := e.cp.AppendLogs(ctx, tenantA, id, rev, controlplane.LogLine{Type: controlplane.LogDeploy, Level: "ERROR", Message: markup}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the revision to fail", func() bool {
		r, err := e.cp.GetRevision(ctx, tenantA, id, rev)
		return err == nil && r.Status == controlplane.RevisionDeployFailed
	})
	pages := map[string]page{}
	for _, path := range []string{"/ui/deployments", "/ui/deployments/" + id, "/ui/deployments/" + id + "/revisions/" + rev,
		"/ui/deployments/" + id + "/revisions/" + rev + "?q=" + url.QueryEscape(markup), "/ui/deployments?name=" + url.QueryEscape(markup)} {
		pages[path] = b.get(path)
	}
	// A secret name with markup (refused by the rules) comes back in the
	// form, escaped; so does a display name on the 422 page.
	pages["create 422"] = b.post("/ui/deployments/new", url.Values{"csrf": {b.token()}, "name": {markup}, "display_name": {markup},
		"source": {"external_docker"}, "image_uri": {markup}, "secret_name_0": {markup}, "secret_value_0": {secretValue}})
	pages["secrets 422"] = b.post("/ui/deployments/"+id+"/secrets", url.Values{"csrf": {b.token()}, "secret_name_0": {markup},
		"secret_value_0": {secretValue}})
	for name, p := range pages {
		if p.status >= 500 {
			t.Errorf("%s: status %d", name, p.status)
		}
		if strings.Contains(p.body, "<script>alert") || strings.Contains(p.body, "<img src=x") {
			t.Errorf("%s: unescaped markup in the page", name)
		}
		if strings.Contains(p.body, secretValue) {
			t.Errorf("%s: a secret value in the page", name)
		}
	}
	for _, check := range []struct{ page, what string }{
		{"/ui/deployments", "display name"},
		{"/ui/deployments/" + id, "display name"},
		{"/ui/deployments/" + id + "/revisions/" + rev, "log line and status message"},
		{"create 422", "secret name"},
	} {
		if !strings.Contains(pages[check.page].body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
			t.Errorf("%s: the %s is not shown escaped", check.page, check.what)
		}
	}
	if p := pages["/ui/deployments/"+id+"/revisions/"+rev]; strings.Count(p.body, "&lt;script&gt;alert") < 2 {
		t.Errorf("the revision page shows the markup of the status message and the log line %d times, want 2", strings.Count(p.body, "&lt;script&gt;alert"))
	}
	if p := pages["create 422"]; p.status != http.StatusUnprocessableEntity {
		t.Errorf("create with markup: %d", p.status)
	}
}
