package oauthflow_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/oauthflow"
)

// strictReplica is a second Service over e's store with the default egress
// policy: it trusts no host, as a server whose operator has not allowed
// the fake provider (which the first Service, e.svc, allows so that
// providers can be registered at it).
func strictReplica(t *testing.T, e *env) *oauthflow.Service {
	t.Helper()
	svc, err := oauthflow.New(e.st, &oauthflow.Options{SecretKey: testKey, PublicURL: testPublicURL, Clock: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// A token endpoint on loopback is not reached on a tenant's behalf unless
// the operator allows its host: the code exchange fails with a refusal
// naming the address, the provider sees no request, and the flow fails.
func TestExchangeRefusedWithoutAllowance(t *testing.T) {
	for name, tokenURL := range map[string]func(e *env) string{
		// http: refused before any connection.
		"http 127.0.0.1": func(e *env) string { return e.prov.TokenURL() },
		// https to a name: resolved, then refused when dialling 127.0.0.1
		// (or ::1).
		"https localhost": func(e *env) string {
			_, port, _ := net.SplitHostPort(e.prov.Host())
			return "https://localhost:" + port + "/token"
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			_, port, _ := net.SplitHostPort(e.prov.Host())
			// A Service that may register both URLs.
			allowingBoth, err := oauthflow.New(e.st, &oauthflow.Options{SecretKey: testKey, PublicURL: testPublicURL,
				Clock: e.clock.Now, Egress: allowing(t, e.prov.Host(), "localhost:"+port)})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			in := oauthflow.NewProvider{ProviderID: "fake", Name: "Fake", ClientID: e.prov.ClientID(),
				ClientSecret: oauthflow.Secret(e.prov.ClientSecret()), AuthURL: e.prov.AuthURL(), TokenURL: tokenURL(e), UsesPKCE: true}
			if _, err := allowingBoth.CreateProvider(ctx, tenantA, in); err != nil {
				t.Fatal(err)
			}
			strict := strictReplica(t, e)
			res, err := strict.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
			if err != nil || res.Status != oauthflow.StatusPending {
				t.Fatalf("Authenticate = %+v, %v; want pending (the browser, not the server, visits auth_url)", res, err)
			}
			err = strict.Callback(ctx, visit(t, res.URL))
			var re *egress.RefusedError
			if !errors.Is(err, oauthflow.ErrExchangeFailed) || !errors.Is(err, egress.ErrRefused) || !errors.As(err, &re) ||
				!errors.Is(err, oauthflow.ErrTokenEndpointRefused) {
				t.Fatalf("Callback = %v, want ErrExchangeFailed, ErrTokenEndpointRefused and an egress refusal", err)
			}
			if re.Scheme == "" && !re.Addr.IsLoopback() {
				t.Errorf("refusal %v names neither the scheme nor a loopback address", re)
			}
			for _, s := range e.prov.Secrets() {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error %q holds a secret", err)
				}
			}
			if n := e.prov.Counts().TokenRequests; n != 0 {
				t.Errorf("the provider's token endpoint got %d requests, want none", n)
			}
			if w, err := strict.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusNotFound {
				t.Errorf("Wait = %+v, %v; want not_found (the flow failed)", w, err)
			}
		})
	}
}

// A stored token is not refreshed at a token endpoint the policy refuses:
// Authenticate starts a new flow instead, and the provider sees nothing.
func TestRefreshRefusedWithoutAllowance(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	e.login(t, tenantA, "fake", "alice", "repo")
	before := e.prov.Counts().TokenRequests
	e.clock.Advance(2 * time.Hour) // the access token expired; the refresh token is kept
	res, err := strictReplica(t, e).Authenticate(context.Background(), tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
	if err != nil || res.Status != oauthflow.StatusPending {
		t.Errorf("Authenticate with an expired token = %+v, %v; want pending", res, err)
	}
	if n := e.prov.Counts().TokenRequests; n != before {
		t.Errorf("the provider's token endpoint got %d more requests, want none", n-before)
	}
	// The allowing Service refreshes it.
	if res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}}); res.Status != oauthflow.StatusCompleted {
		t.Errorf("Authenticate through the allowing Service = %+v, want completed (refreshed)", res)
	}
	if c := e.prov.Counts(); c.Refreshes != 1 {
		t.Errorf("%d refreshes, want 1", c.Refreshes)
	}
}

// By default (no Egress, no HTTPClient) a Service trusts no host: the fake
// provider on loopback cannot even be registered.
func TestDefaultEgressPolicyIsStrict(t *testing.T) {
	e := newEnv(t, nil)
	strict := strictReplica(t, e)
	_, err := strict.CreateProvider(context.Background(), tenantA, oauthflow.NewProvider{ProviderID: "fake", Name: "Fake",
		ClientID: "c", AuthURL: e.prov.AuthURL(), TokenURL: e.prov.TokenURL()})
	want := []problem{{"body.auth_url", "url_scheme"}, {"body.token_url", "url_scheme"}}
	if got := problemsOf(t, err); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("problems %v, want %v", got, want)
	}
}
