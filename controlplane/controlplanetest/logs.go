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
		w, closeStore := newLogWorld(rt, open)
		defer closeStore()
		ctx, cp, ret := context.Background(), w.cp, w.ret
		const tenant = "acme"
		d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("agent"),
			Source:               new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")}})
		if err != nil {
			rt.Fatal(err)
		}
		rev := *d.LatestRevisionID
		model := map[controlplane.LogType]*logModel{controlplane.LogBuild: {}, controlplane.LogDeploy: {}}

		rt.Repeat(map[string]func(*rapid.T){
			"write": func(rt *rapid.T) {
				lines := drawLogLines(rt, 15)
				w.append(rt, tenant, d.ID, rev, lines, func(l controlplane.LogLine, at time.Time) {
					model[l.Type].write(ret, rev, l.Type, normLevel(l.Level), at, l.Message)
				})
			},
			"walk": func(rt *rapid.T) {
				typ := rapid.SampledFrom(logTypes).Draw(rt, "type")
				q := controlplane.LogQuery{Type: typ, Order: rapid.SampledFrom([]string{"", "asc", "desc"}).Draw(rt, "order")}
				if rapid.Bool().Draw(rt, "limited") {
					q.Limit = new(rapid.IntRange(1, 5).Draw(rt, "limit"))
				}
				if rapid.IntRange(0, 2).Draw(rt, "by level") == 0 {
					q.Level = string(rapid.SampledFrom(logLevels[:6]).Draw(rt, "level filter"))
				}
				if rapid.IntRange(0, 2).Draw(rt, "by query") == 0 {
					q.Query = rapid.SampledFrom([]string{"alpha", "BETA", "gamma", "Delta", "psi"}).Draw(rt, "query")
				}
				start, end := drawLogWindow(rt, &q.StartTime, &q.EndTime)
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

// logT0 is the time the log properties' clocks start at.
var logT0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// The words and levels of the lines the log properties draw (levels in
// every spelling the API takes; the first six are also drawn as
// filters).
var (
	logWords  = []string{"alpha", "Beta", "GAMMA", "delta", "epsilon ALPHA"}
	logLevels = []controlplane.LogLevel{"DEBUG", "info", "WARNING", "warn", "Error", "CRITICAL", ""}
	logTypes  = []controlplane.LogType{controlplane.LogBuild, controlplane.LogDeploy}
)

// logWorld is the control plane of the log properties (RunLogs,
// RunDeploymentLogs): over a store of open, its clock a second further at
// each reading from logT0, its ids counted up, its logs kept under a
// small drawn LogRetention.
type logWorld struct {
	cp  *controlplane.ControlPlane
	ret controlplane.LogRetention
	now time.Time // the clock's last reading
}

// newLogWorld opens the store and makes the control plane; the function
// it returns closes the store.
func newLogWorld(rt *rapid.T, open Opener) (*logWorld, func()) {
	st, err := open()
	if err != nil {
		rt.Fatal(err)
	}
	w := &logWorld{now: logT0, ret: controlplane.LogRetention{
		MaxLines:     rapid.IntRange(1, 12).Draw(rt, "max lines"),
		MaxBytes:     rapid.IntRange(1, 120).Draw(rt, "max bytes"),
		MaxLineBytes: 1000,
	}}
	ids := 0
	w.cp = controlplane.New(st, &controlplane.Options{
		Clock:        func() time.Time { w.now = w.now.Add(time.Second); return w.now },
		NewID:        func() string { ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", ids) },
		LogRetention: w.ret,
	})
	return w, func() { st.Close() }
}

// drawLogLines draws 1 to most lines of either log, any level, some
// with a time of their own within 30 s of logT0.
func drawLogLines(rt *rapid.T, most int) []controlplane.LogLine {
	var lines []controlplane.LogLine
	for range rapid.IntRange(1, most).Draw(rt, "lines") {
		l := controlplane.LogLine{
			Type:    rapid.SampledFrom(logTypes).Draw(rt, "type"),
			Level:   rapid.SampledFrom(logLevels).Draw(rt, "level"),
			Message: strings.Join(rapid.SliceOfN(rapid.SampledFrom(logWords), 0, 3).Draw(rt, "words"), " "),
		}
		if rapid.Bool().Draw(rt, "timed") {
			l.Time = logT0.Add(time.Duration(rapid.IntRange(0, 30).Draw(rt, "second")) * time.Second)
		}
		lines = append(lines, l)
	}
	return lines
}

// append writes lines to the revision's logs with AppendLogs and hands
// record each line with the time the log gives it: its own, or the
// write's one reading of the clock.
func (w *logWorld) append(rt *rapid.T, tenant, deploymentID, revisionID string, lines []controlplane.LogLine,
	record func(l controlplane.LogLine, at time.Time)) {
	stamped := w.now.Add(time.Second) // the one reading of the write
	if err := w.cp.AppendLogs(context.Background(), tenant, deploymentID, revisionID, lines...); err != nil {
		rt.Fatal(err)
	}
	for _, l := range lines {
		at := l.Time
		if at.IsZero() {
			at = stamped
		}
		record(l, at)
	}
}

// drawLogWindow draws an optional start (within 40 s of logT0) and end
// (up to 40 s after the start, or after logT0), sets the query's start
// and end times to them, and returns them (zero when not drawn).
func drawLogWindow(rt *rapid.T, startTime, endTime *string) (start, end time.Time) {
	if rapid.IntRange(0, 2).Draw(rt, "from") == 0 {
		start = logT0.Add(time.Duration(rapid.IntRange(0, 40).Draw(rt, "start")) * time.Second)
		*startTime = start.Format(time.RFC3339)
	}
	if rapid.IntRange(0, 2).Draw(rt, "until") == 0 {
		end = start.Add(time.Duration(rapid.IntRange(1, 40).Draw(rt, "window")) * time.Second)
		if start.IsZero() {
			end = logT0.Add(end.Sub(time.Time{}))
		}
		*endTime = end.Format(time.RFC3339Nano)
	}
	return start, end
}
