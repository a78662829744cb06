package oauthflow

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/wiretime"
)

// TestProviderRecordAsBefore: a stored provider is its wire JSON followed by
// the sealed secret (none when empty), byte for byte what was stored when a
// mirror struct encoded Provider, and it decodes back to the same record.
func TestProviderRecordAsBefore(t *testing.T) {
	at := wiretime.New(time.Date(2026, 11, 21, 10, 4, 5, 120_000_000, time.UTC))
	const wire = `{"id":"p","organization_id":"t","provider_id":"github","name":"","client_id":"","auth_url":"","token_url":"",` +
		`"uses_pkce":false,"code_challenge_method":null,"created_at":"2026-11-21T10:04:05.120000Z","updated_at":"2026-11-21T10:04:05.120000Z","provider_type":null`
	for _, c := range []struct {
		rec  providerRecord
		want string
	}{
		{providerRecord{Provider: Provider{ID: "p", OrganizationID: "t", ProviderID: "github", CreatedAt: at, UpdatedAt: at}, SealedSecret: []byte{1, 2, 3}},
			wire + `,"sealed_secret":"AQID"}`},
		{providerRecord{Provider: Provider{ID: "p", OrganizationID: "t", ProviderID: "github", CreatedAt: at, UpdatedAt: at}}, wire + `}`},
	} {
		b, err := json.Marshal(c.rec)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("stored as\n%s\nwant\n%s", b, c.want)
		}
		var got providerRecord
		if err := json.Unmarshal([]byte(c.want), &got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.rec, got); d != "" {
			t.Errorf("round trip of %s (-want +got):\n%s", c.want, d)
		}
	}
}
