package githubapp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/internal/githubtest"
)

func newApp(t *testing.T, g *githubtest.GitHub) *githubapp.App {
	t.Helper()
	a, err := githubapp.New(&githubapp.Options{AppID: g.AppID(), Slug: g.Slug(), PrivateKeyPEM: g.PrivateKeyPEM(),
		ClientID: g.ClientID(), ClientSecret: g.ClientSecret(), APIURL: g.APIURL(), WebURL: g.URL(), HTTPClient: g.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestVerifyInstallation(t *testing.T) {
	g := githubtest.New(t)
	a := newApp(t, g)
	ctx := context.Background()
	g.AddInstallation(7, "acme")
	many := make([]int64, 0, 251)
	for i := range int64(250) {
		many = append(many, 10_000+i)
	}
	many = append(many, 7)

	for _, tc := range []struct {
		name      string
		code      string
		want      string
		forbidden bool // else: another error
		fails     bool
	}{
		{"user can access", g.Code(8, 7), "acme", false, false},
		{"on the third page", g.Code(many...), "acme", false, false},
		{"user cannot access", g.Code(8), "", true, true},
		{"bad code", "code-made-up", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.VerifyInstallation(ctx, tc.code, 7)
			if tc.fails != (err != nil) || got != tc.want {
				t.Fatalf("VerifyInstallation = %q, %v; want %q (failure: %v)", got, err, tc.want, tc.fails)
			}
			if errors.Is(err, controlplane.ErrInstallationForbidden) != tc.forbidden {
				t.Errorf("error %v matches ErrInstallationForbidden: %v, want %v", err, !tc.forbidden, tc.forbidden)
			}
			for _, s := range g.Secrets() {
				if err != nil && strings.Contains(err.Error(), s) {
					t.Errorf("error %q holds a secret", err)
				}
			}
		})
	}
	// A code is single use.
	code := g.Code(7)
	if _, err := a.VerifyInstallation(ctx, code, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := a.VerifyInstallation(ctx, code, 7); err == nil || errors.Is(err, controlplane.ErrInstallationForbidden) {
		t.Errorf("second use of a code: %v, want a GitHub error", err)
	}
	g.Down(true)
	if _, err := a.VerifyInstallation(ctx, g.Code(7), 7); err == nil || errors.Is(err, controlplane.ErrInstallationForbidden) {
		t.Errorf("GitHub down: %v, want an error that is not ErrInstallationForbidden", err)
	}
}

func TestWrongClientSecret(t *testing.T) {
	g := githubtest.New(t)
	a, err := githubapp.New(&githubapp.Options{AppID: g.AppID(), Slug: g.Slug(), PrivateKeyPEM: g.PrivateKeyPEM(),
		ClientID: g.ClientID(), ClientSecret: "wrong", APIURL: g.APIURL(), WebURL: g.URL(), HTTPClient: g.Client()})
	if err != nil {
		t.Fatal(err)
	}
	g.AddInstallation(7, "acme")
	_, err = a.VerifyInstallation(context.Background(), g.Code(7), 7)
	if err == nil || !strings.Contains(err.Error(), "incorrect_client_credentials") {
		t.Errorf("VerifyInstallation with a wrong client secret: %v", err)
	}
	if n := g.Counts().InstallationLists; n != 0 {
		t.Errorf("installations listed %d times without a user token", n)
	}
}

func TestInstallationToken(t *testing.T) {
	g := githubtest.New(t)
	a := newApp(t, g)
	ctx := context.Background()
	g.AddInstallation(7, "acme")
	tok, err := a.InstallationToken(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "ghs_") {
		t.Errorf("token = %q", tok)
	}
	again, err := a.InstallationToken(ctx, 7)
	if err != nil || again != tok {
		t.Errorf("second token = %q, %v; want the cached %q", again, err, tok)
	}
	if n := g.Counts().InstallationTokens; n != 1 {
		t.Errorf("installation tokens issued = %d, want 1", n)
	}
	if _, err := a.InstallationToken(ctx, 8); err == nil {
		t.Error("token of an unknown installation: no error")
	}

	// The installation client authenticates with that token.
	var auth string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { auth = r.Header.Get("Authorization") }))
	defer api.Close()
	resp, err := a.InstallationClient(7).Get(api.URL + "/repos/acme/agent")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if auth != "token "+tok && auth != "Bearer "+tok {
		t.Errorf("Authorization = %q, want the installation token", auth)
	}
}

func TestNew(t *testing.T) {
	if _, err := githubapp.New(nil); err == nil || !strings.Contains(err.Error(), "AppID, Slug, PrivateKeyPEM, ClientID, ClientSecret") {
		t.Errorf("New(nil) = %v", err)
	}
	g := githubtest.New(t)
	if _, err := githubapp.New(&githubapp.Options{AppID: 1, Slug: "s", PrivateKeyPEM: []byte("not a key"), ClientID: "c", ClientSecret: "s"}); err == nil {
		t.Error("New with a bad key: no error")
	}
	if _, err := githubapp.New(&githubapp.Options{AppID: 1, Slug: "s", PrivateKeyPEM: g.PrivateKeyPEM(), ClientID: "c", ClientSecret: "s",
		APIURL: "ftp://example.com"}); err == nil {
		t.Error("New with an ftp API URL: no error")
	}
}
