package oauthflow_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/oauthflow"
)

const tenantA, tenantB = "0194f3a0-0000-7000-8000-00000000000a", "0194f3a0-0000-7000-8000-00000000000b"

func TestFullFlow(t *testing.T) {
	for _, pkce := range []bool{true, false} {
		t.Run(map[bool]string{true: "pkce", false: "no_pkce"}[pkce], func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := context.Background()
			e.addProvider(t, tenantA, "fake", pkce)

			res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{
				UserID: "alice", Provider: "fake", Scopes: []string{"repo", "read:user", "repo"}, AgentID: "agent-1",
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != oauthflow.StatusPending || res.AuthID == "" || res.Token != "" {
				t.Fatalf("Authenticate = %+v, want pending with an auth_id and no token", res)
			}
			u, err := url.Parse(res.URL)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if got, want := u.Scheme+"://"+u.Host+u.Path, e.prov.AuthURL(); got != want {
				t.Errorf("URL base = %s, want %s", got, want)
			}
			wantQuery := map[string]string{
				"response_type": "code",
				"client_id":     e.prov.ClientID(),
				"redirect_uri":  testPublicURL + "/v2/auth/callback/fake",
				"scope":         "repo read:user",
			}
			for k, want := range wantQuery {
				if got := q.Get(k); got != want {
					t.Errorf("URL %s = %q, want %q", k, got, want)
				}
			}
			if len(q.Get("state")) < 26 {
				t.Errorf("state %q is shorter than 128 bits of base32", q.Get("state"))
			}
			if pkce != (q.Get("code_challenge") != "") || pkce != (q.Get("code_challenge_method") == "S256") {
				t.Errorf("PKCE params %q %q, want them iff uses_pkce=%v", q.Get("code_challenge"), q.Get("code_challenge_method"), pkce)
			}

			// A waiter started before the browser returns is woken by the
			// Callback (PollInterval is an hour, so only the notifier can).
			waited := make(chan oauthflow.WaitResult, 1)
			go func() {
				w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 20*time.Second)
				if err != nil {
					t.Error(err)
				}
				waited <- w
			}()

			cb := visit(t, res.URL)
			if err := e.svc.Callback(ctx, cb); err != nil {
				t.Fatalf("Callback: %v", err)
			}
			w := <-waited
			if w.Status != oauthflow.StatusCompleted || !strings.HasPrefix(string(w.Token), "at-") {
				t.Fatalf("Wait = %+v, want completed with the provider's access token", w)
			}
			c := e.prov.Counts()
			if want := map[bool]int{true: 1, false: 0}[pkce]; c.Exchanges != 1 || c.PKCEVerified != want {
				t.Errorf("provider saw %d exchanges, %d PKCE verifications; want 1, %d", c.Exchanges, c.PKCEVerified, want)
			}

			again := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
			if diff := cmp.Diff(oauthflow.AuthResult{Status: oauthflow.StatusCompleted, Token: w.Token}, again); diff != "" {
				t.Errorf("second Authenticate (-want +got):\n%s", diff)
			}
			if c := e.prov.Counts(); c.Exchanges != 1 || c.Refreshes != 0 {
				t.Errorf("second Authenticate reached the provider (%d exchanges, %d refreshes)", c.Exchanges, c.Refreshes)
			}
		})
	}
}

func TestCallbackRejectsBadState(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.addProvider(t, tenantA, "other", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)

	for name, bad := range map[string]oauthflow.CallbackRequest{
		"empty state":    {ProviderID: "fake", Code: cb.Code},
		"unknown state":  {ProviderID: "fake", Code: cb.Code, State: cb.State + "x"},
		"other provider": {ProviderID: "other", Code: cb.Code, State: cb.State},
	} {
		if err := e.svc.Callback(ctx, bad); !errors.Is(err, oauthflow.ErrUnknownState) {
			t.Errorf("%s: Callback error = %v, want ErrUnknownState", name, err)
		}
	}
	// None of those spent the flow: the right callback still completes it.
	if err := e.svc.Callback(ctx, cb); err != nil {
		t.Fatalf("Callback with the right state: %v", err)
	}
	// A state is accepted once.
	if err := e.svc.Callback(ctx, cb); !errors.Is(err, oauthflow.ErrUnknownState) {
		t.Errorf("replayed Callback error = %v, want ErrUnknownState", err)
	}
	if exchanges := e.prov.Counts().Exchanges; exchanges != 1 {
		t.Errorf("provider saw %d exchanges, want 1", exchanges)
	}
}

func TestCallbackProviderErrorEndsFlow(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.prov.Deny("access_denied", "")
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)
	err := e.svc.Callback(ctx, cb)
	var ae *oauthflow.AuthorizationError
	if !errors.As(err, &ae) || ae.Code != "access_denied" {
		t.Fatalf("Callback error = %v, want *AuthorizationError access_denied", err)
	}
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, time.Second); err != nil || w.Status != oauthflow.StatusNotFound {
		t.Errorf("Wait on a failed flow = %+v, %v; want not_found", w, err)
	}
	if err := e.svc.Callback(ctx, oauthflow.CallbackRequest{ProviderID: "fake", State: cb.State, Code: "x"}); !errors.Is(err, oauthflow.ErrUnknownState) {
		t.Errorf("Callback after failure = %v, want ErrUnknownState", err)
	}
}

func TestCallbackWithoutCodeEndsFlow(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)
	cb.Code = ""
	var ae *oauthflow.AuthorizationError
	if err := e.svc.Callback(ctx, cb); !errors.As(err, &ae) || ae.Code != "invalid_request" {
		t.Fatalf("Callback without code = %v, want *AuthorizationError invalid_request", err)
	}
	if w, _ := e.svc.Wait(ctx, tenantA, res.AuthID, 0); w.Status != oauthflow.StatusNotFound {
		t.Errorf("Wait = %q, want not_found", w.Status)
	}
}

func TestCallbackExchangeFailureEndsFlow(t *testing.T) {
	for name, spoil := range map[string]func(e *env, cb *oauthflow.CallbackRequest){
		"code not issued": func(e *env, cb *oauthflow.CallbackRequest) { cb.Code = "forged" },
		"wrong client secret": func(e *env, cb *oauthflow.CallbackRequest) {
			e.prov.SetClientSecret("rotated")
		},
		"provider down": func(e *env, cb *oauthflow.CallbackRequest) { e.prov.Close() },
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := context.Background()
			e.addProvider(t, tenantA, "fake", true)
			res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
			cb := visit(t, res.URL)
			spoil(e, &cb)
			err := e.svc.Callback(ctx, cb)
			if !errors.Is(err, oauthflow.ErrExchangeFailed) {
				t.Fatalf("Callback error = %v, want ErrExchangeFailed", err)
			}
			for _, s := range e.prov.Secrets() {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q contains a secret", err)
				}
			}
			if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, time.Second); err != nil || w.Status != oauthflow.StatusNotFound {
				t.Errorf("Wait = %+v, %v; want not_found", w, err)
			}
			// No token was stored: the next Authenticate starts a new flow.
			next, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
			if err != nil || next.Status != oauthflow.StatusPending {
				t.Errorf("Authenticate after a failed flow = %+v, %v; want pending", next, err)
			}
		})
	}
}

func TestFlowExpires(t *testing.T) {
	e := newEnv(t, func(o *oauthflow.Options) { o.FlowTTL = 5 * time.Minute })
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)

	e.clock.Advance(5*time.Minute - time.Microsecond)
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusPending {
		t.Fatalf("Wait just before expiry = %+v, %v; want pending", w, err)
	}
	e.clock.Advance(time.Microsecond)
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, time.Second); err != nil || w.Status != oauthflow.StatusNotFound {
		t.Errorf("Wait after expiry = %+v, %v; want not_found", w, err)
	}
	if err := e.svc.Callback(ctx, cb); !errors.Is(err, oauthflow.ErrUnknownState) {
		t.Errorf("Callback after expiry = %v, want ErrUnknownState", err)
	}
	if exchanges := e.prov.Counts().Exchanges; exchanges != 0 {
		t.Errorf("an expired flow reached the token endpoint")
	}
}

func TestCompletedFlowStaysReadable(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)
	e.clock.Advance(oauthflow.DefaultFlowTTL - time.Second) // the user takes their time
	if err := e.svc.Callback(ctx, cb); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(oauthflow.DefaultFlowTTL - time.Second) // so does the waiter
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusCompleted {
		t.Errorf("Wait = %+v, %v; want completed (a completed flow lives another FlowTTL)", w, err)
	}
	e.clock.Advance(2 * time.Second)
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusNotFound {
		t.Errorf("Wait = %+v, %v; want not_found", w, err)
	}
}

func TestRefreshExpiredToken(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	first := e.login(t, tenantA, "fake", "alice", "repo")
	req := oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}}

	e.clock.Advance(time.Hour - 11*time.Second) // expires_in is 3600 s
	if res, err := e.svc.Authenticate(ctx, tenantA, req); err != nil || string(res.Token) != first {
		t.Fatalf("Authenticate before expiry = %+v, %v; want the first token", res, err)
	}
	e.clock.Advance(time.Second) // within the 10 s margin
	res := e.authenticate(t, tenantA, req)
	if res.Status != oauthflow.StatusCompleted || res.Token == "" || string(res.Token) == first {
		t.Fatalf("Authenticate after expiry = %+v, want completed with a refreshed token", res)
	}
	if refreshes := e.prov.Counts().Refreshes; refreshes != 1 {
		t.Fatalf("provider saw %d refreshes, want 1", refreshes)
	}
	// The refreshed token was stored: asking again costs no refresh.
	again, err := e.svc.Authenticate(ctx, tenantA, req)
	if err != nil || again.Token != res.Token {
		t.Errorf("Authenticate again = %+v, %v; want the refreshed token", again, err)
	}
	if refreshes := e.prov.Counts().Refreshes; refreshes != 1 {
		t.Errorf("provider saw %d refreshes, want still 1", refreshes)
	}
}

func TestExpiredTokenWithoutRefreshStartsFlow(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.prov.SetRefreshTokens(false)
	e.login(t, tenantA, "fake", "alice")
	e.clock.Advance(2 * time.Hour)
	res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if err != nil || res.Status != oauthflow.StatusPending {
		t.Errorf("Authenticate = %+v, %v; want pending", res, err)
	}
}

func TestRevokedRefreshTokenStartsFlow(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.login(t, tenantA, "fake", "alice")
	e.prov.ForgetRefreshTokens()
	e.clock.Advance(2 * time.Hour)
	res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if err != nil || res.Status != oauthflow.StatusPending {
		t.Errorf("Authenticate = %+v, %v; want pending", res, err)
	}
	// x/oauth2 tries the client credentials in the header, then in the body.
	if refreshes := e.prov.Counts().Refreshes; refreshes == 0 {
		t.Errorf("provider saw no refresh attempt")
	}
}

func TestTokenWithoutExpiryNeverExpires(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", false)
	e.prov.SetExpiresIn(0)
	tok := e.login(t, tenantA, "fake", "alice")
	e.clock.Advance(365 * 24 * time.Hour)
	res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if err != nil || string(res.Token) != tok {
		t.Errorf("Authenticate = %+v, %v; want the stored token", res, err)
	}
}

func TestStoredTokenMustCoverScopes(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	tok := e.login(t, tenantA, "fake", "alice", "repo", "read:user")
	for _, tc := range []struct {
		scopes []string
		want   string
	}{
		{noScopes, oauthflow.StatusCompleted},
		{[]string{"repo"}, oauthflow.StatusCompleted},
		{[]string{"read:user", "repo"}, oauthflow.StatusCompleted},
		{[]string{"repo", "admin"}, oauthflow.StatusPending},
	} {
		res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: tc.scopes})
		if res.Status != tc.want || (res.Status == oauthflow.StatusCompleted && string(res.Token) != tok) {
			t.Errorf("scopes %v: %+v, want %s", tc.scopes, res, tc.want)
		}
	}
}

func TestGrantedScopes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requested []string
		granted   string // the token response's "scope"
		covered   []string
		uncovered string
	}{
		{"as requested", []string{"repo"}, "", []string{"repo"}, "admin"},
		{"renamed by the provider", []string{"email"}, "https://www.googleapis.com/auth/userinfo.email openid", []string{"email", "openid", "https://www.googleapis.com/auth/userinfo.email"}, "profile"},
		{"comma-separated (GitHub)", []string{"repo"}, "repo,gist", []string{"repo", "gist"}, "admin:org"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := context.Background()
			e.addProvider(t, tenantA, "fake", true)
			e.prov.SetScope(tc.granted)
			tok := e.login(t, tenantA, "fake", "alice", tc.requested...)
			for _, sc := range tc.covered {
				res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{sc}})
				if err != nil || string(res.Token) != tok {
					t.Errorf("scope %q: %+v, %v; want the stored token", sc, res, err)
				}
			}
			res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{tc.uncovered}})
			if err != nil || res.Status != oauthflow.StatusPending {
				t.Errorf("scope %q: %+v, %v; want pending", tc.uncovered, res, err)
			}
		})
	}
}

func TestAuthenticateErrors(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)

	_, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "nope", Scopes: noScopes})
	if !errors.Is(err, apierr.ErrNotFound) || err.Error() != "OAuth provider nope not found." {
		t.Errorf("unknown provider: %v, want ErrNotFound 'OAuth provider nope not found.'", err)
	}
	_, err = e.svc.Authenticate(ctx, tenantB, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("another tenant's provider: %v, want ErrNotFound", err)
	}

	_, err = e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{
		Scopes:                     []string{"ok", "", "has space", `q"uote`},
		UseAgentBuilderPublicOAuth: true,
	})
	var ve *apierr.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("invalid request: %v, want *ValidationError", err)
	}
	var locs [][]any
	for _, p := range ve.Problems {
		locs = append(locs, p.Loc)
	}
	want := [][]any{
		{"body", "user_id"},
		{"body", "provider"},
		{"body", "scopes", 1},
		{"body", "scopes", 2},
		{"body", "scopes", 3},
		{"body", "use_agent_builder_public_oauth"},
	}
	if diff := cmp.Diff(want, locs); diff != "" {
		t.Errorf("problem locations (-want +got):\n%s", diff)
	}

	if _, err := e.svc.Authenticate(ctx, "", oauthflow.AuthRequest{UserID: "a", Provider: "fake", Scopes: noScopes}); !errors.Is(err, apierr.ErrInvalidTenant) {
		t.Errorf("empty tenant: %v, want ErrInvalidTenant", err)
	}
}

func TestExpiredFlowsAreCleanedUp(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	for _, user := range []string{"u1", "u2"} {
		if _, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: user, Provider: "fake", Scopes: noScopes}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "u3", Provider: "fake", Scopes: noScopes})
	if err := e.svc.Callback(ctx, visit(t, res.URL)); err != nil {
		t.Fatal(err)
	}
	done := res.AuthID
	if got := countRecords(t, e.st, "oauthflow.flows"); got != 3 {
		t.Fatalf("%d flow records, want 3", got)
	}
	if n, err := e.svc.Cleanup(ctx); err != nil || n != 0 {
		t.Errorf("Cleanup before expiry = %d, %v; want 0", n, err)
	}
	e.clock.Advance(oauthflow.DefaultFlowTTL - time.Minute)
	// Lazily: starting a flow removes the expired open ones (the completed
	// one lives FlowTTL from its completion)...
	if _, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "v", Provider: "fake", Scopes: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if got := countRecords(t, e.st, "oauthflow.flows"); got != 2 {
		t.Errorf("%d flow records after a lazy sweep, want 2", got)
	}
	if w, _ := e.svc.Wait(ctx, tenantA, done, 0); w.Status != oauthflow.StatusCompleted {
		t.Errorf("completed flow: Wait = %q, want completed", w.Status)
	}
	// ...and Cleanup removes everything that has expired.
	e.clock.Advance(oauthflow.DefaultFlowTTL)
	if n, err := e.svc.Cleanup(ctx); err != nil || n != 2 {
		t.Errorf("Cleanup = %d, %v; want 2", n, err)
	}
	for _, coll := range []string{"oauthflow.flows", "oauthflow.states", "oauthflow.flow_expiry"} {
		if got := countRecords(t, e.st, coll); got != 0 {
			t.Errorf("%s holds %d records after Cleanup, want 0", coll, got)
		}
	}
}

// Concurrent callbacks with one state: exactly one exchanges the code.
func TestConcurrentCallbacksSpendTheStateOnce(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- e.svc.Callback(ctx, cb) }()
	}
	ok, unknown := 0, 0
	for range 8 {
		switch err := <-errs; {
		case err == nil:
			ok++
		case errors.Is(err, oauthflow.ErrUnknownState):
			unknown++
		default:
			t.Errorf("Callback: %v", err)
		}
	}
	if ok != 1 || unknown != 7 {
		t.Errorf("%d callbacks succeeded and %d saw ErrUnknownState, want 1 and 7", ok, unknown)
	}
	if exchanges := e.prov.Counts().Exchanges; exchanges != 1 {
		t.Errorf("provider saw %d exchanges, want 1", exchanges)
	}
}
