package httphandler

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/uuidtext"
)

// ErrUnauthenticated is what an Authenticator returns (or wraps) for
// credentials it does not accept; the handler answers 401. Any other error
// is a 500.
var ErrUnauthenticated = errors.New("httphandler: invalid credentials")

// Credentials are what a request presents: the X-Api-Key header, or the
// token of an "Authorization: Bearer" header. At least one is non-empty
// when an Authenticator is called.
type Credentials struct {
	APIKey      string
	BearerToken string
}

// String redacts the secrets, so that Credentials never reach a log.
func (c Credentials) String() string {
	return fmt.Sprintf("Credentials{APIKey:%s BearerToken:%s}", redact(c.APIKey), redact(c.BearerToken))
}

// GoString redacts the secrets for %#v too.
func (c Credentials) GoString() string { return c.String() }

func redact(s string) string {
	if s == "" {
		return `""`
	}
	return "[redacted]"
}

// Principal is who the credentials belong to and the tenants (workspace
// ids, lowercase canonical UUIDs) they may act for.
type Principal struct {
	// ID names the principal in logs. It must not be a secret; the
	// built-in KeyTable uses "key:" and the first 8 hex digits of the key's
	// SHA-256 digest.
	ID string
	// Tenants are the tenants the principal may use. With exactly one, a
	// request needs no X-Tenant-Id header; with several, it must name one
	// (otherwise 403 "... requires workspace specification ...").
	Tenants []string
}

// An Authenticator checks the credentials of a request. It returns the
// Principal they identify, or an error matching ErrUnauthenticated (401).
// The handler then picks the tenant from Principal.Tenants and the
// X-Tenant-Id header. Implementations must be safe for concurrent use.
type Authenticator interface {
	Authenticate(ctx context.Context, c Credentials) (*Principal, error)
}

// A DigestAuthenticator is an Authenticator that can also identify an API
// key from its SHA-256 digest (HashKey) alone, as KeyTable does. The
// dashboard keeps that digest in each session, never the key, and checks
// it again at each request, so that a session ends once its key is no
// longer accepted (dashboard.KeyChecker). With an Authenticator that is
// not one, a dashboard session lasts until it expires.
type DigestAuthenticator interface {
	Authenticator
	// AuthenticateDigest returns the Principal of the key whose SHA-256
	// digest is digest, or an error matching ErrUnauthenticated.
	AuthenticateDigest(ctx context.Context, digest [sha256.Size]byte) (*Principal, error)
}

// HashKey returns the SHA-256 digest of an API key, the form in which a
// KeyTable holds it.
func HashKey(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

// Key is one entry of a KeyTable: the SHA-256 digest of an API key and the
// tenants it may use.
type Key struct {
	SHA256  [sha256.Size]byte
	Tenants []string
}

// KeyTable is the built-in Authenticator: a static table of API keys,
// of which it keeps only SHA-256 digests. A request's key (from X-Api-Key,
// or the bearer token when there is no X-Api-Key) is hashed and compared
// with every digest of the table in constant time.
type KeyTable struct {
	keys []tableKey
}

type tableKey struct {
	digest    [sha256.Size]byte
	principal Principal
}

// NewKeyTable returns a KeyTable of keys. Every key needs at least one
// tenant, each a UUID (any letter case; it is kept canonical). Two entries
// with the same digest are an error.
func NewKeyTable(keys []Key) (*KeyTable, error) {
	t := &KeyTable{}
	seen := make(map[[sha256.Size]byte]bool, len(keys))
	for i, k := range keys {
		if seen[k.SHA256] {
			return nil, fmt.Errorf("httphandler: key %d: the same key appears twice", i)
		}
		seen[k.SHA256] = true
		if len(k.Tenants) == 0 {
			return nil, fmt.Errorf("httphandler: key %d: no tenant", i)
		}
		p := Principal{ID: "key:" + hex.EncodeToString(k.SHA256[:4])}
		for _, tenant := range k.Tenants {
			c, ok := CanonicalTenant(tenant)
			if !ok {
				return nil, fmt.Errorf("httphandler: key %d: tenant %q is not a UUID", i, tenant)
			}
			p.Tenants = append(p.Tenants, c)
		}
		t.keys = append(t.keys, tableKey{digest: k.SHA256, principal: p})
	}
	return t, nil
}

// Authenticate implements Authenticator.
func (t *KeyTable) Authenticate(ctx context.Context, c Credentials) (*Principal, error) {
	key := c.APIKey
	if key == "" {
		key = c.BearerToken
	}
	return t.AuthenticateDigest(ctx, HashKey(key))
}

// AuthenticateDigest implements DigestAuthenticator: the Principal of the
// key whose digest is d.
func (t *KeyTable) AuthenticateDigest(_ context.Context, d [sha256.Size]byte) (*Principal, error) {
	found := -1
	for i := range t.keys {
		// Every entry is compared, so the time taken does not depend on
		// which one matches.
		if subtle.ConstantTimeCompare(d[:], t.keys[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, ErrUnauthenticated
	}
	p := t.keys[found].principal
	return &p, nil
}

// CanonicalTenant returns the lowercase canonical form of a tenant id (a
// UUID), and whether s is one.
func CanonicalTenant(s string) (string, bool) {
	return uuidtext.Canonical(s)
}

// The details of 401 and 403 answers.
const (
	detailNoCredentials   = "Missing authentication credentials: send an API key in the X-Api-Key header or a bearer token in the Authorization header."
	detailBadCredentials  = "Invalid authentication credentials."
	detailNeedsTenant     = "This API key is org-scoped and requires workspace specification. Please provide the 'X-Tenant-Id' header."
	detailTenantForbidden = "The credentials are not authorized for the requested workspace."
	detailTokenRoute      = "A listener token is accepted only by its listener's agent routes."
	detailTokenListener   = "This listener token is not for this listener: a listener token is accepted only by its own listener's agent routes."
)

// isListenerToken reports whether c are a listener token's: a bearer
// token with its prefix, and no API key (which, when sent, is what
// authenticates).
func isListenerToken(c Credentials) bool {
	return c.APIKey == "" && strings.HasPrefix(c.BearerToken, controlplane.ListenerTokenPrefix)
}

// credentials reads the credentials of r.
func credentials(r *http.Request) Credentials {
	c := Credentials{APIKey: r.Header.Get("X-Api-Key")}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		c.BearerToken = strings.TrimSpace(a[7:])
	}
	return c
}

// authenticate checks the credentials of r, a request to rt, and picks
// its tenant. A listener token is checked by the ControlPlane, and
// reaches only the agent routes of its own listener (403 elsewhere);
// every other credential goes to the Authenticator.
func (h *handler) authenticate(r *http.Request, rt route) (*Principal, string, error) {
	c := credentials(r)
	if c.APIKey == "" && c.BearerToken == "" {
		return nil, "", &statusError{status: http.StatusUnauthorized, detail: detailNoCredentials}
	}
	if isListenerToken(c) {
		return h.authenticateListener(r, rt, c.BearerToken)
	}
	p, err := h.auth.Authenticate(r.Context(), c)
	if errors.Is(err, ErrUnauthenticated) {
		return nil, "", &statusError{status: http.StatusUnauthorized, detail: detailBadCredentials}
	}
	if err != nil {
		return nil, "", fmt.Errorf("authenticator: %w", err)
	}
	return pickTenant(r, p)
}

// authenticateListener checks a listener token: 401 unless the
// ControlPlane knows it, 403 on a route that is not one of its listener's
// agent routes. Its Principal has the token's tenant only, and is named
// after its listener (the rate limit's key).
func (h *handler) authenticateListener(r *http.Request, rt route, token string) (*Principal, string, error) {
	tenant, listenerID, err := h.cp.AuthenticateListenerToken(r.Context(), token)
	if errors.Is(err, controlplane.ErrInvalidListenerToken) {
		return nil, "", &statusError{status: http.StatusUnauthorized, detail: detailBadCredentials}
	}
	if err != nil {
		return nil, "", err
	}
	p := &Principal{ID: "listener:" + listenerID, Tenants: []string{tenant}}
	if !rt.agent {
		return p, "", &statusError{status: http.StatusForbidden, detail: detailTokenRoute}
	}
	if id, ok := CanonicalTenant(r.PathValue("listener_id")); !ok || id != listenerID {
		return p, "", &statusError{status: http.StatusForbidden, detail: detailTokenListener}
	}
	return pickTenant(r, p)
}

// pickTenant picks the tenant of r among p's: the one of X-Tenant-Id, or
// p's only one when the header is absent.
func pickTenant(r *http.Request, p *Principal) (*Principal, string, error) {
	if p == nil || len(p.Tenants) == 0 {
		return nil, "", &statusError{status: http.StatusForbidden, detail: detailTenantForbidden}
	}
	want := r.Header.Get("X-Tenant-Id")
	if want == "" {
		if len(p.Tenants) != 1 {
			return p, "", &statusError{status: http.StatusForbidden, detail: detailNeedsTenant}
		}
		return p, p.Tenants[0], nil
	}
	if c, ok := CanonicalTenant(want); ok {
		for _, t := range p.Tenants {
			if t == c {
				return p, t, nil
			}
		}
	}
	return p, "", &statusError{status: http.StatusForbidden, detail: detailTenantForbidden}
}
