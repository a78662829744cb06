package httphandler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/wiretime"
)

// waitAnswer is the answer of GET /v2/auth/wait/{auth_id}.
type waitAnswer struct {
	Status string  `json:"status"`
	Token  *string `json:"token"`
}

func (s *server) authenticate(t *testing.T, key, body string) authAnswer {
	t.Helper()
	return must[authAnswer](t, s, key, "POST", "/v2/auth/authenticate", body, 200)
}

func (s *server) wait(t *testing.T, key, authID, query string) waitAnswer {
	t.Helper()
	return must[waitAnswer](t, s, key, "GET", "/v2/auth/wait/"+authID+query, "", 200)
}

// checkPage checks the headers every callback page carries and that it
// says what it should.
func checkPage(t *testing.T, what string, r reply, status int, says string) {
	t.Helper()
	if r.status != status || !strings.Contains(string(r.body), says) {
		t.Errorf("%s: %d %s, want %d saying %q", what, r.status, r.body, status, says)
	}
	for name, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"Content-Security-Policy": "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
		"Cache-Control":           "no-store",
		"Referrer-Policy":         "no-referrer",
		"X-Content-Type-Options":  "nosniff",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %s %q, want %q", what, name, got, want)
		}
	}
}

// TestOAuthFullFlow: a provider is created over HTTP; authenticate starts a
// flow with PKCE; the browser follows the URL to the provider, which
// redirects to the callback (no API key), which exchanges the code with the
// verifier; the page says the window can be closed; a waiter that was
// already waiting gets the token; a second authenticate answers completed
// at once without another exchange.
// It runs in a synctest bubble, so that the waiter is known to be waiting
// before the callback.
func TestOAuthFullFlow(t *testing.T) { synctest.Test(t, oAuthFullFlow) }

func oAuthFullFlow(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true})
	p := must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	want := oauthflow.Provider{ID: p.ID, OrganizationID: tenantA, ProviderID: "fake", Name: "Fake fake", ClientID: s.prov.ClientID(),
		AuthURL: s.prov.AuthURL(), TokenURL: s.prov.TokenURL(), UsesPKCE: true,
		CodeChallengeMethod: new(oauthflow.MethodS256), CreatedAt: wiretime.New(s.clock.Now()), UpdatedAt: wiretime.New(s.clock.Now())}
	diff(t, "created provider", want, p)

	a := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": ["repo", "read:user"], "agent_id": "agent-1"}`)
	if a.Status != "pending" || a.AuthID == "" || a.Token != nil {
		t.Fatalf("first authenticate: %+v", a)
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	diff(t, "authorization URL", map[string]string{
		"base": s.prov.AuthURL(), "response_type": "code", "client_id": s.prov.ClientID(),
		"redirect_uri": s.url + "/v2/auth/callback/fake", "scope": "repo read:user", "code_challenge_method": "S256",
	}, map[string]string{
		"base": u.Scheme + "://" + u.Host + u.Path, "response_type": q.Get("response_type"), "client_id": q.Get("client_id"),
		"redirect_uri": q.Get("redirect_uri"), "scope": q.Get("scope"), "code_challenge_method": q.Get("code_challenge_method"),
	})
	if q.Get("state") == "" || q.Get("code_challenge") == "" {
		t.Errorf("no state or code challenge in %s", a.URL)
	}
	if w := s.wait(t, keyA, a.AuthID, "?timeout=0"); w.Status != "pending" || w.Token != nil {
		t.Errorf("wait before the callback: %+v", w)
	}

	waited := make(chan waitAnswer, 1)
	go func() {
		r := s.as(keyA, "GET", "/v2/auth/wait/"+a.AuthID+"?timeout=20", "")
		var w waitAnswer
		_ = json.Unmarshal(r.body, &w)
		waited <- w
	}()
	synctest.Wait() // the waiter waits
	checkPage(t, "callback", s.browse(a.URL), 200, "You can close this window")
	token := s.prov.LastAccessToken()
	// A waiter the callback did not wake answers timeout after 20 s of
	// fake time.
	diff(t, "the waiter's answer", waitAnswer{Status: "completed", Token: &token}, <-waited)
	if pkce := s.prov.Counts().PKCEVerified; pkce != 1 {
		t.Errorf("PKCE verified %d times, want 1", pkce)
	}
	diff(t, "wait after the callback", waitAnswer{Status: "completed", Token: &token}, s.wait(t, keyA, a.AuthID, ""))

	second := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": ["repo"]}`)
	diff(t, "second authenticate", authAnswer{Status: "completed", Token: &token}, second)
	if ex := s.prov.Counts().Exchanges; ex != 1 {
		t.Errorf("%d code exchanges, want 1", ex)
	}
	var raw map[string]any
	_ = json.Unmarshal(s.as(keyA, "POST", "/v2/auth/authenticate", `{"user_id": "user-1", "provider": "fake", "scopes": []}`).body, &raw)
	diff(t, "completed answer's members", map[string]any{"status": "completed", "url": nil, "auth_id": nil, "token": token}, raw)
}

// TestOAuthProviders: list, get, patch and delete over HTTP, with the wire
// contract's statuses and sentences, and client_secret in no answer.
func TestOAuthProviders(t *testing.T) {
	s := newServer(t, nil)
	diff(t, "empty list", "[]\n", string(s.as(keyA, "GET", "/v2/auth/providers", "").body))
	b := must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("b-prov", false), 200)
	a := must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("a-prov", true), 200)
	diff(t, "list", []oauthflow.Provider{a, b}, must[[]oauthflow.Provider](t, s, keyA, "GET", "/v2/auth/providers", "", 200))
	diff(t, "get", a, must[oauthflow.Provider](t, s, keyA, "GET", "/v2/auth/providers/a-prov", "", 200))

	r := s.as(keyA, "POST", "/v2/auth/providers", s.providerBody("a-prov", false))
	if r.status != 409 || detail(t, r) == "" {
		t.Errorf("a second a-prov: %d %s", r.status, r.body)
	}
	s.clock.Advance(time.Minute)
	got := must[oauthflow.Provider](t, s, keyA, "PATCH", "/v2/auth/providers/a-prov",
		`{"name": "Renamed", "uses_pkce": false, "client_secret": "new-secret-value", "provider_type": "github"}`, 200)
	want := a
	want.Name, want.UsesPKCE, want.CodeChallengeMethod, want.ProviderType, want.UpdatedAt = "Renamed", false, nil, new("github"), wiretime.New(s.clock.Now())
	diff(t, "patched", want, got)
	diff(t, "get after patch", want, must[oauthflow.Provider](t, s, keyA, "GET", "/v2/auth/providers/a-prov", "", 200))

	diff(t, "immutable provider_id", []apierr.Problem{{Loc: []any{"body", "provider_id"}, Msg: "provider_id cannot be changed", Type: "immutable_field"}},
		problems(t, s.as(keyA, "PATCH", "/v2/auth/providers/a-prov", `{"provider_id": "other"}`)))

	diff(t, "delete", map[string]string{"message": "OAuth provider a-prov deleted."},
		must[map[string]string](t, s, keyA, "DELETE", "/v2/auth/providers/a-prov", "", 200))
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		r := s.as(keyA, m, "/v2/auth/providers/a-prov", `{"name": "x"}`)
		if r.status != 404 || detail(t, r) != "OAuth provider a-prov not found." {
			t.Errorf("%s after delete: %d %s", m, r.status, r.body)
		}
	}
	r = s.as(keyA, "POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "a-prov", "scopes": []}`)
	if r.status != 404 || detail(t, r) != "OAuth provider a-prov not found." {
		t.Errorf("authenticate with a deleted provider: %d %s", r.status, r.body)
	}
	if logs := s.logs(); strings.Contains(logs, s.prov.ClientSecret()) || strings.Contains(logs, "new-secret-value") {
		t.Errorf("a client secret reached the log:\n%s", logs)
	}
}

// TestOAuthValidation: bodies and queries that fail are 422s listing every
// problem at its loc.
func TestOAuthValidation(t *testing.T) {
	s := newServer(t, nil)
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", false), 200)
	locs := func(r reply) [][]any {
		var out [][]any
		for _, p := range problems(t, r) {
			out = append(out, p.Loc)
		}
		return out
	}
	for _, c := range []struct {
		method, path, body string
		want               [][]any
	}{
		{"POST", "/v2/auth/authenticate", `{}`, [][]any{{"body", "user_id"}, {"body", "provider"}, {"body", "scopes"}}},
		{"POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": null}`, [][]any{{"body", "scopes"}}},
		{"POST", "/v2/auth/authenticate", ``, [][]any{{"body"}}},
		{"POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": "repo"}`, [][]any{{"body", "scopes"}}},
		{"POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": ["a b"]}`, [][]any{{"body", "scopes", 0}}},
		{"POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": [], "use_agent_builder_public_oauth": true}`,
			[][]any{{"body", "use_agent_builder_public_oauth"}}},
		{"POST", "/v2/auth/providers", `{"provider_id": "x", "name": "X", "client_id": "c", "auth_url": "http://example.com/a", "token_url": "/t"}`,
			[][]any{{"body", "auth_url"}, {"body", "token_url"}}},
		{"POST", "/v2/auth/providers", `{"uses_pkce": "yes"}`, [][]any{{"body", "uses_pkce"}}},
		{"PATCH", "/v2/auth/providers/fake", `{"token_url": "ftp://x"}`, [][]any{{"body", "token_url"}}},
		{"GET", "/v2/auth/wait/x?timeout=abc", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=-1", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=301", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=1.5", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=9223372036854775807", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=-9223372036854775808", ``, [][]any{{"query", "timeout"}}},
		{"GET", "/v2/auth/wait/x?timeout=99999999999999999999", ``, [][]any{{"query", "timeout"}}},
	} {
		diff(t, c.method+" "+c.path+" "+c.body, c.want, locs(s.as(keyA, c.method, c.path, c.body)))
	}
	diff(t, "wait on an unknown flow", waitAnswer{Status: "not_found"}, s.wait(t, keyA, "no-such-flow", "?timeout=300"))
}

// TestOAuthCallbackFailures: a wrong state changes nothing; a refusal by
// the provider (whose text is escaped), a replayed callback, a deleted
// provider and a refused exchange each show an error page, and end the
// flow where the table of oauthflow says so.
func TestOAuthCallbackFailures(t *testing.T) {
	s := newServer(t, nil)
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	users := 0
	start := func() (authAnswer, string) { // a flow of a new user, at the provider
		users++
		a := s.authenticate(t, keyA, `{"user_id": "user-`+strconv.Itoa(users)+`", "provider": "fake", "scopes": []}`)
		return a, s.redirect(a.URL)
	}

	// A wrong state: 400, and the flow still completes with the right one
	// (after a HEAD of the right one, which spends nothing).
	a, cb := start()
	if resp, err := http.Head(cb); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HEAD of the callback: %v %v", resp, err)
	}
	u, _ := url.Parse(cb)
	q := u.Query()
	q.Set("state", "not-the-state")
	u.RawQuery = q.Encode()
	checkPage(t, "wrong state", s.open(u.String()), 400, "invalid, has expired, or was already used")
	diff(t, "wait after a wrong state", waitAnswer{Status: "pending"}, s.wait(t, keyA, a.AuthID, "?timeout=0"))
	checkPage(t, "right state", s.open(cb), 200, "You can close this window")
	checkPage(t, "the same callback again", s.open(cb), 400, "already used")
	checkPage(t, "a callback without a state", s.open(s.url+"/v2/auth/callback/fake?code=x"), 400, "invalid")

	// The provider refuses, with a description meant to inject markup.
	s.prov.Deny("access_denied", `<script>alert("x")</script>`)
	a, cb = start()
	r := s.open(cb)
	checkPage(t, "refused", r, 400, "access_denied")
	if strings.Contains(string(r.body), "<script>") || !strings.Contains(string(r.body), "&lt;script&gt;") {
		t.Errorf("the provider's text is not escaped: %s", r.body)
	}
	diff(t, "wait after a refusal", waitAnswer{Status: "not_found"}, s.wait(t, keyA, a.AuthID, ""))
	s.prov.Deny("", "")

	// The provider is deleted while the user is at the provider.
	a, cb = start()
	must[map[string]string](t, s, keyA, "DELETE", "/v2/auth/providers/fake", "", 200)
	checkPage(t, "deleted provider", s.open(cb), 404, "no longer configured")
	diff(t, "wait after the provider's deletion", waitAnswer{Status: "not_found"}, s.wait(t, keyA, a.AuthID, ""))

	// The token endpoint refuses the code (the client secret is wrong).
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	must[oauthflow.Provider](t, s, keyA, "PATCH", "/v2/auth/providers/fake", `{"client_secret": "wrong-secret"}`, 200)
	a, cb = start()
	checkPage(t, "refused exchange", s.open(cb), 502, "did not accept")
	diff(t, "wait after a refused exchange", waitAnswer{Status: "not_found"}, s.wait(t, keyA, a.AuthID, ""))
}

// TestOAuthExpiredFlow: a flow the user finishes after FlowTTL is refused
// and is not_found for its waiter.
func TestOAuthExpiredFlow(t *testing.T) {
	s := newServerWith(t, serverSetup{oauth: func(o *oauthflow.Options) { o.FlowTTL = 5 * time.Minute }})
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": []}`)
	cb := s.redirect(a.URL)
	s.clock.Advance(5*time.Minute + time.Second)
	checkPage(t, "late callback", s.open(cb), 400, "has expired")
	diff(t, "wait on an expired flow", waitAnswer{Status: "not_found"}, s.wait(t, keyA, a.AuthID, ""))
	if ex := s.prov.Counts().Exchanges; ex != 0 {
		t.Errorf("an expired flow exchanged its code (%d exchanges)", ex)
	}
}

// TestOAuthRefresh: an expired token is refreshed through its refresh
// token by authenticate, which answers completed with the new one.
func TestOAuthRefresh(t *testing.T) {
	s := newServer(t, nil)
	s.prov.SetExpiresIn(60)
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": []}`)
	checkPage(t, "callback", s.browse(a.URL), 200, "close this window")
	first := s.prov.LastAccessToken()
	diff(t, "before expiry", authAnswer{Status: "completed", Token: &first}, s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": []}`))

	s.clock.Advance(2 * time.Minute)
	got := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": []}`)
	second := s.prov.LastAccessToken()
	if second == first {
		t.Fatal("no new token was issued")
	}
	diff(t, "after expiry", authAnswer{Status: "completed", Token: &second}, got)
	if refreshes := s.prov.Counts().Refreshes; refreshes != 1 {
		t.Errorf("%d refreshes, want 1", refreshes)
	}
}

// TestOAuthTokenIsolation: a token obtained by one user of one tenant is
// never given to another user or to another tenant, even one with a
// provider of the same provider_id; another tenant's flow is not_found.
func TestOAuthTokenIsolation(t *testing.T) {
	s := newServer(t, nil)
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	must[oauthflow.Provider](t, s, keyB, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": []}`)
	checkPage(t, "callback", s.browse(a.URL), 200, "close this window")
	token := s.prov.LastAccessToken()

	for _, c := range []struct {
		name, body string
		headers    []string
	}{
		{"tenant A, another user", `{"user_id": "user-2", "provider": "fake", "scopes": []}`, []string{"X-Api-Key", keyA}},
		{"tenant B, the same user id", `{"user_id": "user-1", "provider": "fake", "scopes": []}`, []string{"X-Api-Key", keyB}},
		{"org key in tenant B", `{"user_id": "user-1", "provider": "fake", "scopes": []}`, []string{"X-Api-Key", keyOrg, "X-Tenant-Id", tenantB}},
	} {
		r := s.do("POST", "/v2/auth/authenticate", c.body, c.headers...)
		var got authAnswer
		_ = json.Unmarshal(r.body, &got)
		if r.status != 200 || got.Status != "pending" || got.Token != nil || strings.Contains(string(r.body), token) {
			t.Errorf("%s: %d %s, want pending without the token", c.name, r.status, r.body)
		}
	}
	diff(t, "tenant B waits on A's flow", waitAnswer{Status: "not_found"}, s.wait(t, keyB, a.AuthID, ""))
	diff(t, "tenant A still has its token", waitAnswer{Status: "completed", Token: &token}, s.wait(t, keyA, a.AuthID, ""))
}

// TestOAuthSecretsStayOut: over a whole flow and a refresh, the client
// secret appears in no answer, and no secret at all (client secret, state,
// code, verifier, access or refresh token) in the log, whose request
// records carry the callback's path without its query.
func TestOAuthSecretsStayOut(t *testing.T) {
	s := newServer(t, nil)
	s.prov.SetExpiresIn(60)
	var answers []reply
	keep := func(r reply) reply { answers = append(answers, r); return r }
	keep(s.as(keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true)))
	keep(s.as(keyA, "GET", "/v2/auth/providers", ""))
	keep(s.as(keyA, "GET", "/v2/auth/providers/fake", ""))
	keep(s.as(keyA, "PATCH", "/v2/auth/providers/fake", `{"name": "n"}`))
	var a authAnswer
	_ = json.Unmarshal(keep(s.as(keyA, "POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": []}`)).body, &a)
	keep(s.browse(a.URL))
	keep(s.as(keyA, "GET", "/v2/auth/wait/"+a.AuthID, ""))
	s.clock.Advance(2 * time.Minute)
	keep(s.as(keyA, "POST", "/v2/auth/authenticate", `{"user_id": "u", "provider": "fake", "scopes": []}`))
	keep(s.as(keyA, "DELETE", "/v2/auth/providers/fake", ""))
	if refreshes := s.prov.Counts().Refreshes; refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", refreshes)
	}

	for _, r := range answers {
		if strings.Contains(string(r.body), s.prov.ClientSecret()) || strings.Contains(string(r.body), "client_secret") {
			t.Errorf("an answer shows the client secret: %s", r.body)
		}
	}
	logs := s.logs()
	for _, secret := range s.prov.Secrets() {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the secret %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, `"path":"/v2/auth/callback/fake","status":200`) {
		t.Errorf("no request record of the callback:\n%s", logs)
	}
}

// TestOAuthWaitTimeout: a long poll on an open flow answers timeout after
// its timeout, not before.
// It runs in a synctest bubble: the timeout passes in fake time.
func TestOAuthWaitTimeout(t *testing.T) { synctest.Test(t, oAuthWaitTimeout) }

func oAuthWaitTimeout(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true})
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "u", "provider": "fake", "scopes": []}`)
	began := time.Now()
	diff(t, "wait", waitAnswer{Status: "timeout"}, s.wait(t, keyA, a.AuthID, "?timeout=1"))
	if took := time.Since(began); took < time.Second {
		t.Errorf("timeout=1 answered after %v", took)
	}
}

// TestOAuthWaitOutlivesServerTimeouts: a long poll longer than the
// server's ReadTimeout and WriteTimeout still delivers its answer.
// It runs in a synctest bubble, on an in-memory network whose connections
// keep the server's deadlines in fake time.
func TestOAuthWaitOutlivesServerTimeouts(t *testing.T) {
	synctest.Test(t, oAuthWaitOutlivesServerTimeouts)
}

func oAuthWaitOutlivesServerTimeouts(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true, http: func(srv *http.Server) {
		srv.ReadTimeout, srv.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	}})
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "u", "provider": "fake", "scopes": []}`)
	diff(t, "a 1 s wait behind 0.3 s server timeouts", waitAnswer{Status: "timeout"}, s.wait(t, keyA, a.AuthID, "?timeout=1"))

	// And one that completes: the callback lands while the poll waits.
	done := make(chan waitAnswer, 1)
	go func() {
		r := s.as(keyA, "GET", "/v2/auth/wait/"+a.AuthID+"?timeout=5", "")
		var w waitAnswer
		_ = json.Unmarshal(r.body, &w)
		done <- w
	}()
	time.Sleep(time.Second) // fake time: the poll waits past the server's timeouts
	checkPage(t, "callback", s.browse(a.URL), 200, "close this window")
	token := s.prov.LastAccessToken()
	diff(t, "the long poll's answer", waitAnswer{Status: "completed", Token: &token}, <-done)
}

// TestOAuthWaitClientGone: a long poll ends when its client goes away,
// long before its timeout.
// It runs in a synctest bubble: the client goes away once the poll waits,
// and the handler must have returned once everything is idle again.
func TestOAuthWaitClientGone(t *testing.T) { synctest.Test(t, oAuthWaitClientGone) }

func oAuthWaitClientGone(t *testing.T) {
	s := newServerWith(t, serverSetup{inMemory: true})
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "u", "provider": "fake", "scopes": []}`)
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/v2/auth/wait/"+a.AuthID+"?timeout=300", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", keyA)
	go func() {
		synctest.Wait() // the poll waits
		cancel()
	}()
	if resp, err := s.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the wait answered %s before the client went away", resp.Status)
	}
	// The handler returns, and logs its request, once it notices: before
	// the bubble is idle again, not at the timeout.
	synctest.Wait()
	record := `"path":"/v2/auth/wait/` + a.AuthID + `"`
	if !strings.Contains(s.logs(), record) {
		t.Fatalf("the long poll still runs after its client went away:\n%s", s.logs())
	}
}

// TestOAuthDisabled: without Options.OAuth, /v2/auth/* answers 404 with a
// detail that says so, and the OpenAPI document lists no /v2/auth path.
func TestOAuthDisabled(t *testing.T) {
	s := newServerWith(t, serverSetup{noOAuth: true})
	for _, c := range []struct{ method, path string }{
		{"POST", "/v2/auth/authenticate"}, {"GET", "/v2/auth/providers"}, {"GET", "/v2/auth/wait/x"}, {"GET", "/v2/auth/callback/x?state=s"},
	} {
		r := s.as(keyA, c.method, c.path, "")
		if r.status != 404 || detail(t, r) != "The OAuth helpers (/v2/auth/*) are not enabled on this server." {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	if body := string(s.do("GET", "/openapi.json", "").body); strings.Contains(body, "/v2/auth") {
		t.Error("the OpenAPI document lists /v2/auth paths that are not served")
	}
	if r := s.as(keyA, "GET", "/v2/deployments", ""); r.status != 200 {
		t.Errorf("the rest of the API: %d", r.status)
	}
}

// TestOAuthOpenAPI: the document describes the OAuth routes as served: the
// callback public and answering HTML, provider_id and auth_id plain
// strings, wait's timeout query, and no client_secret in the provider's
// schema.
func TestOAuthOpenAPI(t *testing.T) {
	s := newServer(t, nil)
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	cb := string(doc.Paths["/v2/auth/callback/{provider_id}"]["get"])
	for _, want := range []string{`"security":[]`, `"text/html"`, `"name":"state"`, `"502"`} {
		if !strings.Contains(cb, want) {
			t.Errorf("the callback's operation lacks %s: %s", want, cb)
		}
	}
	if w := string(doc.Paths["/v2/auth/wait/{auth_id}"]["get"]); !strings.Contains(w, `"name":"timeout"`) || strings.Contains(w, "uuid") ||
		strings.Contains(w, `"404"`) {
		t.Errorf("the wait operation: %s", w)
	}
	if _, ok := doc.Components.Schemas["OAuthProvider"].Properties["client_secret"]; ok {
		t.Error("the provider schema shows client_secret")
	}
	if _, ok := doc.Components.Schemas["OAuthProviderCreate"].Properties["client_secret"]; !ok {
		t.Error("the provider creation schema lacks client_secret")
	}
	diff(t, "AuthWaitResponse members", []string{"status", "token"}, keysOf(doc.Components.Schemas["AuthWaitResponse"].Properties))
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
