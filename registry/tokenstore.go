package registry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/expiry"
	"github.com/deployplane/deployplane/store"
)

// Credentials of the server's registry (wire contract section 10): POST
// .../push-token answers a token that the built-in registry accepts as the
// password of HTTP basic auth (any user name), and that an external
// registry's realm (TokenServer) exchanges for a bearer token, valid
// TokenTTL, for push and pull on the deployment's repository prefix only
// (Repository). Deployers pull with a pull-only token of the same kind.
// Only the token's SHA-256 is stored, in the control plane's store
// (controlplane.ControlPlane.Store), so that every replica accepts what
// any replica issued:
//
//	cp_registry_tokens  t/<sha256 hex of the token> -> tokenRecord JSON
//	                    e/<expiry>/t/<hash>          (the expiry index)
//	                    o/<deployment id> -> tenant   (whose repositories they are)
//	                    q/<deployment id>/<upload id> -> uploadRecord JSON
//	                    e/<expiry>/q/<deployment id>/<upload id>
//
// Expired tokens are swept as new ones are issued. Each push token
// records its deployment's tenant (o/), so that the collector (Collect),
// which finds only deployment ids in the storage, can ask the control
// plane what the deployment keeps (KeptImages); the record goes with the
// deployment's repositories. The q/ records are the UploadLedger: the
// bytes each unfinished upload has received, which every replica counts
// against the deployment's quota. The tokens are not
// removed with their deployment (the control plane does not know them):
// CheckRegistryToken reads the deployment in the same transaction and
// refuses a token whose deployment is gone or being deleted, and the
// token is swept once expired.

// TokenTTL is how long a registry token is valid.
const TokenTTL = time.Hour

// TokenCollection is the store collection of the registry tokens, for
// tools that back up, copy or inspect a store (beside
// controlplane.Collections).
const TokenCollection = "cp_registry_tokens"

// ErrTokenInvalid is returned by CheckRegistryToken for a token that is
// unknown, expired, or whose deployment is gone or being deleted.
var ErrTokenInvalid = errors.New("registry: registry token unknown or expired")

// errPushTokenSource is the 400 of a push token for another source (the
// sentence langgraph deploy looks for).
var errPushTokenSource = apierr.InvalidStatef("push token is only available for 'internal_docker' source deployments")

// Repository is the repository prefix of a deployment in the server's
// registry: its images are <registry host>/<prefix>/<name>.
func Repository(deploymentID string) string { return "deployments/" + deploymentID }

// Token is an issued credential: Token is shown once, never stored.
type Token struct {
	Token string
	// Repository is the prefix it may reach (Repository).
	Repository string
	// Push says it may push as well as pull.
	Push      bool
	ExpiresAt time.Time
}

// Grant is what a valid token allows.
type Grant struct {
	Tenant, DeploymentID string
	// Repository is the deployment's prefix (Repository).
	Repository string
	Push       bool
	ExpiresAt  time.Time
}

// Allows reports whether the grant covers action ("pull" or "push") on
// repository: the deployment's prefix itself or a repository below it;
// push only for a push token. Any other action (delete, the catalog) is
// refused.
func (g *Grant) Allows(repository, action string) bool {
	if repository != g.Repository && !strings.HasPrefix(repository, g.Repository+"/") {
		return false
	}
	switch action {
	case "pull":
		return true
	case "push":
		return g.Push
	}
	return false
}

// tokenRecord is what TokenCollection holds under t/<hash>.
type tokenRecord struct {
	Tenant     string `json:"t"`
	Deployment string `json:"d"`
	Push       bool   `json:"p,omitempty"`
	Expires    int64  `json:"e"` // Unix microseconds
}

// TokenStoreOptions configure a TokenStore. nil means defaults.
type TokenStoreOptions struct {
	// Clock tells the time of issue and of the check against expiry.
	// Default: time.Now.
	Clock func() time.Time
}

// TokenStore issues and checks the registry tokens, kept in the control
// plane's store. It implements Tokens. Safe for concurrent use.
type TokenStore struct {
	cp    *controlplane.ControlPlane
	st    store.Store
	clock func() time.Time
}

// NewTokenStore returns the TokenStore of cp's deployments, over cp's
// store.
func NewTokenStore(cp *controlplane.ControlPlane, o *TokenStoreOptions) *TokenStore {
	if o == nil {
		o = &TokenStoreOptions{}
	}
	s := &TokenStore{cp: cp, st: cp.Store(), clock: o.Clock}
	if s.clock == nil {
		s.clock = time.Now
	}
	return s
}

// now is the tokens' time: the clock, in UTC microseconds.
func (s *TokenStore) now() time.Time {
	return s.clock().UTC().Truncate(time.Microsecond)
}

// IssuePushToken issues a push-and-pull token for an internal_docker
// deployment of the tenant. Errors: *apierr.NotFoundError;
// apierr.ErrInvalidState with the contract's sentence for another source,
// or while the deployment is being deleted.
func (s *TokenStore) IssuePushToken(ctx context.Context, tenant, deploymentID string) (*Token, error) {
	return s.issue(ctx, tenant, deploymentID, true)
}

// IssuePullToken issues a pull-only token for a deployment of the tenant,
// of any source: what a Deployer uses to pull the deployment's image from
// the server's registry. Errors: *apierr.NotFoundError.
func (s *TokenStore) IssuePullToken(ctx context.Context, tenant, deploymentID string) (*Token, error) {
	return s.issue(ctx, tenant, deploymentID, false)
}

func (s *TokenStore) issue(ctx context.Context, tenant, deploymentID string, push bool) (*Token, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	token := "dpr_" + rand.Text() + rand.Text()
	now := s.now()
	exp := now.Add(TokenTTL)
	h := tokenDigest(token)
	var id string
	err := s.st.Update(ctx, func(tx store.Tx) error {
		d, err := s.cp.ReadDeployment(tx, tenant, deploymentID)
		if err != nil {
			return err
		}
		if push && d.Source != controlplane.SourceInternalDocker {
			return errPushTokenSource
		}
		if d.Status == controlplane.StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", d.ID)
		}
		id = d.ID
		b, err := json.Marshal(tokenRecord{Tenant: tenant, Deployment: d.ID, Push: push, Expires: exp.UnixMicro()})
		if err != nil {
			return err
		}
		if err := expiry.Sweep(tx, TokenCollection, expiry.Key(now)); err != nil {
			return err
		}
		if err := tx.Put(TokenCollection, expiry.Entry(exp, "t/"+h), nil); err != nil {
			return err
		}
		if push {
			if err := tx.Put(TokenCollection, ownerKey(d.ID), []byte(tenant)); err != nil {
				return err
			}
		}
		return tx.Create(TokenCollection, "t/"+h, b)
	})
	if err != nil {
		return nil, storeErr("issue registry token", err)
	}
	return &Token{Token: token, Repository: Repository(id), Push: push, ExpiresAt: exp}, nil
}

// CheckRegistryToken answers what token allows, reading the store (so it
// holds across replicas): ErrTokenInvalid when the token is unknown,
// expired, or its deployment is gone or being deleted.
func (s *TokenStore) CheckRegistryToken(ctx context.Context, token string) (*Grant, error) {
	if !strings.HasPrefix(token, "dpr_") || len(token) > 200 {
		return nil, ErrTokenInvalid
	}
	now := s.now()
	var g *Grant
	err := s.st.View(ctx, func(r store.Reader) error {
		g = nil
		b, err := r.Get(TokenCollection, "t/"+tokenDigest(token))
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrTokenInvalid
			}
			return err
		}
		var rec tokenRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("decoding registry token: %w", err)
		}
		exp := time.UnixMicro(rec.Expires).UTC()
		if !now.Before(exp) {
			return ErrTokenInvalid
		}
		d, err := s.cp.ReadDeployment(r, rec.Tenant, rec.Deployment)
		if err != nil {
			var nf *apierr.NotFoundError
			if errors.As(err, &nf) {
				return ErrTokenInvalid
			}
			return err
		}
		if d.Status == controlplane.StatusAwaitingDelete {
			return ErrTokenInvalid
		}
		g = &Grant{Tenant: rec.Tenant, DeploymentID: rec.Deployment, Repository: Repository(rec.Deployment),
			Push: rec.Push, ExpiresAt: exp}
		return nil
	})
	if errors.Is(err, ErrTokenInvalid) {
		return nil, ErrTokenInvalid
	}
	if err != nil {
		return nil, storeErr("check registry token", err)
	}
	return g, nil
}

// tokenDigest is the hex SHA-256 of a token, its key: the token itself is
// never stored.
func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// storeErr keeps store sentinels from leaking out of the tokens: an error
// that matches one is returned as plain text. Domain errors pass through.
func storeErr(op string, err error) error {
	for _, sentinel := range []error{store.ErrNotFound, store.ErrAlreadyExists, store.ErrClosed, store.ErrInvalidKey} {
		if errors.Is(err, sentinel) {
			return fmt.Errorf("registry: %s: %s", op, err.Error())
		}
	}
	var nf *apierr.NotFoundError
	var de *apierr.DetailError
	var ve *apierr.ValidationError
	if errors.As(err, &nf) || errors.As(err, &de) || errors.As(err, &ve) {
		return err
	}
	return fmt.Errorf("registry: %s: %w", op, err)
}
