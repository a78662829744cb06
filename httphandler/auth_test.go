package httphandler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/httphandler"
)

func TestNewKeyTableRejects(t *testing.T) {
	tenant := "0194c0de-0000-7000-8000-000000000001"
	k := httphandler.HashKey("k")
	for name, keys := range map[string][]httphandler.Key{
		"no tenant":         {{SHA256: k}},
		"tenant not a UUID": {{SHA256: k, Tenants: []string{"acme"}}},
		"braced UUID":       {{SHA256: k, Tenants: []string{"{" + tenant + "}"}}},
		"the same key":      {{SHA256: k, Tenants: []string{tenant}}, {SHA256: k, Tenants: []string{tenant}}},
	} {
		if _, err := httphandler.NewKeyTable(keys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKeyTable: each key reaches its own principal (whichever entry of the
// table it is), the X-Api-Key wins over a bearer token, and the principal's
// id is a digest prefix, never the key.
func TestKeyTable(t *testing.T) {
	var keys []httphandler.Key
	for i := range 50 {
		keys = append(keys, httphandler.Key{SHA256: httphandler.HashKey(fmt.Sprint("key-", i)),
			Tenants: []string{fmt.Sprintf("0194c0de-0000-7000-8000-%012d", i)}})
	}
	kt, err := httphandler.NewKeyTable(keys)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 50 {
		p, err := kt.Authenticate(ctx, httphandler.Credentials{APIKey: fmt.Sprint("key-", i), BearerToken: "key-0"})
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "tenant", []string{fmt.Sprintf("0194c0de-0000-7000-8000-%012d", i)}, p.Tenants)
		if !strings.HasPrefix(p.ID, "key:") || strings.Contains(p.ID, fmt.Sprint("key-", i)) {
			t.Errorf("principal id %q", p.ID)
		}
	}
	for _, c := range []httphandler.Credentials{{APIKey: "key-50"}, {BearerToken: "KEY-1"}, {APIKey: "key-1 "}} {
		if _, err := kt.Authenticate(ctx, c); !errors.Is(err, httphandler.ErrUnauthenticated) {
			t.Errorf("%q: %v", c.APIKey+c.BearerToken, err)
		}
	}
}

// TestCredentialsRedacted: Credentials never print their secrets, with fmt
// or log/slog.
func TestCredentialsRedacted(t *testing.T) {
	c := httphandler.Credentials{APIKey: "the-api-key", BearerToken: "the-token"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("x", "credentials", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %s %#v", c, c, c, c), b.String()} {
		if strings.Contains(s, "the-api-key") || strings.Contains(s, "the-token") {
			t.Errorf("secrets printed: %s", s)
		}
	}
}
