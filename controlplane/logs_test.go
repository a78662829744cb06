package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// TestLogsModel walks random log queries over random writes, against the
// model of controlplanetest.RunLogs (storebolt and storepg run it too).
func TestLogsModel(t *testing.T) {
	controlplanetest.RunLogs(t, openMem)
}

// TestLogQueryValidation: every bad value is one problem at [In, name];
// a query with several lists them all.
func TestLogQueryValidation(t *testing.T) {
	asc, desc := controlplane.EncodeLogOffset(false, 7), controlplane.EncodeLogOffset(true, 7)
	tests := []struct {
		name string
		q    controlplane.LogQuery
		want []string
	}{
		{"defaults", controlplane.LogQuery{Type: "build"}, nil},
		{"all set, end before start in another zone", controlplane.LogQuery{Type: "deploy", Order: "desc", Limit: new(1000), Offset: desc, Level: "warn",
			Query: "Error", StartTime: "2026-11-21T10:00:00Z", EndTime: "2026-11-21T10:00:00.000001+01:00"}, []string{"query.end_time: value_error"}},
		{"window", controlplane.LogQuery{Type: "deploy", StartTime: "2026-11-21T10:00:00.5Z", EndTime: "2026-11-21T11:00:00+01:00"}, []string{"query.end_time: value_error"}},
		{"window ok", controlplane.LogQuery{Type: "deploy", StartTime: "2026-11-21T10:00:00.5Z", EndTime: "2026-11-21T10:00:01Z"}, nil},
		{"type missing", controlplane.LogQuery{}, []string{"query.type: missing"}},
		{"type unknown", controlplane.LogQuery{Type: "runtime"}, []string{"query.type: literal_error"}},
		{"order", controlplane.LogQuery{Type: "build", Order: "DESC"}, []string{"query.order: literal_error"}},
		{"limit 0", controlplane.LogQuery{Type: "build", Limit: new(0)}, []string{"query.limit: greater_than_equal"}},
		{"limit 1001", controlplane.LogQuery{Type: "build", Limit: new(1001)}, []string{"query.limit: less_than_equal"}},
		{"limit 1", controlplane.LogQuery{Type: "build", Limit: new(1)}, nil},
		{"offset garbage", controlplane.LogQuery{Type: "build", Offset: "12"}, []string{"query.offset: value_error"}},
		{"offset of desc used asc", controlplane.LogQuery{Type: "build", Offset: desc}, []string{"query.offset: value_error"}},
		{"offset of asc used desc", controlplane.LogQuery{Type: "build", Order: "desc", Offset: asc}, []string{"query.offset: value_error"}},
		{"offset with bad order: order only", controlplane.LogQuery{Type: "build", Order: "up", Offset: asc}, []string{"query.order: literal_error"}},
		{"level", controlplane.LogQuery{Type: "build", Level: "NOTICE"}, []string{"query.level: literal_error"}},
		{"level any case", controlplane.LogQuery{Type: "build", Level: "critical"}, nil},
		{"query too long", controlplane.LogQuery{Type: "build", Query: strings.Repeat("x", 1025)}, []string{"query.query: string_too_long"}},
		{"times", controlplane.LogQuery{Type: "build", StartTime: "yesterday", EndTime: "2026-11-21"}, []string{"query.start_time: value_error", "query.end_time: value_error"}},
		{"in body", controlplane.LogQuery{Type: "build", Order: "x", Limit: new(-1), Level: "x", In: "body"},
			[]string{"body.order: literal_error", "body.limit: greater_than_equal", "body.level: literal_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			diff(t, "problems", tt.want, locTypes(problems(t, err)))
		})
	}
}

// TestLogOffsetRoundTrip: every offset decodes to what it encodes, and
// only one spelling decodes per position.
func TestLogOffsetRoundTrip(t *testing.T) {
	for _, desc := range []bool{false, true} {
		for _, seq := range []uint64{0, 1, 9, 10, 1 << 40, ^uint64(0)} {
			s := controlplane.EncodeLogOffset(desc, seq)
			d, n, ok := controlplane.DecodeLogOffset(s)
			if !ok || d != desc || n != seq {
				t.Errorf("DecodeLogOffset(EncodeLogOffset(%v, %d) = %q) = %v, %d, %v", desc, seq, s, d, n, ok)
			}
		}
	}
	for _, bad := range []string{"", "MWE", "MWEwNw==", "MWEwNw", "MmE3", "MXg3", "MWEtMQ", "MWErNw", "MWE4888"} {
		if _, _, ok := controlplane.DecodeLogOffset(bad); ok {
			t.Errorf("DecodeLogOffset(%q) ok, want refused", bad)
		}
	}
}

// logFixture is a fixture with a deployment and its revision.
func logFixture(t *testing.T, ret controlplane.LogRetention) (*fixture, *controlplane.Deployment) {
	f := newFixture(t, &controlplane.Options{LogRetention: ret})
	return f, f.create(tenantA, dockerBody("agent"))
}

func (f *fixture) logs(d *controlplane.Deployment, q controlplane.LogQuery) []controlplane.LogEntry {
	f.t.Helper()
	p, err := f.cp.ListLogs(f.ctx, tenantA, d.ID, *d.LatestRevisionID, &q)
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Logs
}

func messages(ls []controlplane.LogEntry) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, l.Message)
	}
	return out
}

func numbered(n int, prefix string) []controlplane.LogLine {
	var ls []controlplane.LogLine
	for i := range n {
		ls = append(ls, controlplane.LogLine{Type: controlplane.LogBuild, Message: fmt.Sprintf("%s%d", prefix, i)})
	}
	return ls
}

// TestLogsBounded: a log keeps its newest lines within MaxLines and
// MaxBytes, and answers one WARNING line counting the dropped ones before
// them; the other log of the revision is untouched.
func TestLogsBounded(t *testing.T) {
	f, d := logFixture(t, controlplane.LogRetention{MaxLines: 4, MaxBytes: 1000})
	rev := *d.LatestRevisionID
	if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, rev, numbered(3, "a")...); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, rev, append(numbered(3, "b"),
		controlplane.LogLine{Type: controlplane.LogDeploy, Message: "deploy"})...); err != nil {
		t.Fatal(err)
	}
	got := f.logs(d, controlplane.LogQuery{Type: "build"})
	diff(t, "build log", []string{"2 earlier lines dropped: this log keeps its last 4 lines and 1000 bytes of messages",
		"a2", "b0", "b1", "b2"}, messages(got))
	if got[0].Level != controlplane.LevelWarning || got[0].ID != rev+":build:dropped:2" || got[1].ID != rev+":build:3" {
		t.Errorf("dropped line %+v, next %+v", got[0], got[1])
	}
	// A batch larger than the log: only its tail is kept, everything
	// before counted.
	if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, rev, numbered(10, "c")...); err != nil {
		t.Fatal(err)
	}
	diff(t, "build log after a large batch", []string{"12 earlier lines dropped: this log keeps its last 4 lines and 1000 bytes of messages",
		"c6", "c7", "c8", "c9"}, messages(f.logs(d, controlplane.LogQuery{Type: "build"})))
	diff(t, "deploy log", []string{"deploy"}, messages(f.logs(d, controlplane.LogQuery{Type: "deploy"})))

	// By bytes: 10 bytes keep the lines whose messages add up to 10 at most.
	f, d = logFixture(t, controlplane.LogRetention{MaxLines: 100, MaxBytes: 10})
	if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, *d.LatestRevisionID,
		controlplane.LogLine{Type: "build", Message: "12345"}, controlplane.LogLine{Type: "build", Message: "1234"},
		controlplane.LogLine{Type: "build", Message: "123"}, controlplane.LogLine{Type: "build", Message: "12"}); err != nil {
		t.Fatal(err)
	}
	diff(t, "log bounded by bytes", []string{"1 earlier lines dropped: this log keeps its last 100 lines and 10 bytes of messages",
		"1234", "123", "12"}, messages(f.logs(d, controlplane.LogQuery{Type: "build"})))
}

// TestLogLinesCleaned: levels and times are normalized, long messages
// cut, trailing line breaks removed; a line of unknown type or level
// writes nothing.
func TestLogLinesCleaned(t *testing.T) {
	f, d := logFixture(t, controlplane.LogRetention{MaxLineBytes: 20})
	rev := *d.LatestRevisionID
	at := time.Date(2026, 11, 21, 9, 0, 0, 123_456_789, time.FixedZone("x", 3600))
	err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, rev,
		controlplane.LogLine{Type: "deploy", Level: "warn", Time: at, Message: "line\r\n"},
		controlplane.LogLine{Type: "deploy", Message: strings.Repeat("é", 30)},
		controlplane.LogLine{Type: "deploy", Level: "error", Message: "bad \xff byte"})
	if err != nil {
		t.Fatal(err)
	}
	got := f.logs(d, controlplane.LogQuery{Type: "deploy"})
	diff(t, "lines", []controlplane.LogEntry{
		{ID: rev + ":deploy:1", Timestamp: got[0].Timestamp, Level: "WARNING", Message: "line"},
		{ID: rev + ":deploy:2", Timestamp: got[1].Timestamp, Level: "INFO", Message: "éééé [truncated]"},
		{ID: rev + ":deploy:3", Timestamp: got[2].Timestamp, Level: "ERROR", Message: "bad \uFFFD byte"},
	}, got)
	if want := at.UTC().Truncate(time.Microsecond); !got[0].Timestamp.Time().Equal(want) || got[1].Timestamp.Time().IsZero() {
		t.Errorf("timestamps %v, %v; want %v and the clock's", got[0].Timestamp, got[1].Timestamp, want)
	}
	before := dump(t, f.st)
	for _, bad := range []controlplane.LogLine{{Type: "runtime", Message: "x"}, {Type: "build", Level: "NOTICE", Message: "x"}} {
		if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, rev, controlplane.LogLine{Type: "build", Message: "ok"}, bad); err == nil {
			t.Errorf("AppendLogs with %+v succeeded", bad)
		}
	}
	diff(t, "store after refused writes", before, dump(t, f.st))
}

// TestLogsNotFound: unknown, malformed and other tenants' ids are not
// found; revision "" is the latest revision.
func TestLogsNotFound(t *testing.T) {
	f, d := logFixture(t, controlplane.LogRetention{})
	other := f.create(tenantA, dockerBody("other"))
	rev := *d.LatestRevisionID
	q := &controlplane.LogQuery{Type: "deploy"}
	for _, tc := range []struct {
		tenant, dep, rev string
		kind             string
	}{
		{tenantB, d.ID, rev, apierr.KindDeployment},
		{tenantA, "00000000-0000-7000-8000-0000000000ff", rev, apierr.KindDeployment},
		{tenantA, "nope", rev, apierr.KindDeployment},
		{tenantA, d.ID, "00000000-0000-7000-8000-0000000000ff", apierr.KindRevision},
		{tenantA, d.ID, "nope", apierr.KindRevision},
		{tenantA, d.ID, *other.LatestRevisionID, apierr.KindRevision},
	} {
		_, err := f.cp.ListLogs(f.ctx, tc.tenant, tc.dep, tc.rev, q)
		var nf *apierr.NotFoundError
		if !errors.As(err, &nf) || nf.Kind != tc.kind {
			t.Errorf("ListLogs(%s, %s, %s) = %v, want a %s not found", tc.tenant, tc.dep, tc.rev, err, tc.kind)
		}
		err = f.cp.AppendLogs(f.ctx, tc.tenant, tc.dep, tc.rev, controlplane.LogLine{Type: "deploy", Message: "x"})
		if !errors.As(err, &nf) || nf.Kind != tc.kind {
			t.Errorf("AppendLogs(%s, %s, %s) = %v, want a %s not found", tc.tenant, tc.dep, tc.rev, err, tc.kind)
		}
	}
	// The latest revision: a PATCH makes a second one.
	d2, err := f.cp.CreateRevision(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, d2.ID, controlplane.LogLine{Type: "deploy", Message: "second"}); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.AppendLogs(f.ctx, tenantA, d.ID, rev, controlplane.LogLine{Type: "deploy", Message: "first"}); err != nil {
		t.Fatal(err)
	}
	p, err := f.cp.ListLogs(f.ctx, tenantA, d.ID, "", q)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "latest revision's log", []string{"second"}, messages(p.Logs))
	if p.NextOffset == nil {
		t.Errorf("next_offset null after a line: a follower could not continue")
	}
}

// TestLogsRemovedWithDeployment: the teardown removes the logs with every
// other record of the deployment.
func TestLogsRemovedWithDeployment(t *testing.T) {
	f, d := logFixture(t, controlplane.LogRetention{MaxLines: 3})
	keep := f.create(tenantA, dockerBody("keep"))
	for _, dep := range []*controlplane.Deployment{d, keep} {
		if err := f.cp.AppendLogs(f.ctx, tenantA, dep.ID, *dep.LatestRevisionID, append(numbered(5, "x"),
			controlplane.LogLine{Type: "deploy", Message: "y"})...); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	f.deployAll() // the teardown
	// A key holds the deployment's id as its 16 bytes (or, under the text
	// keys of earlier builds, as text).
	id := uuid.MustParse(d.ID)
	logs := dump(t, f.st)["cp_revision_logs"]
	for k := range logs {
		if strings.Contains(k, string(id[:])) || strings.Contains(k, d.ID) {
			t.Errorf("log record %q left after the deployment was removed", k)
		}
	}
	if len(logs) != 2+4 {
		t.Errorf("%d log records left, want the other deployment's 6 (two meta records, 3 build lines, 1 deploy line)", len(logs))
	}
	if _, err := f.cp.ListLogs(f.ctx, tenantA, d.ID, *d.LatestRevisionID, &controlplane.LogQuery{Type: "build"}); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("ListLogs of a removed deployment: %v, want not found", err)
	}
	diff(t, "the other deployment's log", 4, len(f.logs(keep, controlplane.LogQuery{Type: "build"})))
}

// TestReporterLog: a deployer's lines land in one write, also after the
// revision is terminal; the old owner of a lost lease writes nothing.
func TestReporterLog(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	clock := testclock.New(t0, time.Microsecond)
	opts := &controlplane.Options{Clock: clock.Now, LeaseDuration: time.Hour}
	a, b := controlplane.New(st, opts), controlplane.New(st, opts)
	d, err := a.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, dockerBody("agent")))
	if err != nil {
		t.Fatal(err)
	}
	var late, bad error
	_, err = a.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
		if err := r.Log(ctx, controlplane.LogLine{Type: "deploy", Message: "a1"}, controlplane.LogLine{Type: "build", Message: "a2"}); err != nil {
			return err
		}
		bad = r.Log(ctx, controlplane.LogLine{Type: "deploy", Level: "LOUD", Message: "x"})
		clock.Advance(2 * time.Hour)
		_, err := b.Process(ctx, &script{deploy: func(ctx context.Context, w *controlplane.Work, rb controlplane.Reporter) error {
			late = r.Log(ctx, controlplane.LogLine{Type: "deploy", Message: "late"})
			for _, s := range []controlplane.RevisionStatus{"QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"} {
				if err := rb.Report(ctx, controlplane.Step{Status: s}); err != nil {
					return err
				}
			}
			return rb.Log(ctx, controlplane.LogLine{Type: "deploy", Message: "b after DEPLOYED"})
		}})
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(late, controlplane.ErrLeaseLost) {
		t.Errorf("old owner's Log: %v, want ErrLeaseLost", late)
	}
	if bad == nil {
		t.Errorf("Log of a line of unknown level succeeded")
	}
	p, err := a.ListLogs(ctx, tenantA, d.ID, *d.LatestRevisionID, &controlplane.LogQuery{Type: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "deploy log", []string{"a1", "b after DEPLOYED"}, messages(p.Logs))
}
