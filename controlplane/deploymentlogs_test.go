package controlplane_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/controlplane/controlplanetest"
	"github.com/deployplane/deployplane/storemem"
)

// TestDeploymentLogsModel walks random queries of the deployment logs over
// random revisions and writes, against the model of
// controlplanetest.RunDeploymentLogs (storebolt and storepg run it too).
func TestDeploymentLogsModel(t *testing.T) {
	controlplanetest.RunDeploymentLogs(t, openMem)
}

// logsFixture is a fixture with an external_docker deployment of tenant A
// of three revisions, each with lines in its build and deploy logs, and
// one of tenant B.
type logsFixture struct {
	*fixture
	dep, other string   // tenant A's deployment, tenant B's
	revs       []string // dep's revisions, oldest first
}

func newLogsFixture(t *testing.T) *logsFixture {
	t.Helper()
	f := &logsFixture{fixture: newFixture(t, nil)}
	d := f.create(tenantA, dockerBody("agent"))
	f.dep, f.revs = d.ID, []string{*d.LatestRevisionID}
	for i := 1; i < 3; i++ {
		u, err := f.cp.UpdateDeployment(f.ctx, tenantA, d.ID, &controlplane.UpdateDeploymentRequest{
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(fmt.Sprintf("registry.example.com/agent:%d", i+1))}})
		if err != nil {
			t.Fatal(err)
		}
		f.revs = append(f.revs, *u.LatestRevisionID)
	}
	for i, rev := range f.revs {
		f.write(rev, controlplane.LogBuild, fmt.Sprintf("r%d build", i+1), 2)
		f.write(rev, controlplane.LogDeploy, fmt.Sprintf("r%d deploy", i+1), 3)
	}
	f.other = f.create(tenantB, dockerBody("agent")).ID
	ob, err := f.cp.GetDeployment(f.ctx, tenantB, f.other)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cp.AppendLogs(f.ctx, tenantB, f.other, *ob.LatestRevisionID, controlplane.LogLine{Type: controlplane.LogDeploy, Message: "tenant B"}); err != nil {
		t.Fatal(err)
	}
	return f
}

// write appends n lines "<prefix> <i>" to a log of rev, i from 1, the
// second one at ERROR.
func (f *logsFixture) write(rev string, typ controlplane.LogType, prefix string, n int) {
	f.t.Helper()
	var lines []controlplane.LogLine
	for i := 1; i <= n; i++ {
		l := controlplane.LogLine{Type: typ, Time: t0.Add(time.Duration(len(f.revs)*10+i) * time.Second), Message: fmt.Sprintf("%s %d", prefix, i)}
		if i == 2 {
			l.Level = controlplane.LevelError
		}
		lines = append(lines, l)
	}
	if err := f.cp.AppendLogs(f.ctx, tenantA, f.dep, rev, lines...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *logsFixture) list(tenant string, q controlplane.DeploymentLogQuery) (*controlplane.DeploymentLogPage, error) {
	return f.cp.ListDeploymentLogs(f.ctx, tenant, &q)
}

// all walks q from cursor to cursor and returns the messages.
func (f *logsFixture) all(q controlplane.DeploymentLogQuery) []string {
	f.t.Helper()
	out := []string{}
	for range 100 {
		p, err := f.list(tenantA, q)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, e := range p.Items {
			out = append(out, e.Message)
		}
		if p.NextCursor == nil {
			return out
		}
		q.Cursor = *p.NextCursor
	}
	f.t.Fatal("no end after 100 pages")
	return nil
}

// TestDeploymentLogs: the logs of every revision, or of one, in either
// order, filtered, a page at a time; the entries as the revision log
// routes answer them.
func TestDeploymentLogs(t *testing.T) {
	f := newLogsFixture(t)
	q := func(mod func(*controlplane.DeploymentLogQuery)) controlplane.DeploymentLogQuery {
		q := controlplane.DeploymentLogQuery{DeploymentID: f.dep, PageSize: new(2)}
		if mod != nil {
			mod(&q)
		}
		return q
	}
	tests := []struct {
		name string
		q    controlplane.DeploymentLogQuery
		want []string
	}{
		{"deploy logs by default, oldest revision first", q(nil),
			[]string{"r1 deploy 1", "r1 deploy 2", "r1 deploy 3", "r2 deploy 1", "r2 deploy 2", "r2 deploy 3", "r3 deploy 1", "r3 deploy 2", "r3 deploy 3"}},
		{"build, desc", q(func(q *controlplane.DeploymentLogQuery) { q.LogType, q.SortOrder = "BUILD", "desc" }),
			[]string{"r3 build 2", "r3 build 1", "r2 build 2", "r2 build 1", "r1 build 2", "r1 build 1"}},
		{"one revision", q(func(q *controlplane.DeploymentLogQuery) { q.RevisionID = strings.ToUpper(f.revs[1]) }),
			[]string{"r2 deploy 1", "r2 deploy 2", "r2 deploy 3"}},
		{"level", q(func(q *controlplane.DeploymentLogQuery) { q.Level = "error" }),
			[]string{"r1 deploy 2", "r2 deploy 2", "r3 deploy 2"}},
		{"query ignores case", q(func(q *controlplane.DeploymentLogQuery) { q.Query, q.LogType = "R2 BUILD", "build" }),
			[]string{"r2 build 1", "r2 build 2"}},
		{"time window", q(func(q *controlplane.DeploymentLogQuery) {
			q.StartTime, q.EndTime = t0.Add(32*time.Second).Format(time.RFC3339), t0.Add(33*time.Second).Format(time.RFC3339)
		}), []string{"r1 deploy 2", "r2 deploy 2", "r3 deploy 2"}},
		{"nothing matches", q(func(q *controlplane.DeploymentLogQuery) { q.Query = "no such line" }), []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "messages", tt.want, f.all(tt.q))
		})
	}

	p, err := f.list(tenantA, controlplane.DeploymentLogQuery{DeploymentID: f.dep, PageSize: new(1)})
	if err != nil {
		t.Fatal(err)
	}
	want := []controlplane.LogEntry{{ID: f.revs[0] + ":deploy:1", Timestamp: p.Items[0].Timestamp, Level: controlplane.LevelInfo, Message: "r1 deploy 1"}}
	diff(t, "the first entry", want, p.Items)
	same, err := f.cp.ListLogs(f.ctx, tenantA, f.dep, f.revs[0], &controlplane.LogQuery{Type: controlplane.LogDeploy, Limit: new(1)})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "the entry of the revision's log route", same.Logs, p.Items)
	if p.NextCursor == nil {
		t.Fatal("a full page without next_cursor")
	}
	last, err := f.list(tenantA, controlplane.DeploymentLogQuery{DeploymentID: f.dep, PageSize: new(100)})
	if err != nil || len(last.Items) != 9 || last.NextCursor != nil {
		t.Errorf("one page of everything: %d items, next_cursor %v, %v", len(last.Items), last.NextCursor, err)
	}
}

// A walk in asc order goes on with the lines written after its place:
// in the revision it is in, and in revisions made since.
func TestDeploymentLogsAppendedLines(t *testing.T) {
	f := newLogsFixture(t)
	q := controlplane.DeploymentLogQuery{DeploymentID: f.dep, PageSize: new(8)}
	p, err := f.list(tenantA, q)
	if err != nil || p.NextCursor == nil {
		t.Fatalf("%v, %+v", err, p)
	}
	// r3's third line is still to come; r1 gets a line behind the place.
	f.write(f.revs[0], controlplane.LogDeploy, "r1 late", 1)
	f.write(f.revs[2], controlplane.LogDeploy, "r3 more", 1)
	u, err := f.cp.UpdateDeployment(f.ctx, tenantA, f.dep, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:4")}})
	if err != nil {
		t.Fatal(err)
	}
	f.write(*u.LatestRevisionID, controlplane.LogDeploy, "r4 deploy", 1)
	q.Cursor = *p.NextCursor
	diff(t, "the rest", []string{"r3 deploy 3", "r3 more 1", "r4 deploy 1"}, f.all(q))
}

// TestDeploymentLogQueryValidation: every bad value is one problem at
// ["query", name]; a query with several lists them all.
func TestDeploymentLogQueryValidation(t *testing.T) {
	f := newLogsFixture(t)
	cursor := func(q controlplane.DeploymentLogQuery) string {
		t.Helper()
		q.PageSize = new(1)
		p, err := f.list(tenantA, q)
		if err != nil || p.NextCursor == nil {
			t.Fatalf("%v %+v", err, p)
		}
		return *p.NextCursor
	}
	asc := cursor(controlplane.DeploymentLogQuery{DeploymentID: f.dep})
	desc := cursor(controlplane.DeploymentLogQuery{DeploymentID: f.dep, SortOrder: "desc"})
	build := cursor(controlplane.DeploymentLogQuery{DeploymentID: f.dep, LogType: "BUILD"})
	oneRev := cursor(controlplane.DeploymentLogQuery{DeploymentID: f.dep, RevisionID: f.revs[1]})
	dep := func(q controlplane.DeploymentLogQuery) controlplane.DeploymentLogQuery {
		q.DeploymentID = f.dep
		return q
	}
	tests := []struct {
		name string
		q    controlplane.DeploymentLogQuery
		want []string
	}{
		{"defaults", dep(controlplane.DeploymentLogQuery{}), nil},
		{"all set", dep(controlplane.DeploymentLogQuery{RevisionID: f.revs[0], LogType: "build", SortOrder: "desc", PageSize: new(100),
			Query: "x", Level: "warn", StartTime: "2026-11-21T10:00:00Z", EndTime: "2026-11-21T10:00:00.000001Z"}), nil},
		{"deployment_id missing", controlplane.DeploymentLogQuery{}, []string{"query.deployment_id: missing"}},
		{"deployment_id not a uuid", controlplane.DeploymentLogQuery{DeploymentID: "agent"}, []string{"query.deployment_id: uuid_parsing"}},
		{"revision_id not a uuid", dep(controlplane.DeploymentLogQuery{RevisionID: "latest"}), []string{"query.revision_id: uuid_parsing"}},
		{"log_type", dep(controlplane.DeploymentLogQuery{LogType: "RUNTIME"}), []string{"query.log_type: literal_error"}},
		{"sort_order", dep(controlplane.DeploymentLogQuery{SortOrder: "DESC"}), []string{"query.sort_order: literal_error"}},
		{"page_size 0", dep(controlplane.DeploymentLogQuery{PageSize: new(0)}), []string{"query.page_size: greater_than_equal"}},
		{"page_size 101", dep(controlplane.DeploymentLogQuery{PageSize: new(101)}), []string{"query.page_size: less_than_equal"}},
		{"level", dep(controlplane.DeploymentLogQuery{Level: "NOTICE"}), []string{"query.level: literal_error"}},
		{"query too long", dep(controlplane.DeploymentLogQuery{Query: strings.Repeat("x", 1025)}), []string{"query.query: string_too_long"}},
		{"times", dep(controlplane.DeploymentLogQuery{StartTime: "yesterday", EndTime: "2026-11-21"}),
			[]string{"query.start_time: value_error", "query.end_time: value_error"}},
		{"window", dep(controlplane.DeploymentLogQuery{StartTime: "2026-11-21T10:00:00Z", EndTime: "2026-11-21T10:00:00Z"}),
			[]string{"query.end_time: value_error"}},
		{"cursor", dep(controlplane.DeploymentLogQuery{Cursor: asc}), nil},
		{"cursor garbage", dep(controlplane.DeploymentLogQuery{Cursor: "12"}), []string{"query.cursor: value_error"}},
		{"cursor of desc used asc", dep(controlplane.DeploymentLogQuery{Cursor: desc}), []string{"query.cursor: value_error"}},
		{"cursor of asc used desc", dep(controlplane.DeploymentLogQuery{SortOrder: "desc", Cursor: asc}), []string{"query.cursor: value_error"}},
		{"cursor with a bad order: the order only", dep(controlplane.DeploymentLogQuery{SortOrder: "up", Cursor: asc}), []string{"query.sort_order: literal_error"}},
		{"cursor of the build logs", dep(controlplane.DeploymentLogQuery{Cursor: build}), []string{"query.cursor: value_error"}},
		{"cursor of the build logs, any case", dep(controlplane.DeploymentLogQuery{LogType: "Build", Cursor: build}), nil},
		{"cursor of one revision", dep(controlplane.DeploymentLogQuery{Cursor: oneRev}), []string{"query.cursor: value_error"}},
		{"cursor of that revision", dep(controlplane.DeploymentLogQuery{RevisionID: f.revs[1], Cursor: oneRev}), nil},
		{"cursor of another revision", dep(controlplane.DeploymentLogQuery{RevisionID: f.revs[2], Cursor: oneRev}), []string{"query.cursor: value_error"}},
		{"cursor without its deployment: the id only", controlplane.DeploymentLogQuery{Cursor: asc}, []string{"query.deployment_id: missing"}},
		{"several", controlplane.DeploymentLogQuery{DeploymentID: "x", PageSize: new(-1), Level: "x", SortOrder: "x"},
			[]string{"query.deployment_id: uuid_parsing", "query.sort_order: literal_error", "query.page_size: greater_than_equal", "query.level: literal_error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.q.Validate(tenantA)
			_, lerr := f.list(tenantA, tt.q)
			if tt.want == nil {
				if err != nil || lerr != nil {
					t.Fatalf("Validate = %v, ListDeploymentLogs = %v; want nil", err, lerr)
				}
				return
			}
			diff(t, "problems", tt.want, locTypes(problems(t, err)))
			diff(t, "ListDeploymentLogs' problems", tt.want, locTypes(problems(t, lerr)))
		})
	}
}

// A cursor is bound to its tenant and query: another tenant's (for a
// deployment of the same id, or its own), another deployment's, and one
// changed in any bit are refused, and nothing is read.
func TestDeploymentLogCursorBinding(t *testing.T) {
	f := newLogsFixture(t)
	p, err := f.list(tenantA, controlplane.DeploymentLogQuery{DeploymentID: f.dep, PageSize: new(1)})
	if err != nil || p.NextCursor == nil {
		t.Fatalf("%v %+v", err, p)
	}
	c := *p.NextCursor
	refused := func(what, tenant, dep, cursor string) {
		t.Helper()
		_, err := f.list(tenant, controlplane.DeploymentLogQuery{DeploymentID: dep, Cursor: cursor})
		var ve *apierr.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%s: %v, want a 422", what, err)
		}
		diff(t, what, []string{"query.cursor: value_error"}, locTypes(ve.Problems))
	}
	refused("tenant B, its own deployment", tenantB, f.other, c)
	refused("tenant B, tenant A's deployment id", tenantB, f.dep, c)
	refused("another deployment", tenantA, f.create(tenantA, dockerBody("second")).ID, c)
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, bit := range []byte{1, 0x80} {
			b := slices.Clone(raw)
			b[i] ^= bit
			refused(fmt.Sprintf("byte %d ^ %#x", i, bit), tenantA, f.dep, base64.RawURLEncoding.EncodeToString(b))
		}
	}
	refused("cut", tenantA, f.dep, c[:len(c)-1])
	refused("longer", tenantA, f.dep, c+"A")
	refused("padded", tenantA, f.dep, c+"==")
	if _, err := f.list(tenantA, controlplane.DeploymentLogQuery{DeploymentID: f.dep, Cursor: c}); err != nil {
		t.Errorf("the cursor itself: %v", err)
	}
}

// An unknown deployment or revision, another tenant's, or a revision of
// another deployment is not found; a deployment without logs is an empty
// page.
func TestDeploymentLogsNotFound(t *testing.T) {
	f := newLogsFixture(t)
	other, err := f.cp.GetDeployment(f.ctx, tenantB, f.other)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		tenant  string
		q       controlplane.DeploymentLogQuery
		kind    string
		missing string
	}{
		{"unknown deployment", tenantA, controlplane.DeploymentLogQuery{DeploymentID: "00000000-0000-7000-8000-0000000fffff"}, apierr.KindDeployment, "00000000-0000-7000-8000-0000000fffff"},
		{"another tenant's", tenantB, controlplane.DeploymentLogQuery{DeploymentID: f.dep}, apierr.KindDeployment, f.dep},
		{"unknown revision", tenantA, controlplane.DeploymentLogQuery{DeploymentID: f.dep, RevisionID: "00000000-0000-7000-8000-0000000fffff"}, apierr.KindRevision, "00000000-0000-7000-8000-0000000fffff"},
		{"another deployment's revision", tenantA, controlplane.DeploymentLogQuery{DeploymentID: f.dep, RevisionID: *other.LatestRevisionID}, apierr.KindRevision, *other.LatestRevisionID},
	} {
		_, err := f.list(c.tenant, c.q)
		var nf *apierr.NotFoundError
		if !errors.As(err, &nf) || nf.Kind != c.kind || nf.ID != c.missing {
			t.Errorf("%s: %v, want %s %s not found", c.name, err, c.kind, c.missing)
		}
	}
	empty := f.create(tenantA, dockerBody("quiet"))
	p, err := f.list(tenantA, controlplane.DeploymentLogQuery{DeploymentID: empty.ID})
	if err != nil || p.Items == nil || len(p.Items) != 0 || p.NextCursor != nil {
		t.Errorf("a deployment without logs: %+v, %v", p, err)
	}
}

// FuzzDeploymentLogCursor: any cursor either reads a page of the query's
// own deployment or is refused with one problem at ["query", "cursor"];
// nothing of another deployment or tenant is ever answered.
func FuzzDeploymentLogCursor(f *testing.F) {
	st := storemem.New()
	f.Cleanup(func() { st.Close() })
	ctx := context.Background()
	cp := controlplane.New(st, nil)
	mk := func(tenant, name string) (string, string) {
		d, err := cp.CreateDeployment(ctx, tenant, decode[controlplane.CreateDeploymentRequest](f, dockerBody(name)))
		if err != nil {
			f.Fatal(err)
		}
		for i := range 3 {
			if err := cp.AppendLogs(ctx, tenant, d.ID, *d.LatestRevisionID, controlplane.LogLine{Type: controlplane.LogDeploy, Message: fmt.Sprint(name, i)}); err != nil {
				f.Fatal(err)
			}
		}
		return d.ID, *d.LatestRevisionID
	}
	dep, rev := mk(tenantA, "mine")
	otherDep, _ := mk(tenantA, "other")
	bDep, _ := mk(tenantB, "theirs")
	for _, seed := range []struct{ tenant, dep, order string }{{tenantA, dep, ""}, {tenantA, dep, "desc"}, {tenantA, otherDep, ""}, {tenantB, bDep, "asc"}} {
		p, err := cp.ListDeploymentLogs(ctx, seed.tenant, &controlplane.DeploymentLogQuery{DeploymentID: seed.dep, SortOrder: seed.order, PageSize: new(1)})
		if err != nil || p.NextCursor == nil {
			f.Fatalf("%v %+v", err, p)
		}
		f.Add(*p.NextCursor, seed.order == "desc")
	}
	f.Add("", false)
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", true)
	f.Fuzz(func(t *testing.T, cursor string, desc bool) {
		order := "asc"
		if desc {
			order = "desc"
		}
		p, err := cp.ListDeploymentLogs(ctx, tenantA, &controlplane.DeploymentLogQuery{DeploymentID: dep, SortOrder: order, Cursor: cursor})
		if err != nil {
			var ve *apierr.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("cursor %q: %v, want a 422 or a page", cursor, err)
			}
			diff(t, "problems", []string{"query.cursor: value_error"}, locTypes(ve.Problems))
			return
		}
		for _, e := range p.Items {
			if !strings.HasPrefix(e.ID, rev+":deploy:") || !strings.HasPrefix(e.Message, "mine") {
				t.Fatalf("cursor %q answered %+v, not a line of the deployment", cursor, e)
			}
		}
	})
}

// CountFreeDeployments counts the tenant's deployments of the free types
// (dev_free, and dev_free_zero when it is a type), being deleted or not,
// and nothing of another tenant.
func TestCountFreeDeployments(t *testing.T) {
	f := newFixture(t, &controlplane.Options{Uploads: controlplane.AnyUpload{}})
	count := func(tenant string) int {
		t.Helper()
		n, err := f.cp.CountFreeDeployments(f.ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(tenantA); n != 0 {
		t.Fatalf("a tenant never written: %d", n)
	}
	want := 0
	for i, typ := range controlplane.DeploymentTypes() {
		for j, src := range []string{"internal_docker", "internal_source"} {
			f.create(tenantA, fmt.Sprintf(`{"name": "lg-%d-%d", "source": %q, "source_config": {"deployment_type": %q}, "source_revision_config": {}}`, i, j, src, typ))
			if strings.HasPrefix(string(typ), "dev_free") {
				want++
			}
		}
	}
	in := f.integration(tenantA)
	f.create(tenantA, strings.Replace(githubBody("gh-free", in), `"repo_url"`, `"deployment_type": "dev_free", "repo_url"`, 1))
	f.create(tenantA, githubBody("gh-prod", in))
	f.create(tenantA, dockerBody("docker"))
	want++
	f.create(tenantB, `{"name": "b", "source": "internal_docker", "source_config": {"deployment_type": "dev_free"}, "source_revision_config": {}}`)
	if n := count(tenantA); n != want {
		t.Errorf("tenant A: %d free deployments, want %d", n, want)
	}
	if n := count(tenantB); n != 1 {
		t.Errorf("tenant B: %d free deployments, want 1", n)
	}
	// One being deleted (it reached an engine) still counts; one removed
	// (it never ran) does not.
	f.reachEngine()
	for _, name := range []string{"gh-free", "lg-0-0"} {
		page, err := f.cp.ListDeployments(f.ctx, tenantA, &controlplane.ListDeploymentsQuery{DeploymentType: controlplane.DeploymentTypeDevFree, NameContains: name})
		if err != nil || len(page.Resources) != 1 {
			t.Fatalf("%v %+v", err, page)
		}
		if err := f.cp.DeleteDeployment(f.ctx, tenantA, page.Resources[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := f.cp.ListDeployments(f.ctx, tenantA, &controlplane.ListDeploymentsQuery{Status: controlplane.StatusAwaitingDelete}); err != nil || len(d.Resources) != 1 {
		t.Fatalf("AWAITING_DELETE: %+v, %v", d, err)
	}
	if n := count(tenantA); n != want-1 {
		t.Errorf("after deleting one being torn down and one that never ran: %d, want %d", n, want-1)
	}
}
