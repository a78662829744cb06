package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
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
	if want := `{"v":2,"n":"n","dn":"N","s":"g","sec":[{"name":"K","value":"V"}],"c":`; !strings.HasPrefix(string(b), want) || strings.Contains(string(b), "null") {
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
		return tx.Put(colDeployments, testDeploymentKey(tx, "t1", d.ID), []byte(`{"v":3,"id":"`+d.ID+`","future":true}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cp.GetDeployment(ctx, "t1", d.ID)
	if !errors.Is(err, ErrNewerRecord) {
		t.Fatalf("GetDeployment of a version 3 record = %v, want ErrNewerRecord", err)
	}
	for _, want := range []string{d.ID, "version 3", "version 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := cp.GetDeploymentJSON(ctx, "t1", d.ID); !errors.Is(err, ErrNewerRecord) {
		t.Errorf("GetDeploymentJSON of a version 3 record = %v, want ErrNewerRecord", err)
	}
	if _, err := (secretCodec{}).decodeRevision([]byte(`{"v":12,"id":"r"}`), "t", "d", "r"); !errors.Is(err, ErrNewerRecord) {
		t.Errorf("decodeRevision of a version 12 record = %v, want ErrNewerRecord", err)
	}
}

// TestUnversionedRecordsRefused: a deployment, revision or tracing
// project record without a format version (stored as wire JSON) is
// refused, by every read that meets it, with an error
// that names the record and wraps ErrOldLayout, not decoded.
func TestUnversionedRecordsRefused(t *testing.T) {
	ctx := context.Background()
	cp, st, d := oneDeployment(t)
	// An unversioned record: the deployment's wire JSON, then its tags.
	wire, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.TrimSuffix(string(wire), "}") + `,"tag_value_ids":[]}`
	err = st.Update(ctx, func(tx store.Tx) error {
		return tx.Put(colDeployments, testDeploymentKey(tx, "t1", d.ID), []byte(old))
	})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrOldLayout) || errors.Is(err, ErrNewerRecord) {
			t.Errorf("%s of an unversioned record = %v, want ErrOldLayout", what, err)
		} else if !strings.Contains(err.Error(), d.ID) {
			t.Errorf("%s: error %q does not name the record %s", what, err, d.ID)
		}
	}
	_, err = cp.GetDeployment(ctx, "t1", d.ID)
	refused("GetDeployment", err)
	_, err = cp.GetDeploymentJSON(ctx, "t1", d.ID)
	refused("GetDeploymentJSON", err)
	_, err = cp.ListDeployments(ctx, "t1", nil)
	refused("ListDeployments", err)
	_, err = (secretCodec{}).decodeRevision([]byte(`{"id":"`+d.ID+`","created_at":"2026-11-21T10:04:05.120000Z","status":"DEPLOYED"}`), "t1", "d", d.ID)
	refused("decodeRevision", err)
	err = st.Update(ctx, func(tx store.Tx) error {
		b, _ := json.Marshal(TracingProject{Tenant: "t1", DeploymentID: d.ID, Name: "old", CreatedAt: time.Now()})
		return tx.Put(colTracingProjects, testDeploymentKey(tx, "t1", d.ID), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(ctx, func(r store.Reader) error {
		_, err := StoreTracingProjects{}.Get(r, "t1", d.ID)
		return err
	})
	refused("StoreTracingProjects.Get", err)
}

// TestListenerRecordAsBefore: listeners no agent was seen for are stored
// as their wire JSON was, byte for byte as before the storage form of
// deployments and revisions (the status of answers is not stored).
func TestListenerRecordAsBefore(t *testing.T) {
	const before = `{"id":"l","compute_type":"k8s","compute_id":"c","compute_config":{"k8s_namespaces":["a"]},"version":"1",` +
		`"created_at":"2026-11-21T10:04:05.120000Z","updated_at":"2026-11-21T10:04:05.120000Z"}`
	w := wiretime.New(time.Date(2026, 11, 21, 10, 4, 5, 120_000_000, time.UTC))
	l := &Listener{ID: "l", ComputeType: "k8s", ComputeID: "c", ComputeConfig: ComputeConfig{K8sNamespaces: []string{"a"}}, Version: "1", CreatedAt: w, UpdatedAt: w,
		Status: ListenerConnected}
	b, err := encodeListener(l)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != before {
		t.Errorf("listener encodes as\n%s\nbefore:\n%s", b, before)
	}
	var gotL storedListener
	if err := json.Unmarshal([]byte(before), &gotL); err != nil {
		t.Fatal(err)
	}
	l.Status = ""
	if d := cmp.Diff(l, gotL.listener()); d != "" {
		t.Errorf("listener decoded from the earlier record (-want +got):\n%s", d)
	}
}

// TestTracingProjectRecords: StoreTracingProjects writes the compact
// versioned form and reads it back whole.
func TestTracingProjectRecords(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	at := time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC)
	p := TracingProject{Tenant: "t1", DeploymentID: "d1", Name: "agent", CreatedAt: at}
	err := st.Update(ctx, func(tx store.Tx) error {
		return (StoreTracingProjects{}).CreateTracingProject(ctx, tx, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = st.View(ctx, func(r store.Reader) error {
		b, _ := r.Get(colTracingProjects, testDeploymentKey(r, "t1", "d1"))
		if !strings.HasPrefix(string(b), `{"v":2,`) {
			t.Errorf("stored tracing project = %s, want the versioned form", b)
		}
		got, err := StoreTracingProjects{}.Get(r, "t1", p.DeploymentID)
		if err != nil {
			return err
		}
		if d := cmp.Diff(p, got); d != "" {
			t.Errorf("tracing project %s (-want +got):\n%s", p.DeploymentID, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testDeploymentKey is the key of the tenant's deployment id in
// cp_deployments and cp_tracing_projects (internal/keyenc).
func testDeploymentKey(r store.Reader, tenant, id string) string {
	tp, err := (*keyenc.Tenants)(nil).Prefix(r, tenant)
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

// TestSummariesOfEarlierBuilds checks that the list's summary filter
// answers the same of a summary as earlier builds wrote it (the status,
// deployment type and source as text) and of one with their codes.
func TestSummariesOfEarlierBuilds(t *testing.T) {
	r := &deploymentRecord{Deployment: Deployment{Name: "Agent-1", Status: StatusAwaitingDatabase, Source: SourceGitHub,
		SourceConfig: SourceConfig{DeploymentType: new(DeploymentTypeDev)}, ImageVersion: new("v1")}}
	earlier := "agent-1\x00AWAITING_DATABASE\x00dev\x00github\x00=v1"
	if now := r.summary(); now == earlier || len(now) >= len(earlier) {
		t.Fatalf("summary %q: not the codes", now)
	}
	for _, q := range []*ListDeploymentsQuery{
		{}, {Status: StatusAwaitingDatabase}, {Status: StatusReady}, {DeploymentType: DeploymentTypeDev},
		{DeploymentType: DeploymentTypeProd}, {RemoteReconciled: new(true)}, {RemoteReconciled: new(false)},
		{ImageVersion: "v1"}, {ImageVersion: "v2"}, {NameContains: "T-1"}, {Name: "agent-1"}, {Name: "agent-2"},
		{Status: StatusAwaitingDatabase, DeploymentType: DeploymentTypeDev, RemoteReconciled: new(false), ImageVersion: "v1"},
	} {
		f := newSummaryFilter(q)
		if a, b := f.match(earlier), f.match(r.summary()); a != b {
			t.Errorf("%+v: the earlier summary matches %v, the current one %v", q, a, b)
		}
	}
}

// TestImpliedHistoryLeftOut checks that a revision's status_history is
// left out of its record when a record without one answers the same, and
// kept otherwise.
func TestImpliedHistoryLeftOut(t *testing.T) {
	at := wiretime.New(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	later := wiretime.New(at.Time().Add(time.Second))
	for _, tc := range []struct {
		rev  Revision
		kept bool
	}{
		{Revision{Status: RevisionCreating, CreatedAt: at, UpdatedAt: at,
			StatusHistory: []StatusChange{{Status: RevisionCreating, At: at}}}, false},
		{Revision{Status: RevisionQueued, CreatedAt: at, UpdatedAt: later,
			StatusHistory: []StatusChange{{Status: RevisionCreating, At: at}, {Status: RevisionQueued, At: later}}}, false},
		{Revision{Status: RevisionDeployed, CreatedAt: at, UpdatedAt: later,
			StatusHistory: []StatusChange{{Status: RevisionCreating, At: at}, {Status: RevisionQueued, At: at}, {Status: RevisionDeployed, At: later}}}, true},
	} {
		rec := &revisionRecord{Revision: tc.rev, revisionSnapshot: revisionSnapshot{DeploymentID: "d"}}
		rec.ID = "r"
		b, err := secretCodec{}.encodeRevision("t", rec)
		if err != nil {
			t.Fatal(err)
		}
		if kept := strings.Contains(string(b), `"h":`); kept != tc.kept {
			t.Errorf("%s: history kept %v, want %v: %s", tc.rev.Status, kept, tc.kept, b)
		}
		got, err := secretCodec{}.decodeRevision(b, "t", "d", "r")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.rev.StatusHistory, got.StatusHistory); diff != "" {
			t.Errorf("%s: history read back (-want +got):\n%s", tc.rev.Status, diff)
		}
	}
}

// TestVersion1Records reads records as version 1 wrote them (sources and
// statuses as text, updated_at always there, revision ids as text, a
// revision's history in Unix microseconds) and
// finds what version 2 writes of the same records, which reads the same.
func TestVersion1Records(t *testing.T) {
	at := wiretime.New(time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC))
	later := wiretime.New(at.Time().Add(time.Second))
	dep := deploymentRecord{Deployment: Deployment{ID: "d", Name: "n", TenantID: "t", DisplayName: new("N"), Source: SourceExternalDocker,
		Secrets: []Secret{{"K", "V"}}, CreatedAt: at, UpdatedAt: at, Status: StatusAwaitingDatabase, LatestRevisionID: new("01a247e6-a424-7d53-91a9-cb9036d3ce44"), ActiveRevisionID: new("r")}}
	rev := revisionRecord{Revision: Revision{ID: "r", CreatedAt: at, UpdatedAt: later, Status: RevisionDeployed, Source: SourceExternalDocker,
		StatusHistory: []StatusChange{{RevisionCreating, at}, {RevisionQueued, at}, {RevisionDeployed, later}}},
		revisionSnapshot: revisionSnapshot{DeploymentID: "d", Secrets: []Secret{{"K", "V"}}}}
	v1Dep := `{"v":1,"n":"n","dn":"N","s":"external_docker","sec":[{"name":"K","value":"V"}],"c":1795255445123456,"u":1795255445123456,"st":"AWAITING_DATABASE","lr":"01a247e6-a424-7d53-91a9-cb9036d3ce44","ar":"r"}`
	v1Rev := `{"v":1,"c":1795255445123456,"u":1795255446123456,"st":"DEPLOYED","s":"external_docker","sec":[{"name":"K","value":"V"}],` +
		`"h":[{"s":"CREATING","t":1795255445123456},{"s":"QUEUED","t":1795255445123456},{"s":"DEPLOYED","t":1795255446123456}]}`
	gotDep, err := (secretCodec{}).decodeDeployment([]byte(v1Dep), "t", "d")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&dep, gotDep); d != "" {
		t.Errorf("version 1 deployment (-want +got):\n%s", d)
	}
	gotRev, err := (secretCodec{}).decodeRevision([]byte(v1Rev), "t", "d", "r")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&rev, gotRev, cmp.AllowUnexported(revisionRecord{})); d != "" {
		t.Errorf("version 1 revision (-want +got):\n%s", d)
	}
	b, err := (secretCodec{}).encodeDeployment("t", gotDep)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":2,"n":"n","dn":"N","s":"e","sec":[{"name":"K","value":"V"}],"c":1795255445123456,"st":"A","lr":"AaJH5qQkfVORqcuQNtPORA","ar":"r"}`; string(b) != want {
		t.Errorf("version 2 of the deployment = %s, want %s", b, want)
	}
	if got, err := (secretCodec{}).decodeDeployment(b, "t", "d"); err != nil || !cmp.Equal(got, &dep) {
		t.Errorf("version 2 of the deployment reads %+v, %v", got, err)
	}
	b, err = (secretCodec{}).encodeRevision("t", gotRev)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":2,"c":1795255445123456,"u":1795255446123456,"st":"D","s":"e","sec":[{"name":"K","value":"V"}],` +
		`"h":"C,Q,D1000000"}`; string(b) != want {
		t.Errorf("version 2 of the revision = %s, want %s", b, want)
	}
	if got, err := (secretCodec{}).decodeRevision(b, "t", "d", "r"); err != nil || !cmp.Equal(got, &rev, cmp.AllowUnexported(revisionRecord{})) {
		t.Errorf("version 2 of the revision reads %+v, %v", got, err)
	}
}

// TestCreatedWithinIDMillisecond: a revision record whose id is a UUID of
// its created_at's millisecond keeps only the microseconds within it
// ("cr"), another keeps created_at ("c"), as every deployment record
// does; all read back the same, at the first and the last microsecond of
// the millisecond.
func TestCreatedWithinIDMillisecond(t *testing.T) {
	ms := time.Date(2026, 12, 5, 10, 4, 5, 123_000_000, time.UTC)
	for _, tc := range []struct {
		at     time.Time
		id     string
		within bool
	}{
		{ms, "01a245a9-2e83-7000-8000-000000000001", true},
		{ms.Add(999 * time.Microsecond), "01a245a9-2e83-7000-8000-000000000001", true},
		{ms.Add(time.Millisecond), "01a245a9-2e83-7000-8000-000000000001", false},
		{ms, "not-a-uuid", false},
	} {
		if got, _ := uuidMillis("01a245a9-2e83-7000-8000-000000000001"); got != ms.UnixMilli() {
			t.Fatalf("the fixture's id is of millisecond %d, want %d", got, ms.UnixMilli())
		}
		at := wiretime.New(tc.at)
		dep := deploymentRecord{Deployment: Deployment{ID: tc.id, Name: "n", TenantID: "t", Source: SourceGitHub, Secrets: []Secret{},
			CreatedAt: at, UpdatedAt: at, Status: StatusReady}}
		rev := revisionRecord{Revision: Revision{ID: tc.id, CreatedAt: at, UpdatedAt: at, Status: RevisionCreating, Source: SourceGitHub,
			StatusHistory: []StatusChange{{RevisionCreating, at}}}, revisionSnapshot: revisionSnapshot{DeploymentID: "d"}}
		b, err := (secretCodec{}).encodeDeployment("t", &dep)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"cr":`) || !strings.Contains(string(b), `"c":`) {
			t.Errorf("%s at %v: deployment record %s, want created_at in c", tc.id, tc.at, b)
		}
		got, err := (secretCodec{}).decodeDeployment(b, "t", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&dep, got); d != "" {
			t.Errorf("%s at %v: deployment (-want +got):\n%s", tc.id, tc.at, d)
		}
		b, err = (secretCodec{}).encodeRevision("t", &rev)
		if err != nil {
			t.Fatal(err)
		}
		if within := strings.Contains(string(b), `"cr":`) && !strings.Contains(string(b), `"c":`); within != tc.within {
			t.Errorf("%s at %v: revision record %s, within the millisecond %v, want %v", tc.id, tc.at, b, within, tc.within)
		}
		gotRev, err := (secretCodec{}).decodeRevision(b, "t", "d", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(&rev, gotRev, cmp.AllowUnexported(revisionRecord{})); d != "" {
			t.Errorf("%s at %v: revision (-want +got):\n%s", tc.id, tc.at, d)
		}
	}
}

// TestStoredHistory: a status_history is written as one string of codes
// and times, or, with a status that has no code, as the array version 1
// wrote; both forms, and the array of the earliest version 2 records,
// read back as written; what no build writes is an error.
func TestStoredHistory(t *testing.T) {
	for _, tc := range []struct {
		h    storedHistory
		want string
	}{
		{storedHistory{{S: "CREATING"}, {S: "QUEUED", T: 1200}, {S: "DEPLOYED", T: 900000}}, `"C,Q1200,D900000"`},
		{storedHistory{{S: "CREATING"}, {S: "DEPLOY_FAILED", T: -5}}, `"C,3-5"`}, // a clock that went back
		{storedHistory{{S: "CREATING"}, {S: "SOMEDAY", T: 7}}, `[{"s":"C"},{"s":"SOMEDAY","t":7}]`},
		{storedHistory{}, `[]`},
	} {
		b, err := json.Marshal(tc.h)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v written as %s, %v; want %s", tc.h, b, err, tc.want)
		}
		for name, unmarshal := range map[string]func([]byte, any) error{"encoding/json": json.Unmarshal,
			"json v2": func(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }} {
			var got storedHistory
			if err := unmarshal(b, &got); err != nil || len(got) != len(tc.h) || len(got) > 0 && !cmp.Equal(got, tc.h) {
				t.Errorf("%s: %s read back as %v, %v; want %v", name, b, got, err, tc.h)
			}
		}
	}
	var got storedHistory
	if err := json.Unmarshal([]byte(`[{"s":"C"},{"s":"Q","t":1200}]`), &got); err != nil ||
		!cmp.Equal(got, storedHistory{{S: "CREATING"}, {S: "QUEUED", T: 1200}}) {
		t.Errorf("the array of codes read as %v, %v", got, err)
	}
	for _, bad := range []string{`"Z5"`, `"Qx"`, `"C,,Q"`, `"C,"`, `5`} {
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s read as %v, want an error", bad, got)
		}
	}
}

// FuzzStoredHistory: whatever a stored status_history holds, reading it
// fails or gives a history that is written and read back the same.
func FuzzStoredHistory(f *testing.F) {
	for _, s := range []string{`"C,Q1200,D900000"`, `"C,3-5"`, `[{"s":"C"},{"s":"SOMEDAY","t":7}]`, `[]`, `""`, `"Z"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var h storedHistory
		if err := jsonv2.Unmarshal([]byte(s), &h); err != nil {
			return
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatalf("%s read as %v, which writes as an error: %v", s, h, err)
		}
		var again storedHistory
		if err := jsonv2.Unmarshal(b, &again); err != nil || len(again) != len(h) || len(h) > 0 && !cmp.Equal(again, h) {
			t.Fatalf("%s read as %v, written as %s, read back as %v, %v", s, h, b, again, err)
		}
	})
}
