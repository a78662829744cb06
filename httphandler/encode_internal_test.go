package httphandler

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
)

// TestEncodeAsEncoder: encode writes exactly what json.Encoder writes, for
// the response types it encodes directly (values, pointers, nil pointers,
// HTML characters and U+2028 in strings) and for any other value.
func TestEncodeAsEncoder(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 100_000_000, time.UTC)
	tricky := "<a&b> \u2028 \"ü\""
	d := controlplane.Deployment{ID: "d", Name: tricky, Secrets: []controlplane.Secret{{Name: "S", Value: tricky}}, CreatedAt: at, UpdatedAt: at,
		SourceConfig: controlplane.SourceConfig{ResourceSpec: &controlplane.ResourceSpec{CPU: new(0.5), Labels: map[string]string{"<k>": tricky}}}}
	r := controlplane.Revision{ID: "r", CreatedAt: at, StatusMessage: &tricky}
	l := controlplane.Listener{ID: "l", ComputeID: tricky, UpdatedAt: at}
	p := oauthflow.Provider{ID: "p", Name: tricky, CreatedAt: at, UpdatedAt: at}
	dp := controlplane.DeploymentPage{Resources: []controlplane.Deployment{d, d}, Offset: 2}
	rp := controlplane.RevisionPage{Resources: []controlplane.Revision{r}, Offset: 1}
	lp := controlplane.ListenerPage{Resources: []controlplane.Listener{}}
	for _, v := range []any{d, &d, r, &r, l, &l, p, &p, dp, &dp, rp, &rp, lp, &lp, controlplane.DeploymentPage{},
		(*controlplane.Deployment)(nil), (*controlplane.RevisionPage)(nil), (*oauthflow.Provider)(nil),
		[]oauthflow.Provider{p}, errorBody{tricky}, map[string]any{"x": tricky}} {
		var want, got bytes.Buffer
		if err := json.NewEncoder(&want).Encode(v); err != nil {
			t.Fatal(err)
		}
		if err := encode(&got, v); err != nil {
			t.Fatalf("encode(%T): %v", v, err)
		}
		if got.String() != want.String() {
			t.Errorf("encode(%T) = %s\nwant %s", v, got.Bytes(), want.Bytes())
		}
	}
}
