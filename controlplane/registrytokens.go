package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/internal/expiry"
	"github.com/deployplane/deployplane/store"
)

// Credentials of the server's registry (wire contract section 10): POST
// .../push-token answers a token that the built-in registry accepts as the
// password of HTTP basic auth (any user name), and that an external
// registry's realm (package registry's TokenServer) exchanges for a bearer
// token, valid RegistryTokenTTL, for push and pull on the deployment's
// repository prefix only (RegistryRepository). Deployers pull with a
// pull-only token of the same kind. Only the token's SHA-256 is stored, in
// the control plane's store, so that every replica accepts what any
// replica issued.

// RegistryTokenTTL is how long a registry token is valid.
const RegistryTokenTTL = time.Hour

// colRegistryTokens holds "t/<sha256 hex of the token>" -> the token's
// record (JSON registryTokenRecord) and the expiry index
// "e/<expiry.Key(expiry)>/t/<hash>" (package internal/expiry) that sweeps expired ones as new ones
// are issued.
const colRegistryTokens = "cp_registry_tokens"

// ErrRegistryTokenInvalid is returned by CheckRegistryToken for a token
// that is unknown, expired, or whose deployment is gone or being deleted.
var ErrRegistryTokenInvalid = errors.New("controlplane: registry token unknown or expired")

// errPushTokenSource is the 400 of a push token for another source (the
// sentence langgraph deploy looks for).
var errPushTokenSource = apierr.InvalidStatef("push token is only available for 'internal_docker' source deployments")

// RegistryRepository is the repository prefix of a deployment in the
// built-in registry: its images are <registry host>/<prefix>/<name>.
func RegistryRepository(deploymentID string) string { return "deployments/" + deploymentID }

// RegistryToken is an issued credential: Token is shown once, never stored.
type RegistryToken struct {
	Token string
	// Repository is the prefix it may reach (RegistryRepository).
	Repository string
	// Push says it may push as well as pull.
	Push      bool
	ExpiresAt time.Time
}

// RegistryGrant is what a valid token allows.
type RegistryGrant struct {
	Tenant, DeploymentID string
	// Repository is the deployment's prefix (RegistryRepository).
	Repository string
	Push       bool
	ExpiresAt  time.Time
}

// Allows reports whether the grant covers action ("pull" or "push") on
// repository: the deployment's prefix itself or a repository below it;
// push only for a push token. Any other action (delete, the catalog) is
// refused.
func (g *RegistryGrant) Allows(repository, action string) bool {
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

type registryTokenRecord struct {
	Tenant     string `json:"t"`
	Deployment string `json:"d"`
	Push       bool   `json:"p,omitempty"`
	Expires    int64  `json:"e"` // Unix microseconds
}

// IssuePushToken issues a push-and-pull token for an internal_docker
// deployment of the tenant. Errors: *apierr.NotFoundError;
// apierr.ErrInvalidState with the contract's sentence for another source,
// or while the deployment is being deleted.
func (cp *ControlPlane) IssuePushToken(ctx context.Context, tenant, deploymentID string) (*RegistryToken, error) {
	return cp.issueRegistryToken(ctx, tenant, deploymentID, true)
}

// IssuePullToken issues a pull-only token for a deployment of the tenant,
// of any source: what a Deployer uses to pull the deployment's image from
// the built-in registry. Errors: *apierr.NotFoundError.
func (cp *ControlPlane) IssuePullToken(ctx context.Context, tenant, deploymentID string) (*RegistryToken, error) {
	return cp.issueRegistryToken(ctx, tenant, deploymentID, false)
}

func (cp *ControlPlane) issueRegistryToken(ctx context.Context, tenant, deploymentID string, push bool) (*RegistryToken, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	id, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	token := "dpr_" + rand.Text() + rand.Text()
	now := cp.now()
	rec := registryTokenRecord{Tenant: tenant, Deployment: id, Push: push, Expires: now.Add(RegistryTokenTTL).UnixMicro()}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	h := digestKey(token)
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		d, err := cp.getDeployment(tx, tenant, id)
		if err != nil {
			return err
		}
		if push && d.Source != SourceInternalDocker {
			return errPushTokenSource
		}
		if d.Status == StatusAwaitingDelete {
			return apierr.InvalidStatef("Deployment ID %s is being deleted.", id)
		}
		if err := expiry.Sweep(tx, colRegistryTokens, expiry.Key(now)); err != nil {
			return err
		}
		exp := time.UnixMicro(rec.Expires)
		if err := tx.Put(colRegistryTokens, expiry.Entry(exp, "t/"+h), nil); err != nil {
			return err
		}
		return tx.Create(colRegistryTokens, "t/"+h, b)
	})
	if err != nil {
		return nil, cp.storeErr("issue registry token", err)
	}
	return &RegistryToken{Token: token, Repository: RegistryRepository(id), Push: push, ExpiresAt: time.UnixMicro(rec.Expires).UTC()}, nil
}

// CheckRegistryToken answers what token allows, reading the store (so it
// holds across replicas): ErrRegistryTokenInvalid when the token is
// unknown, expired, or its deployment is gone or being deleted.
func (cp *ControlPlane) CheckRegistryToken(ctx context.Context, token string) (*RegistryGrant, error) {
	if !strings.HasPrefix(token, "dpr_") || len(token) > 200 {
		return nil, ErrRegistryTokenInvalid
	}
	now := cp.now()
	var g *RegistryGrant
	err := cp.st.View(ctx, func(r store.Reader) error {
		g = nil
		b, err := r.Get(colRegistryTokens, "t/"+digestKey(token))
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrRegistryTokenInvalid
			}
			return err
		}
		var rec registryTokenRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		exp := time.UnixMicro(rec.Expires).UTC()
		if !now.Before(exp) {
			return ErrRegistryTokenInvalid
		}
		d, err := cp.getDeployment(r, rec.Tenant, rec.Deployment)
		if err != nil {
			var nf *apierr.NotFoundError
			if errors.As(err, &nf) {
				return ErrRegistryTokenInvalid
			}
			return err
		}
		if d.Status == StatusAwaitingDelete {
			return ErrRegistryTokenInvalid
		}
		g = &RegistryGrant{Tenant: rec.Tenant, DeploymentID: rec.Deployment, Repository: RegistryRepository(rec.Deployment),
			Push: rec.Push, ExpiresAt: exp}
		return nil
	})
	if errors.Is(err, ErrRegistryTokenInvalid) {
		return nil, ErrRegistryTokenInvalid
	}
	if err != nil {
		return nil, cp.storeErr("check registry token", err)
	}
	return g, nil
}
