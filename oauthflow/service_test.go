package oauthflow_test

import (
	"testing"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

func TestNewRequiresKeyAndPublicURL(t *testing.T) {
	st := storemem.New()
	defer st.Close()
	for _, tc := range []struct {
		name string
		opts *oauthflow.Options
		ok   bool
	}{
		{"nil options", nil, false},
		{"no key", &oauthflow.Options{PublicURL: testPublicURL}, false},
		{"short key", &oauthflow.Options{SecretKey: make([]byte, 16), PublicURL: testPublicURL}, false},
		{"no public URL", &oauthflow.Options{SecretKey: testKey}, false},
		{"relative public URL", &oauthflow.Options{SecretKey: testKey, PublicURL: "/deploy"}, false},
		{"public URL with query", &oauthflow.Options{SecretKey: testKey, PublicURL: "https://x.example?a=b"}, false},
		{"ok", &oauthflow.Options{SecretKey: testKey, PublicURL: testPublicURL}, true},
		{"ok with path", &oauthflow.Options{SecretKey: testKey, PublicURL: "http://localhost:8080/deploy/"}, true},
	} {
		svc, err := oauthflow.New(st, tc.opts)
		if (err == nil) != tc.ok || (svc != nil) != tc.ok {
			t.Errorf("%s: New = %v, %v; want ok=%v", tc.name, svc, err, tc.ok)
		}
	}
	if _, err := oauthflow.New(nil, &oauthflow.Options{SecretKey: testKey, PublicURL: testPublicURL}); err == nil {
		t.Error("New(nil store) succeeded")
	}
}

func TestRedirectURIFollowsPublicURL(t *testing.T) {
	e := newEnv(t, func(o *oauthflow.Options) { o.PublicURL = "http://localhost:8080/deploy/" })
	e.addProvider(t, tenantA, "fake", false)
	res, err := e.svc.Authenticate(t.Context(), tenantA, oauthflow.AuthRequest{UserID: "u", Provider: "fake", Scopes: noScopes})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := queryParam(t, res.URL, "redirect_uri"), "http://localhost:8080/deploy/v2/auth/callback/fake"; got != want {
		t.Errorf("redirect_uri = %q, want %q", got, want)
	}
}
