package controlplanetest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
)

// RunDeploymentLogs checks ControlPlane.ListDeploymentLogs against the
// model of RunLogs, over the store open opens: a deployment gets
// revisions (PATCHes of its image) and random batches of lines in the
// logs of any of them under a small drawn LogRetention; random queries
// (either log type, either order, one revision or all, any page size,
// level, query and time window) are walked from cursor to cursor until
// next_cursor is null, and must give exactly the model's lines of each
// revision's log, oldest revision first (asc) or last (desc). A second
// kind of walk writes lines between its pages, to any revision's log or a
// new revision's: it must never answer a line twice or out of key order,
// and must answer every line that was there when it began and still is
// when it ends.
func RunDeploymentLogs(t *testing.T, open Opener) {
	t.Helper()
	rapid.Check(t, func(rt *rapid.T) {
		w, closeStore := newLogWorld(rt, open)
		defer closeStore()
		ctx, cp, ret := context.Background(), w.cp, w.ret
		const tenant = "acme"
		image := func(n int) *string { return new(fmt.Sprintf("registry.example.com/agent:%d", n)) }
		d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("agent"),
			Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: image(0)}})
		if err != nil {
			rt.Fatal(err)
		}
		revs := []string{*d.LatestRevisionID} // oldest first, which is id order
		type logOf struct {
			rev string
			typ controlplane.LogType
		}
		model := map[logOf]*logModel{}

		revise := func(rt *rapid.T) {
			u, err := cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
				SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: image(len(revs))}})
			if err != nil {
				rt.Fatal(err)
			}
			revs = append(revs, *u.LatestRevisionID)
		}
		write := func(rt *rapid.T) {
			rev := rapid.SampledFrom(revs).Draw(rt, "revision")
			lines := drawLogLines(rt, 8)
			w.append(rt, tenant, d.ID, rev, lines, func(l controlplane.LogLine, at time.Time) {
				k := logOf{rev, l.Type}
				if model[k] == nil {
					model[k] = &logModel{}
				}
				model[k].write(ret, rev, l.Type, normLevel(l.Level), at, l.Message)
			})
		}
		drawQuery := func(rt *rapid.T) (controlplane.DeploymentLogQuery, controlplane.LogQuery, time.Time, time.Time) {
			typ := rapid.SampledFrom(logTypes).Draw(rt, "type")
			q := controlplane.DeploymentLogQuery{DeploymentID: d.ID,
				LogType:   rapid.SampledFrom(map[controlplane.LogType][]string{controlplane.LogBuild: {"BUILD", "build"}, controlplane.LogDeploy: {"DEPLOY", "Deploy", ""}}[typ]).Draw(rt, "log type"),
				SortOrder: rapid.SampledFrom([]string{"", "asc", "desc"}).Draw(rt, "order")}
			if rapid.IntRange(0, 3).Draw(rt, "one revision") == 0 {
				q.RevisionID = rapid.SampledFrom(revs).Draw(rt, "revision filter")
			}
			if rapid.Bool().Draw(rt, "sized") {
				q.PageSize = new(rapid.IntRange(1, 5).Draw(rt, "page size"))
			}
			if rapid.IntRange(0, 2).Draw(rt, "by level") == 0 {
				q.Level = string(rapid.SampledFrom(logLevels[:6]).Draw(rt, "level filter"))
			}
			if rapid.IntRange(0, 2).Draw(rt, "by query") == 0 {
				q.Query = rapid.SampledFrom([]string{"alpha", "BETA", "gamma", "Delta", "psi"}).Draw(rt, "query")
			}
			start, end := drawLogWindow(rt, &q.StartTime, &q.EndTime)
			lq := controlplane.LogQuery{Type: typ, Order: q.SortOrder, Level: q.Level, Query: q.Query}
			return q, lq, start, end
		}
		// expect is what a walk of q gives, by the model: each revision's
		// log in turn, its dropped-lines line as the model has it.
		expect := func(q controlplane.DeploymentLogQuery, lq controlplane.LogQuery, start, end time.Time) []controlplane.LogEntry {
			order := slices.Clone(revs)
			if q.RevisionID != "" {
				order = []string{q.RevisionID}
			}
			if q.SortOrder == "desc" {
				slices.Reverse(order)
			}
			want := []controlplane.LogEntry{}
			for _, rev := range order {
				if m := model[logOf{rev, lq.Type}]; m != nil {
					want = append(want, m.expect(lq, start, end)...)
				}
			}
			return want
		}
		// page reads one page and checks what holds of every page.
		page := func(rt *rapid.T, q controlplane.DeploymentLogQuery) *controlplane.DeploymentLogPage {
			p, err := cp.ListDeploymentLogs(ctx, tenant, &q)
			if err != nil {
				rt.Fatalf("ListDeploymentLogs %+v: %v", q, err)
			}
			size := controlplane.DefaultDeploymentLogPageSize
			if q.PageSize != nil {
				size = *q.PageSize
			}
			if len(p.Items) > size || len(p.Items) < size && p.NextCursor != nil {
				rt.Fatalf("a page of %d lines (page size %d), next_cursor %v: a page is full unless it is the last", len(p.Items), size, p.NextCursor)
			}
			return p
		}

		rt.Repeat(map[string]func(*rapid.T){
			"revise": revise,
			"write":  write,
			"walk": func(rt *rapid.T) {
				q, lq, start, end := drawQuery(rt)
				want := expect(q, lq, start, end)
				got := []controlplane.LogEntry{}
				for pages := 0; ; pages++ {
					if pages > len(want)+1 {
						rt.Fatalf("the walk %+v does not end: %d pages for %d lines", q, pages, len(want))
					}
					p := page(rt, q)
					got = append(got, p.Items...)
					if p.NextCursor == nil {
						break
					}
					q.Cursor = *p.NextCursor
				}
				for i, l := range got {
					rev, typ, n, ok := dropped(l.ID)
					if !ok {
						continue
					}
					dm := model[logOf{rev, controlplane.LogType(typ)}]
					if dm == nil || n != strconv.Itoa(dm.dropped) || !strings.HasPrefix(l.Message, n+" earlier lines dropped") {
						rt.Fatalf("dropped-lines line %+v, want it to count the model's", l)
					}
					got[i].ID, got[i].Message = "", "(dropped)"
				}
				if diff := cmp.Diff(want, got); diff != "" {
					rt.Fatalf("walk %+v (-model +got):\n%s", q, diff)
				}
			},
			"walk while writing": func(rt *rapid.T) {
				q, lq, _, _ := drawQuery(rt)
				q.Level, q.Query, q.StartTime, q.EndTime = "", "", "", ""
				lq.Level, lq.Query = "", ""
				idSet := func(es []controlplane.LogEntry) map[string]bool {
					out := map[string]bool{}
					for _, e := range es {
						out[e.ID] = true
					}
					return out
				}
				startIDs := idSet(expect(q, lq, time.Time{}, time.Time{}))
				var got []controlplane.LogEntry
				for pages := 0; ; pages++ {
					if pages > 1000 {
						rt.Fatalf("the walk %+v does not end", q)
					}
					p := page(rt, q)
					got = append(got, p.Items...)
					if p.NextCursor == nil {
						break
					}
					q.Cursor = *p.NextCursor
					if pages >= 10 {
						continue // (an asc walk would follow the writes forever)
					}
					for range rapid.IntRange(0, 2).Draw(rt, "writes between pages") {
						if rapid.IntRange(0, 3).Draw(rt, "new revision") == 0 {
							revise(rt)
						}
						write(rt)
					}
				}
				endIDs := idSet(expect(q, lq, time.Time{}, time.Time{}))
				seen := map[string]bool{}
				for i, l := range got {
					if seen[l.ID] {
						rt.Fatalf("line %s answered twice", l.ID)
					}
					seen[l.ID] = true
					if i > 0 && !placeBefore(got[i-1].ID, l.ID, q.SortOrder == "desc") {
						rt.Fatalf("line %s answered after %s", l.ID, got[i-1].ID)
					}
				}
				for id := range startIDs {
					if id != "" && endIDs[id] && !seen[id] {
						rt.Fatalf("line %s, there from the walk's start to its end, was not answered", id)
					}
				}
			},
		})
	})
}

// dropped splits the id of a dropped-lines line (rev:type:dropped:N).
func dropped(id string) (rev, typ, n string, ok bool) {
	parts := strings.Split(id, ":")
	if len(parts) != 4 || parts[2] != "dropped" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[3], true
}

// placeBefore reports whether the line of id a comes before the one of id
// b in a walk's order: by revision, then by place in the log (a
// dropped-lines line is at the place before its log's first line kept,
// after every place a walk passed before its lines were dropped).
func placeBefore(a, b string, desc bool) bool {
	if desc {
		a, b = b, a
	}
	ra, sa, _ := strings.Cut(a, ":")
	rb, sb, _ := strings.Cut(b, ":")
	if ra != rb {
		return ra < rb
	}
	if strings.Contains(sa, "dropped") || strings.Contains(sb, "dropped") {
		return true // its place moves with the lines dropped; ids do not say where it was
	}
	_, na, _ := strings.Cut(sa, ":")
	_, nb, _ := strings.Cut(sb, ":")
	x, _ := strconv.ParseUint(na, 10, 64)
	y, _ := strconv.ParseUint(nb, 10, 64)
	return x < y
}
