package oauthflow_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/internal/oauthtest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// visit plays the browser: it opens the authorization URL and returns the
// callback the provider redirects to, without following it.
func visit(t testing.TB, authURL string) oauthflow.CallbackRequest {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatalf("visit authorization URL: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorization URL answered %s, want 302", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = testPublicURL + oauthflow.CallbackPath
	base := loc.Scheme + "://" + loc.Host + loc.Path
	if len(base) <= len(prefix) || base[:len(prefix)] != prefix {
		t.Fatalf("provider redirected to %s, want a callback under %s", base, prefix)
	}
	q := loc.Query()
	return oauthflow.CallbackRequest{
		ProviderID:       base[len(prefix):],
		Code:             q.Get("code"),
		State:            q.Get("state"),
		Error:            q.Get("error"),
		ErrorDescription: q.Get("error_description"),
	}
}

const testPublicURL = "https://deploy.example.com"

var testKey = bytes.Repeat([]byte{7}, 32)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a Service over a fresh storemem, with a fake clock, a fake
// provider (which its egress policy allows: the Service reaches it through
// its default client) and a captured debug-level JSON log.
type env struct {
	svc   *oauthflow.Service
	st    store.Store
	clock *testclock.Clock
	prov  *oauthtest.Provider
	logs  *syncBuffer
}

func newEnv(t testing.TB, tweak func(*oauthflow.Options)) *env {
	t.Helper()
	return newEnvOver(t, storemem.New(), tweak)
}

// newEnvOver is newEnv over st, which it closes at the end of the test.
func newEnvOver(t testing.TB, st store.Store, tweak func(*oauthflow.Options)) *env {
	t.Helper()
	e := &env{st: st, clock: testclock.New(time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC), 0), prov: oauthtest.New(t), logs: &syncBuffer{}}
	t.Cleanup(func() { e.st.Close() })
	opts := &oauthflow.Options{
		SecretKey:    testKey,
		PublicURL:    testPublicURL,
		Egress:       allowing(t, e.prov.Host()),
		Clock:        e.clock.Now,
		PollInterval: time.Hour, // wake-ups must come from the notifier
		Logger:       slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(opts)
	}
	svc, err := oauthflow.New(e.st, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e
}

// allowing is an egress policy that allows hosts.
func allowing(t testing.TB, hosts ...string) *egress.Policy {
	t.Helper()
	p, err := egress.New(&egress.Options{AllowHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// addProvider registers the fake provider as providerID in tenant.
func (e *env) addProvider(t testing.TB, tenant, providerID string, pkce bool) oauthflow.Provider {
	t.Helper()
	p, err := e.svc.CreateProvider(context.Background(), tenant, oauthflow.NewProvider{
		ProviderID:   providerID,
		Name:         "Fake " + providerID,
		ClientID:     e.prov.ClientID(),
		ClientSecret: oauthflow.Secret(e.prov.ClientSecret()),
		AuthURL:      e.prov.AuthURL(),
		TokenURL:     e.prov.TokenURL(),
		UsesPKCE:     pkce,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// authenticate calls Authenticate and fails the test on an error.
func (e *env) authenticate(t testing.TB, tenant string, req oauthflow.AuthRequest) oauthflow.AuthResult {
	t.Helper()
	res, err := e.svc.Authenticate(context.Background(), tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// login runs a whole flow for user and returns the token it yields.
func (e *env) login(t testing.TB, tenant, providerID, user string, scopes ...string) string {
	t.Helper()
	ctx := context.Background()
	if scopes == nil {
		scopes = noScopes
	}
	res := e.authenticate(t, tenant, oauthflow.AuthRequest{UserID: user, Provider: providerID, Scopes: scopes})
	if res.Status != oauthflow.StatusPending {
		t.Fatalf("Authenticate: status %q, want pending", res.Status)
	}
	if err := e.svc.Callback(ctx, visit(t, res.URL)); err != nil {
		t.Fatalf("Callback: %v", err)
	}
	w, err := e.svc.Wait(ctx, tenant, res.AuthID, 0)
	if err != nil || w.Status != oauthflow.StatusCompleted || w.Token == "" {
		t.Fatalf("Wait after Callback = %v, %v; want completed with a token", w.Status, err)
	}
	return string(w.Token)
}

func queryParam(t testing.TB, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(name)
}

// noScopes asks for no particular scope (scopes are required; nil is
// missing).
var noScopes = []string{}
