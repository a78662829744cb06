package githubapp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/expiry"
	"github.com/deployplane/deployplane/store"
)

// StatesCollection is the store collection States writes:
//
//	s/sha256(state)              -> {"tenant": ..., "expires_at": ...}
//	e/expiry ts/s/sha256(state)  -> "" (oldest first, for removal)
//
// States are never stored as such, only their SHA-256.
const StatesCollection = "cp_github_install_states"

// StatesOptions configure States. A nil *StatesOptions means defaults.
type StatesOptions struct {
	// Clock tells the time states expire by; default time.Now.
	Clock func() time.Time
}

// States are the pending states of the GitHub App's installation flow, in
// a store: each single use, bound to a tenant and valid for
// controlplane.GitHubInstallStateTTL. It implements
// controlplane.InstallStates and is safe for concurrent use.
type States struct {
	st    store.Store
	clock func() time.Time
}

var _ controlplane.InstallStates = (*States)(nil)

// NewStates returns the installation states kept in st (usually the
// control plane's own store), in StatesCollection.
func NewStates(st store.Store, o *StatesOptions) *States {
	s := &States{st: st, clock: time.Now}
	if o != nil && o.Clock != nil {
		s.clock = o.Clock
	}
	return s
}

// stateRecord is what a pending state holds.
type stateRecord struct {
	Tenant    string    `json:"tenant"`
	ExpiresAt time.Time `json:"expires_at"`
}

func (s *States) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// Issue stores a fresh state bound to tenant, valid
// controlplane.GitHubInstallStateTTL, and returns it. It removes a few
// expired states on the way.
func (s *States) Issue(ctx context.Context, tenant string) (string, error) {
	state := rand.Text() + rand.Text()
	now := s.now()
	rec := stateRecord{Tenant: tenant, ExpiresAt: now.Add(controlplane.GitHubInstallStateTTL)}
	b, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	h := digest(state)
	err = s.st.Update(ctx, func(tx store.Tx) error {
		if err := expiry.Sweep(tx, StatesCollection, expiry.Key(now)); err != nil {
			return err
		}
		if err := tx.Put(StatesCollection, expiry.Entry(rec.ExpiresAt, "s/"+h), nil); err != nil {
			return err
		}
		return tx.Create(StatesCollection, "s/"+h, b)
	})
	if err != nil {
		return "", fmt.Errorf("githubapp: issuing install state: %w", err)
	}
	return state, nil
}

// Consume spends state and returns the tenant it is bound to. A state
// that is unknown, already spent or expired is an error matching
// controlplane.ErrUnknownInstallState; an expired one is spent all the
// same.
func (s *States) Consume(ctx context.Context, state string) (string, error) {
	now := s.now()
	h := digest(state)
	var tenant string
	err := s.st.Update(ctx, func(tx store.Tx) error {
		tenant = ""
		b, err := tx.Get(StatesCollection, "s/"+h)
		if errors.Is(err, store.ErrNotFound) {
			return errUnknownState
		}
		if err != nil {
			return err
		}
		var rec stateRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("decoding install state: %w", err)
		}
		if err := tx.Delete(StatesCollection, "s/"+h); err != nil {
			return err
		}
		if err := tx.Delete(StatesCollection, expiry.Entry(rec.ExpiresAt, "s/"+h)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if now.Before(rec.ExpiresAt) {
			tenant = rec.Tenant
		}
		return nil
	})
	switch {
	case errors.Is(err, errUnknownState):
		return "", err
	case err != nil:
		return "", fmt.Errorf("githubapp: consuming install state: %w", err)
	case tenant == "":
		return "", errUnknownState
	}
	return tenant, nil
}

var errUnknownState = fmt.Errorf("githubapp: %w", controlplane.ErrUnknownInstallState)

// digest is the hex SHA-256 of s: fixed-length keys for states, which are
// never stored as such.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
