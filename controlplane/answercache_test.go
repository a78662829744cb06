package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// TestGetDeploymentJSONSeesEveryChange: GetDeploymentJSON keeps the
// answers it made, yet every change of a deployment (a PATCH of an
// in-place field, of its secrets, the reconcile loop's status changes, a
// redeploy, its deletion) shows in the very next read, also when another
// ControlPlane over the same store made the change; each answer is
// json.Marshal of GetDeployment's, and a caller writing into an answer
// changes no later one.
func TestGetDeploymentJSONSeesEveryChange(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"storemem": func(*testing.T) store.Store { return storemem.New() },
		"storebolt": func(t *testing.T) store.Store {
			st, err := storebolt.Open(filepath.Join(t.TempDir(), "db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := open(t)
			defer st.Close()
			opts := &controlplane.Options{SecretKey: testSecretKey}
			reader, writer := controlplane.New(st, opts), controlplane.New(st, opts)
			d, err := writer.CreateDeployment(ctx, "t1", &controlplane.CreateDeploymentRequest{Name: new("a"),
				Source:               new(controlplane.SourceExternalDocker),
				SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")},
				Secrets:              []controlplane.SecretInput{{Name: "K", Value: new(secretValue)}}})
			if err != nil {
				t.Fatal(err)
			}
			var last []byte
			// check reads the deployment twice through reader (the second
			// read may be served by what the first kept) and through
			// writer, wants json.Marshal of GetDeployment's answer, and,
			// when changed, an answer other than the last one.
			check := func(step string, changed bool) {
				t.Helper()
				want, err := reader.GetDeployment(ctx, "t1", d.ID)
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				wantJSON, _ := json.Marshal(want)
				for i, cp := range []*controlplane.ControlPlane{reader, reader, writer} {
					got, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
					if err != nil {
						t.Fatalf("%s: read %d: %v", step, i, err)
					}
					if !bytes.Equal(got, wantJSON) {
						t.Fatalf("%s: read %d = %s\nwant %s", step, i, got, wantJSON)
					}
					clear(got) // the caller's: no later answer may change
				}
				if changed && bytes.Equal(wantJSON, last) {
					t.Fatalf("%s: the answer did not change: %s", step, wantJSON)
				}
				last = wantJSON
			}
			check("created", true)
			check("read again", false)

			if _, err := writer.UpdateDeployment(ctx, "t1", d.ID, &controlplane.UpdateDeploymentRequest{
				Name: new("a"), DisplayName: new("A")}); err != nil {
				t.Fatal(err)
			}
			check("display name patched", true)
			if _, err := writer.UpdateDeployment(ctx, "t1", d.ID, &controlplane.UpdateDeploymentRequest{
				Secrets: []controlplane.SecretInput{{Name: "K", Value: new(secretValue + "-2")}}}); err != nil {
				t.Fatal(err)
			}
			check("secret patched", true)
			// The reconcile loop walks the latest revision to DEPLOYED (the
			// first one was superseded by the PATCH): the deployment becomes
			// READY, with an active revision and an image version.
			var deployed string
			before := last
			for {
				ok, err := writer.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
					deployed = w.Revision.ID
					for _, s := range controlplane.HappyPath(w.Revision.Source)[1:] {
						step := controlplane.Step{Status: s}
						if s == controlplane.RevisionDeployed {
							step.ImageVersion = new("1.0.0")
						}
						if err := r.Report(ctx, step); err != nil {
							return err
						}
						check("reported "+string(s), false)
					}
					return nil
				}})
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
			}
			check("deployed", false)
			if bytes.Equal(last, before) || !bytes.Contains(last, []byte(`"status":"READY"`)) {
				t.Fatalf("deployed: %s", last)
			}
			if _, err := writer.RedeployRevision(ctx, "t1", d.ID, deployed); err != nil {
				t.Fatal(err)
			}
			check("redeployed", true)
			if err := writer.DeleteDeployment(ctx, "t1", d.ID); err != nil {
				t.Fatal(err)
			}
			check("deleted", true)
			for {
				ok, err := writer.Process(ctx, &script{})
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
			}
			if _, err := reader.GetDeploymentJSON(ctx, "t1", d.ID); !errors.Is(err, apierr.ErrNotFound) {
				t.Fatalf("after the teardown: %v, want not found", err)
			}
		})
	}
}

// TestAppendDeploymentJSON appends to the buffer given and leaves it as it
// was on an error.
func TestAppendDeploymentJSON(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d, err := cp.CreateDeployment(ctx, "t1", &controlplane.CreateDeploymentRequest{Name: new("a"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(d)
	for range 2 { // made, then kept
		got, err := cp.AppendDeploymentJSON(ctx, []byte("prefix:"), "t1", d.ID)
		if err != nil || string(got) != "prefix:"+string(want) {
			t.Fatalf("AppendDeploymentJSON = %s, %v\nwant prefix:%s", got, err, want)
		}
	}
	got, err := cp.AppendDeploymentJSON(ctx, []byte("prefix:"), "t2", d.ID)
	if !errors.Is(err, apierr.ErrNotFound) || string(got) != "prefix:" {
		t.Fatalf("another tenant's: %q, %v", got, err)
	}
}

// TestGetDeploymentJSONConcurrent: readers of a deployment that is PATCHed
// meanwhile each see its display name only move forward (a kept answer is
// never older than what the reader saw before), every answer is whole, and
// the last read after the writes sees the last one.
func TestGetDeploymentJSONConcurrent(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), &controlplane.Options{AnswerCacheBytes: 64 << 10})
	d, err := cp.CreateDeployment(ctx, "t1", &controlplane.CreateDeploymentRequest{Name: new("a"), DisplayName: new("v000"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	const writes = 60
	var wg sync.WaitGroup
	done := make(chan struct{})
	for r := range 4 {
		wg.Go(func() {
			seen := ""
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				b, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				var got controlplane.Deployment
				if err := json.Unmarshal(b, &got); err != nil || got.DisplayName == nil {
					t.Errorf("reader %d: %s: %v", r, b, err)
					return
				}
				if *got.DisplayName < seen {
					t.Errorf("reader %d: display name %s after %s", r, *got.DisplayName, seen)
					return
				}
				seen = *got.DisplayName
			}
		})
	}
	for i := 1; i <= writes; i++ {
		if _, err := cp.UpdateDeployment(ctx, "t1", d.ID, &controlplane.UpdateDeploymentRequest{
			DisplayName: new(fmt.Sprintf("v%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	b, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
	if err != nil || !bytes.Contains(b, []byte(fmt.Sprintf(`"display_name":"v%03d"`, writes))) {
		t.Fatalf("after the writes: %s, %v", b, err)
	}
}
