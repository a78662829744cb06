package oauthflow_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storebolt"
)

// The flow over the durable store the server runs by default: login,
// reuse, refresh, expiry sweep, and a token that survives reopening.
func TestOverBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oauth.db")
	st, err := storebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOver(t, st, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.addProvider(t, tenantB, "fake", true)
	tok := e.login(t, tenantA, "fake", "alice", "repo")
	if res, err := e.svc.Authenticate(ctx, tenantB, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes}); err != nil || res.Status != oauthflow.StatusPending {
		t.Fatalf("tenant B: %+v, %v; want pending", res, err)
	}
	e.clock.Advance(2 * time.Hour)
	res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
	if err != nil || res.Status != oauthflow.StatusCompleted || string(res.Token) == tok {
		t.Fatalf("after expiry: %+v, %v; want a refreshed token", res, err)
	}
	if n, err := e.svc.Cleanup(ctx); err != nil || n != 2 {
		t.Errorf("Cleanup = %d, %v; want 2 (tenant B's open flow, tenant A's completed one)", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = storebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := oauthflow.New(st, &oauthflow.Options{SecretKey: testKey, PublicURL: testPublicURL, Clock: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: []string{"repo"}})
	if err != nil || again.Token != res.Token {
		t.Errorf("after reopening: %+v, %v; want the refreshed token", again, err)
	}
}
