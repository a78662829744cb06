package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/memnet"
	"github.com/deployplane/deployplane/internal/oauthtest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/registry"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/webhooks"
)

// Tenants and keys of the tests. keyA may use tenant A only, keyB tenant B
// only, keyOrg both (so it must name one).
const (
	tenantA = "0194c0de-0000-7000-8000-00000000000a"
	tenantB = "0194c0de-0000-7000-8000-00000000000b"
	keyA    = "key-of-tenant-a"
	keyB    = "key-of-tenant-b"
	keyOrg  = "org-wide-key"

	// webhookSecret is the GitHub webhook secret of the test servers.
	webhookSecret = "webhook-secret-of-the-tests"
)

func keyTable(t testing.TB) *httphandler.KeyTable {
	t.Helper()
	kt, err := httphandler.NewKeyTable([]httphandler.Key{
		{SHA256: httphandler.HashKey(keyA), Tenants: []string{tenantA}},
		{SHA256: httphandler.HashKey(keyB), Tenants: []string{tenantB}},
		{SHA256: httphandler.HashKey(keyOrg), Tenants: []string{tenantA, strings.ToUpper(tenantB)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return kt
}

// server is a real httptest.Server running the handler over storemem,
// with the OAuth helpers over their own storemem, a fake OAuth provider and
// a settable clock.
type server struct {
	t      testing.TB
	url    string
	client *http.Client // reaches the server and the provider
	log    *syncBuffer
	api    *httphandler.Handler
	prov   *oauthtest.Provider
	clock  *testclock.Clock
}

// logs is what the server logged so far, the request records of the
// requests that have ended included.
func (s *server) logs() string {
	_ = s.api.Close()
	return s.log.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newServer(t testing.TB, opts *httphandler.Options) *server {
	t.Helper()
	return newServerCP(t, controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)}), opts)
}

func newServerCP(t testing.TB, cp *controlplane.ControlPlane, opts *httphandler.Options) *server {
	t.Helper()
	return newServerWith(t, serverSetup{cp: cp, opts: opts})
}

// serverSetup is what newServerWith may vary.
type serverSetup struct {
	cp         *controlplane.ControlPlane // nil: a new one over storemem
	opts       *httphandler.Options
	noOAuth    bool                     // leave Options.OAuth nil
	noWebhook  bool                     // leave Options.GitHubWebhookSecret nil
	noWebhooks bool                     // leave Options.Webhooks nil
	verified   bool                     // leave Options.AllowUnverifiedIntegrations false
	oauth      func(*oauthflow.Options) // adjusts the OAuth service's options
	http       func(*http.Server)       // adjusts the server before it starts
	// inMemory serves the server and the provider on an internal/memnet
	// network instead of loopback ports, for tests in a synctest bubble
	// (newServerWith must then be called inside the bubble).
	inMemory bool
}

func newServerWith(t testing.TB, c serverSetup) *server {
	t.Helper()
	s := &server{t: t, client: http.DefaultClient, log: &syncBuffer{}, clock: testclock.New(time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), 0)}
	srv := httptest.NewUnstartedServer(nil)
	if c.inMemory {
		var n memnet.Network
		srv.Listener.Close()
		srv.Listener = n.Listen()
		s.client = n.Client()
		s.prov = oauthtest.NewOn(t, n.Listen(), s.client)
	} else {
		s.prov = oauthtest.New(t)
	}
	if c.cp == nil {
		c.cp = controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	}
	var o httphandler.Options
	if c.opts != nil {
		o = *c.opts
	}
	if !c.verified {
		// Most tests register integrations with POST /v1/integrations/github.
		o.AllowUnverifiedIntegrations = true
	}
	if o.Authenticator == nil {
		o.Authenticator = keyTable(t)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.GitHubWebhookSecret == nil && !c.noWebhook {
		o.GitHubWebhookSecret = []byte(webhookSecret)
	}
	s.url = "http://" + srv.Listener.Addr().String()
	if o.OAuth == nil && !c.noOAuth {
		oo := &oauthflow.Options{
			SecretKey:  bytes.Repeat([]byte{7}, 32),
			PublicURL:  s.url,
			HTTPClient: s.prov.Client(),
			Egress:     egressAllowing(t, s.prov.Host()),
			Clock:      s.clock.Now,
			Logger:     o.Logger,
		}
		if c.oauth != nil {
			c.oauth(oo)
		}
		svc, err := oauthflow.New(storemem.New(), oo)
		if err != nil {
			t.Fatal(err)
		}
		o.OAuth = svc
	}
	if o.Webhooks == nil && !c.noWebhooks {
		// The tenants' webhooks, under the strict egress policy.
		wh, err := webhooks.New(c.cp, &webhooks.Options{Clock: s.clock.Now, Logger: o.Logger})
		if err != nil {
			t.Fatal(err)
		}
		o.Webhooks = wh
	}
	s.api = httphandler.New(c.cp, &o)
	srv.Config.Handler = s.api
	if c.http != nil {
		c.http(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return s
}

// reply is an answer of the server.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; headers are name, value pairs.
func (s *server) do(method, path, body string, headers ...string) reply {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// An event stream does not end: the answer is its status and
		// headers (events_test.go reads streams).
		return reply{status: resp.StatusCode, header: resp.Header}
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// as sends a request with key A.
func (s *server) as(key, method, path, body string) reply {
	s.t.Helper()
	return s.do(method, path, body, "X-Api-Key", key)
}

// must sends a request with key and checks the status, decoding the body
// into a new T.
func must[T any](t testing.TB, s *server, key, method, path, body string, status int) T {
	t.Helper()
	r := s.as(key, method, path, body)
	if r.status != status {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, status, r.body)
	}
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, r.body)
	}
	return v
}

func diff(t testing.TB, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// detail decodes {"detail": "..."}.
func detail(t testing.TB, r reply) string {
	t.Helper()
	var b struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("not a detail body: %v: %s", err, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return b.Detail
}

// problems decodes a 422 body, checking its shape: every problem has a loc
// starting with body, path or query, a msg and a type.
func problems(t testing.TB, r reply) []apierr.Problem {
	t.Helper()
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422: %s", r.status, r.body)
	}
	var b struct {
		Detail []apierr.Problem `json:"detail"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("not a 422 body: %v: %s", err, r.body)
	}
	if len(b.Detail) == 0 {
		t.Fatalf("422 without problems: %s", r.body)
	}
	for _, p := range b.Detail {
		if len(p.Loc) == 0 || p.Msg == "" || p.Type == "" {
			t.Fatalf("malformed problem %+v in %s", p, r.body)
		}
		switch p.Loc[0] {
		case "body", "path", "query":
		default:
			t.Fatalf("loc %v does not start with body, path or query", p.Loc)
		}
		for i, l := range p.Loc {
			if n, ok := l.(json.Number); ok {
				k, err := n.Int64()
				if err != nil || k < 0 {
					t.Fatalf("loc %v: bad index", p.Loc)
				}
				p.Loc[i] = int(k)
			}
		}
	}
	return b.Detail
}

// fixture is a set of resources of tenant A, created over HTTP.
type fixture struct {
	integrationID string
	github        controlplane.Deployment // a github deployment
	docker        controlplane.Deployment // an external_docker deployment on the listener
	listener      controlplane.Listener
	token         controlplane.NewListenerToken // a token of the listener
	provider      oauthflow.Provider            // an OAuth provider (the fake one)
	authID        string                        // a completed flow of user-a through it
	webhook       webhooks.CreatedWebhook       // a webhook
}

func githubBody(name, integrationID string) string {
	return `{"name": "` + name + `", "source": "github",
		"source_config": {"integration_id": "` + integrationID + `", "repo_url": "https://github.com/acme/agent"},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"},
		"secrets": [{"name": "OPENAI_API_KEY", "value": "sk-secret-value"}]}`
}

func dockerBody(name string) string {
	return `{"name": "` + name + `", "source": "external_docker",
		"source_revision_config": {"image_uri": "registry.example/agent:1"}}`
}

func newFixture(t testing.TB, s *server) fixture {
	t.Helper()
	var f fixture
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	f.integrationID = in.ID
	f.github = must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", githubBody("agent", in.ID), 201)
	f.listener = must[controlplane.Listener](t, s, keyA, "POST", "/v2/listeners",
		`{"compute_type": "k8s", "compute_id": "cluster-1", "compute_config": {"k8s_namespaces": ["prod"]}, "version": "1"}`, 201)
	f.token = must[controlplane.NewListenerToken](t, s, keyA, "POST", "/v2/listeners/"+f.listener.ID+"/tokens", "", 201)
	f.docker = must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments",
		`{"name": "docker-agent", "source": "external_docker",
		  "source_config": {"listener_id": "`+f.listener.ID+`", "listener_config": {"k8s_namespace": "prod"}},
		  "source_revision_config": {"image_uri": "registry.example/agent:1"}}`, 201)
	f.provider = must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := must[authAnswer](t, s, keyA, "POST", "/v2/auth/authenticate", `{"user_id": "user-a", "provider": "fake", "scopes": ["read"]}`, 200)
	if page := s.browse(a.URL); page.status != 200 {
		t.Fatalf("the fixture's flow: %d %s", page.status, page.body)
	}
	f.authID = a.AuthID
	f.webhook = must[webhooks.CreatedWebhook](t, s, keyA, "POST", "/v2/webhooks", `{"url": "https://hooks.example.com/f", "events": ["*"]}`, 201)
	return f
}

// testRegistry is the httphandler.Registry of a registry at host: it
// names registry_url as package registry does (the registry's host and
// the deployment's repository prefix) and issues the push tokens of a
// registry.TokenStore over the control plane's store.
type testRegistry struct {
	host   string
	tokens *registry.TokenStore
}

// registryAt is the testRegistry at host of cp's deployments.
func registryAt(cp *controlplane.ControlPlane, host string) *testRegistry {
	return &testRegistry{host: host, tokens: registry.NewTokenStore(cp, nil)}
}

func (r *testRegistry) URL(deploymentID string) string {
	return r.host + "/" + registry.Repository(deploymentID)
}

func (r *testRegistry) PushToken(ctx context.Context, tenant, deploymentID string) (string, error) {
	tok, err := r.tokens.IssuePushToken(ctx, tenant, deploymentID)
	if err != nil {
		return "", err
	}
	return tok.Token, nil
}

// failDeploying is a Deployer that takes every revision to DEPLOYING,
// where an engine starts to make things, and fails it there; its
// Teardown fails with teardownErr while that is set.
type failDeploying struct{ teardownErr error }

func (failDeploying) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	reached, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{})
	if err != nil {
		return err
	}
	return r.Report(ctx, controlplane.Step{Status: controlplane.FailureOf(reached), Message: "failed while deploying"})
}

func (d failDeploying) Teardown(context.Context, string, *controlplane.Deployment) error {
	return d.teardownErr
}

// reachEngine works every pending revision of cp with failDeploying, so
// that their deployments have reached an engine: deleting one makes it
// AWAITING_DELETE until its teardown, where one that never ran is removed
// at once. The deployments themselves do not change. Call it before any
// deployment is AWAITING_DELETE: it would tear that down too.
func reachEngine(t testing.TB, cp *controlplane.ControlPlane) {
	t.Helper()
	for {
		ok, err := cp.Process(context.Background(), failDeploying{})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
	}
}
