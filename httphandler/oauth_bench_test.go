package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/internal/oauthtest"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

// BenchmarkAuthenticateStoredTokenInProcess measures what the HTTP layer
// adds to POST /v2/auth/authenticate when a stored token answers it:
// ServeHTTP on a recorder against oauthflow's Authenticate plus
// json.Marshal of its result (the work no HTTP layer can avoid).
func BenchmarkAuthenticateStoredTokenInProcess(b *testing.B) {
	prov := oauthtest.New(b)
	svc, err := oauthflow.New(storemem.New(), &oauthflow.Options{SecretKey: bytes.Repeat([]byte{7}, 32),
		PublicURL: "http://127.0.0.1:8124", Egress: egressAllowing(b, prov.Host())})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := svc.CreateProvider(ctx, tenantA, oauthflow.NewProvider{ProviderID: "fake", Name: "Fake", ClientID: prov.ClientID(),
		ClientSecret: oauthflow.Secret(prov.ClientSecret()), AuthURL: prov.AuthURL(), TokenURL: prov.TokenURL(), UsesPKCE: true}); err != nil {
		b.Fatal(err)
	}
	h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{Authenticator: keyTable(b), OAuth: svc})
	req := oauthflow.AuthRequest{UserID: "user-1", Provider: "fake", Scopes: []string{"read"}}
	res, err := svc.Authenticate(ctx, tenantA, req)
	if err != nil {
		b.Fatal(err)
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(res.URL)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", cb.RequestURI(), nil))
	if w.Code != 200 {
		b.Fatalf("callback: %d %s", w.Code, w.Body)
	}

	body := `{"user_id": "user-1", "provider": "fake", "scopes": ["read"]}`
	benchcmp.CompareNamed(b,
		"oauthflow+json", func(b *testing.B) {
			for b.Loop() {
				got, err := svc.Authenticate(ctx, tenantA, req)
				if err != nil || got.Status != oauthflow.StatusCompleted {
					b.Fatal(got.Status, err)
				}
				if _, err := json.Marshal(got); err != nil {
					b.Fatal(err)
				}
			}
		},
		"httphandler", func(b *testing.B) {
			rd := strings.NewReader(body)
			r := httptest.NewRequest("POST", "/v2/auth/authenticate", io.NopCloser(rd))
			r.Header.Set("X-Api-Key", keyA)
			for b.Loop() {
				rd.Reset(body) // one request, its body rewound: parsing requests is not the handler's cost
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body)
				}
			}
		})
}
