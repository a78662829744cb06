package storepg_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deployplane/deployplane/controlplane"
)

// TestSecretsSealedInRows: with controlplane.Options.SecretKey, no row of
// the records table holds a deployment's or revision's secret value in
// plain text, while the ControlPlane still answers it.
func TestSecretsSealedInRows(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t, nil)
	st := openSchema(t, schema, nil)
	const secret = "dp-secret-pg-4b1e93d7"
	cp := controlplane.New(st, &controlplane.Options{SecretKey: bytes.Repeat([]byte{0x5a}, 32)})
	d, err := cp.CreateDeployment(ctx, "t1", &controlplane.CreateDeploymentRequest{Name: new("a"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")},
		Secrets:              []controlplane.SecretInput{{Name: "K", Value: new(secret)}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cp.GetDeployment(ctx, "t1", d.ID)
	if err != nil || got.Secrets[0].Value != secret {
		t.Fatalf("GetDeployment = %v, %v", got, err)
	}
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT collection, key, value FROM `+pgx.Identifier{schema, "records"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	n, seen := 0, false
	for rows.Next() {
		var col, key, value []byte
		if err := rows.Scan(&col, &key, &value); err != nil {
			t.Fatal(err)
		}
		n++
		if bytes.Contains(bytes.Join([][]byte{col, key, value}, nil), []byte(secret)) {
			t.Errorf("row %s %s holds the secret in plain text: %s", col, key, value)
		}
		seen = seen || bytes.Contains(value, []byte(`"r/a:1"`))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Errorf("no row of %d holds the deployment's image_uri: the test reads the wrong table", n)
	}
}
