package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/wiretime"
)

// TestRecordsRoundTrip: the storage form keeps every field, starts with
// its format version and holds no null.
func TestRecordsRoundTrip(t *testing.T) {
	at := wiretime.New(time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC))
	dep := deploymentRecord{Deployment: Deployment{ID: "d", Name: "n", TenantID: "t", DisplayName: new("N"), Source: SourceGitHub, Secrets: []Secret{{"K", "V"}},
		CreatedAt: at, UpdatedAt: wiretime.New(at.Time().Add(time.Second)), Status: StatusReady, ImageVersion: new("v1")}, Tags: []string{"x", "y"}}
	rev := revisionRecord{Revision: Revision{ID: "r", CreatedAt: at, UpdatedAt: at, Status: RevisionDeployed, Source: SourceGitHub,
		StatusHistory: []StatusChange{{RevisionCreating, at}, {RevisionQueued, wiretime.New(at.Time().Add(time.Microsecond))}, {RevisionDeployed, at.Add(time.Second)}}},
		revisionSnapshot: revisionSnapshot{DeploymentID: "d", Secrets: []Secret{{"K", "V"}}, ResourceSpec: &ResourceSpec{MinScale: new(int64(2))},
			InstallCommand: new("i"), BuildCommand: new("b"), ImageVersion: new("v2")}}
	b, err := (secretCodec{}).encodeDeployment("t", &dep)
	if err != nil {
		t.Fatal(err)
	}
	gotDep, err := (secretCodec{}).decodeDeployment(b, "t", "d")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&dep, gotDep); d != "" {
		t.Errorf("deployment round trip (-want +got):\n%s", d)
	}
	if want := `{"v":1,"n":"n","dn":"N","s":"github","sec":[{"name":"K","value":"V"}],"c":`; !strings.HasPrefix(string(b), want) || strings.Contains(string(b), "null") {
		t.Errorf("stored deployment record = %s\nwant it to start %s and hold no null", b, want)
	}
	b, err = (secretCodec{}).encodeRevision("t", &rev)
	if err != nil {
		t.Fatal(err)
	}
	gotRev, err := (secretCodec{}).decodeRevision(b, "t", "d", "r")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&rev, gotRev, cmp.AllowUnexported(revisionRecord{})); d != "" {
		t.Errorf("revision round trip (-want +got):\n%s", d)
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("stored revision record = %s, holds a null", b)
	}
}

// TestNewerRecordVersion: a record whose format version is newer than this
// build's is an error naming the record and both versions, wrapping
// ErrNewerRecord, through the ControlPlane's reads.
func TestNewerRecordVersion(t *testing.T) {
	ctx := context.Background()
	cp, st, d := oneDeployment(t)
	err := st.Update(ctx, func(tx store.Tx) error {
		return tx.Put(colDeployments, testDeploymentKey(tx, "t1", d.ID), []byte(`{"v":2,"id":"`+d.ID+`","future":true}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cp.GetDeployment(ctx, "t1", d.ID)
	if !errors.Is(err, ErrNewerRecord) {
		t.Fatalf("GetDeployment of a version 2 record = %v, want ErrNewerRecord", err)
	}
	for _, want := range []string{d.ID, "version 2", "version 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := cp.GetDeploymentJSON(ctx, "t1", d.ID); !errors.Is(err, ErrNewerRecord) {
		t.Errorf("GetDeploymentJSON of a version 2 record = %v, want ErrNewerRecord", err)
	}
	if _, err := (secretCodec{}).decodeRevision([]byte(`{"v":12,"id":"r"}`), "t", "d", "r"); !errors.Is(err, ErrNewerRecord) {
		t.Errorf("decodeRevision of a version 12 record = %v, want ErrNewerRecord", err)
	}
}

// TestOlderTimestampsDecode: a record stored by an earlier build, with
// trimmed fractions, still decodes; GetDeployment and GetDeploymentJSON
// answer it re-encoded.
func TestOlderTimestampsDecode(t *testing.T) {
	ctx := context.Background()
	cp, st, d := oneDeployment(t)
	old := time.Date(2026, 11, 21, 6, 45, 29, 677_250_000, time.UTC)
	var stored []byte
	err := st.Update(ctx, func(tx store.Tx) error {
		cur, err := cp.getDeployment(tx, "t1", d.ID)
		if err != nil {
			return err
		}
		b, err := json.Marshal(cur) // the unversioned wire-JSON form of earlier builds
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
		return tx.Put(colDeployments, testDeploymentKey(tx, "t1", d.ID), stored)
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
	if string(raw) != string(b) {
		t.Errorf("GetDeploymentJSON = %s\nwant json.Marshal(GetDeployment) %s", raw, b)
	}
}

// TestRecordsAsBefore: unversioned deployment and revision records in the
// wire-JSON form of earlier builds (testdata/records-before-wiretime.jsonl,
// written before the storage form) decode to the same values; listeners
// still encode byte for byte as before.
func TestRecordsAsBefore(t *testing.T) {
	golden, err := os.ReadFile("testdata/records-before-wiretime.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(golden)), "\n")
	at := time.Date(2026, 11, 21, 10, 4, 5, 120_000_000, time.UTC)
	w := wiretime.New(at)
	dep := &deploymentRecord{Deployment: Deployment{ID: "d", Name: "n<&>", TenantID: "t", Source: SourceGitHub, Secrets: []Secret{{"K", "V"}},
		SourceConfig: SourceConfig{ResourceSpec: &ResourceSpec{MinScale: new(int64(1))}},
		CreatedAt:    w, UpdatedAt: wiretime.New(at.Add(time.Second)), Status: StatusReady, ImageVersion: new("v1"), LatestRevisionID: new("r")},
		Tags: []string{"x", "y"}}
	rev := &revisionRecord{Revision: Revision{ID: "r", CreatedAt: w, UpdatedAt: w, Status: RevisionDeployed, Source: SourceGitHub,
		StatusHistory: []StatusChange{{RevisionCreating, w}, {RevisionDeployed, w}}}, // what is known of a record without one
		revisionSnapshot: revisionSnapshot{DeploymentID: "d", Secrets: []Secret{{"K", "V"}}, ResourceSpec: &ResourceSpec{MinScale: new(int64(2))},
			InstallCommand: new("i"), BuildCommand: new("b"), ImageVersion: new("v2")}}
	l := &Listener{ID: "l", ComputeType: "k8s", ComputeID: "c", ComputeConfig: ComputeConfig{K8sNamespaces: []string{"a"}}, Version: "1", CreatedAt: w, UpdatedAt: w}
	gotDep, err := (secretCodec{}).decodeDeployment([]byte(lines[0]), "t", "d")
	if err != nil {
		t.Fatal(err)
	}
	gotRev, err := (secretCodec{}).decodeRevision([]byte(lines[1]), "t", "d", "r")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ want, got any }{{dep, gotDep}, {rev, gotRev}} {
		if d := cmp.Diff(c.want, c.got, cmp.AllowUnexported(revisionRecord{})); d != "" {
			t.Errorf("%T decoded from the earlier record %d (-want +got):\n%s", c.want, i, d)
		}
	}
	// Listeners keep the wire form.
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != lines[2] {
		t.Errorf("listener encodes as\n%s\nbefore:\n%s", b, lines[2])
	}
	var gotL Listener
	if err := json.Unmarshal([]byte(lines[2]), &gotL); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(l, &gotL); d != "" {
		t.Errorf("listener decoded from the earlier record (-want +got):\n%s", d)
	}
}

// TestTracingProjectRecords: StoreTracingProjects writes the compact
// versioned form and reads it back whole; a record in the TracingProject
// JSON of earlier builds still reads.
func TestTracingProjectRecords(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	at := time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC)
	p := TracingProject{Tenant: "t1", DeploymentID: "d1", Name: "agent", CreatedAt: at}
	old, _ := json.Marshal(TracingProject{Tenant: "t1", DeploymentID: "d2", Name: "old", CreatedAt: at})
	err := st.Update(ctx, func(tx store.Tx) error {
		if err := (StoreTracingProjects{}).CreateTracingProject(ctx, tx, p); err != nil {
			return err
		}
		return tx.Put(colTracingProjects, testDeploymentKey(tx, "t1", "d2"), old)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(ctx, func(r store.Reader) error {
		b, _ := r.Get(colTracingProjects, testDeploymentKey(r, "t1", "d1"))
		if !strings.HasPrefix(string(b), `{"v":1,`) {
			t.Errorf("stored tracing project = %s, want the versioned form", b)
		}
		for _, want := range []TracingProject{p, {Tenant: "t1", DeploymentID: "d2", Name: "old", CreatedAt: at}} {
			got, err := StoreTracingProjects{}.Get(r, "t1", want.DeploymentID)
			if err != nil {
				return err
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("tracing project %s (-want +got):\n%s", want.DeploymentID, d)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testDeploymentKey is the key of the tenant's deployment id in
// cp_deployments and cp_tracing_projects (keys.go).
func testDeploymentKey(r store.Reader, tenant, id string) string {
	tp, err := (*tenantCache)(nil).tenantPrefix(r, tenant, false)
	if err != nil {
		panic(err)
	}
	return deploymentKey(tp, id)
}

// oneDeployment is a ControlPlane over a new storemem store holding one
// external_docker deployment, "a" of tenant t1.
func oneDeployment(t *testing.T) (*ControlPlane, store.Store, *Deployment) {
	t.Helper()
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	cp := New(st, nil)
	d, err := cp.CreateDeployment(context.Background(), "t1", &CreateDeploymentRequest{Name: new("a"), Source: new(SourceExternalDocker),
		SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")}})
	if err != nil {
		t.Fatal(err)
	}
	return cp, st, d
}
