package controlplane

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/wiretime"
)

// TestRecordsRoundTrip: the stored records keep every field through
// encoding/json, and the deployment record is its wire JSON followed by
// tag_value_ids.
func TestRecordsRoundTrip(t *testing.T) {
	at := wiretime.New(time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC))
	dep := deploymentRecord{Deployment: Deployment{ID: "d", Name: "n", Source: SourceGitHub, Secrets: []Secret{{"K", "V"}},
		CreatedAt: at, UpdatedAt: wiretime.New(at.Time().Add(time.Second)), Status: StatusReady, ImageVersion: new("v1")}, Tags: []string{"x", "y"}}
	rev := revisionRecord{Revision: Revision{ID: "r", CreatedAt: at, UpdatedAt: at, Status: RevisionDeployed, Source: SourceGitHub},
		revisionSnapshot: revisionSnapshot{DeploymentID: "d", Secrets: []Secret{{"K", "V"}}, ResourceSpec: &ResourceSpec{MinScale: new(int64(2))},
			InstallCommand: new("i"), BuildCommand: new("b"), ImageVersion: new("v2")}}
	for _, v := range []any{&dep, &rev} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal(b, got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(v, got, cmp.AllowUnexported(revisionRecord{})); d != "" {
			t.Errorf("%T round trip (-want +got):\n%s", v, d)
		}
	}
	b, _ := json.Marshal(dep)
	wire, _ := json.Marshal(dep.wire())
	if want := string(wire[:len(wire)-1]) + `,"tag_value_ids":["x","y"]}`; string(b) != want {
		t.Errorf("stored deployment record = %s\nwant %s", b, want)
	}
}

// TestOlderTimestampsDecode: a record stored by an earlier build, with
// trimmed fractions, still decodes; GetDeploymentJSON serves its bytes as
// stored (the documented exception), GetDeployment re-encodes them.
func TestOlderTimestampsDecode(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	cp := New(st, nil)
	d, err := cp.CreateDeployment(ctx, "t1", &CreateDeploymentRequest{Name: new("a"), Source: new(SourceExternalDocker),
		SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2026, 11, 21, 6, 45, 29, 677_250_000, time.UTC)
	var stored []byte
	err = st.Update(ctx, func(tx store.Tx) error {
		b, err := tx.Get(colDeployments, key("t1", d.ID))
		if err != nil {
			return err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		m["created_at"] = json.RawMessage(`"2026-11-21T06:45:29.67725Z"`)
		m["updated_at"] = json.RawMessage(`"2026-11-21T08:45:29.67725+02:00"`)
		// Keep the wire order with tag_value_ids last, as earlier builds did.
		rec, _ := json.Marshal(m["tag_value_ids"])
		delete(m, "tag_value_ids")
		var sb strings.Builder
		sb.WriteString("{")
		for i, k := range []string{"id", "name", "source", "source_config", "source_revision_config", "secrets", "created_at",
			"updated_at", "status", "latest_revision_id", "active_revision_id", "image_version"} {
			if i > 0 {
				sb.WriteString(",")
			}
			kb, _ := json.Marshal(k)
			sb.Write(kb)
			sb.WriteString(":")
			sb.Write(m[k])
		}
		sb.WriteString(`,"tag_value_ids":` + string(rec) + "}")
		stored = []byte(sb.String())
		return tx.Put(colDeployments, key("t1", d.ID), stored)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cp.GetDeployment(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Time().Equal(old) || !got.UpdatedAt.Time().Equal(old) {
		t.Errorf("decoded created_at %v updated_at %v, want %v", got.CreatedAt, got.UpdatedAt, old)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"created_at":"2026-11-21T06:45:29.677250Z","updated_at":"2026-11-21T06:45:29.677250Z"`) {
		t.Errorf("GetDeployment re-encoded = %s, want six-digit UTC timestamps", b)
	}
	raw, err := cp.GetDeploymentJSON(ctx, "t1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(stored[:strings.LastIndex(string(stored), `,"tag_value_ids":`)]) + "}"; string(raw) != want {
		t.Errorf("GetDeploymentJSON = %s\nwant the stored bytes %s", raw, want)
	}
}

// TestRecordsAsBefore: the records the code writes are byte for byte the
// ones written before the wire types carried wiretime.Time (when mirror
// structs encoded them; testdata/records-before-wiretime.jsonl, written by
// that code), and those decode to the same values: a store written by
// either reads the same, and GetDeploymentJSON serves the same bytes.
func TestRecordsAsBefore(t *testing.T) {
	golden, err := os.ReadFile("testdata/records-before-wiretime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(golden)), "\n")
	at := time.Date(2026, 11, 21, 10, 4, 5, 120_000_000, time.UTC)
	w := wiretime.New(at)
	dep := &deploymentRecord{Deployment: Deployment{ID: "d", Name: "n<&>", Source: SourceGitHub, Secrets: []Secret{{"K", "V"}},
		SourceConfig: SourceConfig{ResourceSpec: &ResourceSpec{MinScale: new(int64(1))}},
		CreatedAt:    w, UpdatedAt: wiretime.New(at.Add(time.Second)), Status: StatusReady, ImageVersion: new("v1"), LatestRevisionID: new("r")},
		Tags: []string{"x", "y"}}
	rev := &revisionRecord{Revision: Revision{ID: "r", CreatedAt: w, UpdatedAt: w, Status: RevisionDeployed, Source: SourceGitHub},
		revisionSnapshot: revisionSnapshot{DeploymentID: "d", Secrets: []Secret{{"K", "V"}}, ResourceSpec: &ResourceSpec{MinScale: new(int64(2))},
			InstallCommand: new("i"), BuildCommand: new("b"), ImageVersion: new("v2")}}
	l := &Listener{ID: "l", ComputeType: "k8s", ComputeID: "c", ComputeConfig: ComputeConfig{K8sNamespaces: []string{"a"}}, Version: "1", CreatedAt: w, UpdatedAt: w}
	for i, v := range []any{dep, rev, l} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != lines[i] {
			t.Errorf("%T encodes as\n%s\nbefore:\n%s", v, b, lines[i])
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := json.Unmarshal([]byte(lines[i]), got); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(v, got, cmp.AllowUnexported(revisionRecord{})); d != "" {
			t.Errorf("%T decoded from the earlier record (-want +got):\n%s", v, d)
		}
	}
}
