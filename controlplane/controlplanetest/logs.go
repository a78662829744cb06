package controlplanetest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/wiretime"
)

// RunLogs checks the revision logs of ControlPlane.AppendLogs and ListLogs
// against a model, over the store open opens: random batches of lines (both
// logs, every level, times out of order) written under a small drawn
// LogRetention, then random queries (either order, any limit, level, query
// and time window filters) walked page by page from offset to offset until
// next_offset is null. The walk must give exactly the model's lines, each
// once, in order: the newest lines within the bounds, preceded (asc) or
// followed (desc) by the one WARNING line that counts the dropped ones,
// stamped with the newest dropped line's time.
func RunLogs(t *testing.T, open Opener) {
	t.Helper()
	rapid.Check(t, func(rt *rapid.T) {
		st, err := open()
		if err != nil {
			rt.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
		now, ids := t0, 0
		ret := controlplane.LogRetention{
			MaxLines:     rapid.IntRange(1, 12).Draw(rt, "max lines"),
			MaxBytes:     rapid.IntRange(1, 120).Draw(rt, "max bytes"),
			MaxLineBytes: 1000,
		}
		cp := controlplane.New(st, &controlplane.Options{
			Clock:        func() time.Time { now = now.Add(time.Second); return now },
			NewID:        func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
			LogRetention: ret,
		})
		const tenant = "acme"
		d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("agent"),
			Source:               new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")}})
		if err != nil {
			rt.Fatal(err)
		}
		rev := *d.LatestRevisionID
		model := map[controlplane.LogType]*logModel{controlplane.LogBuild: {}, controlplane.LogDeploy: {}}

		words := []string{"alpha", "Beta", "GAMMA", "delta", "epsilon ALPHA"}
		levels := []controlplane.LogLevel{"DEBUG", "info", "WARNING", "warn", "Error", "CRITICAL", ""}
		rt.Repeat(map[string]func(*rapid.T){
			"write": func(rt *rapid.T) {
				n := rapid.IntRange(1, 15).Draw(rt, "lines")
				var lines []controlplane.LogLine
				for range n {
					l := controlplane.LogLine{
						Type:    rapid.SampledFrom([]controlplane.LogType{controlplane.LogBuild, controlplane.LogDeploy}).Draw(rt, "type"),
						Level:   rapid.SampledFrom(levels).Draw(rt, "level"),
						Message: strings.Join(rapid.SliceOfN(rapid.SampledFrom(words), 0, 3).Draw(rt, "words"), " "),
					}
					if rapid.Bool().Draw(rt, "timed") {
						l.Time = t0.Add(time.Duration(rapid.IntRange(0, 30).Draw(rt, "second")) * time.Second)
					}
					lines = append(lines, l)
				}
				before := now
				if err := cp.AppendLogs(ctx, tenant, d.ID, rev, lines...); err != nil {
					rt.Fatal(err)
				}
				stamped := before.Add(time.Second) // the one reading of the write
				for _, l := range lines {
					at := l.Time
					if at.IsZero() {
						at = stamped
					}
					model[l.Type].write(ret, rev, l.Type, normLevel(l.Level), at, l.Message)
				}
			},
			"walk": func(rt *rapid.T) {
				typ := rapid.SampledFrom([]controlplane.LogType{controlplane.LogBuild, controlplane.LogDeploy}).Draw(rt, "type")
				q := controlplane.LogQuery{Type: typ, Order: rapid.SampledFrom([]string{"", "asc", "desc"}).Draw(rt, "order")}
				if rapid.Bool().Draw(rt, "limited") {
					q.Limit = new(rapid.IntRange(1, 5).Draw(rt, "limit"))
				}
				if rapid.IntRange(0, 2).Draw(rt, "by level") == 0 {
					q.Level = string(rapid.SampledFrom(levels[:6]).Draw(rt, "level filter"))
				}
				if rapid.IntRange(0, 2).Draw(rt, "by query") == 0 {
					q.Query = rapid.SampledFrom([]string{"alpha", "BETA", "gamma", "Delta", "psi"}).Draw(rt, "query")
				}
				var start, end time.Time
				if rapid.IntRange(0, 2).Draw(rt, "from") == 0 {
					start = t0.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, "start")) * time.Second)
					q.StartTime = start.Format(time.RFC3339)
				}
				if rapid.IntRange(0, 2).Draw(rt, "until") == 0 {
					end = start.Add(time.Duration(rapid.IntRange(1, 40).Draw(rt, "window")) * time.Second)
					if start.IsZero() {
						end = t0.Add(end.Sub(time.Time{}))
					}
					q.EndTime = end.Format(time.RFC3339Nano)
				}
				want := model[typ].expect(q, start, end)
				got := []controlplane.LogEntry{}
				seen := map[string]bool{}
				limit := controlplane.DefaultLogLimit
				if q.Limit != nil {
					limit = *q.Limit
				}
				for pages := 0; ; pages++ {
					if pages > len(want)+1 {
						rt.Fatalf("the walk %+v does not end: %d pages for %d lines", q, pages, len(want))
					}
					page, err := cp.ListLogs(ctx, tenant, d.ID, rev, &q)
					if err != nil {
						rt.Fatalf("ListLogs %+v: %v", q, err)
					}
					if len(page.Logs) > limit {
						rt.Fatalf("page of %d lines, limit %d", len(page.Logs), limit)
					}
					if (page.NextOffset == nil) != (len(page.Logs) == 0) {
						rt.Fatalf("next_offset %v with %d lines: want null exactly on an empty page", page.NextOffset, len(page.Logs))
					}
					for _, l := range page.Logs {
						if seen[l.ID] {
							rt.Fatalf("line %s answered twice", l.ID)
						}
						seen[l.ID] = true
					}
					got = append(got, page.Logs...)
					if page.NextOffset == nil {
						break
					}
					q.Offset = *page.NextOffset
				}
				// The dropped-lines line: its id and count, then the
				// model's placeholder.
				for i, l := range got {
					if _, n, ok := strings.Cut(l.ID, ":dropped:"); ok {
						d := model[typ].dropped
						if n != strconv.Itoa(d) || !strings.HasPrefix(l.Message, strconv.Itoa(d)+" earlier lines dropped") {
							rt.Fatalf("dropped-lines line %+v, want it to count %d", l, d)
						}
						got[i].ID, got[i].Message = "", "(dropped)"
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					rt.Fatalf("walk %+v (-model +got):\n%s", q, diff)
				}
			},
		})
	})
}

// logModel is the model of one log: every line written, in order.
type logModel struct {
	lines   []controlplane.LogEntry // kept
	sizes   int
	dropped int
	dropAt  time.Time
	seq     int
}

func normLevel(l controlplane.LogLevel) controlplane.LogLevel {
	switch strings.ToUpper(string(l)) {
	case "":
		return controlplane.LevelInfo
	case "WARN":
		return controlplane.LevelWarning
	}
	return controlplane.LogLevel(strings.ToUpper(string(l)))
}

// write adds a line and keeps the newest lines within ret.
func (m *logModel) write(ret controlplane.LogRetention, rev string, typ controlplane.LogType, level controlplane.LogLevel, at time.Time, msg string) {
	m.seq++
	m.lines = append(m.lines, controlplane.LogEntry{ID: rev + ":" + string(typ) + ":" + strconv.Itoa(m.seq),
		Timestamp: wiretime.New(at), Level: level, Message: msg})
	m.sizes += len(msg)
	for len(m.lines) > ret.MaxLines || m.sizes > ret.MaxBytes {
		old := m.lines[0]
		m.lines = m.lines[1:]
		m.sizes -= len(old.Message)
		m.dropped++
		if old.Timestamp.Time().After(m.dropAt) {
			m.dropAt = old.Timestamp.Time()
		}
	}
}

// expect is what a walk of q gives: the dropped-lines line first, then the
// kept lines, filtered, in q's order. The model's words never occur in
// the dropped-lines line, so a query filter never matches it.
func (m *logModel) expect(q controlplane.LogQuery, start, end time.Time) []controlplane.LogEntry {
	var all []controlplane.LogEntry
	if m.dropped > 0 && q.Query == "" {
		all = append(all, controlplane.LogEntry{Timestamp: wiretime.New(m.dropAt), Level: controlplane.LevelWarning,
			Message: "(dropped)"})
	}
	all = append(all, m.lines...)
	want := []controlplane.LogEntry{}
	for _, l := range all {
		at := l.Timestamp.Time()
		if q.Level != "" && l.Level != normLevel(controlplane.LogLevel(q.Level)) ||
			!start.IsZero() && at.Before(start) || !end.IsZero() && !at.Before(end) ||
			q.Query != "" && !strings.Contains(strings.ToLower(l.Message), strings.ToLower(q.Query)) {
			continue
		}
		want = append(want, l)
	}
	if q.Order == "desc" {
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
	}
	return want
}
