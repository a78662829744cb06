package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

// Fuzz targets of the OAuth routes' decoders, with the same checks as the
// others (fuzzTarget.check): no panic, no 5xx, every rejection a
// well-formed JSON error. Their seed corpora run in every `go test`.

// newOAuthFuzzTarget is a handler with the OAuth helpers, where tenant A
// has a provider "fake" (never contacted: nothing here reaches a token
// endpoint).
func newOAuthFuzzTarget(t testing.TB) *fuzzTarget {
	st := storemem.New()
	svc, err := oauthflow.New(st, &oauthflow.Options{SecretKey: bytes.Repeat([]byte{7}, 32), PublicURL: "http://127.0.0.1:8124",
		Egress: egressAllowing(t, "127.0.0.1:1")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.CreateProvider(context.Background(), tenantA, oauthflow.NewProvider{ProviderID: "fake", Name: "Fake",
		ClientID: "c", ClientSecret: "s", AuthURL: "http://127.0.0.1:1/authorize", TokenURL: "http://127.0.0.1:1/token", UsesPKCE: true})
	if err != nil {
		t.Fatal(err)
	}
	return &fuzzTarget{h: httphandler.New(controlplane.New(st, nil),
		&httphandler.Options{Authenticator: keyTable(t), MaxBodyBytes: 64 << 10, OAuth: svc})}
}

var oauthBodySeeds = []string{
	``, `null`, `{}`, `[]`, `"x"`, `{"user_id": `, "{\"user_id\": \"\xff\"}", `{"user_id": "a", "user_id": "b"}`,
	`{"user_id": "u", "provider": "fake", "scopes": ["repo", "read:user"], "agent_id": "a"}`,
	`{"user_id": "u", "provider": "fake", "scopes": "repo"}`, `{"user_id": "u", "provider": "fake", "scopes": ["a b", "", 1]}`,
	`{"user_id": "u", "provider": "nope"}`, `{"user_id": 1, "provider": null, "use_agent_builder_public_oauth": true}`,
	`{"USER_ID": "u", "Provider": "fake"}`, `{"user_id": "` + strings.Repeat("u", 1000) + `", "provider": "fake"}`,
	`{"provider_id": "p", "name": "P", "client_id": "c", "client_secret": "s", "auth_url": "https://a.example/auth",
	  "token_url": "https://a.example/token", "uses_pkce": true, "code_challenge_method": "S256", "provider_type": "github"}`,
	`{"provider_id": "-bad", "name": "", "client_id": "c", "auth_url": "http://example.com/a", "token_url": "https://u:p@x/t#f",
	  "uses_pkce": false, "code_challenge_method": "plain"}`,
	`{"provider_id": "fake", "client_secret": ""}`, `{"uses_pkce": "yes", "auth_url": 5}`, `{"token_url": "http://[::1]:9/t"}`,
}

func fuzzOAuthBody(f *testing.F, method, path string) {
	for _, s := range oauthBodySeeds {
		f.Add([]byte(s))
	}
	ft := newOAuthFuzzTarget(f)
	f.Fuzz(func(t *testing.T, body []byte) { ft.check(t, method, path, "", body) })
}

func FuzzAuthenticateBody(f *testing.F) { fuzzOAuthBody(f, "POST", "/v2/auth/authenticate") }

func FuzzCreateProviderBody(f *testing.F) { fuzzOAuthBody(f, "POST", "/v2/auth/providers") }

func FuzzUpdateProviderBody(f *testing.F) { fuzzOAuthBody(f, "PATCH", "/v2/auth/providers/fake") }

// FuzzWaitQuery: any query of a wait on an unknown flow answers at once,
// 200 not_found or a 422 at ["query", "timeout"] (a long poll could only
// block on an open flow).
func FuzzWaitQuery(f *testing.F) {
	for _, s := range []string{"", "timeout=0", "timeout=30", "timeout=300", "timeout=301", "timeout=-1", "timeout=abc",
		"timeout=", "timeout=1.5", "timeout=9223372036854775807", "timeout=-9223372036854775808", "timeout=99999999999999999999",
		"timeout=1&timeout=2", "timeout=%zz", "a;b", "timeout=+5", "timeout= 7 "} {
		f.Add(s)
	}
	ft := newOAuthFuzzTarget(f)
	f.Fuzz(func(t *testing.T, q string) {
		ft.check(t, "GET", "/v2/auth/wait/no-such-flow", q, nil)
		req := httptest.NewRequest("GET", "/v2/auth/wait/no-such-flow", nil)
		req.URL.RawQuery = q
		req.Header.Set("X-Api-Key", keyA)
		w := httptest.NewRecorder()
		ft.h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			if w.Body.String() != `{"status":"not_found","token":null}`+"\n" {
				t.Fatalf("?%s: %s", q, w.Body)
			}
		case http.StatusUnprocessableEntity:
			var b struct {
				Detail []struct {
					Loc []any `json:"loc"`
				} `json:"detail"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &b)
			for _, p := range b.Detail {
				if len(p.Loc) > 2 || p.Loc[0] != "query" || len(p.Loc) == 2 && p.Loc[1] != "timeout" {
					t.Fatalf("?%s: loc %v", q, p.Loc)
				}
			}
		default:
			t.Fatalf("?%s: %d %s", q, w.Code, w.Body)
		}
	})
}

// FuzzCallbackQuery: whatever the provider (or anyone) sends the callback,
// the answer is an HTML page, never a 5xx.
func FuzzCallbackQuery(f *testing.F) {
	for _, s := range []string{"", "code=c&state=s", "state=", "error=access_denied&error_description=%3Cb%3Ex%3C%2Fb%3E&state=s",
		"code=c", "%zz", "state=s&state=t", "error=" + strings.Repeat("e", 5000)} {
		f.Add(s)
	}
	ft := newOAuthFuzzTarget(f)
	f.Fuzz(func(t *testing.T, q string) {
		req := httptest.NewRequest("GET", "/v2/auth/callback/fake", nil)
		req.URL.RawQuery = q
		w := httptest.NewRecorder()
		ft.h.ServeHTTP(w, req)
		if w.Code >= 500 || w.Code == http.StatusOK || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("?%s: %d %s %s", q, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	})
}
