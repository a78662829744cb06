package oauthflow_test

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/oauthflow"
)

// FuzzProviderAuthURL: an auth_url is accepted only if it is an absolute
// https URL without credentials or fragment whose host is not a non-public
// IP literal nor a localhost name (http and any address only for the host
// the egress policy allows, the fake provider's), and
// the authorization URL built from an accepted one keeps its scheme, host
// and path and carries the flow's parameters.
func FuzzProviderAuthURL(f *testing.F) {
	for _, s := range []string{
		"https://github.com/login/oauth/authorize",
		"https://login.example.com/authorize?tenant=x",
		"https://login.example.com/authorize?",
		"http://localhost:9000/a",
		"http://127.0.0.1/a",
		"http://[::1]:80/a",
		"http://[::ffff:127.0.0.1]/a",
		"https://127.0.0.1/a",
		"https://[::ffff:a00:1]/a",
		"https://sub.localhost./a",
		"http://example.com/a",
		"https://user:pw@example.com/",
		"https://example.com/#frag",
		"HTTPS://EXAMPLE.COM/%41",
		"//example.com/a",
		"https://[fe80::1%25eth0]/a",
		"",
	} {
		f.Add(s)
	}
	// Millions of runs: log nothing, and let each run's flow expire so
	// that the next Authenticate sweeps it away.
	e := newEnv(f, func(o *oauthflow.Options) { o.Logger = nil })
	f.Add(e.prov.AuthURL())
	f.Add("https://" + e.prov.Host() + "/a")
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, authURL string) {
		e.clock.Advance(oauthflow.DefaultFlowTTL)
		in := validProvider()
		in.ProviderID = "fuzz"
		in.AuthURL = authURL
		_, err := e.svc.CreateProvider(ctx, tenantA, in)
		if err != nil {
			var ve *apierr.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error %v is not a *ValidationError", err)
			}
			for _, p := range ve.Problems {
				if len(p.Loc) != 2 || p.Loc[0] != "body" || p.Loc[1] != "auth_url" {
					t.Fatalf("problem at %v, want [body auth_url]", p.Loc)
				}
			}
			return
		}
		defer func() {
			if err := e.svc.DeleteProvider(ctx, tenantA, "fuzz"); err != nil {
				t.Fatal(err)
			}
		}()
		u, err := url.Parse(authURL)
		if err != nil || u.User != nil || strings.Contains(authURL, "#") || u.Host == "" {
			t.Fatalf("accepted %q", authURL)
		}
		// Only the fake provider's host is allowed: anything else must be
		// https to a name, or to a public IP literal.
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		addr, aerr := netip.ParseAddr(host)
		allowed := aerr == nil && addr.Unmap().String()+":"+u.Port() == e.prov.Host()
		switch {
		case allowed && (u.Scheme == "http" || u.Scheme == "https"):
		case u.Scheme != "https":
			t.Fatalf("accepted %q (scheme %q)", authURL, u.Scheme)
		case aerr == nil && egress.CheckAddr(addr) != nil:
			t.Fatalf("accepted %q (host %s is not public)", authURL, addr)
		case host == "localhost" || strings.HasSuffix(host, ".localhost"):
			t.Fatalf("accepted %q (a localhost name)", authURL)
		}

		res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "u", Provider: "fuzz", Scopes: []string{"a"}})
		got, err := url.Parse(res.URL)
		if err != nil {
			t.Fatalf("authorization URL %q does not parse: %v", res.URL, err)
		}
		if got.Scheme != u.Scheme || got.Host != u.Host || got.EscapedPath() != u.EscapedPath() {
			t.Fatalf("authorization URL %q does not start at %q", res.URL, authURL)
		}
		q := got.Query()
		if q.Get("response_type") != "code" || q.Get("state") == "" || q.Get("client_id") != in.ClientID || q.Get("code_challenge") == "" {
			t.Fatalf("authorization URL %q lacks the flow's parameters", res.URL)
		}
	})
}
