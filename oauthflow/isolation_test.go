package oauthflow_test

import (
	"context"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/store"
)

func TestTokensStayWithTheirTenantAndUser(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	// Both tenants use the same provider_id, client and provider.
	e.addProvider(t, tenantA, "fake", true)
	e.addProvider(t, tenantB, "fake", true)
	tokA := e.login(t, tenantA, "fake", "alice")

	for _, tc := range []struct{ tenant, user string }{{tenantB, "alice"}, {tenantA, "bob"}} {
		res := e.authenticate(t, tc.tenant, oauthflow.AuthRequest{UserID: tc.user, Provider: "fake", Scopes: noScopes})
		if res.Status != oauthflow.StatusPending || res.Token != "" {
			t.Errorf("%s/%s: %+v, want pending without a token", tc.tenant, tc.user, res)
		}
	}

	// Another tenant cannot wait on tenant A's flow.
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "carol", Provider: "fake", Scopes: noScopes})
	if err := e.svc.Callback(ctx, visit(t, res.URL)); err != nil {
		t.Fatal(err)
	}
	if w, err := e.svc.Wait(ctx, tenantB, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusNotFound || w.Token != "" {
		t.Errorf("tenant B waits on A's flow: %+v, %v; want not_found", w, err)
	}
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusCompleted || string(w.Token) == tokA {
		t.Errorf("tenant A waits on its flow: %+v, %v; want carol's token", w, err)
	}
}

// A sealed token copied into another tenant's record does not open: the
// ciphertext is bound to its (tenant, provider, user).
func TestCopiedTokenRecordDoesNotOpen(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.addProvider(t, tenantB, "fake", true)
	e.login(t, tenantA, "fake", "alice")
	err := e.st.Update(ctx, func(tx store.Tx) error {
		v, err := tx.Get("oauthflow.tokens", tenantA+"\x00fake\x00alice")
		if err != nil {
			return err
		}
		return tx.Put("oauthflow.tokens", tenantB+"\x00fake\x00alice", v)
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.Authenticate(ctx, tenantB, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if err == nil {
		t.Fatalf("Authenticate with a transplanted record = %+v, want an error", res)
	}
}

// Property: whatever sequence of logins and lookups over a few tenants and
// users, Authenticate answers each (tenant, user) with its own latest token
// or with a new flow, never with someone else's.
func TestIsolationProperty(t *testing.T) {
	tenants := []string{tenantA, tenantB}
	users := []string{"alice", "bob", "alice/x", "alice\x00bob"}
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		for _, tn := range tenants {
			e.addProvider(t, tn, "fake", rapid.Bool().Draw(rt, "pkce"))
		}
		model := map[string]string{} // tenant/user -> token
		logins := 0
		for range rapid.IntRange(1, 12).Draw(rt, "steps") {
			tn := rapid.SampledFrom(tenants).Draw(rt, "tenant")
			user := rapid.SampledFrom(users).Draw(rt, "user")
			k := fmt.Sprintf("%s/%q", tn, user)
			if rapid.Bool().Draw(rt, "login") {
				res, err := e.svc.Authenticate(ctx, tn, oauthflow.AuthRequest{UserID: user, Provider: "fake", Scopes: []string{fmt.Sprint("fresh", logins)}})
				logins++
				if err != nil {
					rt.Fatal(err)
				}
				if err := e.svc.Callback(ctx, visit(t, res.URL)); err != nil {
					rt.Fatal(err)
				}
				w, err := e.svc.Wait(ctx, tn, res.AuthID, 0)
				if err != nil || w.Status != oauthflow.StatusCompleted {
					rt.Fatalf("Wait = %+v, %v", w, err)
				}
				model[k] = string(w.Token)
				continue
			}
			res, err := e.svc.Authenticate(ctx, tn, oauthflow.AuthRequest{UserID: user, Provider: "fake", Scopes: noScopes})
			if err != nil {
				rt.Fatal(err)
			}
			want, ok := model[k]
			switch {
			case ok && (res.Status != oauthflow.StatusCompleted || string(res.Token) != want):
				rt.Fatalf("%s: got %s, want its own token", k, res.Status)
			case !ok && res.Status != oauthflow.StatusPending:
				rt.Fatalf("%s: got %s with a token, want pending", k, res.Status)
			}
		}
	})
}
