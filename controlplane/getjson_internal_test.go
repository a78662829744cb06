package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// TestGetDeploymentJSONOfRecordWithoutSecrets: a record stored without
// its secrets member (a nil list) answers the wire JSON, secrets [],
// through the decoding path; unknown ids and other tenants' ids are not
// found.
func TestGetDeploymentJSONOfRecordWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := New(st, nil)
	d, err := cp.CreateDeployment(ctx, "t1", &CreateDeploymentRequest{Name: new("a"), Source: new(SourceExternalDocker),
		SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}, TagValueIDs: []string{"11111111-1111-4111-8111-111111111111"}})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		rec, err := cp.getDeployment(tx, "t1", d.ID)
		if err != nil {
			return err
		}
		rec.Secrets = nil
		b, err := cp.secrets.encodeDeployment("t1", rec)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(`"sec"`)) {
			t.Errorf("stored record %s holds a secrets member", b)
		}
		return tx.Put(colDeployments, testDeploymentKey(tx, "t1", d.ID), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	cp = New(st, nil) // no answer kept: the record is decoded
	got, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d)
	if string(got) != string(want) {
		t.Errorf("GetDeploymentJSON = %s\nwant %s", got, want)
	}
	for _, c := range []struct{ tenant, id string }{{"t2", d.ID}, {"t1", "00000000-0000-4000-8000-000000000000"}, {"t1", "nope"}} {
		if _, err := cp.GetDeploymentJSON(ctx, c.tenant, c.id); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("GetDeploymentJSON(%s, %s) = %v, want not found", c.tenant, c.id, err)
		}
	}
}
