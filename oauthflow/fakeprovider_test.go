package oauthflow_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// fakeProvider is an OAuth 2.0 authorization server on an httptest.Server:
// /authorize redirects back with a code (or an error), /token exchanges
// codes (checking the PKCE verifier against the challenge and the client
// credentials) and refresh tokens. It records every secret it hands out so
// that tests can look for them where they must not be.
type fakeProvider struct {
	srv          *httptest.Server
	clientID     string
	clientSecret string

	mu            sync.Mutex
	expiresIn     int              // seconds; 0 omits expires_in
	noRefresh     bool             // issue no refresh tokens
	scope         string           // "scope" in token responses; "" omits it
	deny          string           // /authorize redirects with this error
	codes         map[string]grant // live authorization codes
	refreshTokens map[string]grant // live refresh tokens
	issued        []string         // every code, token and verifier seen
	pkceVerified  int              // exchanges whose verifier matched
	exchanges     int
	refreshes     int
}

type grant struct {
	challenge, redirectURI, scope string
}

func newFakeProvider(t testing.TB) *fakeProvider {
	p := &fakeProvider{
		clientID:      "client-" + rand.Text(),
		clientSecret:  "secret-" + rand.Text(),
		expiresIn:     3600,
		codes:         map[string]grant{},
		refreshTokens: map[string]grant{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakeProvider) authURL() string  { return p.srv.URL + "/authorize" }
func (p *fakeProvider) tokenURL() string { return p.srv.URL + "/token" }

func (p *fakeProvider) set(f func(p *fakeProvider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// secrets returns everything secret the provider handed out or received.
func (p *fakeProvider) secrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{p.clientSecret}, p.issued...)
}

func (p *fakeProvider) counts() (exchanges, refreshes, pkceVerified int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exchanges, p.refreshes, p.pkceVerified
}

func (p *fakeProvider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("redirect_uri") == "" || q.Get("response_type") != "code" || q.Get("client_id") != p.clientID || q.Get("state") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	if q.Has("code_challenge") && q.Get("code_challenge_method") != "S256" {
		http.Error(w, "only S256", http.StatusBadRequest)
		return
	}
	back := url.Values{"state": {q.Get("state")}}
	p.mu.Lock()
	if p.deny != "" {
		back.Set("error", p.deny)
	} else {
		code := "code-" + rand.Text()
		p.codes[code] = grant{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri"), scope: q.Get("scope")}
		p.issued = append(p.issued, code)
		back.Set("code", code)
	}
	p.mu.Unlock()
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (p *fakeProvider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.clientID || secret != p.clientSecret {
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var g grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		p.exchanges++
		code := r.PostForm.Get("code")
		var ok bool
		g, ok = p.codes[code]
		delete(p.codes, code) // single use
		if !ok || r.PostForm.Get("redirect_uri") != g.redirectURI {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		if g.challenge != "" {
			v := r.PostForm.Get("code_verifier")
			sum := sha256.Sum256([]byte(v))
			if v == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
				tokenError(w, http.StatusBadRequest, "invalid_grant")
				return
			}
			p.issued = append(p.issued, v)
			p.pkceVerified++
		}
	case "refresh_token":
		p.refreshes++
		rt := r.PostForm.Get("refresh_token")
		var ok bool
		g, ok = p.refreshTokens[rt]
		if !ok {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		delete(p.refreshTokens, rt) // rotated
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	resp := map[string]any{"access_token": "at-" + rand.Text(), "token_type": "Bearer"}
	p.issued = append(p.issued, resp["access_token"].(string))
	if p.expiresIn > 0 {
		resp["expires_in"] = p.expiresIn
	}
	if !p.noRefresh {
		rt := "rt-" + rand.Text()
		p.refreshTokens[rt] = g
		p.issued = append(p.issued, rt)
		resp["refresh_token"] = rt
	}
	if p.scope != "" {
		resp["scope"] = p.scope
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// visit plays the browser: it opens the authorization URL and returns the
// callback the provider redirects to, without following it.
func visit(t testing.TB, authURL string) oauthflow.CallbackRequest {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatalf("visit authorization URL: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorization URL answered %s, want 302", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = testPublicURL + oauthflow.CallbackPath
	base := loc.Scheme + "://" + loc.Host + loc.Path
	if len(base) <= len(prefix) || base[:len(prefix)] != prefix {
		t.Fatalf("provider redirected to %s, want a callback under %s", base, prefix)
	}
	q := loc.Query()
	return oauthflow.CallbackRequest{
		ProviderID:       base[len(prefix):],
		Code:             q.Get("code"),
		State:            q.Get("state"),
		Error:            q.Get("error"),
		ErrorDescription: q.Get("error_description"),
	}
}

const testPublicURL = "https://deploy.example.com"

var testKey = bytes.Repeat([]byte{7}, 32)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a Service over a fresh storemem, with a fake clock, a fake
// provider and a captured debug-level JSON log.
type env struct {
	svc   *oauthflow.Service
	st    store.Store
	clock *fakeClock
	prov  *fakeProvider
	logs  *syncBuffer
}

func newEnv(t testing.TB, tweak func(*oauthflow.Options)) *env {
	t.Helper()
	return newEnvOver(t, storemem.New(), tweak)
}

// newEnvOver is newEnv over st, which it closes at the end of the test.
func newEnvOver(t testing.TB, st store.Store, tweak func(*oauthflow.Options)) *env {
	t.Helper()
	e := &env{st: st, clock: newFakeClock(), prov: newFakeProvider(t), logs: &syncBuffer{}}
	t.Cleanup(func() { e.st.Close() })
	opts := &oauthflow.Options{
		SecretKey:    testKey,
		PublicURL:    testPublicURL,
		HTTPClient:   e.prov.srv.Client(),
		Clock:        e.clock.Now,
		PollInterval: time.Hour, // wake-ups must come from the notifier
		Logger:       slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(opts)
	}
	svc, err := oauthflow.New(e.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// addProvider registers the fake provider as providerID in tenant.
func (e *env) addProvider(t testing.TB, tenant, providerID string, pkce bool) oauthflow.Provider {
	t.Helper()
	p, err := e.svc.CreateProvider(context.Background(), tenant, oauthflow.NewProvider{
		ProviderID:   providerID,
		Name:         "Fake " + providerID,
		ClientID:     e.prov.clientID,
		ClientSecret: oauthflow.Secret(e.prov.clientSecret),
		AuthURL:      e.prov.authURL(),
		TokenURL:     e.prov.tokenURL(),
		UsesPKCE:     pkce,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// login runs a whole flow for user and returns the token it yields.
func (e *env) login(t testing.TB, tenant, providerID, user string, scopes ...string) string {
	t.Helper()
	ctx := context.Background()
	res, err := e.svc.Authenticate(ctx, tenant, oauthflow.AuthRequest{UserID: user, Provider: providerID, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != oauthflow.StatusPending {
		t.Fatalf("Authenticate: status %q, want pending", res.Status)
	}
	if err := e.svc.Callback(ctx, visit(t, res.URL)); err != nil {
		t.Fatalf("Callback: %v", err)
	}
	w, err := e.svc.Wait(ctx, tenant, res.AuthID, 0)
	if err != nil || w.Status != oauthflow.StatusCompleted || w.Token == "" {
		t.Fatalf("Wait after Callback = %v, %v; want completed with a token", w.Status, err)
	}
	return string(w.Token)
}

func queryParam(t testing.TB, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(name)
}
