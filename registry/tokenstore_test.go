package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/registry"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

// TestGrantAllows: a grant covers its prefix and below, pull
// always, push only for a push token, nothing else.
func TestGrantAllows(t *testing.T) {
	g := &registry.Grant{Repository: "deployments/d1", Push: true}
	pull := &registry.Grant{Repository: "deployments/d1"}
	for _, tt := range []struct {
		g            *registry.Grant
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

// TestRegistryTokens: a token is checked through any TokenStore over the
// control plane's store (a replica), only its hash is stored, it expires
// after TokenTTL, and a push token is only for an internal_docker
// deployment.
func TestRegistryTokens(t *testing.T) {
	e := newEnv(t)
	d := e.deployment(t, tenantA, "a", "internal_docker")
	tok, err := e.tokens.IssuePushToken(e.ctx, tenantA, d)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Push || tok.Repository != registry.Repository(d) || !tok.ExpiresAt.Equal(e.now.Add(registry.TokenTTL)) {
		t.Errorf("token %+v", tok)
	}
	dumped, err := storetest.Dump(e.ctx, e.cp.Store(), append(controlplane.Collections(), registry.TokenCollection)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(dumped[registry.TokenCollection]) == 0 {
		t.Errorf("no record in %s", registry.TokenCollection)
	}
	for col, recs := range dumped {
		for k, v := range recs {
			if strings.Contains(k, tok.Token) || strings.Contains(v, tok.Token) {
				t.Errorf("%s/%s holds the token", col, k)
			}
		}
	}
	replica := registry.NewTokenStore(controlplane.New(e.cp.Store(), nil), &registry.TokenStoreOptions{Clock: func() time.Time { return e.now }})
	g, err := replica.CheckRegistryToken(e.ctx, tok.Token)
	if err != nil || g.DeploymentID != d || g.Tenant != tenantA || !g.Push || g.Repository != registry.Repository(d) {
		t.Fatalf("check through a replica: %+v, %v", g, err)
	}
	ext := e.deployment(t, tenantA, "x", "external_docker")
	if _, err := e.tokens.IssuePushToken(e.ctx, tenantA, ext); !errors.Is(err, apierr.ErrInvalidState) {
		t.Errorf("push token of external_docker: %v, want ErrInvalidState", err)
	}
	pull, err := e.tokens.IssuePullToken(e.ctx, tenantA, ext)
	if err != nil || pull.Push {
		t.Errorf("pull token of external_docker: %+v, %v", pull, err)
	}
	var nf *apierr.NotFoundError
	if _, err := e.tokens.IssuePullToken(e.ctx, tenantB, d); !errors.As(err, &nf) {
		t.Errorf("another tenant's deployment: %v, want NotFoundError", err)
	}
	e.now = e.now.Add(registry.TokenTTL)
	if _, err := e.tokens.CheckRegistryToken(e.ctx, tok.Token); !errors.Is(err, registry.ErrTokenInvalid) {
		t.Errorf("after an hour: %v, want ErrTokenInvalid", err)
	}
	for _, bad := range []string{"", "dpr_", "x" + tok.Token[1:]} {
		if _, err := e.tokens.CheckRegistryToken(e.ctx, bad); !errors.Is(err, registry.ErrTokenInvalid) {
			t.Errorf("token %q: %v", bad, err)
		}
	}
}

// TestTokenRecordLayout: the records keep their layout, so that a token
// one replica issued is accepted by every other: t/<sha256 hex of the
// token> holds {"t": tenant, "d": deployment, "p": push, "e": expiry in
// Unix microseconds}, beside the expiry index e/<expiry>/t/<hash>.
func TestTokenRecordLayout(t *testing.T) {
	e := newEnv(t)
	d := e.deployment(t, tenantA, "a", "internal_docker")
	const token = "dpr_written-by-another-replica"
	sum := sha256.Sum256([]byte(token))
	hash := hex.EncodeToString(sum[:])
	exp := e.now.Add(time.Minute).UnixMicro()
	err := e.cp.Store().Update(e.ctx, func(tx store.Tx) error {
		return tx.Create("cp_registry_tokens", "t/"+hash, fmt.Appendf(nil, `{"t":%q,"d":%q,"p":true,"e":%d}`, tenantA, d, exp))
	})
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.tokens.CheckRegistryToken(e.ctx, token)
	if err != nil || g.Tenant != tenantA || g.DeploymentID != d || !g.Push || g.ExpiresAt.UnixMicro() != exp {
		t.Fatalf("a record of the layout: %+v, %v", g, err)
	}

	tok, err := e.tokens.IssuePullToken(e.ctx, tenantA, d)
	if err != nil {
		t.Fatal(err)
	}
	sum = sha256.Sum256([]byte(tok.Token))
	hash = hex.EncodeToString(sum[:])
	recs, err := storetest.Dump(e.ctx, e.cp.Store(), "cp_registry_tokens")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"t":%q,"d":%q,"e":%d}`, tenantA, d, tok.ExpiresAt.UnixMicro())
	if got := recs["cp_registry_tokens"]["t/"+hash]; got != want {
		t.Errorf("issued record %s, want %s", got, want)
	}
	index := 0
	for k := range recs["cp_registry_tokens"] {
		if strings.HasPrefix(k, "e/") && strings.HasSuffix(k, "/t/"+hash) {
			index++
		}
	}
	if index != 1 {
		t.Errorf("%d expiry index entries of the issued token, want 1: %v", index, recs)
	}
}
