package controlplane_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// TestRegistryGrantAllows: a grant covers its prefix and below, pull
// always, push only for a push token, nothing else.
func TestRegistryGrantAllows(t *testing.T) {
	g := &controlplane.RegistryGrant{Repository: "deployments/d1", Push: true}
	pull := &controlplane.RegistryGrant{Repository: "deployments/d1"}
	for _, tt := range []struct {
		g            *controlplane.RegistryGrant
		repo, action string
		want         bool
	}{
		{g, "deployments/d1/agent", "push", true},
		{g, "deployments/d1/a/b", "pull", true},
		{g, "deployments/d1", "push", true},
		{g, "deployments/d12/agent", "push", false},
		{g, "deployments/d2/agent", "pull", false},
		{g, "deployments", "pull", false},
		{g, "deployments/d1/agent", "delete", false},
		{g, "deployments/d1/agent", "*", false},
		{pull, "deployments/d1/agent", "pull", true},
		{pull, "deployments/d1/agent", "push", false},
	} {
		if got := tt.g.Allows(tt.repo, tt.action); got != tt.want {
			t.Errorf("push %v: Allows(%s, %s) = %v, want %v", tt.g.Push, tt.repo, tt.action, got, tt.want)
		}
	}
}

// TestRegistryTokens: a token is checked through any ControlPlane over
// the store (a replica), only its hash is stored, and it expires after
// RegistryTokenTTL.
func TestRegistryTokens(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(tenantA, `{"name": "a", "source": "internal_docker"}`)
	tok, err := f.cp.IssuePushToken(f.ctx, tenantA, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	for col, recs := range dump(t, f.st) {
		for k, v := range recs {
			if strings.Contains(k, tok.Token) || strings.Contains(v, tok.Token) {
				t.Errorf("%s/%s holds the token", col, k)
			}
		}
	}
	replica := controlplane.New(f.st, &controlplane.Options{Clock: func() time.Time { return f.now }})
	g, err := replica.CheckRegistryToken(f.ctx, tok.Token)
	if err != nil || g.DeploymentID != d.ID || g.Tenant != tenantA || !g.Push || g.Repository != controlplane.RegistryRepository(d.ID) {
		t.Fatalf("check through a replica: %+v, %v", g, err)
	}
	f.now = f.now.Add(controlplane.RegistryTokenTTL)
	if _, err := f.cp.CheckRegistryToken(f.ctx, tok.Token); !errors.Is(err, controlplane.ErrRegistryTokenInvalid) {
		t.Errorf("after an hour: %v, want ErrRegistryTokenInvalid", err)
	}
	for _, bad := range []string{"", "dpr_", "x" + tok.Token[1:]} {
		if _, err := f.cp.CheckRegistryToken(f.ctx, bad); !errors.Is(err, controlplane.ErrRegistryTokenInvalid) {
			t.Errorf("token %q: %v", bad, err)
		}
	}
}
