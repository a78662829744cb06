package oauthflow

import (
	"encoding/json"
	"errors"
	"time"
)

// wireLayout is the timestamp format of the wire contract (section 1):
// RFC 3339 in UTC, always six fractional digits and a Z. The controlplane
// package encodes its timestamps the same way.
const wireLayout = "2006-01-02T15:04:05.000000Z"

// wireTime is a time.Time that encodes in wireLayout. Provider keeps
// time.Time fields; its MarshalJSON encodes a mirror struct whose
// timestamps are wireTime. Decoding needs nothing of the kind: time.Time
// accepts any RFC 3339 time, so records stored by earlier builds (with
// trimmed fractions) still decode.
type wireTime time.Time

// MarshalText formats t in UTC with six fractional digits, truncating
// below the microsecond (the Service's clock truncates too). Like
// time.Time, it fails for a year outside [0,9999]. The receiver is a
// pointer so that encoding/json need not copy the value into an interface
// (the mirror is always encoded through a pointer, so addressable).
func (t *wireTime) MarshalText() ([]byte, error) {
	u := time.Time(*t).UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return nil, errors.New("oauthflow: timestamp year outside of range [0,9999]")
	}
	return u.AppendFormat(make([]byte, 0, len(wireLayout)), wireLayout), nil
}

// providerJSON is Provider as encoded: the same fields, names and order,
// with wireTime timestamps (TestProviderMirror keeps them in step).
type providerJSON struct {
	ID                  string   `json:"id"`
	OrganizationID      string   `json:"organization_id"`
	ProviderID          string   `json:"provider_id"`
	Name                string   `json:"name"`
	ClientID            string   `json:"client_id"`
	AuthURL             string   `json:"auth_url"`
	TokenURL            string   `json:"token_url"`
	UsesPKCE            bool     `json:"uses_pkce"`
	CodeChallengeMethod *string  `json:"code_challenge_method"`
	CreatedAt           wireTime `json:"created_at"`
	UpdatedAt           wireTime `json:"updated_at"`
	ProviderType        *string  `json:"provider_type"`
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
		CreatedAt:           wireTime(p.CreatedAt),
		UpdatedAt:           wireTime(p.UpdatedAt),
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
	if len(more) <= 2 { // {}: no secret
		return b, nil
	}
	return append(append(b[:len(b)-1], ','), more[1:]...), nil
}
