package oauthflow

import (
	"encoding/json"

	"github.com/deployplane/deployplane/internal/wirejson"
)

// providerJSON is Provider as encoded: the same fields, names and order,
// with wirejson.Time timestamps (TestProviderMirror keeps them in step).
type providerJSON struct {
	ID                  string        `json:"id"`
	OrganizationID      string        `json:"organization_id"`
	ProviderID          string        `json:"provider_id"`
	Name                string        `json:"name"`
	ClientID            string        `json:"client_id"`
	AuthURL             string        `json:"auth_url"`
	TokenURL            string        `json:"token_url"`
	UsesPKCE            bool          `json:"uses_pkce"`
	CodeChallengeMethod *string       `json:"code_challenge_method"`
	CreatedAt           wirejson.Time `json:"created_at"`
	UpdatedAt           wirejson.Time `json:"updated_at"`
	ProviderType        *string       `json:"provider_type"`
}

// MarshalJSON encodes p with its timestamps in the wire format
// (2026-11-21T10:04:05.123456Z: UTC, six fractional digits).
func (p Provider) MarshalJSON() ([]byte, error) {
	return json.Marshal(&providerJSON{
		ID:                  p.ID,
		OrganizationID:      p.OrganizationID,
		ProviderID:          p.ProviderID,
		Name:                p.Name,
		ClientID:            p.ClientID,
		AuthURL:             p.AuthURL,
		TokenURL:            p.TokenURL,
		UsesPKCE:            p.UsesPKCE,
		CodeChallengeMethod: p.CodeChallengeMethod,
		CreatedAt:           wirejson.Time(p.CreatedAt),
		UpdatedAt:           wirejson.Time(p.UpdatedAt),
		ProviderType:        p.ProviderType,
	})
}

// providerRecordRest is the part of a providerRecord after its Provider.
type providerRecordRest struct {
	SealedSecret []byte `json:"sealed_secret,omitempty"`
}

// MarshalJSON encodes r as Provider.MarshalJSON does, followed by the
// sealed secret. Without it, Provider's MarshalJSON would be promoted and
// the secret dropped from the stored record.
func (r providerRecord) MarshalJSON() ([]byte, error) {
	b, err := r.Provider.MarshalJSON()
	if err != nil {
		return nil, err
	}
	more, err := json.Marshal(providerRecordRest{r.SealedSecret})
	if err != nil {
		return nil, err
	}
	return wirejson.AppendMembers(b, more), nil
}
