package httphandler_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeProvider is an OAuth 2.0 authorization server on its own
// httptest.Server. GET /authorize redirects the browser back to the
// redirect_uri with a code (or with the error set in deny); POST /token
// exchanges a code, checking the client credentials, the redirect_uri and
// the PKCE verifier against the challenge, and trades refresh tokens. It
// keeps every secret it hands out or receives, so that tests can look for
// them where they must not be.
type fakeProvider struct {
	srv          *httptest.Server
	clientID     string
	clientSecret string

	mu            sync.Mutex
	expiresIn     int    // seconds; 0 omits expires_in
	deny          string // /authorize answers with this error
	denyDesc      string // and this error_description
	codes         map[string]fakeGrant
	refreshTokens map[string]fakeGrant
	secrets       []string // codes, tokens, verifiers, states
	accessTokens  []string // in the order issued
	exchanges     int
	refreshes     int
	pkceChecked   int // exchanges whose verifier matched the challenge
}

type fakeGrant struct {
	challenge, redirectURI string
}

func newFakeProvider(t testing.TB) *fakeProvider {
	p := &fakeProvider{
		clientID:      "client-" + rand.Text(),
		clientSecret:  "secret-" + rand.Text(),
		expiresIn:     3600,
		codes:         map[string]fakeGrant{},
		refreshTokens: map[string]fakeGrant{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakeProvider) set(f func(*fakeProvider)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

// allSecrets is the client secret and everything secret the provider saw.
func (p *fakeProvider) allSecrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{p.clientSecret}, p.secrets...)
}

func (p *fakeProvider) lastAccessToken() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.accessTokens) == 0 {
		return ""
	}
	return p.accessTokens[len(p.accessTokens)-1]
}

func (p *fakeProvider) counts() (exchanges, refreshes, pkceChecked int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exchanges, p.refreshes, p.pkceChecked
}

func (p *fakeProvider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("redirect_uri") == "" || q.Get("response_type") != "code" || q.Get("client_id") != p.clientID || q.Get("state") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	if q.Has("code_challenge") && q.Get("code_challenge_method") != "S256" {
		http.Error(w, "only S256", http.StatusBadRequest)
		return
	}
	v := url.Values{"state": {q.Get("state")}}
	p.mu.Lock()
	p.secrets = append(p.secrets, q.Get("state"))
	if p.deny != "" {
		v.Set("error", p.deny)
		v.Set("error_description", p.denyDesc)
	} else {
		code := "code-" + rand.Text()
		p.codes[code] = fakeGrant{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri")}
		p.secrets = append(p.secrets, code)
		v.Set("code", code)
	}
	p.mu.Unlock()
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
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
	var g fakeGrant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		p.exchanges++
		code := r.PostForm.Get("code")
		g, ok = p.codes[code]
		delete(p.codes, code)
		if !ok || r.PostForm.Get("redirect_uri") != g.redirectURI {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		if g.challenge != "" {
			verifier := r.PostForm.Get("code_verifier")
			sum := sha256.Sum256([]byte(verifier))
			if verifier == "" || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
				tokenError(w, http.StatusBadRequest, "invalid_grant")
				return
			}
			p.secrets = append(p.secrets, verifier)
			p.pkceChecked++
		}
	case "refresh_token":
		p.refreshes++
		rt := r.PostForm.Get("refresh_token")
		g, ok = p.refreshTokens[rt]
		delete(p.refreshTokens, rt)
		if !ok {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	at, rt := "at-"+rand.Text(), "rt-"+rand.Text()
	p.refreshTokens[rt] = g
	p.secrets = append(p.secrets, at, rt)
	p.accessTokens = append(p.accessTokens, at)
	resp := map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt}
	if p.expiresIn > 0 {
		resp["expires_in"] = p.expiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// fakeClock is the OAuth service's settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC)}
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

// providerBody is the JSON of a provider creation for the fake provider.
func (s *server) providerBody(providerID string, pkce bool) string {
	b, _ := json.Marshal(map[string]any{
		"provider_id": providerID, "name": "Fake " + providerID,
		"client_id": s.prov.clientID, "client_secret": s.prov.clientSecret,
		"auth_url": s.prov.srv.URL + "/authorize", "token_url": s.prov.srv.URL + "/token",
		"uses_pkce": pkce,
	})
	return string(b)
}

// authAnswer is the answer of POST /v2/auth/authenticate.
type authAnswer struct {
	Status string  `json:"status"`
	URL    string  `json:"url"`
	AuthID string  `json:"auth_id"`
	Token  *string `json:"token"`
}

// redirect plays the user's browser at the provider: it opens the
// authorization URL and returns where the provider sends the browser back
// to (the callback URL, with code and state), without following it.
func (s *server) redirect(authURL string) string {
	s.t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authURL)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, s.url+"/v2/auth/callback/") {
		s.t.Fatalf("the provider answered %d to %s, redirecting to %q", resp.StatusCode, loc, authURL)
	}
	return loc
}

// open is the browser landing on a URL of ours: a GET without credentials.
func (s *server) open(rawURL string) reply {
	s.t.Helper()
	resp, err := http.Get(rawURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// browse is the whole browser leg: the provider, then the callback.
func (s *server) browse(authURL string) reply {
	s.t.Helper()
	return s.open(s.redirect(authURL))
}
