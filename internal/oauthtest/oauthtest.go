package oauthtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Provider is a fake OAuth 2.0 authorization server. Make one with New.
type Provider struct {
	srv      *httptest.Server
	client   *http.Client // nil: srv.Client()
	clientID string

	mu             sync.Mutex
	clientSecret   string
	expiresIn      int    // seconds; 0 omits expires_in
	noRefresh      bool   // issue no refresh tokens
	scope          string // "scope" in token responses; "" omits it
	deny, denyDesc string
	codes          map[string]grant // live authorization codes
	refreshTokens  map[string]grant // live refresh tokens
	secrets        []string         // every secret seen, in order
	accessTokens   []string         // in the order issued
	counts         Counts
}

// grant is what an authorization code or a refresh token stands for.
type grant struct {
	challenge, redirectURI string
}

// Counts is how many token requests a Provider was asked for.
type Counts struct {
	// TokenRequests counts every request to the token endpoint, whatever
	// it carries.
	TokenRequests int
	// Exchanges counts authorization_code grants with valid client
	// credentials, accepted or not.
	Exchanges int
	// Refreshes counts refresh_token grants with valid client credentials,
	// accepted or not.
	Refreshes int
	// PKCEVerified counts exchanges whose code_verifier matched the code's
	// S256 challenge.
	PKCEVerified int
}

// New starts a Provider with a random client id and secret, which issues
// refresh tokens and access tokens that expire in 3600 seconds, and
// closes it when t ends.
func New(t testing.TB) *Provider {
	return start(t, nil, nil)
}

// NewOn is New serving on ln instead of a loopback port, for tests in a
// testing/synctest bubble (ln is then an internal/memnet listener); Client
// returns client, which must reach ln.
func NewOn(t testing.TB, ln net.Listener, client *http.Client) *Provider {
	return start(t, ln, client)
}

func start(t testing.TB, ln net.Listener, client *http.Client) *Provider {
	p := &Provider{
		client:        client,
		clientID:      "client-" + rand.Text(),
		clientSecret:  "secret-" + rand.Text(),
		expiresIn:     3600,
		codes:         map[string]grant{},
		refreshTokens: map[string]grant{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	if ln == nil {
		p.srv = httptest.NewServer(mux)
	} else {
		p.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
		p.srv.Start()
	}
	t.Cleanup(p.srv.Close)
	return p
}

// AuthURL is the authorization endpoint.
func (p *Provider) AuthURL() string { return p.srv.URL + "/authorize" }

// TokenURL is the token endpoint.
func (p *Provider) TokenURL() string { return p.srv.URL + "/token" }

// Host is the host:port of the provider's server (an IP literal on
// loopback), e.g. to allow it in an egress.Options.AllowHosts.
func (p *Provider) Host() string { return p.srv.Listener.Addr().String() }

// Client returns an HTTP client for the provider's server.
func (p *Provider) Client() *http.Client {
	if p.client != nil {
		return p.client
	}
	return p.srv.Client()
}

// Close shuts the server down before the test ends: the provider is
// unreachable from then on.
func (p *Provider) Close() { p.srv.Close() }

// ClientID is the client id the provider accepts.
func (p *Provider) ClientID() string { return p.clientID }

// ClientSecret is the client secret the provider accepts now.
func (p *Provider) ClientSecret() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clientSecret
}

// SetClientSecret rotates the client secret: from now on only secret is
// accepted. The old secret stays among Secrets.
func (p *Provider) SetClientSecret(secret string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.secrets = append(p.secrets, p.clientSecret)
	p.clientSecret = secret
}

// Deny makes /authorize redirect back with the error code (RFC 6749
// section 4.1.2.1) and, when description is not empty, that
// error_description, instead of a code. Deny("", "") grants again.
func (p *Provider) Deny(code, description string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deny, p.denyDesc = code, description
}

// SetExpiresIn sets expires_in, in seconds, of the token responses from
// now on; 0 leaves it out (a token without a known expiry).
func (p *Provider) SetExpiresIn(seconds int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expiresIn = seconds
}

// SetRefreshTokens sets whether token responses carry a refresh token (they
// do at first).
func (p *Provider) SetRefreshTokens(issue bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noRefresh = !issue
}

// SetScope sets the scope that token responses report as granted; "" (the
// default) leaves it out, which means the scope requested.
func (p *Provider) SetScope(scope string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scope = scope
}

// ForgetCodes makes every authorization code issued so far invalid, as if
// it had expired.
func (p *Provider) ForgetCodes() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.codes)
}

// ForgetRefreshTokens makes every refresh token issued so far invalid, as
// if the user had revoked the grant.
func (p *Provider) ForgetRefreshTokens() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.refreshTokens)
}

// Counts returns how many exchanges, refreshes and PKCE checks the
// provider has done so far.
func (p *Provider) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Secrets returns every secret the provider has handed out or received:
// its client secrets (the current one first), and every state, code, PKCE
// verifier, access token and refresh token it has seen.
func (p *Provider) Secrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{p.clientSecret}, p.secrets...)
}

// LastAccessToken is the access token issued last, or "" if none was.
func (p *Provider) LastAccessToken() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.accessTokens) == 0 {
		return ""
	}
	return p.accessTokens[len(p.accessTokens)-1]
}

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
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
		if p.denyDesc != "" {
			v.Set("error_description", p.denyDesc)
		}
	} else {
		code := "code-" + rand.Text()
		p.codes[code] = grant{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri")}
		p.secrets = append(p.secrets, code)
		v.Set("code", code)
	}
	p.mu.Unlock()
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.counts.TokenRequests++
	p.mu.Unlock()
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
	p.mu.Lock()
	defer p.mu.Unlock()
	if id != p.clientID || secret != p.clientSecret {
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	var g grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		p.counts.Exchanges++
		code := r.PostForm.Get("code")
		g, ok = p.codes[code]
		delete(p.codes, code) // single use, even when refused
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
			p.counts.PKCEVerified++
		}
	case "refresh_token":
		p.counts.Refreshes++
		rt := r.PostForm.Get("refresh_token")
		g, ok = p.refreshTokens[rt]
		delete(p.refreshTokens, rt) // rotated
		if !ok {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	at := "at-" + rand.Text()
	p.secrets = append(p.secrets, at)
	p.accessTokens = append(p.accessTokens, at)
	resp := map[string]any{"access_token": at, "token_type": "Bearer"}
	if p.expiresIn > 0 {
		resp["expires_in"] = p.expiresIn
	}
	if !p.noRefresh {
		rt := "rt-" + rand.Text()
		p.refreshTokens[rt] = g
		p.secrets = append(p.secrets, rt)
		resp["refresh_token"] = rt
	}
	if p.scope != "" {
		resp["scope"] = p.scope
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// tokenError writes an RFC 6749 section 5.2 error response.
func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}
