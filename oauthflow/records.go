package oauthflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/deployplane/deployplane/store"
)

// The collections this package owns. Keys join their parts with NUL, which
// tenants and provider ids cannot contain; a user id, which may contain
// anything, is always the last part.
const (
	// tenant \x00 provider_id -> providerRecord
	collProviders = "oauthflow.providers"
	// tenant \x00 provider_id \x00 user_id -> tokenRecord
	collTokens = "oauthflow.tokens"
	// auth_id -> flowRecord
	collFlows = "oauthflow.flows"
	// hex(sha256(state)) -> auth_id; present while the flow awaits its callback
	collStates = "oauthflow.states"
	// %019d(expires_at unix nanos) \x00 auth_id -> empty; walks flows by expiry
	collFlowExpiry = "oauthflow.flow_expiry"
)

// Collections returns the names of the store collections the package
// writes, for tools that back up, copy or inspect a store.
func Collections() []string {
	return []string{collProviders, collTokens, collFlows, collStates, collFlowExpiry}
}

func providerKey(tenant, providerID string) string { return tenant + "\x00" + providerID }
func tokenPrefix(tenant, providerID string) string { return tenant + "\x00" + providerID + "\x00" }
func tokenKey(tenant, providerID, userID string) string {
	return tokenPrefix(tenant, providerID) + userID
}

// stateKey stores a digest of the state, not the state itself, so that
// reading the database does not reveal live states.
func stateKey(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

func expiryKey(at time.Time, authID string) string {
	return fmt.Sprintf("%019d\x00%s", at.UnixNano(), authID)
}

// Additional data for sealed values: each binds a ciphertext to its record.
func secretAAD(tenant, providerID string) string {
	return "client_secret\x00" + providerKey(tenant, providerID)
}
func tokenAAD(key string) string       { return "token\x00" + key }
func verifierAAD(authID string) string { return "verifier\x00" + authID }

// providerRecord is a Provider as stored, with its sealed client secret.
type providerRecord struct {
	Provider
	SealedSecret []byte `json:"sealed_secret,omitempty"`
}

// tokenRecord is a token as stored; Sealed holds tokenSecrets.
type tokenRecord struct {
	TokenType string    `json:"token_type,omitempty"`
	Scopes    []string  `json:"scopes"`
	Expiry    time.Time `json:"expiry,omitzero"`
	UpdatedAt time.Time `json:"updated_at"`
	Sealed    []byte    `json:"sealed"`
}

// tokenSecrets is the sealed part of a tokenRecord.
type tokenSecrets struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// Flow statuses as stored.
const (
	flowPending    = "pending"    // waiting for the browser to come back
	flowExchanging = "exchanging" // callback claimed the state, code exchange under way
	flowCompleted  = "completed"
	flowFailed     = "failed"
)

// flowRecord is one authorization-code flow.
type flowRecord struct {
	AuthID         string    `json:"auth_id"`
	Tenant         string    `json:"tenant"`
	ProviderID     string    `json:"provider_id"`
	UserID         string    `json:"user_id"`
	AgentID        string    `json:"agent_id,omitempty"`
	Scopes         []string  `json:"scopes"`
	StateKey       string    `json:"state_key"`
	RedirectURI    string    `json:"redirect_uri"`
	SealedVerifier []byte    `json:"sealed_verifier,omitempty"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	ExpiresAt      time.Time `json:"expires_at"`
}

// getJSON reads and decodes one record; a missing key is store.ErrNotFound.
func getJSON(r store.Reader, coll, key string, v any) error {
	b, err := r.Get(coll, key)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("oauthflow: corrupt record %s/%q: %w", coll, key, err)
	}
	return nil
}

// putJSON encodes and stores one record.
func putJSON(tx store.Tx, coll, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("oauthflow: encode %s record: %w", coll, err)
	}
	return tx.Put(coll, key, b)
}
