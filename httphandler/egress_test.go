package httphandler_test

import (
	"strings"
	"testing"

	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/oauthflow"
)

// egressAllowing is an egress policy that allows hosts, such as the fake
// OAuth provider's.
func egressAllowing(t testing.TB, hosts ...string) *egress.Policy {
	t.Helper()
	p, err := egress.New(&egress.Options{AllowHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOAuthCallbackEgressRefused: when the egress policy refuses the token
// endpoint, the callback page says so (502) rather than blaming the
// provider, the provider sees no request, and the flow fails.
func TestOAuthCallbackEgressRefused(t *testing.T) {
	strict := egressAllowing(t)
	s := newServerWith(t, serverSetup{oauth: func(o *oauthflow.Options) {
		// Providers on the fake's host may be registered, but the client
		// that reaches token endpoints trusts no host.
		o.HTTPClient = strict.Client()
	}})
	must[oauthflow.Provider](t, s, keyA, "POST", "/v2/auth/providers", s.providerBody("fake", true), 200)
	a := s.authenticate(t, keyA, `{"user_id": "user-1", "provider": "fake", "scopes": ["repo"]}`)
	checkPage(t, "refused by the egress policy", s.browse(a.URL), 502, "may not contact the provider&#39;s token endpoint")
	if n := s.prov.Counts().TokenRequests; n != 0 {
		t.Errorf("the token endpoint got %d requests, want none", n)
	}
	diff(t, "wait after the refusal", waitAnswer{Status: "not_found"}, s.wait(t, keyA, a.AuthID, ""))
	if logs := s.logs(); !strings.Contains(logs, "is not a public address (loopback)") && !strings.Contains(logs, "only https may be used") {
		t.Errorf("the log does not say why the exchange failed:\n%s", logs)
	}
}
