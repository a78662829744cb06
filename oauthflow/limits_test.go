package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/oauthflow"
)

// scopes is required (wire contract section 8): a request without it
// names it beside user_id and provider; an empty list is a request for no
// particular scope.
func TestAuthenticateRequiresScopes(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	_, err := e.svc.Authenticate(context.Background(), tenantA, oauthflow.AuthRequest{})
	want := []problem{{"body.user_id", "missing"}, {"body.provider", "missing"}, {"body.scopes", "missing"}}
	if diff := cmp.Diff(want, problemsOf(t, err)); diff != "" {
		t.Errorf("Authenticate({}) problems (-want +got):\n%s", diff)
	}
	_, err = e.svc.Authenticate(context.Background(), tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake"})
	if diff := cmp.Diff([]problem{{"body.scopes", "missing"}}, problemsOf(t, err)); diff != "" {
		t.Errorf("Authenticate without scopes: problems (-want +got):\n%s", diff)
	}
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{}})
	if res.Status != oauthflow.StatusPending || queryParam(t, res.URL, "scope") != "" {
		t.Errorf("Authenticate with scopes [] = %+v, want pending without a scope parameter", res)
	}
}

// A list over its cap is one problem, whatever its items: the items are
// not looked at (de-duplicating 60,000 scopes is quadratic, and 200,000
// blank scopes would otherwise make 200,001 problems).
func TestAuthenticateScopeCap(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	distinct := make([]string, 60_000)
	for i := range distinct {
		distinct[i] = fmt.Sprintf("scope-%d", i)
	}
	blank := make([]string, 200_000)
	for _, tc := range []struct {
		name   string
		scopes []string
		msg    string
	}{
		{"60,000 distinct scopes", distinct, "List should have at most 100 items, not 60000"},
		{"200,000 blank scopes", blank, "List should have at most 100 items, not 200000"},
		{"101 scopes", distinct[:101], "List should have at most 100 items, not 101"},
	} {
		_, err := e.svc.Authenticate(context.Background(), tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: tc.scopes})
		ve := validationErrorOf(t, err)
		want := []apierr.Problem{{Loc: []any{"body", "scopes"}, Msg: tc.msg, Type: "too_long"}}
		if diff := cmp.Diff(want, ve.Problems); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", tc.name, diff)
		}
	}
	// At the cap, the items are checked, and duplicates count once.
	atCap := append(append([]string{}, distinct[:50]...), distinct[:50]...)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: atCap})
	if got := strings.Fields(queryParam(t, res.URL, "scope")); !cmp.Equal(got, distinct[:50]) {
		t.Errorf("100 scopes with 50 repeated: requested %d scopes, want the 50 distinct ones in order", len(got))
	}
}

// However bad a request within the caps, its problems are bounded: one per
// scope at most, plus one per other field.
func TestAuthenticateProblemsBounded(t *testing.T) {
	e := newEnv(t, nil)
	blank := make([]string, 100)
	_, err := e.svc.Authenticate(context.Background(), tenantA, oauthflow.AuthRequest{
		AgentID: strings.Repeat("a", 2000), Scopes: blank, UseAgentBuilderPublicOAuth: true,
	})
	ve := validationErrorOf(t, err)
	if n := len(ve.Problems); n != 104 {
		t.Errorf("%d problems, want 104 (user_id, agent_id, provider, 100 scopes, use_agent_builder_public_oauth)", n)
	}
	if len(ve.Error()) > 64<<10 {
		t.Errorf("the error's message is %d bytes", len(ve.Error()))
	}
}

// A provider that reports many granted scopes (the tenant chooses the
// provider) costs linear work, and its scopes count.
func TestManyGrantedScopes(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", false)
	granted := make([]string, 50_000)
	for i := range granted {
		granted[i] = fmt.Sprintf("s%d", i%25_000) // each twice
	}
	e.prov.SetScope(strings.Join(granted, " "))
	tok := e.login(t, tenantA, "fake", "alice", "repo")
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo", "s24999", "s0"}})
	if res.Status != oauthflow.StatusCompleted || string(res.Token) != tok {
		t.Errorf("Authenticate for granted scopes = %+v, want completed with the token", res)
	}
	res = e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"s25000"}})
	if res.Status != oauthflow.StatusPending {
		t.Errorf("Authenticate for a scope not granted = %+v, want pending", res)
	}
}

func BenchmarkValidateScopes(b *testing.B) {
	e := newEnv(b, func(o *oauthflow.Options) { o.Logger = nil })
	for _, n := range []int{100, 60_000} {
		scopes := make([]string, n)
		for i := range scopes {
			scopes[i] = fmt.Sprintf("scope-%d", i)
		}
		req := oauthflow.AuthRequest{UserID: "alice", Provider: "none", Scopes: scopes}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				// The provider does not exist: a valid request stops at
				// ErrNotFound, an invalid one at validation.
				_, _ = e.svc.Authenticate(context.Background(), tenantA, req)
			}
		})
	}
}

// validationErrorOf returns err as a *ValidationError, or fails the test.
func validationErrorOf(t *testing.T, err error) *apierr.ValidationError {
	t.Helper()
	var ve *apierr.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v, want a *ValidationError", err)
	}
	return ve
}
