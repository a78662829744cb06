package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
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
	recs, err := storetest.Dump(ctx, st, eventlog.Events)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs[eventlog.Events]) != 3 { // the counter and two events
		t.Fatalf("cp_events holds %d records", len(recs[eventlog.Events]))
	}
	for k, v := range recs[eventlog.Events] {
		if strings.Contains(v, "the-secret-value") {
			t.Errorf("%s holds the secret in plain text", k)
		}
	}
	if evs := next(t, s); !strings.Contains(string(evs[0].Data), `"secrets":[{"name":"API_KEY","value":"the-secret-value"}]`) {
		t.Errorf("the deployment event: %s", evs[0].Data)
	}
}

// TestEventsPruned: the log keeps a tenant's newest EventRetention events
// and none older than EventMaxAge (by the newest's time): the event
// Options reach the log (eventlog tests the pruning itself).
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
			recs, err := storetest.Dump(ctx, st, eventlog.Events)
			if err != nil {
				t.Fatal(err)
			}
			var first, last uint64
			for k := range recs[eventlog.Events] {
				hex, ok := strings.CutPrefix(k, eventsTenant+"/e/")
				if !ok {
					continue
				}
				n, err := strconv.ParseUint(hex, 16, 64)
				if err != nil {
					t.Fatal(err)
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
	if err := cp.maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
}
