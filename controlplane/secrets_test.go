package controlplane_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// secretValue is distinctive enough that finding it in a store's bytes
// means it is stored in plain text.
const secretValue = "dp-secret-7f3a9c51e2"

// testSecretKey is a 32-byte key for the tests.
var testSecretKey = bytes.Repeat([]byte{0x5a}, 32)

// writeSecrets creates a deployment with a secret, PATCHes it with another
// (a second revision), and checks that the ControlPlane answers the
// plaintext values and that a Deployer's Work carries them.
func writeSecrets(t *testing.T, cp *controlplane.ControlPlane) *controlplane.Deployment {
	t.Helper()
	ctx := context.Background()
	d, err := cp.CreateDeployment(ctx, "t1", &controlplane.CreateDeploymentRequest{Name: new("a"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")},
		Secrets:              []controlplane.SecretInput{{Name: "K", Value: new(secretValue)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.UpdateDeployment(ctx, "t1", d.ID, &controlplane.UpdateDeploymentRequest{
		Secrets: []controlplane.SecretInput{{Name: "K", Value: new(secretValue)}, {Name: "L", Value: new(secretValue + "-2")}}}); err != nil {
		t.Fatal(err)
	}
	got, err := cp.GetDeployment(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Secrets) != 2 || got.Secrets[0].Value != secretValue {
		t.Fatalf("GetDeployment secrets = %v", got.Secrets)
	}
	var works []*controlplane.Work
	for {
		ok, err := cp.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
			works = append(works, w)
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if len(works) == 0 {
		t.Fatal("no Work")
	}
	for _, w := range works {
		if len(w.Secrets) == 0 || w.Secrets[0].Value != secretValue {
			t.Errorf("Work secrets = %v, want the plaintext values", w.Secrets)
		}
	}
	return d
}

// TestSecretsSealedAtRest: with Options.SecretKey, no store holds a
// deployment's or revision's secret value in plain text: not storemem's
// records, not the bytes of a bbolt file. Without a key, storemem holds
// them in plain text (the documented default).
func TestSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	t.Run("storemem", func(t *testing.T) {
		st := storemem.New()
		defer st.Close()
		writeSecrets(t, controlplane.New(st, &controlplane.Options{SecretKey: testSecretKey}))
		dump, err := storetest.Dump(ctx, st, controlplane.Collections()...)
		if err != nil {
			t.Fatal(err)
		}
		for col, recs := range dump {
			for k, v := range recs {
				if strings.Contains(k+v, secretValue) {
					t.Errorf("%s %s holds the secret in plain text: %s", col, k, v)
				}
			}
		}
	})
	t.Run("storebolt", func(t *testing.T) {
		path := t.TempDir() + "/db"
		st, err := storebolt.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		writeSecrets(t, controlplane.New(st, &controlplane.Options{SecretKey: testSecretKey}))
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(secretValue)) {
			t.Error("the bbolt file holds the secret in plain text")
		}
		if !bytes.Contains(raw, []byte(`"r/a:1"`)) {
			t.Error("the bbolt file does not hold the image_uri: the test reads the wrong bytes")
		}
	})
	t.Run("no key", func(t *testing.T) {
		st := storemem.New()
		defer st.Close()
		writeSecrets(t, controlplane.New(st, nil))
		dump, err := storetest.Dump(ctx, st, controlplane.Collections()...)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, recs := range dump {
			for _, v := range recs {
				found = found || strings.Contains(v, secretValue)
			}
		}
		if !found {
			t.Error("without a SecretKey the secret is not stored in plain text, as documented")
		}
	})
}

// TestSecretsNeedTheirKey: records sealed under a key read with that key
// only: without a key, or with another, reads fail with ErrSecretKey; a
// key of the wrong length fails writes. Records written without a key
// still read once a key is set.
func TestSecretsNeedTheirKey(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	d := writeSecrets(t, controlplane.New(st, &controlplane.Options{SecretKey: testSecretKey}))
	for name, opts := range map[string]*controlplane.Options{
		"no key":    nil,
		"other key": {SecretKey: bytes.Repeat([]byte{1}, 32)},
	} {
		_, err := controlplane.New(st, opts).GetDeployment(ctx, "t1", d.ID)
		if !errors.Is(err, controlplane.ErrSecretKey) {
			t.Errorf("%s: GetDeployment = %v, want ErrSecretKey", name, err)
		}
	}
	_, err := controlplane.New(st, &controlplane.Options{SecretKey: []byte("short")}).CreateDeployment(ctx, "t1",
		&controlplane.CreateDeploymentRequest{Name: new("b"), Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err == nil || !strings.Contains(err.Error(), "SecretKey") {
		t.Errorf("CreateDeployment with a 5-byte key = %v, want an error naming SecretKey", err)
	}

	plainStore := storemem.New()
	defer plainStore.Close()
	d = writeSecrets(t, controlplane.New(plainStore, nil))
	got, err := controlplane.New(plainStore, &controlplane.Options{SecretKey: testSecretKey}).GetDeployment(ctx, "t1", d.ID)
	if err != nil || got.Secrets[0].Value != secretValue {
		t.Errorf("plaintext record read with a key = %v, %v", got, err)
	}
}
