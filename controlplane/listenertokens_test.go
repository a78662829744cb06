package controlplane_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// TestListenerTokens: a token is shown once, listed without its secret,
// authenticates its own tenant and listener only, records its use at most
// once a minute, and is refused once revoked or once its listener is
// gone.
func TestListenerTokens(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		f := newAgentFixture(t, st)
		edge, other := f.listener(tenantA, "edge-1"), f.listener(tenantA, "edge-2")
		theirs := f.listener(tenantB, "edge-1")

		tok, err := f.cp.CreateListenerToken(f.ctx, tenantA, edge)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok.Token, "dpl_lt_"+tok.ID+"_") || len(tok.Token) < len("dpl_lt_")+36+1+20 {
			t.Errorf("token %q", tok.Token)
		}
		created := wiretime.New(time.Now().UTC())
		diff(t, "created_at", created, tok.CreatedAt)
		if dumped := dump(t, st); strings.Contains(strings.Join(values(dumped), " "), tok.Token[len(tok.Token)-20:]) {
			t.Errorf("the token's secret is stored")
		}
		time.Sleep(time.Second)
		tok2, err := f.cp.CreateListenerToken(f.ctx, tenantA, edge)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.cp.CreateListenerToken(f.ctx, tenantB, edge)
		wantErr(t, "create for another tenant's listener", err, apierr.ErrNotFound)

		// Listed newest first, without secrets, paged.
		page, err := f.cp.ListListenerTokens(f.ctx, tenantA, edge, nil)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "list", &controlplane.ListenerTokenPage{Resources: []controlplane.ListenerToken{
			{ID: tok2.ID, CreatedAt: tok2.CreatedAt}, {ID: tok.ID, CreatedAt: tok.CreatedAt}}, Offset: 2}, page)
		page, err = f.cp.ListListenerTokens(f.ctx, tenantA, edge, &controlplane.ListListenersQuery{Limit: new(1), Offset: 1})
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "second page", &controlplane.ListenerTokenPage{Resources: []controlplane.ListenerToken{
			{ID: tok.ID, CreatedAt: tok.CreatedAt}}, Offset: 2}, page)
		if page, err := f.cp.ListListenerTokens(f.ctx, tenantA, other, nil); err != nil || len(page.Resources) != 0 {
			t.Errorf("another listener's tokens: %+v, %v", page, err)
		}
		_, err = f.cp.ListListenerTokens(f.ctx, tenantB, edge, nil)
		wantErr(t, "list from another tenant", err, apierr.ErrNotFound)
		_, err = f.cp.ListListenerTokens(f.ctx, tenantA, edge, &controlplane.ListListenersQuery{Limit: new(0)})
		diff(t, "list problems", []string{"query.limit: greater_than_equal"}, locTypes(problems(t, err)))

		// Authenticated: its tenant and listener; last_used_at once a minute.
		tenant, listener, err := f.cp.AuthenticateListenerToken(f.ctx, tok.Token)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "authenticated", []string{tenantA, edge}, []string{tenant, listener})
		used := wiretime.New(time.Now().UTC())
		lastUsed := func() *wiretime.Time {
			t.Helper()
			page, err := f.cp.ListListenerTokens(f.ctx, tenantA, edge, nil)
			if err != nil {
				t.Fatal(err)
			}
			return page.Resources[1].LastUsedAt
		}
		diff(t, "last_used_at", &used, lastUsed())
		time.Sleep(30 * time.Second)
		before := dump(t, st)
		if _, _, err := f.cp.AuthenticateListenerToken(f.ctx, tok.Token); err != nil {
			t.Fatal(err)
		}
		diff(t, "store after a use within the minute", before, dump(t, st))
		time.Sleep(30 * time.Second)
		if _, _, err := f.cp.AuthenticateListenerToken(f.ctx, tok.Token); err != nil {
			t.Fatal(err)
		}
		diff(t, "last_used_at a minute later", new(used.Add(time.Minute)), lastUsed())

		// Forgeries and near misses.
		for _, bad := range []string{"", "dpl_lt_", tok.Token + "x", tok.Token[:len(tok.Token)-1],
			strings.Replace(tok.Token, tok.ID, tok2.ID, 1), "dpl_lt_" + tok.ID + "_", strings.ToUpper(tok.Token),
			"dpl_lt_not-an-id_secret"} {
			if _, _, err := f.cp.AuthenticateListenerToken(f.ctx, bad); !errors.Is(err, controlplane.ErrInvalidListenerToken) {
				t.Errorf("authenticate %q: %v, want ErrInvalidListenerToken", bad, err)
			}
		}

		// Revoked: refused; only by its own tenant and listener.
		wantErr(t, "revoke through another listener", f.cp.DeleteListenerToken(f.ctx, tenantA, other, tok.ID), apierr.ErrNotFound)
		wantErr(t, "revoke through another tenant", f.cp.DeleteListenerToken(f.ctx, tenantB, theirs, tok.ID), apierr.ErrNotFound)
		wantErr(t, "revoke an unknown token", f.cp.DeleteListenerToken(f.ctx, tenantA, edge, "x"), apierr.ErrNotFound)
		if err := f.cp.DeleteListenerToken(f.ctx, tenantA, edge, tok.ID); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "revoke twice", f.cp.DeleteListenerToken(f.ctx, tenantA, edge, tok.ID), apierr.ErrNotFound)
		if _, _, err := f.cp.AuthenticateListenerToken(f.ctx, tok.Token); !errors.Is(err, controlplane.ErrInvalidListenerToken) {
			t.Errorf("authenticate a revoked token: %v", err)
		}
		if _, _, err := f.cp.AuthenticateListenerToken(f.ctx, tok2.Token); err != nil {
			t.Errorf("the other token after a revocation: %v", err)
		}

		// The listener's deletion takes its tokens with it.
		if err := f.cp.DeleteListener(f.ctx, tenantA, edge); err != nil {
			t.Fatal(err)
		}
		if _, _, err := f.cp.AuthenticateListenerToken(f.ctx, tok2.Token); !errors.Is(err, controlplane.ErrInvalidListenerToken) {
			t.Errorf("authenticate a token of a deleted listener: %v", err)
		}
		if n := len(dump(t, st)["cp_listener_tokens"]); n != 0 {
			t.Errorf("%d token records left after the listener's deletion", n)
		}
	})
}

// values lists every value of a dump.
func values(d map[string]map[string]string) []string {
	var out []string
	for _, col := range d {
		for k, v := range col {
			out = append(out, k, v)
		}
	}
	return out
}
