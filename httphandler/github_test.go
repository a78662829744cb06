package httphandler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/internal/githubtest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// stubApp is the GitHubApp of the servers that do not go through GitHub:
// it makes install URLs and confirms nothing.
type stubApp struct{}

func (stubApp) InstallURL(state string) string {
	return "https://github.example/apps/stub/installations/new?state=" + url.QueryEscape(state)
}

func (stubApp) VerifyInstallation(context.Context, string, int64) (string, error) {
	return "", controlplane.ErrInstallationForbidden
}

// githubServer is a server whose control plane verifies installations with
// a githubapp.App on a fake GitHub, whose setup redirect lands on the
// server.
type githubServer struct {
	*server
	gh    *githubtest.GitHub
	clock *testclock.Clock
}

func newGitHubServer(t *testing.T) githubServer {
	t.Helper()
	gh := githubtest.New(t)
	app, err := githubapp.New(&githubapp.Options{AppID: gh.AppID(), Slug: gh.Slug(), PrivateKeyPEM: gh.PrivateKeyPEM(),
		ClientID: gh.ClientID(), ClientSecret: gh.ClientSecret(), APIURL: gh.APIURL(), WebURL: gh.URL(), HTTPClient: gh.Client()})
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), time.Microsecond)
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: app, Clock: clock.Now,
		GitHubInstallStates: githubapp.NewStates(storemem.New(), &githubapp.StatesOptions{Clock: clock.Now})})
	s := newServerWith(t, serverSetup{cp: cp, verified: true})
	gh.SetSetupURL(s.url + "/v1/integrations/github/setup")
	return githubServer{server: s, gh: gh, clock: clock}
}

// installURL asks the server for the App's installation URL as key's
// tenant.
func (s githubServer) installURL(t *testing.T, key string) string {
	t.Helper()
	r := s.as(key, "GET", "/v1/integrations/github/install", "")
	var b struct {
		URL string `json:"url"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &b) != nil || !strings.HasPrefix(b.URL, s.gh.URL()+"/apps/"+s.gh.Slug()+"/installations/new?state=") {
		t.Fatalf("GET /v1/integrations/github/install: %d %s", r.status, r.body)
	}
	return b.URL
}

// browse follows the install URL as a browser would, up to the setup
// page's answer, without credentials; it returns that answer and the setup
// URL GitHub redirected to.
func (s githubServer) browse(t *testing.T, installURL string) (reply, string) {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(installURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	setup := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(setup, s.url+"/v1/integrations/github/setup?") {
		t.Fatalf("the installation page: %d to %q", resp.StatusCode, setup)
	}
	return s.do("GET", strings.TrimPrefix(setup, s.url), ""), setup
}

func htmlAnswer(t *testing.T, what string, r reply, status int, text string) {
	t.Helper()
	if r.status != status || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), text) {
		t.Errorf("%s: %d %s %s, want %d with %q", what, r.status, r.header.Get("Content-Type"), r.body, status, text)
	}
}

// TestGitHubInstallFlow drives the verified installation end to end: the
// install URL, GitHub's installation page and setup redirect, the code
// exchange and GET /user/installations on the fake GitHub, and the
// integration recorded for the tenant the state was made for.
func TestGitHubInstallFlow(t *testing.T) {
	s := newGitHubServer(t)
	s.gh.WillInstall(7, "acme")
	r, setup := s.browse(t, s.installURL(t, keyA))
	list := must[[]controlplane.Integration](t, s.server, keyA, "GET", "/v1/integrations/github", "", 200)
	if len(list) != 1 || list[0].InstallationID != 7 || list[0].Name != "acme" {
		t.Fatalf("A's integrations after the installation: %+v", list)
	}
	htmlAnswer(t, "the setup page", r, 200, list[0].ID)
	diff(t, "B's integrations", "[]\n", string(s.as(keyB, "GET", "/v1/integrations/github", "").body))
	if c := s.gh.Counts(); c.Exchanges != 1 || c.InstallationLists != 1 {
		t.Errorf("GitHub was asked %+v, want one exchange and one installation list", c)
	}

	// The same redirect again: the state is spent.
	htmlAnswer(t, "the setup redirect replayed", s.do("GET", strings.TrimPrefix(setup, s.url), ""), 400, "already used")

	// Tenant B cannot take A's installation, even through GitHub with a
	// user who can access it.
	r, _ = s.browse(t, s.installURL(t, keyB))
	htmlAnswer(t, "B installs A's installation", r, 409, "already registered by another workspace")
	diff(t, "B's integrations after the refused claim", "[]\n", string(s.as(keyB, "GET", "/v1/integrations/github", "").body))

	// A signed push of installation 7 reaches A's deployment only, though
	// B tracks the same repository through its own installation.
	s.gh.WillInstall(8, "acme-b")
	s.browse(t, s.installURL(t, keyB))
	listB := must[[]controlplane.Integration](t, s.server, keyB, "GET", "/v1/integrations/github", "", 200)
	if len(listB) != 1 || listB[0].InstallationID != 8 {
		t.Fatalf("B's integrations: %+v", listB)
	}
	track := func(key, name, integration string) string {
		return must[controlplane.Deployment](t, s.server, key, "POST", "/v2/deployments", `{"name": "`+name+`", "source": "github",
			"source_config": {"integration_id": "`+integration+`", "repo_url": "https://github.com/acme/agent", "build_on_push": true},
			"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, 201).ID
	}
	track(keyA, "tracks", list[0].ID)
	track(keyB, "tracks", listB[0].ID)
	beforeB := s.revisionsOf(t, keyB)
	diff(t, "revisions created by A's push", 1,
		accepted(t, s.deliver("push", pushBody(7, "refs/heads/main", pushed, "https://github.com/acme/agent.git"))))
	diff(t, "B's revisions after A's push", beforeB, s.revisionsOf(t, keyB))

	// Secrets (client secret, codes, tokens) appear in no answer and no log.
	for _, secret := range s.gh.Secrets() {
		if strings.Contains(s.logs(), secret) {
			t.Errorf("the log holds a secret of GitHub's")
		}
	}
}

// TestGitHubSetupErrors: each way the setup redirect fails is an HTML page
// with its status, and records nothing.
func TestGitHubSetupErrors(t *testing.T) {
	s := newGitHubServer(t)
	s.gh.AddInstallation(9, "acme")
	stateOf := func() string {
		u, err := url.Parse(s.installURL(t, keyA))
		if err != nil {
			t.Fatal(err)
		}
		return u.Query().Get("state")
	}
	setup := func(v url.Values) reply {
		return s.do("GET", "/v1/integrations/github/setup?"+v.Encode(), "")
	}
	for _, c := range []struct {
		name   string
		query  func() url.Values
		before func()
		status int
		text   string
	}{
		{"no query", func() url.Values { return url.Values{} }, nil, 400, "state: Field required"},
		{"unknown state", func() url.Values {
			return url.Values{"installation_id": {"9"}, "code": {s.gh.Code(9)}, "state": {"made-up"}}
		}, nil, 400, "invalid, has expired, or was already used"},
		{"expired state", func() url.Values {
			v := url.Values{"installation_id": {"9"}, "code": {s.gh.Code(9)}, "state": {stateOf()}}
			s.clock.Advance(controlplane.GitHubInstallStateTTL)
			return v
		}, nil, 400, "invalid, has expired, or was already used"},
		{"requested, not installed", func() url.Values {
			return url.Values{"setup_action": {"request"}, "state": {stateOf()}}
		}, nil, 400, "awaits approval"},
		{"no code", func() url.Values {
			return url.Values{"installation_id": {"9"}, "setup_action": {"install"}, "state": {stateOf()}}
		}, nil, 400, "code: Field required"},
		{"user cannot access the installation", func() url.Values {
			return url.Values{"installation_id": {"9"}, "code": {s.gh.Code(10)}, "state": {stateOf()}}
		}, nil, 403, "cannot access this installation"},
		{"code refused", func() url.Values {
			return url.Values{"installation_id": {"9"}, "code": {"made-up"}, "state": {stateOf()}}
		}, nil, 502, "GitHub did not confirm"},
		{"GitHub down", func() url.Values {
			v := url.Values{"installation_id": {"9"}, "code": {s.gh.Code(9)}, "state": {stateOf()}}
			s.gh.Down(true)
			return v
		}, nil, 502, "GitHub did not confirm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer s.gh.Down(false)
			htmlAnswer(t, c.name, setup(c.query()), c.status, c.text)
			diff(t, "A's integrations", "[]\n", string(s.as(keyA, "GET", "/v1/integrations/github", "").body))
		})
	}
	// HEAD does not spend the state.
	v := url.Values{"installation_id": {"9"}, "code": {s.gh.Code(9)}, "state": {stateOf()}}
	if r := s.do("HEAD", "/v1/integrations/github/setup?"+v.Encode(), ""); r.status != 200 {
		t.Errorf("HEAD of the setup URL: %d", r.status)
	}
	htmlAnswer(t, "GET after HEAD", setup(v), 200, "is integration")
	for _, secret := range s.gh.Secrets() {
		if strings.Contains(s.logs(), secret) {
			t.Errorf("the log holds a secret of GitHub's")
		}
	}
}

// TestGitHubInstallWithoutApp: without a GitHub App the install route and
// the setup redirect answer 503 saying so.
func TestGitHubInstallWithoutApp(t *testing.T) {
	s := newServerWith(t, serverSetup{cp: controlplane.New(storemem.New(), nil)})
	r := s.as(keyA, "GET", "/v1/integrations/github/install", "")
	if r.status != 503 || !strings.Contains(detail(t, r), "No GitHub App is configured") {
		t.Errorf("install without an App: %d %s", r.status, r.body)
	}
	htmlAnswer(t, "setup without an App", s.do("GET", "/v1/integrations/github/setup?installation_id=1&code=c&state=s", ""),
		503, "No GitHub App is configured")
}

// TestUnverifiedIntegrations: POST /v1/integrations/github is served only
// when allowed (404 and absent from the document otherwise), and even then
// an installation belongs to one tenant.
func TestUnverifiedIntegrations(t *testing.T) {
	s := newServerWith(t, serverSetup{verified: true})
	r := s.as(keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`)
	if r.status != 404 || !strings.Contains(detail(t, r), "not enabled on this server") {
		t.Errorf("unverified registration not allowed: %d %s", r.status, r.body)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	diff(t, "methods of /v1/integrations/github", []string{"get"}, keysOf(doc.Paths["/v1/integrations/github"]))

	s = newServer(t, nil) // allowed
	must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	for _, key := range []string{keyB, keyA} {
		r := s.as(key, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "mine"}`)
		if r.status != 409 || !strings.Contains(detail(t, r), "already registered") {
			t.Errorf("a second claim of installation 42: %d %s", r.status, r.body)
		}
	}
	diff(t, "B's integrations", "[]\n", string(s.as(keyB, "GET", "/v1/integrations/github", "").body))
}

// TestWebhookReplay: a signed delivery is processed once, whether it comes
// again with the same X-GitHub-Delivery or under another one.
func TestWebhookReplay(t *testing.T) {
	s := newServer(t, nil)
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "tracks", "source": "github",
		"source_config": {"integration_id": "`+in.ID+`", "repo_url": "https://github.com/acme/agent", "build_on_push": true},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, 201)
	body := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	send := func(delivery string) int {
		t.Helper()
		return accepted(t, s.do("POST", "/v1/integrations/github/webhook", body, "X-GitHub-Event", "push",
			"X-GitHub-Delivery", delivery, "X-Hub-Signature-256", sign(webhookSecret, body)))
	}
	for i, want := range []int{1, 0, 0} {
		if got := send("72d3162e-cc78-11e3-81ab-4c9367dc0958"); got != want {
			t.Errorf("delivery sent the %d. time: %d revisions created, want %d", i+1, got, want)
		}
	}
	if got := send("a-new-delivery-id"); got != 0 {
		t.Errorf("the same body under another delivery id: %d revisions created, want 0", got)
	}
	revs := must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions", "", 200)
	diff(t, "revisions (create and one push)", 2, len(revs.Resources))
}
