package httphandler_test

import (
	"encoding/json"
	"net/http"
	"strings"
)

// providerBody is the JSON of a provider creation for the fake provider.
func (s *server) providerBody(providerID string, pkce bool) string {
	b, _ := json.Marshal(map[string]any{
		"provider_id": providerID, "name": "Fake " + providerID,
		"client_id": s.prov.ClientID(), "client_secret": s.prov.ClientSecret(),
		"auth_url": s.prov.AuthURL(), "token_url": s.prov.TokenURL(),
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
	client := &http.Client{Transport: s.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
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
	path, ok := strings.CutPrefix(rawURL, s.url)
	if !ok {
		s.t.Fatalf("open %s: not a URL of the server under test", rawURL)
	}
	return s.do("GET", path, "")
}

// browse is the whole browser leg: the provider, then the callback.
func (s *server) browse(authURL string) reply {
	s.t.Helper()
	return s.open(s.redirect(authURL))
}
