package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// GitHub installations: who owns an installation, and the verified way to
// claim one (StartGitHubInstall, then CompleteGitHubInstall).
//
// The pending states of the verified flow are a side feature kept by an
// InstallStates (package githubapp's States, in its own collection); the
// control plane keeps what deployments depend on: the integrations, and
// which tenant owns an installation, which decides where a push goes.
//
// Collections (besides cp_integrations and cp_integration_installs, see
// records.go):
//
//	cp_installation_owners  installation id              -> tenant/integration id (one owner per installation)
//	cp_webhook_deliveries    d/sha256(delivery id)       -> ts (push.go)
//	cp_webhook_deliveries    b/sha256(body digest)       -> ts
//	cp_webhook_deliveries    e/ts/d|b/hash               -> "" (oldest first, for removal)
const (
	colInstallationOwners = "cp_installation_owners"
	colDeliveries         = "cp_webhook_deliveries"
)

// GitHubInstallStateTTL is how long a state of StartGitHubInstall stays
// valid: the time a user has to install the App and come back. An
// InstallStates keeps states this long.
const GitHubInstallStateTTL = 15 * time.Minute

// More sentinel errors, of the GitHub App installation flow. Match them with
// errors.Is; the errors returned that match them carry a sentence fit for
// a response's detail.
var (
	// ErrGitHubAppNotConfigured: the control plane has no GitHubApp
	// (Options.GitHubApp), so installations cannot be verified (HTTP 503).
	ErrGitHubAppNotConfigured = errors.New("github app not configured")
	// ErrUnknownInstallState: the state of a GitHub setup redirect is
	// unknown, expired or already used (HTTP 400).
	ErrUnknownInstallState = errors.New("unknown install state")
	// ErrInstallationForbidden: GitHub says the user who came back from the
	// installation cannot access that installation (HTTP 403). A GitHubApp
	// returns an error matching it from VerifyInstallation.
	ErrInstallationForbidden = errors.New("installation not accessible")
	// ErrGitHubUnavailable: GitHub refused the authorization code or could
	// not be reached (HTTP 502). CompleteGitHubInstall returns it for every
	// VerifyInstallation error but ErrInstallationForbidden, whose cause
	// goes to the log.
	ErrGitHubUnavailable = errors.New("github unavailable")
)

// The sentences of the installation flow's errors.
var (
	errNoGitHubApp = &apierr.DetailError{Kind: ErrGitHubAppNotConfigured,
		Detail: "No GitHub App is configured on this server, so GitHub installations cannot be verified."}
	errNoInstallStates = &apierr.DetailError{Kind: ErrGitHubAppNotConfigured,
		Detail: "This server keeps no GitHub installation states, so GitHub installations cannot be verified."}
	errInstallState = &apierr.DetailError{Kind: ErrUnknownInstallState,
		Detail: "This installation link is invalid, has expired, or was already used."}
	errInstallForbidden = &apierr.DetailError{Kind: ErrInstallationForbidden,
		Detail: "The GitHub user who installed the App cannot access this installation."}
	errGitHubDown = &apierr.DetailError{Kind: ErrGitHubUnavailable,
		Detail: "GitHub did not confirm the installation: the authorization code was refused or GitHub could not be reached."}
)

// GitHubApp is the GitHub App through which tenants install the
// integration. The control plane calls it outside store transactions.
// Package githubapp implements it over GitHub's API.
type GitHubApp interface {
	// InstallURL returns the App's installation page, carrying state so
	// that GitHub's setup redirect brings it back.
	InstallURL(state string) string
	// VerifyInstallation exchanges code, the OAuth code of GitHub's setup
	// redirect, for a user token and confirms that this user can access
	// the installation. It returns the installation's account (user or
	// organization login). An error matching ErrInstallationForbidden
	// means GitHub answered that the user cannot; any other error means
	// the answer could not be had. Errors must not contain code or tokens.
	VerifyInstallation(ctx context.Context, code string, installationID int64) (account string, err error)
}

// InstallStates keeps the states of the verified installation flow: each
// single use, bound to a tenant, and valid GitHubInstallStateTTL. The
// control plane calls it outside store transactions. Package githubapp's
// States implements it over a store.
type InstallStates interface {
	// Issue stores a fresh, unguessable state bound to tenant and
	// returns it.
	Issue(ctx context.Context, tenant string) (state string, err error)
	// Consume spends state and returns the tenant it is bound to. A state
	// that is unknown, already spent or expired is an error matching
	// ErrUnknownInstallState.
	Consume(ctx context.Context, state string) (tenant string, err error)
}

// GitHubSetup is GitHub's setup redirect after a user installed (or
// changed) the App: the query of GET /v1/integrations/github/setup.
type GitHubSetup struct {
	// InstallationID is installation_id.
	InstallationID int64
	// SetupAction is setup_action: "install", "update", or "request" (a
	// user without the right to install asked an owner to; there is no
	// installation yet).
	SetupAction string
	// Code is code, the OAuth code for a user token.
	Code string
	// State is state, as StartGitHubInstall made it.
	State string
}

// digestKey is the hex SHA-256 of s: fixed-length keys for values that
// come from outside (states, delivery ids), which are never stored as such.
func digestKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// StartGitHubInstall begins the verified installation of the GitHub App
// for tenant: it has the InstallStates issue a fresh state bound to tenant
// (single use, valid GitHubInstallStateTTL) and returns the App's
// installation URL carrying it. Errors: ErrGitHubAppNotConfigured (no
// GitHubApp or no InstallStates).
func (cp *ControlPlane) StartGitHubInstall(ctx context.Context, tenant string) (string, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return "", err
	}
	if cp.github == nil {
		return "", errNoGitHubApp
	}
	if cp.states == nil {
		return "", errNoInstallStates
	}
	state, err := cp.states.Issue(ctx, tenant)
	if err != nil {
		return "", cp.storeErr("start github install", err)
	}
	return cp.github.InstallURL(state), nil
}

// CompleteGitHubInstall finishes a verified installation: it consumes the
// state (single use: a second use, an unknown or an expired state is
// ErrUnknownInstallState), asks the GitHubApp to confirm that the user
// behind code can access the installation, and only then records the
// integration for the state's tenant, named after the installation's
// account. The installation must not belong to another tenant
// (apierr.ErrConflict); when the tenant already holds it, its integration is
// returned unchanged. Errors: *apierr.ValidationError (no installation id or
// code, or setup_action "request": nothing installed yet),
// ErrGitHubAppNotConfigured, ErrUnknownInstallState,
// ErrInstallationForbidden, ErrGitHubUnavailable, apierr.ErrConflict.
func (cp *ControlPlane) CompleteGitHubInstall(ctx context.Context, s *GitHubSetup) (*Integration, error) {
	if cp.github == nil {
		return nil, errNoGitHubApp
	}
	if cp.states == nil {
		return nil, errNoInstallStates
	}
	if s == nil {
		s = &GitHubSetup{}
	}
	c := &checker{lim: cp.lim}
	if s.State == "" {
		c.add([]any{"query", "state"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	}
	if s.SetupAction == "request" {
		c.add([]any{"query", "setup_action"}, apierr.TypeLiteralError,
			"The installation was requested and awaits approval by an owner of the account; start again once it is approved")
	} else {
		if s.InstallationID <= 0 {
			c.add([]any{"query", "installation_id"}, apierr.TypeGreaterThan, "Input should be greater than 0")
		}
		if s.Code == "" {
			c.add([]any{"query", "code"}, apierr.TypeMissing,
				"Field required (the GitHub App must request user authorization (OAuth) during installation)")
		}
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	// The state is spent before GitHub is asked, so that it is single use
	// even when two redirects race; a failure below means starting again.
	tenant, err := cp.states.Consume(ctx, s.State)
	switch {
	case errors.Is(err, ErrUnknownInstallState):
		return nil, errInstallState
	case err != nil:
		return nil, cp.storeErr("complete github install", err)
	}
	account, err := cp.github.VerifyInstallation(ctx, s.Code, s.InstallationID)
	switch {
	case errors.Is(err, ErrInstallationForbidden):
		return nil, errInstallForbidden
	case err != nil:
		cp.log.Warn("controlplane: github installation not verified", "installation_id", s.InstallationID, "err", err)
		return nil, errGitHubDown
	}
	if account == "" {
		account = "installation " + strconv.FormatInt(s.InstallationID, 10)
	}
	if len(account) > cp.lim.MaxStringBytes {
		account = account[:cp.lim.MaxStringBytes]
	}
	return cp.recordIntegration(ctx, tenant, s.InstallationID, account, true)
}

// recordIntegration records that tenant holds installationID, as a new
// integration named name, in one Update. An installation held by another
// tenant is apierr.ErrConflict; one the tenant already holds is apierr.ErrConflict too,
// unless again is true, which returns the existing integration instead.
func (cp *ControlPlane) recordIntegration(ctx context.Context, tenant string, installationID int64, name string, again bool) (*Integration, error) {
	rec := &integrationRecord{Integration: Integration{ID: cp.newID(), InstallationID: installationID, Name: name},
		CreatedAt: cp.now()}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	inst := strconv.FormatInt(installationID, 10)
	var out *Integration
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		out = nil
		owner, err := tx.Get(colInstallationOwners, inst)
		switch {
		case err == nil:
			t, id, _ := strings.Cut(string(owner), "/")
			if t != tenant || !again {
				return apierr.Conflictf("GitHub installation %d is already registered.", installationID)
			}
			v, err := tx.Get(colIntegrations, key(tenant, id))
			if err != nil {
				return err
			}
			var got integrationRecord
			if err := json.Unmarshal(v, &got); err != nil {
				return fmt.Errorf("controlplane: decoding integration %s: %w", id, err)
			}
			out = &got.Integration
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := tx.Create(colInstallationOwners, inst, []byte(key(tenant, rec.ID))); err != nil {
			return err
		}
		if err := tx.Put(colIntegrationInsts, key(tenant, inst), []byte(rec.ID)); err != nil {
			return err
		}
		if err := tx.Create(colIntegrations, key(tenant, rec.ID), b); err != nil {
			return err
		}
		out = &rec.Integration
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("create integration", err)
	}
	return out, nil
}
