package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// TestNewNeedsSessions: the program names the store that keeps sessions.
func TestNewNeedsSessions(t *testing.T) {
	cp := controlplane.New(storemem.New(), nil)
	for _, o := range []*dashboard.Options{nil, {}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(cp, %+v) did not panic", o)
				}
			}()
			dashboard.New(cp, o)
		}()
	}
	if dashboard.New(cp, &dashboard.Options{Sessions: storemem.New()}) == nil {
		t.Errorf("New with a store returned nil")
	}
}

func TestPagesNeedASession(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	for _, path := range []string{"/ui/deployments", "/ui/deployments/new", "/ui/listeners",
		"/ui/deployments/01a20ce2-bbef-777a-8bd7-1cf6f4babcbe"} {
		p := b.get(path)
		want := "/ui/signin?next=" + url.QueryEscape(path)
		if p.status != http.StatusSeeOther || p.header.Get("Location") != want {
			t.Errorf("GET %s: status %d, Location %q; want 303 to %q", path, p.status, p.header.Get("Location"), want)
		}
	}
	// A form posted without a session does nothing.
	p := b.post("/ui/deployments/new", url.Values{"name": {"x"}, "source": {"external_docker"}, "image_uri": {"a:1"}})
	if p.status != http.StatusForbidden {
		t.Errorf("POST without a session: status %d, want 403", p.status)
	}
	// The stream answers 204, so that EventSource stops.
	if p := b.get("/ui/stream/events"); p.status != http.StatusNoContent {
		t.Errorf("stream without a session: status %d, want 204", p.status)
	}
	if p := b.get("/ui/"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/deployments" {
		t.Errorf("GET /ui/: %d %q", p.status, p.header.Get("Location"))
	}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	p := b.signIn("dp_not_a_key", "")
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "This API key is not valid.") {
		t.Fatalf("wrong key: status %d\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, "dp_not_a_key") {
		t.Error("the sign-in page echoes the key")
	}
	if p := b.get("/ui/deployments"); p.status != http.StatusSeeOther {
		t.Fatalf("after a wrong key the deployments page answers %d, want a redirect to sign in", p.status)
	}

	p = b.signIn(keyA, "")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/deployments" {
		t.Fatalf("sign in: status %d, Location %q", p.status, p.header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "dp_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/ui/" || session.Secure || session.MaxAge <= 0 {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, not Secure on http, expiring", session)
	}
	if strings.Contains(session.Value, keyA) {
		t.Error("the cookie holds the key")
	}
	if p := b.get("/ui/deployments"); p.status != http.StatusOK || !strings.Contains(p.body, tenantA) {
		t.Fatalf("deployments after sign-in: %d", p.status)
	}
	// The session is kept in the store without the key.
	if err := e.st.View(context.Background(), func(r storeReader) error {
		return r.Scan("dashboard_sessions", "", nil, func(k string, v []byte) (bool, error) {
			if strings.Contains(string(v), keyA) || strings.Contains(k, keyA) {
				t.Error("a session record holds the key")
			}
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}

	// Sign out ends the session.
	tok := b.token()
	if p := b.post("/ui/signout", url.Values{"csrf": {tok}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", p.status)
	}
	if p := b.get("/ui/deployments"); p.status != http.StatusSeeOther {
		t.Fatalf("after sign out: %d, want a redirect", p.status)
	}
}

func TestSecureCookieBehindHTTPS(t *testing.T) {
	for _, tls := range []bool{false, true} {
		e := newEnv(t, &envOptions{tls: tls})
		b := e.browser(t)
		form := b.get("/ui/signin")
		req, _ := http.NewRequest(http.MethodPost, b.base+"/ui/signin", strings.NewReader(url.Values{
			"csrf": {csrf(t, form)}, "api_key": {keyA}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if !tls {
			req.Header.Set("X-Forwarded-Proto", "https")
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		found := false
		for _, c := range resp.Cookies() {
			if c.Name == "dp_session" {
				found = true
				if !c.Secure {
					t.Errorf("tls=%v: the session cookie is not Secure", tls)
				}
			}
		}
		if !found {
			t.Errorf("tls=%v: no session cookie (status %d)", tls, resp.StatusCode)
		}
	}
}

func TestSignInFormNeedsItsToken(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	// A page of another site posts the form: it has no dp_signin cookie.
	p := b.post("/ui/signin", url.Values{"csrf": {"forged"}, "api_key": {keyA}})
	if p.status != http.StatusForbidden {
		t.Fatalf("forged sign-in: %d, want 403", p.status)
	}
	if p := b.get("/ui/deployments"); p.status != http.StatusSeeOther {
		t.Fatalf("a forged sign-in opened a session")
	}
}

func TestForgedFormsAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	create := url.Values{"name": {"forged"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/agent:1"}}
	for name, f := range map[string]func(url.Values){
		"no token":    func(url.Values) {},
		"wrong token": func(v url.Values) { v.Set("csrf", "AAAA") },
	} {
		v := url.Values{}
		for k, vs := range create {
			v[k] = vs
		}
		f(v)
		if p := b.post("/ui/deployments/new", v); p.status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, p.status)
		}
	}
	// The right token from another origin.
	v := url.Values{"csrf": {b.token()}}
	for k, vs := range create {
		v[k] = vs
	}
	req, _ := http.NewRequest(http.MethodPost, b.base+"/ui/deployments/new", strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if p := b.do(req); p.status != http.StatusForbidden {
		t.Errorf("cross-origin form: status %d, want 403", p.status)
	}
	page, err := e.cp.ListDeployments(context.Background(), tenantA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Resources) != 0 {
		t.Fatalf("a forged form created %d deployments", len(page.Resources))
	}
}

func TestSessionExpires(t *testing.T) {
	clock := testclock.New(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC), 0)
	e := newEnv(t, &envOptions{now: clock.Now, ttl: time.Hour})
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	if p := b.get("/ui/deployments"); p.status != http.StatusOK {
		t.Fatalf("status %d", p.status)
	}
	clock.Advance(time.Hour + time.Second)
	if p := b.get("/ui/deployments"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/signin") {
		t.Fatalf("after the TTL: status %d, Location %q; want the sign-in page", p.status, p.header.Get("Location"))
	}
	// A later sign-in sweeps the expired session.
	b2 := e.browser(t)
	b2.mustSignIn(keyA, "")
	n := 0
	_ = e.st.View(context.Background(), func(r storeReader) error {
		return r.Scan("dashboard_sessions", "", nil, func(string, []byte) (bool, error) { n++; return true, nil })
	})
	if n != 1 {
		t.Fatalf("%d session records after the sweep, want 1", n)
	}
}

func TestSessionsSharedThroughTheStore(t *testing.T) {
	shared := storemem.New()
	e1 := newEnv(t, &envOptions{sessions: shared})
	e2 := newEnv(t, &envOptions{sessions: shared})
	b := e1.browser(t)
	b.mustSignIn(keyA, "")
	// The same cookie on the second server (another replica).
	b2 := e2.browser(t)
	u1, _ := url.Parse(e1.srv.URL + "/ui/")
	u2, _ := url.Parse(e2.srv.URL + "/ui/")
	b2.c.Jar.SetCookies(u2, b.c.Jar.Cookies(u1))
	if p := b2.get("/ui/deployments"); p.status != http.StatusOK {
		t.Fatalf("the second replica: status %d, want 200", p.status)
	}
	// Replicas with their own session stores do not know each other's.
	e3 := newEnv(t, &envOptions{sessions: storemem.New()})
	b3 := e3.browser(t)
	u3, _ := url.Parse(e3.srv.URL + "/ui/")
	b3.c.Jar.SetCookies(u3, b.c.Jar.Cookies(u1))
	if p := b3.get("/ui/deployments"); p.status != http.StatusSeeOther {
		t.Fatalf("a replica with its own sessions: status %d, want a redirect", p.status)
	}
}

// TestSessionEndsWithItsKey: a session opened with a key of the server's
// key table ends at its next request once the server (restarted, or
// another replica sharing the session store) no longer accepts the key,
// or the key opens other tenants; its record goes, a form posted with it
// changes nothing, and the same key table still honours it.
func TestSessionEndsWithItsKey(t *testing.T) {
	shared := storemem.New()
	e := newEnv(t, &envOptions{sessions: shared})
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	csrfToken := b.token()
	sessions := func() int {
		n := 0
		_ = shared.View(context.Background(), func(r storeReader) error {
			return r.Scan("dashboard_sessions", "", nil, func(string, []byte) (bool, error) { n++; return true, nil })
		})
		return n
	}
	// on serves b's cookie to a server with keys over the shared sessions.
	on := func(keys []httphandler.Key) (*env, *browser) {
		o := newEnv(t, &envOptions{sessions: shared, keys: keys})
		ob := o.browser(t)
		u, _ := url.Parse(e.srv.URL + "/ui/")
		ou, _ := url.Parse(o.srv.URL + "/ui/")
		ob.c.Jar.SetCookies(ou, b.c.Jar.Cookies(u))
		return o, ob
	}
	keyBOnly := httphandler.Key{SHA256: httphandler.HashKey(keyB), Tenants: []string{tenantB}}
	for _, tt := range []struct {
		name string
		keys []httphandler.Key
		ok   bool
	}{
		{"the same key table", []httphandler.Key{{SHA256: httphandler.HashKey(keyA), Tenants: []string{tenantA}}, keyBOnly}, true},
		{"the key opens another tenant too", []httphandler.Key{{SHA256: httphandler.HashKey(keyA), Tenants: []string{tenantA, tenantB}}, keyBOnly}, false},
		{"the key was removed", []httphandler.Key{keyBOnly}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok {
				// A form posted with the session changes nothing.
				o, ob := on(tt.keys)
				p := ob.post("/ui/deployments/new", url.Values{"csrf": {csrfToken}, "name": {"agent-x"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/x:1"}})
				if p.status != http.StatusForbidden || !strings.Contains(p.body, "Your session has ended") {
					t.Fatalf("a form posted with the ended session: status %d\n%s", p.status, p.body)
				}
				if n := sessions(); n != 0 {
					t.Fatalf("%d session records after the session ended, want 0", n)
				}
				if list, err := o.cp.ListDeployments(context.Background(), tenantA, nil); err != nil || len(list.Resources) != 0 {
					t.Fatalf("deployments after the refused form: %v %v", list, err)
				}
				// Signing in again opens a new session.
				b.mustSignIn(keyA, "")
				csrfToken = b.token()
				return
			}
			_, ob := on(tt.keys)
			if p := ob.get("/ui/deployments"); p.status != http.StatusOK {
				t.Fatalf("status %d, want 200", p.status)
			}
			if n := sessions(); n != 1 {
				t.Fatalf("%d session records, want 1", n)
			}
		})
	}
	// A page (not a form) of an ended session goes to the sign-in page.
	_, ob := on([]httphandler.Key{keyBOnly})
	if p := ob.get("/ui/deployments"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/signin") {
		t.Fatalf("a page of an ended session: status %d, Location %q; want the sign-in page", p.status, p.header.Get("Location"))
	}
}

func TestTenants(t *testing.T) {
	e := newEnv(t, nil)
	a := e.browser(t)
	a.mustSignIn(keyA, "")
	id := a.createDeployment(url.Values{"name": {"agent-a"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})

	// A key of several tenants chooses one.
	ab := e.browser(t)
	p := ab.signIn(keyAB, "")
	if loc := p.header.Get("Location"); !strings.HasPrefix(loc, "/ui/workspace") {
		t.Fatalf("a key of two tenants went to %q", loc)
	}
	if p := ab.get("/ui/deployments"); p.header.Get("Location") != "/ui/workspace" {
		t.Fatalf("before choosing: %d %q", p.status, p.header.Get("Location"))
	}
	ws := ab.get("/ui/workspace")
	if p := ab.post("/ui/workspace", url.Values{"csrf": {csrf(t, ws)}, "tenant": {"00000000-0000-0000-0000-000000000000"}}); p.status != http.StatusUnprocessableEntity {
		t.Fatalf("a tenant the key may not use: %d", p.status)
	}
	if p := ab.post("/ui/workspace", url.Values{"csrf": {csrf(t, ws)}, "tenant": {tenantB}}); p.status != http.StatusSeeOther {
		t.Fatalf("choosing: %d", p.status)
	}
	if p := ab.get("/ui/deployments"); p.status != http.StatusOK || strings.Contains(p.body, "agent-a") {
		t.Fatalf("tenant B sees tenant A's deployment (status %d)", p.status)
	}
	if p := ab.get("/ui/deployments/" + id); p.status != http.StatusNotFound {
		t.Fatalf("tenant B opens tenant A's deployment: %d", p.status)
	}
	if p := ab.post("/ui/deployments/"+id+"/delete", url.Values{"csrf": {ab.token()}, "confirm": {"agent-a"}}); p.status != http.StatusNotFound {
		t.Fatalf("tenant B deletes tenant A's deployment: %d", p.status)
	}
	// Signing in with the tenant named.
	ab2 := e.browser(t)
	if p := ab2.signIn(keyAB, tenantA); p.header.Get("Location") != "/ui/deployments" {
		t.Fatalf("sign-in naming the tenant: %q", p.header.Get("Location"))
	}
	if p := ab2.get("/ui/deployments"); !strings.Contains(p.body, "agent-a") {
		t.Fatal("tenant A's deployment is not listed")
	}
	if p := e.browser(t).signIn(keyB, tenantA); p.status != http.StatusForbidden {
		t.Fatalf("a tenant the key may not use at sign-in: %d", p.status)
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	id := b.createDeployment(url.Values{"name": {"agent"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	for _, path := range []string{"/ui/signin", "/ui/deployments", "/ui/deployments/new", "/ui/deployments/" + id, "/ui/listeners", "/ui/nope"} {
		p := b.get(path)
		csp := p.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") ||
			strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if p.header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: X-Frame-Options %q", path, p.header.Get("X-Frame-Options"))
		}
		if strings.Contains(p.body, "<script>") || strings.Contains(p.body, " onclick=") || strings.Contains(p.body, "style=") {
			t.Errorf("%s: an inline script or style", path)
		}
	}
	if p := b.get("/openapi.json"); strings.Contains(p.body, `"/ui`) {
		t.Error("/openapi.json lists the dashboard")
	}
}

func TestValidationProblemsBesideTheirFields(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	p := b.post("/ui/deployments/new", url.Values{"csrf": {b.token()}, "name": {"Bad Name"}, "source": {"external_docker"},
		"image_uri": {"docker.io/acme/a:1"}, "cpu": {"lots"}, "secret_name_0": {"1BAD"}, "secret_value_0": {"v"}})
	if p.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d", p.status)
	}
	if !strings.Contains(p.body, `name="cpu" type="text" inputmode="decimal" value="lots" aria-invalid="true">`) {
		t.Errorf("the cpu field is not marked:\n%s", p.body)
	}
	// The form's own check stops before the domain's; the domain's 422:
	p = b.post("/ui/deployments/new", url.Values{"csrf": {b.token()}, "name": {"Bad Name"}, "source": {"external_docker"},
		"image_uri": {"docker.io/acme/a:1"}, "secret_name_0": {"1BAD"}, "secret_value_0": {"v"}, "min_scale": {"-1"}})
	if p.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d", p.status)
	}
	for _, field := range []string{`id="name"`, `id="spec-min_scale"`} {
		i := strings.Index(p.body, field)
		if i < 0 {
			t.Fatalf("no %s", field)
		}
		rest := p.body[i:]
		end := strings.Index(rest, "<label")
		if end < 0 {
			end = len(rest)
		}
		if !strings.Contains(rest[:end], `aria-invalid="true"`) || !strings.Contains(rest[:end], `class="problem"`) {
			t.Errorf("no problem beside %s:\n%s", field, rest[:end])
		}
	}
	i := strings.Index(p.body, "<legend>Secrets</legend>")
	if i < 0 || !strings.Contains(p.body[i:i+300], `class="problem"`) {
		t.Errorf("no problem in the secrets fieldset")
	}
	// A duplicate name (409) is shown beside the name.
	b.createDeployment(url.Values{"name": {"taken"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	p = b.post("/ui/deployments/new", url.Values{"csrf": {b.token()}, "name": {"taken"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "already exists") {
		t.Errorf("duplicate name: %d", p.status)
	}
}

func TestActions(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	id := b.createDeployment(url.Values{"name": {"agent"}, "display_name": {"Agent"}, "source": {"external_docker"},
		"image_uri": {"docker.io/acme/a:1"}, "secret_name_0": {"TOKEN"}, "secret_value_0": {"v1"}, "cpu": {"0.5"}})
	get := func() *controlplane.Deployment {
		d, err := e.cp.GetDeployment(ctx, tenantA, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := get(); *d.SourceConfig.ResourceSpec.CPU != 0.5 || len(d.Secrets) != 1 || *d.DisplayName != "Agent" {
		t.Fatalf("created %+v", d)
	}
	post := func(path string, v url.Values, want int) page {
		t.Helper()
		v.Set("csrf", b.token())
		p := b.post("/ui/deployments/"+id+path, v)
		if p.status != want {
			t.Fatalf("POST %s: status %d, want %d\n%s", path, p.status, want, p.body)
		}
		return p
	}
	post("/image", url.Values{"image_uri": {"docker.io/acme/a:2"}}, http.StatusSeeOther)
	if d := get(); *d.SourceRevisionConfig.ImageURI != "docker.io/acme/a:2" {
		t.Fatalf("image %q", *d.SourceRevisionConfig.ImageURI)
	}
	post("/display-name", url.Values{"display_name": {"Renamed"}}, http.StatusSeeOther)
	if d := get(); *d.DisplayName != "Renamed" {
		t.Fatalf("display name %q", *d.DisplayName)
	}
	p := post("/display-name", url.Values{"display_name": {""}}, http.StatusUnprocessableEntity)
	if !strings.Contains(p.body, `aria-invalid="true"`) {
		t.Error("an empty display name is not marked")
	}
	// A secret left empty keeps its value; a new one is added.
	post("/secrets", url.Values{"secret_orig_0": {"TOKEN"}, "secret_name_0": {"TOKEN"}, "secret_value_0": {""},
		"secret_name_1": {"OTHER"}, "secret_value_1": {"v2"}}, http.StatusSeeOther)
	if d := get(); len(d.Secrets) != 2 || d.Secrets[0].Value != "v1" || d.Secrets[1].Value != "v2" {
		t.Fatalf("secrets %+v", d.Secrets)
	}
	post("/secrets", url.Values{"secret_orig_0": {"TOKEN"}, "secret_name_0": {"TOKEN"}, "secret_remove_0": {"1"},
		"secret_orig_1": {"OTHER"}, "secret_name_1": {"OTHER"}}, http.StatusSeeOther)
	if d := get(); len(d.Secrets) != 1 || d.Secrets[0].Name != "OTHER" || d.Secrets[0].Value != "v2" {
		t.Fatalf("secrets %+v", d.Secrets)
	}
	post("/resources", url.Values{"cpu": {"1"}, "memory_mb": {"512"}}, http.StatusSeeOther)
	d := get()
	if *d.SourceConfig.ResourceSpec.CPU != 1 || *d.SourceConfig.ResourceSpec.MemoryMB != 512 {
		t.Fatalf("spec %+v", d.SourceConfig.ResourceSpec)
	}
	// The page shows the spec with its defaults (cpu_limit = 2 x cpu).
	page := b.get("/ui/deployments/" + id)
	if !strings.Contains(page.body, `<th scope="row">cpu_limit</th><td class="wrap">2 <span class="hint">(default)</span>`) {
		t.Errorf("the defaults are not shown")
	}
	// Redeploy the first revision.
	revs, err := e.cp.ListRevisions(ctx, tenantA, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := revs.Resources[len(revs.Resources)-1]
	post("/revisions/"+first.ID+"/redeploy", url.Values{}, http.StatusSeeOther)
	if d := get(); *d.SourceRevisionConfig.ImageURI != "docker.io/acme/a:1" {
		t.Fatalf("after redeploy the image is %q", *d.SourceRevisionConfig.ImageURI)
	}
	// Delete needs the name.
	post("/delete", url.Values{"confirm": {"agen"}}, http.StatusUnprocessableEntity)
	if d := get(); d.Status == controlplane.StatusAwaitingDelete {
		t.Fatal("deleted without the name")
	}
	post("/delete", url.Values{"confirm": {"agent"}}, http.StatusSeeOther)
	waitFor(t, "the deployment to be removed", func() bool {
		_, err := e.cp.GetDeployment(ctx, tenantA, id)
		return err != nil
	})
	if p := b.get("/ui/deployments/" + id); p.status != http.StatusNotFound {
		t.Fatalf("a removed deployment's page: %d", p.status)
	}
}

func TestDeploymentsListFiltersAndPages(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	l, err := e.cp.CreateListener(ctx, tenantA, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("cluster-1"),
		ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: []string{"agents"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	for i := range 30 {
		v := url.Values{"name": {"agent-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}}
		if i%10 == 0 {
			v.Set("listener_id", l.ID)
		}
		b.createDeployment(v)
	}
	p := b.get("/ui/deployments")
	if n := strings.Count(p.body, `data-label="Name"`); n != 25 {
		t.Fatalf("first page: %d rows, want 25", n)
	}
	// Newest first.
	if i, j := strings.Index(p.body, ">agent-dx<"), strings.Index(p.body, ">agent-z<"); i < 0 || j < 0 || i > j {
		t.Errorf("not newest first")
	}
	if !strings.Contains(p.body, `href="/ui/deployments?offset=25" rel="next"`) {
		t.Fatalf("no next page link")
	}
	p2 := b.get("/ui/deployments?offset=25")
	if n := strings.Count(p2.body, `data-label="Name"`); n != 5 || !strings.Contains(p2.body, `rel="prev"`) {
		t.Fatalf("second page: %d rows", n)
	}
	if p := b.get("/ui/deployments?name=agent-e"); strings.Count(p.body, `data-label="Name"`) != 1 {
		t.Errorf("name filter")
	}
	if p := b.get("/ui/deployments?listener=" + l.ID); strings.Count(p.body, `data-label="Name"`) != 3 {
		t.Errorf("listener filter: %d rows", strings.Count(p.body, `data-label="Name"`))
	}
	// The listener filter combines with the others and pages like them.
	if p := b.get("/ui/deployments?name=agent-k&listener=" + l.ID); strings.Count(p.body, `data-label="Name"`) != 1 || !strings.Contains(p.body, ">agent-k<") {
		t.Errorf("listener and name filters: %d rows", strings.Count(p.body, `data-label="Name"`))
	}
	if p := b.get("/ui/deployments?offset=1&listener=" + l.ID); strings.Count(p.body, `data-label="Name"`) != 2 || !strings.Contains(p.body, `rel="prev"`) {
		t.Errorf("listener filter, second row on: %d rows", strings.Count(p.body, `data-label="Name"`))
	}
	if p := b.get("/ui/deployments?status=AWAITING_DELETE"); strings.Count(p.body, `data-label="Name"`) != 0 {
		t.Errorf("status filter")
	}
	if p := b.get("/ui/deployments?status=NOPE"); p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `class="problem"`) {
		t.Errorf("a bad status: %d", p.status)
	}
	if p := b.get("/ui/deployments?listener=nope"); p.status != http.StatusUnprocessableEntity {
		t.Errorf("a bad listener: %d", p.status)
	}
	if p := b.get("/ui/listeners"); !strings.Contains(p.body, "cluster-1") || !strings.Contains(p.body, "agents") ||
		!strings.Contains(p.body, ">DISCONNECTED</strong><br>never seen") {
		t.Errorf("listeners page")
	}
	// Once its agent calls in, the listener shows it connected, when, and the agent's version.
	if err := e.cp.AgentHeartbeat(ctx, tenantA, l.ID, "agent-9.8.7"); err != nil {
		t.Fatal(err)
	}
	if p := b.get("/ui/listeners"); !strings.Contains(p.body, ">CONNECTED</strong><br>last seen <time") || !strings.Contains(p.body, "agent-9.8.7") {
		t.Errorf("listeners page after a heartbeat")
	}
	// The deployment page shows the listener and its namespace.
	dep, err := e.cp.ListDeployments(ctx, tenantA, &controlplane.ListDeploymentsQuery{NameContains: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	if p := b.get("/ui/deployments/" + dep.Resources[len(dep.Resources)-1].ID); !strings.Contains(p.body, "<dt>Namespace</dt><dd>agents</dd>") {
		t.Errorf("the namespace is not shown")
	}
}

func TestLiveStreamCarriesStatusNotSecrets(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/ui/stream/events", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := readEvents(resp.Body)
	b.createDeployment(url.Values{"name": {"agent"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"},
		"secret_name_0": {"TOKEN"}, "secret_value_0": {"SECRET-VALUE-123"}})
	for ev := range events {
		if strings.Contains(ev.data, "SECRET-VALUE-123") {
			t.Fatal("a secret value in the stream")
		}
		if ev.name == "deployment" && strings.Contains(ev.data, `"status":"READY"`) {
			return
		}
	}
	t.Fatal("the stream ended before the deployment was READY")
}

func TestLogStreamCatchesUpThenFollows(t *testing.T) {
	e := newEnv(t, &envOptions{step: time.Hour}) // nothing moves by itself
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	id := b.createDeployment(url.Values{"name": {"agent"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	d, _ := e.cp.GetDeployment(ctx, tenantA, id)
	rev := *d.LatestRevisionID
	if err := e.cp.AppendLogs(ctx, tenantA, id, rev, controlplane.LogLine{Type: controlplane.LogDeploy, Message: "before the page"}); err != nil {
		t.Fatal(err)
	}
	page := b.get("/ui/deployments/" + id + "/revisions/" + rev)
	if !strings.Contains(page.body, "before the page") {
		t.Fatal("the page lacks the first line")
	}
	// A line written after the page, before the stream opens.
	if err := e.cp.AppendLogs(ctx, tenantA, id, rev, controlplane.LogLine{Type: controlplane.LogDeploy, Level: "ERROR", Message: "between"}); err != nil {
		t.Fatal(err)
	}
	i := strings.Index(page.body, `data-live="`)
	live := page.body[i+len(`data-live="`):]
	live = strings.ReplaceAll(live[:strings.Index(live, `"`)], "&amp;", "&")
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, b.base+live, nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := readEvents(resp.Body)
	next := func() sseEvent {
		for ev := range events {
			if ev.name == "line" {
				return ev
			}
		}
		t.Fatal("the stream ended")
		return sseEvent{}
	}
	if ev := next(); !strings.Contains(ev.data, `"message":"between"`) {
		t.Fatalf("first line %s, want the one written between", ev.data)
	}
	if err := e.cp.AppendLogs(ctx, tenantA, id, rev, controlplane.LogLine{Type: controlplane.LogDeploy, Message: "after"}); err != nil {
		t.Fatal(err)
	}
	if ev := next(); !strings.Contains(ev.data, `"message":"after"`) {
		t.Fatalf("next line %s", ev.data)
	}
	_ = io.Discard
}

func TestCreateInternalDocker(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	if p := b.get("/ui/deployments/new"); !strings.Contains(p.body, `<option value="internal_docker"`) {
		t.Fatal("the create form does not offer internal_docker")
	}
	// Without an image yet: no revision, the page still renders.
	id := b.createDeployment(url.Values{"name": {"pushed"}, "source": {"internal_docker"}, "deployment_type": {"dev"}})
	d, err := e.cp.GetDeployment(ctx, tenantA, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.LatestRevisionID != nil || d.Source != controlplane.SourceInternalDocker {
		t.Fatalf("created %+v", d)
	}
	if p := b.get("/ui/deployments/" + id); p.status != http.StatusOK || !strings.Contains(p.body, `id="form-image"`) {
		t.Fatalf("the page of a deployment without a revision: %d", p.status)
	}
	// Its first image makes the first revision, which deploys.
	if p := b.post("/ui/deployments/"+id+"/image", url.Values{"csrf": {b.token()}, "image_uri": {"registry.example/pushed@sha256:" + strings.Repeat("a", 64)}}); p.status != http.StatusSeeOther {
		t.Fatalf("image: %d\n%s", p.status, p.body)
	}
	waitFor(t, "the first revision to deploy", func() bool {
		d, err := e.cp.GetDeployment(ctx, tenantA, id)
		return err == nil && d.ActiveRevisionID != nil
	})
	// Options the source refuses are shown beside their fields.
	p := b.post("/ui/deployments/new", url.Values{"csrf": {b.token()}, "name": {"pushed-2"}, "source": {"internal_docker"},
		"deployment_type": {"huge"}})
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, `<select id="deployment_type"`) {
		t.Fatalf("a bad deployment type: %d", p.status)
	}
	i := strings.Index(p.body, `<select id="deployment_type"`)
	if j := strings.Index(p.body[i:], `class="problem"`); j < 0 || j > 600 {
		t.Errorf("no problem beside deployment_type")
	}
}

// A stream starts with the state as it is when it opens, so that a page
// rendered before a change and followed after it still shows it.
func TestStreamStartsWithTheCurrentState(t *testing.T) {
	e := newEnv(t, nil)
	b := e.browser(t)
	b.mustSignIn(keyA, "")
	ctx := context.Background()
	id := b.createDeployment(url.Values{"name": {"agent"}, "source": {"external_docker"}, "image_uri": {"docker.io/acme/a:1"}})
	waitFor(t, "the deployment to be READY", func() bool {
		d, err := e.cp.GetDeployment(ctx, tenantA, id)
		return err == nil && d.Status == controlplane.StatusReady
	})
	for _, q := range []string{"?deployment=" + id, "?ids=" + id + ",01a20ce2-bbef-777a-8bd7-1cf6f4babcbe"} {
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		req, _ := http.NewRequestWithContext(sctx, http.MethodGet, b.base+"/ui/stream/events"+q, nil)
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		events := readEvents(resp.Body)
		first := <-events
		if first.name != "deployment" || first.id != "" || !strings.Contains(first.data, `"change":"snapshot"`) ||
			!strings.Contains(first.data, `"status":"READY"`) {
			t.Errorf("%s: first event %+v", q, first)
		}
		second := <-events
		switch {
		case strings.HasPrefix(q, "?deployment="):
			if second.name != "revision" || !strings.Contains(second.data, `"status":"DEPLOYED"`) {
				t.Errorf("%s: second event %+v", q, second)
			}
		default:
			if second.name != "deployment" || !strings.Contains(second.data, `"change":"deleted"`) {
				t.Errorf("%s: an unknown id: %+v", q, second)
			}
		}
		cancel()
		resp.Body.Close()
	}
}

// TestSignInNextStaysInTheDashboard: after signing in, next is followed
// only to a clean path of the dashboard; dot segments (plain or encoded),
// other routes, other hosts and schemes land on the deployments page.
func TestSignInNextStaysInTheDashboard(t *testing.T) {
	e := newEnv(t, nil)
	for _, tt := range []struct{ next, want string }{
		{"/ui/deployments/01a20ce2-bbef-777a-8bd7-1cf6f4babcbe", "/ui/deployments/01a20ce2-bbef-777a-8bd7-1cf6f4babcbe"},
		{"/ui/deployments?status=READY", "/ui/deployments?status=READY"},
		{"/ui/listeners", "/ui/listeners"},
		{"/ui/../v2/deployments", "/ui/deployments"},
		{"/ui/%2e%2e/v2/deployments", "/ui/deployments"},
		{"/ui/./listeners", "/ui/deployments"},
		{"/ui//evil.example/", "/ui/deployments"},
		{"/ui/x/../../metrics", "/ui/deployments"},
		{"//evil.example/ui/", "/ui/deployments"},
		{"https://evil.example/ui/", "/ui/deployments"},
		{"javascript:alert(1)//ui/", "/ui/deployments"},
		{"/ui/signin", "/ui/deployments"},
		{"/v2/deployments", "/ui/deployments"},
	} {
		b := e.browser(t)
		form := b.get("/ui/signin")
		p := b.post("/ui/signin", url.Values{"csrf": {csrf(t, form)}, "api_key": {keyA}, "next": {tt.next}})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != tt.want {
			t.Errorf("sign in with next=%s: %d to %q, want %q", tt.next, p.status, p.header.Get("Location"), tt.want)
		}
	}
}
