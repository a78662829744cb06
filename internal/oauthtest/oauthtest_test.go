package oauthtest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"

	"github.com/deployplane/deployplane/internal/oauthtest"
)

const redirectURI = "https://app.example.com/callback"

func config(p *oauthtest.Provider, style oauth2.AuthStyle) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     p.ClientID(),
		ClientSecret: p.ClientSecret(),
		Endpoint:     oauth2.Endpoint{AuthURL: p.AuthURL(), TokenURL: p.TokenURL(), AuthStyle: style},
		RedirectURL:  redirectURI,
		Scopes:       []string{"repo"},
	}
}

// ctxFor makes x/oauth2 talk to p through p's client.
func ctxFor(p *oauthtest.Provider) context.Context {
	return context.WithValue(context.Background(), oauth2.HTTPClient, p.Client())
}

// authorize plays the browser: it opens the authorization URL and returns
// the query of the redirect back to redirectURI, without following it.
func authorize(t *testing.T, p *oauthtest.Provider, authURL string) url.Values {
	t.Helper()
	client := p.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize answered %s, Location %q (%v); want a 302", resp.Status, resp.Header.Get("Location"), err)
	}
	if base := loc.Scheme + "://" + loc.Host + loc.Path; base != redirectURI {
		t.Fatalf("redirected to %s, want %s", base, redirectURI)
	}
	return loc.Query()
}

// errorCode is the RFC 6749 error code of a failed token request, or "".
func errorCode(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func TestFlow(t *testing.T) {
	for name, style := range map[string]oauth2.AuthStyle{"basic": oauth2.AuthStyleInHeader, "form": oauth2.AuthStyleInParams} {
		t.Run(name, func(t *testing.T) {
			p := oauthtest.New(t)
			cfg, ctx := config(p, style), ctxFor(p)
			verifier := oauth2.GenerateVerifier()
			q := authorize(t, p, cfg.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier)))
			if q.Get("state") != "state-1" || q.Get("code") == "" || q.Has("error") {
				t.Fatalf("redirect query %v, want state-1 and a code", q)
			}
			tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			if tok.AccessToken == "" || tok.RefreshToken == "" || tok.Expiry.IsZero() || tok.Extra("scope") != nil {
				t.Errorf("token %+v, want an access token, a refresh token, an expiry and no scope", tok)
			}
			if got := p.LastAccessToken(); got != tok.AccessToken {
				t.Errorf("LastAccessToken = %q, want %q", got, tok.AccessToken)
			}
			if diff := cmp.Diff(oauthtest.Counts{TokenRequests: 1, Exchanges: 1, PKCEVerified: 1}, p.Counts()); diff != "" {
				t.Errorf("Counts (-want +got):\n%s", diff)
			}
			secrets := p.Secrets()
			for _, s := range []string{cfg.ClientSecret, "state-1", q.Get("code"), verifier, tok.AccessToken, tok.RefreshToken} {
				if !slices.Contains(secrets, s) {
					t.Errorf("Secrets() %q lacks %q", secrets, s)
				}
			}
		})
	}
}

func TestPKCEMismatchRefused(t *testing.T) {
	p := oauthtest.New(t)
	cfg, ctx := config(p, oauth2.AuthStyleInHeader), ctxFor(p)
	q := authorize(t, p, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	_, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier()))
	if got := errorCode(err); got != "invalid_grant" {
		t.Errorf("exchange with another verifier: %v, want invalid_grant", err)
	}
	q = authorize(t, p, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())))
	if _, err := cfg.Exchange(ctx, q.Get("code")); errorCode(err) != "invalid_grant" {
		t.Errorf("exchange without a verifier: %v, want invalid_grant", err)
	}
	if diff := cmp.Diff(oauthtest.Counts{TokenRequests: 2, Exchanges: 2}, p.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	if p.LastAccessToken() != "" {
		t.Errorf("a token was issued: %q", p.LastAccessToken())
	}
}

func TestCodeSingleUse(t *testing.T) {
	p := oauthtest.New(t)
	cfg, ctx := config(p, oauth2.AuthStyleInParams), ctxFor(p)
	code := authorize(t, p, cfg.AuthCodeURL("s")).Get("code")
	if _, err := cfg.Exchange(ctx, code); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Exchange(ctx, code); errorCode(err) != "invalid_grant" {
		t.Errorf("second exchange of one code: %v, want invalid_grant", err)
	}
	other := *cfg
	other.RedirectURL = "https://app.example.com/elsewhere"
	code = authorize(t, p, cfg.AuthCodeURL("s")).Get("code")
	if _, err := other.Exchange(ctx, code); errorCode(err) != "invalid_grant" {
		t.Errorf("exchange with another redirect_uri: %v, want invalid_grant", err)
	}
	code = authorize(t, p, cfg.AuthCodeURL("s")).Get("code")
	p.ForgetCodes()
	if _, err := cfg.Exchange(ctx, code); errorCode(err) != "invalid_grant" {
		t.Errorf("exchange after ForgetCodes: %v, want invalid_grant", err)
	}
}

// refresh trades rt for a new token.
func refresh(ctx context.Context, cfg *oauth2.Config, rt string) (*oauth2.Token, error) {
	return cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rt, Expiry: time.Unix(1, 0)}).Token()
}

func TestRefreshRotation(t *testing.T) {
	p := oauthtest.New(t)
	cfg, ctx := config(p, oauth2.AuthStyleInHeader), ctxFor(p)
	first, err := cfg.Exchange(ctx, authorize(t, p, cfg.AuthCodeURL("s")).Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := refresh(ctx, cfg, first.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if second.AccessToken == first.AccessToken || second.RefreshToken == "" || second.RefreshToken == first.RefreshToken {
		t.Errorf("refresh gave %+v after %+v, want new tokens", second, first)
	}
	if p.LastAccessToken() != second.AccessToken {
		t.Errorf("LastAccessToken = %q, want %q", p.LastAccessToken(), second.AccessToken)
	}
	if _, err := refresh(ctx, cfg, first.RefreshToken); errorCode(err) != "invalid_grant" {
		t.Errorf("reusing a rotated refresh token: %v, want invalid_grant", err)
	}
	third, err := refresh(ctx, cfg, second.RefreshToken)
	if err != nil {
		t.Fatalf("the rotated refresh token: %v", err)
	}
	p.ForgetRefreshTokens()
	if _, err := refresh(ctx, cfg, third.RefreshToken); errorCode(err) != "invalid_grant" {
		t.Errorf("refresh after ForgetRefreshTokens: %v, want invalid_grant", err)
	}
	if diff := cmp.Diff(oauthtest.Counts{TokenRequests: 5, Exchanges: 1, Refreshes: 4}, p.Counts()); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
}

func TestClientSecret(t *testing.T) {
	p := oauthtest.New(t)
	cfg, ctx := config(p, oauth2.AuthStyleInHeader), ctxFor(p)
	wrong := *cfg
	wrong.ClientSecret = "not-the-secret"
	if _, err := wrong.Exchange(ctx, authorize(t, p, cfg.AuthCodeURL("s")).Get("code")); errorCode(err) != "invalid_client" {
		t.Errorf("a wrong client secret: %v, want invalid_client", err)
	}
	old := p.ClientSecret()
	p.SetClientSecret("rotated-secret")
	if _, err := cfg.Exchange(ctx, authorize(t, p, cfg.AuthCodeURL("s")).Get("code")); errorCode(err) != "invalid_client" {
		t.Errorf("the old secret after SetClientSecret: %v, want invalid_client", err)
	}
	cfg.ClientSecret = p.ClientSecret()
	if _, err := cfg.Exchange(ctx, authorize(t, p, cfg.AuthCodeURL("s")).Get("code")); err != nil {
		t.Errorf("the new secret: %v", err)
	}
	if s := p.Secrets(); s[0] != "rotated-secret" || !slices.Contains(s, old) {
		t.Errorf("Secrets() = %q, want the new client secret first and the old one among them", s)
	}
	if diff := cmp.Diff(oauthtest.Counts{TokenRequests: 3, Exchanges: 1}, p.Counts()); diff != "" {
		t.Errorf("Counts (-want +got), refused clients counted only as requests:\n%s", diff)
	}
}

func TestKnobs(t *testing.T) {
	p := oauthtest.New(t)
	cfg, ctx := config(p, oauth2.AuthStyleInParams), ctxFor(p)

	p.Deny("access_denied", "no thanks")
	q := authorize(t, p, cfg.AuthCodeURL("s"))
	if diff := cmp.Diff(url.Values{"state": {"s"}, "error": {"access_denied"}, "error_description": {"no thanks"}}, q); diff != "" {
		t.Errorf("denied redirect (-want +got):\n%s", diff)
	}
	p.Deny("", "")

	p.SetExpiresIn(0)
	p.SetRefreshTokens(false)
	p.SetScope("repo read:user")
	tok, err := cfg.Exchange(ctx, authorize(t, p, cfg.AuthCodeURL("s")).Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Expiry.IsZero() || tok.RefreshToken != "" || tok.Extra("scope") != "repo read:user" {
		t.Errorf("token %+v (scope %v), want no expiry, no refresh token, scope %q", tok, tok.Extra("scope"), "repo read:user")
	}
}

func TestBadAuthorizationRequest(t *testing.T) {
	p := oauthtest.New(t)
	cfg := config(p, oauth2.AuthStyleInParams)
	for name, u := range map[string]string{
		"plain PKCE":   cfg.AuthCodeURL("s", oauth2.SetAuthURLParam("code_challenge", "c"), oauth2.SetAuthURLParam("code_challenge_method", "plain")),
		"no state":     cfg.AuthCodeURL(""),
		"other client": (&oauth2.Config{ClientID: "other", Endpoint: cfg.Endpoint, RedirectURL: redirectURI}).AuthCodeURL("s"),
	} {
		resp, err := p.Client().Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s, want 400", name, resp.Status)
		}
	}
}
