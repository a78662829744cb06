package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

const eventsTenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

// newEventsCP is a ControlPlane over storemem whose clock moves a second
// per reading, from now.
func newEventsCP(t *testing.T, o *Options, now *time.Time) (*ControlPlane, store.Store) {
	t.Helper()
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	if o == nil {
		o = &Options{}
	}
	o.Clock = func() time.Time { *now = now.Add(time.Second); return *now }
	return New(st, o), st
}

func createEventsDeployment(t *testing.T, cp *ControlPlane, name string) *Deployment {
	t.Helper()
	d, err := cp.CreateDeployment(context.Background(), eventsTenant, &CreateDeploymentRequest{Name: new(name), Source: new(SourceExternalDocker),
		SourceRevisionConfig: &SourceRevisionConfig{ImageURI: new("r/a:1")},
		Secrets:              []SecretInput{{Name: "API_KEY", Value: new("the-secret-value")}}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// next returns the stream's next events, failing when there are none
// within a generous deadline.
func next(t *testing.T, s *EventStream) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	evs, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestLogEvents: log lines appended with logEvent reach only the followers
// that asked for their type, in order with the other events.
func TestLogEvents(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp, st := newEventsCP(t, nil, &now)
	none, _ := cp.FollowEvents(ctx, eventsTenant, nil)
	build, _ := cp.FollowEvents(ctx, eventsTenant, &FollowOptions{Logs: []LogType{LogBuild}})
	both, _ := cp.FollowEvents(ctx, eventsTenant, &FollowOptions{Logs: []LogType{LogDeploy, LogBuild}})
	err := st.Update(ctx, func(tx store.Tx) error { // st: not the ControlPlane's store, so no wake-up; Next polls
		if err := cp.logEvent(tx, eventsTenant, "d", "r", LogBuild, now, []byte(`{"message":"b"}`)); err != nil {
			return err
		}
		return cp.logEvent(tx, eventsTenant, "d", "r", LogDeploy, now, []byte(`{"message":"d"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	createEventsDeployment(t, cp, "agent")
	got := func(evs []Event) string {
		var out []string
		for _, e := range evs {
			out = append(out, e.ID+" "+e.Name)
		}
		return strings.Join(out, ", ")
	}
	diff := func(what, want string, evs []Event) {
		t.Helper()
		if g := got(evs); g != want {
			t.Errorf("%s: %s, want %s", what, g, want)
		}
	}
	diff("without logs", "3 deployment, 4 revision", next(t, none))
	evs := next(t, build)
	diff("build logs", "1 log, 3 deployment, 4 revision", evs)
	if d := string(evs[0].Data); d != `{"type":"build","deployment_id":"d","revision_id":"r","log":{"message":"b"}}` {
		t.Errorf("a log event's data: %s", d)
	}
	diff("both", "1 log, 2 log, 3 deployment, 4 revision", next(t, both))
	if _, err := cp.FollowEvents(ctx, eventsTenant, &FollowOptions{Logs: []LogType{"trace"}}); err == nil {
		t.Error("an unknown log type is accepted")
	}
}

// TestEventsRollBack: an Update that fails after appending an event leaves
// no event and no number used.
func TestEventsRollBack(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp, _ := newEventsCP(t, nil, &now)
	s, _ := cp.FollowEvents(ctx, eventsTenant, nil)
	boom := errors.New("boom")
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		if err := cp.logEvent(tx, eventsTenant, "d", "r", LogBuild, now, []byte(`{}`)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	createEventsDeployment(t, cp, "agent")
	if evs := next(t, s); evs[0].ID != "1" || evs[0].Name != EventDeployment {
		t.Errorf("first event after a rolled-back one: %s %s", evs[0].ID, evs[0].Name)
	}
}

// TestEventsSealed: with a SecretKey, the event log holds no secret value
// in plain text (deployment events are stored in the sealed storage form),
// while the event a follower reads carries the deployment as GET answers
// it.
func TestEventsSealed(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp, st := newEventsCP(t, &Options{SecretKey: bytes.Repeat([]byte{9}, 32)}, &now)
	s, _ := cp.FollowEvents(ctx, eventsTenant, nil)
	createEventsDeployment(t, cp, "agent")
	maintain(t, cp)
	recs, err := storetest.Dump(ctx, st, colEvents)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs[colEvents]) != 3 { // the counter and two events
		t.Fatalf("cp_events holds %d records", len(recs[colEvents]))
	}
	for k, v := range recs[colEvents] {
		if strings.Contains(v, "the-secret-value") {
			t.Errorf("%s holds the secret in plain text", k)
		}
	}
	if evs := next(t, s); !strings.Contains(string(evs[0].Data), `"secrets":[{"name":"API_KEY","value":"the-secret-value"}]`) {
		t.Errorf("the deployment event: %s", evs[0].Data)
	}
}

// TestEventsPruned: the log keeps a tenant's newest EventRetention events
// and none older than EventMaxAge (by the newest's time), pruning every
// 64th append.
func TestEventsPruned(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		o    Options
		step time.Duration // clock advance between changes
		kept string        // the first and last numbers kept after 128 events
	}{
		{"count", Options{EventRetention: 50, EventMaxAge: time.Hour}, 0, "79 128"},
		{"age", Options{EventRetention: 1000, EventMaxAge: 30 * time.Minute}, time.Minute, "99 128"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp, st := newEventsCP(t, &c.o, &now)
			d := createEventsDeployment(t, cp, "agent") // events 1, 2
			createEventsDeployment(t, cp, "other")      // 3, 4
			for i := range 124 {                        // events 5 to 128
				now = now.Add(c.step)
				if _, err := cp.UpdateDeployment(ctx, eventsTenant, d.ID, &UpdateDeploymentRequest{
					SourceConfig: &SourceConfig{CustomURL: new(fmt.Sprintf("https://%d.example", i))}}); err != nil {
					t.Fatal(err)
				}
			}
			maintain(t, cp)
			recs, err := storetest.Dump(ctx, st, colEvents)
			if err != nil {
				t.Fatal(err)
			}
			var first, last uint64
			for k := range recs[colEvents] {
				n, ok := eventNumber(eventPrefix(eventsTenant), k)
				if !ok {
					continue
				}
				if first == 0 || n < first {
					first = n
				}
				last = max(last, n)
			}
			if got := fmt.Sprint(first, " ", last); got != c.kept {
				t.Errorf("kept %s, want %s", got, c.kept)
			}
		})
	}
}

// TestFollowersShareTail: many followers of one tenant, some starting
// late and some reading slowly, each receive every event exactly once and
// in order while a producer commits more than a tail holds (the followers
// share reads through the tenant's tail, and those behind it read alone).
func TestFollowersShareTail(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp, _ := newEventsCP(t, nil, &now)
	d := createEventsDeployment(t, cp, "agent") // events 1, 2
	const total = 2 + 3*eventTailSize
	errs := make(chan error, 20)
	follow := func(lastID string, slow bool) {
		s, err := cp.FollowEvents(ctx, eventsTenant, &FollowOptions{LastEventID: lastID})
		if err != nil {
			errs <- err
			return
		}
		want := uint64(2) // from now: after the deployment's creation
		if lastID != "" {
			want, _ = strconv.ParseUint(lastID, 10, 64)
		}
		go func() {
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			for want < total {
				evs, err := s.Next(cctx)
				if err != nil {
					errs <- fmt.Errorf("after %d: %w", want, err)
					return
				}
				for _, e := range evs {
					if want++; e.ID != fmt.Sprint(want) || e.Name == EventGap {
						errs <- fmt.Errorf("event %s %s, want %d", e.ID, e.Name, want)
						return
					}
				}
				if slow {
					time.Sleep(time.Millisecond)
				}
			}
			errs <- nil
		}()
	}
	for i := range 10 {
		follow("", i%3 == 0)
	}
	for i := range 3 * eventTailSize {
		if _, err := cp.UpdateDeployment(ctx, eventsTenant, d.ID, &UpdateDeploymentRequest{
			SourceConfig: &SourceConfig{CustomURL: new(fmt.Sprintf("https://%d.example", i))}}); err != nil {
			t.Fatal(err)
		}
		if i%eventTailSize == 7 {
			follow("1", false) // from the start, behind the tail
		}
	}
	for range 13 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// FuzzEventRecord: decodeEventRecord never panics, and what encode writes
// decodes to the same record.
func FuzzEventRecord(f *testing.F) {
	f.Add([]byte("1\ndeployment\ncreated\nd\n\n5\n{\"v\":1}"), "revision", "status", "d", "r", int64(-3), []byte("{}\n\nx"))
	f.Add([]byte("2\n\n\n\n\n\n"), "", "", "", "", int64(0), []byte(nil))
	f.Fuzz(func(t *testing.T, raw []byte, kind, change, dep, rev string, at int64, payload []byte) {
		_, _ = decodeEventRecord(raw)
		for _, s := range []string{kind, change, dep, rev} {
			if strings.Contains(s, "\n") {
				return // fields never hold a line end (kinds, changes, ids)
			}
		}
		e := eventRecord{kind: kind, change: change, deployment: dep, revision: rev, at: at, payload: payload}
		got, err := decodeEventRecord(e.encode())
		if err != nil {
			t.Fatal(err)
		}
		if got.kind != kind || got.change != change || got.deployment != dep || got.revision != rev || got.at != at ||
			!bytes.Equal(got.payload, payload) {
			t.Fatalf("round trip: %+v, want %+v", got, e)
		}
	})
}

// TestStoredLogLinesAreEvents: every line the log store keeps (AppendLogs,
// and Reporter.Log, which share appendLogs) is a log event whose data
// carries the line as ListLogs answers it, id included; lines a follower
// did not ask for stay out of its stream.
func TestStoredLogLinesAreEvents(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp, _ := newEventsCP(t, nil, &now)
	d := createEventsDeployment(t, cp, "agent")
	deploy, err := cp.FollowEvents(ctx, eventsTenant, &FollowOptions{Logs: []LogType{LogDeploy}})
	if err != nil {
		t.Fatal(err)
	}
	err = cp.AppendLogs(ctx, eventsTenant, d.ID, *d.LatestRevisionID,
		LogLine{Type: LogBuild, Message: "compiling"},
		LogLine{Type: LogDeploy, Level: LevelError, Message: "container exited"})
	if err != nil {
		t.Fatal(err)
	}
	evs := next(t, deploy)
	if len(evs) != 1 || evs[0].Name != EventLog {
		t.Fatalf("events: %+v, want one deploy log event", evs)
	}
	page, err := cp.ListLogs(ctx, eventsTenant, d.ID, *d.LatestRevisionID, &LogQuery{Type: LogDeploy})
	if err != nil {
		t.Fatal(err)
	}
	line, err := json.Marshal(page.Logs[0])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"deploy","deployment_id":"` + d.ID + `","revision_id":"` + *d.LatestRevisionID + `","log":` + string(line) + `}`
	if got := string(evs[0].Data); got != want {
		t.Errorf("log event data:\n got %s\nwant %s", got, want)
	}
}

// maintain runs the sequencer over every tenant's outbox and folds the
// pending count changes, as Run does at each poll.
func maintain(t testing.TB, cp *ControlPlane) {
	t.Helper()
	if err := cp.seq.maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
}
