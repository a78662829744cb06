package controlplanetest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// The event log across replicas: events are written to an outbox by the
// change that makes them and numbered later by a sequencer that any
// replica runs (controlplane/internal/eventlog). These checks run
// two ControlPlanes, each over its own Store, over one database, as two
// replicas do.

// evTenant is the tenant of the replica event checks.
const evTenant = "5d2e7c10-3b4a-4f6e-8d9c-0a1b2c3d4e5f"

// evChange is one event the model expects: a deployment's kind and change.
type evChange struct{ deployment, kind, change string }

// seenEvent is an event as a follower read it, with what it names.
type seenEvent struct {
	id int
	evChange
}

// fataler is what the checks need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// goroutineT is a *testing.T for a goroutine other than the test's: its
// Fatalf marks the test failed and ends the goroutine.
type goroutineT struct{ t *testing.T }

func (g goroutineT) Helper() { g.t.Helper() }
func (g goroutineT) Fatalf(format string, args ...any) {
	g.t.Errorf(format, args...)
	runtime.Goexit()
}

func parseEvent(tb fataler, e controlplane.Event) seenEvent {
	tb.Helper()
	var d struct {
		Change       string `json:"change"`
		DeploymentID string `json:"deployment_id"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		tb.Fatalf("event %s: %v", e.ID, err)
	}
	id, err := strconv.Atoi(e.ID)
	if err != nil {
		tb.Fatalf("event id %q: %v", e.ID, err)
	}
	return seenEvent{id: id, evChange: evChange{d.DeploymentID, e.Name, d.Change}}
}

// readN reads n events from s (a gap or more than n fails), within a
// generous deadline that only a hang reaches.
func readN(tb fataler, s *controlplane.EventStream, n int) []seenEvent {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []seenEvent
	for len(out) < n {
		evs, err := s.Next(ctx)
		if err != nil {
			tb.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		for _, e := range evs {
			if e.Name == controlplane.EventGap {
				tb.Fatalf("a gap event after %d of %d events: %s", len(out), n, e.Data)
			}
			out = append(out, parseEvent(tb, e))
		}
	}
	if len(out) > n {
		tb.Fatalf("%d events, want %d: %v", len(out), n, out)
	}
	return out
}

// checkLog checks a whole log read from the start against the changes of
// the model, per deployment in the order they committed: ids 1, 2, 3, ...
// with no gap, and each deployment's events in the order of its changes.
func checkLog(tb fataler, log []seenEvent, want []evChange) {
	tb.Helper()
	if len(log) != len(want) {
		tb.Fatalf("%d events, want %d", len(log), len(want))
	}
	for i, e := range log {
		if e.id != i+1 {
			tb.Fatalf("event %d has id %d: ids are not dense", i+1, e.id)
		}
	}
	per := func(cs []evChange) map[string][]evChange {
		m := map[string][]evChange{}
		for _, c := range cs {
			m[c.deployment] = append(m[c.deployment], c)
		}
		return m
	}
	got := map[string][]evChange{}
	for _, e := range log {
		got[e.deployment] = append(got[e.deployment], e.evChange)
	}
	for d, w := range per(want) {
		if !slices.Equal(got[d], w) {
			tb.Fatalf("deployment %s: events %v, want %v", d, got[d], w)
		}
	}
}

// newReplicas returns two ControlPlanes over the two stores (one database);
// clocks may be nil.
func newReplicas(stores [2]store.Store, clocks [2]func() time.Time) [2]*controlplane.ControlPlane {
	var cps [2]*controlplane.ControlPlane
	for i := range cps {
		cps[i] = controlplane.New(stores[i], &controlplane.Options{Clock: clocks[i],
			EventPollInterval: 20 * time.Millisecond})
	}
	return cps
}

func createReq(name string) *controlplane.CreateDeploymentRequest {
	return &controlplane.CreateDeploymentRequest{Name: new(name), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}}
}

// EventsAcrossReplicas runs random sequences of creates, changes and
// sequencer runs through two replicas whose clocks disagree (by up to an
// hour either way), with followers opened between them on either replica,
// and checks: every replica reads the same log, ids 1, 2, 3, ... with no
// gap, one event per change, each deployment's in the order of its
// changes; and a follower opened at some point reads exactly the events
// of the changes made after it was opened. open returns the two stores
// over one new, empty database.
func EventsAcrossReplicas(t *testing.T, open func(t *rapid.T) [2]store.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		skew := time.Duration(rapid.IntRange(-3600, 3600).Draw(rt, "skew seconds")) * time.Second
		var mu sync.Mutex
		tick := base
		clock := func(off time.Duration) func() time.Time {
			return func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				tick = tick.Add(time.Millisecond)
				return tick.Add(off)
			}
		}
		cps := newReplicas(open(rt), [2]func() time.Time{clock(0), clock(skew)})
		var want []evChange
		var ids []string
		type follower struct {
			s    *controlplane.EventStream
			from int // the model's events when it was opened
		}
		var followers []follower
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := range steps {
			cp := cps[rapid.IntRange(0, 1).Draw(rt, "replica")]
			switch action := rapid.SampledFrom([]string{"create", "create", "change", "sequence", "follow"}).Draw(rt, "action"); {
			case action == "create" || action == "change" && len(ids) == 0:
				d, err := cp.CreateDeployment(ctx, evTenant, createReq(fmt.Sprintf("agent-%d", i)))
				if err != nil {
					rt.Fatal(err)
				}
				ids = append(ids, d.ID)
				want = append(want, evChange{d.ID, controlplane.EventDeployment, controlplane.ChangeCreated},
					evChange{d.ID, controlplane.EventRevision, controlplane.ChangeCreated})
			case action == "change":
				id := rapid.SampledFrom(ids).Draw(rt, "deployment")
				if _, err := cp.UpdateDeployment(ctx, evTenant, id, &controlplane.UpdateDeploymentRequest{
					DisplayName: new(fmt.Sprintf("step %d", i))}); err != nil {
					rt.Fatal(err)
				}
				want = append(want, evChange{id, controlplane.EventDeployment, controlplane.ChangeUpdated})
			case action == "sequence":
				if err := cp.SequenceEvents(ctx); err != nil {
					rt.Fatal(err)
				}
			case action == "follow":
				s, err := cp.FollowEvents(ctx, evTenant, nil)
				if err != nil {
					rt.Fatal(err)
				}
				followers = append(followers, follower{s, len(want)})
			}
		}
		var logs [2][]seenEvent
		for r, cp := range cps {
			s, err := cp.FollowEvents(ctx, evTenant, &controlplane.FollowOptions{LastEventID: "0"})
			if err != nil {
				rt.Fatal(err)
			}
			logs[r] = readN(rt, s, len(want))
			checkLog(rt, logs[r], want)
		}
		if !slices.Equal(logs[0], logs[1]) {
			rt.Fatalf("the replicas read different logs:\n%v\n%v", logs[0], logs[1])
		}
		for _, f := range followers {
			got := readN(rt, f.s, len(want)-f.from)
			// What it reads is the end of the log, and the events of the
			// changes made after it was opened.
			if !slices.Equal(got, logs[0][len(logs[0])-len(got):]) {
				rt.Fatalf("a follower read %v, not the end of the log", got)
			}
			var cs []evChange
			for _, e := range got {
				cs = append(cs, e.evChange)
			}
			for _, c := range want[f.from:] {
				i := slices.Index(cs, c)
				if i < 0 {
					rt.Fatalf("a follower opened after %d events missed %v", f.from, c)
				}
				cs = slices.Delete(cs, i, i+1)
			}
		}
	})
}

// EventsUnderConcurrentWrites creates and changes deployments from
// goroutines on both replicas at once (each goroutine its own
// deployments), while a follower on each replica reads, and checks that
// both followers read the whole log, dense and in each deployment's order.
func EventsUnderConcurrentWrites(t *testing.T, stores [2]store.Store, goroutines, perGoroutine int) {
	ctx := context.Background()
	cps := newReplicas(stores, [2]func() time.Time{nil, nil})
	var followers [2]*controlplane.EventStream
	for r, cp := range cps {
		s, err := cp.FollowEvents(ctx, evTenant, nil)
		if err != nil {
			t.Fatal(err)
		}
		followers[r] = s
	}
	changes := make([][]evChange, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			cp := cps[g%2]
			for i := range perGoroutine {
				d, err := cp.CreateDeployment(ctx, evTenant, createReq(fmt.Sprintf("g%d-%d", g, i)))
				if err != nil {
					t.Error(err)
					return
				}
				changes[g] = append(changes[g], evChange{d.ID, controlplane.EventDeployment, controlplane.ChangeCreated},
					evChange{d.ID, controlplane.EventRevision, controlplane.ChangeCreated})
				if _, err := cps[(g+i)%2].UpdateDeployment(ctx, evTenant, d.ID, &controlplane.UpdateDeploymentRequest{
					DisplayName: new("changed")}); err != nil {
					t.Error(err)
					return
				}
				changes[g] = append(changes[g], evChange{d.ID, controlplane.EventDeployment, controlplane.ChangeUpdated})
			}
		})
	}
	var logs [2][]seenEvent
	var rg sync.WaitGroup
	for r := range followers {
		rg.Go(func() { logs[r] = readN(goroutineT{t}, followers[r], goroutines*perGoroutine*3) })
	}
	wg.Wait()
	rg.Wait()
	if t.Failed() {
		return
	}
	var want []evChange
	for _, cs := range changes {
		want = append(want, cs...)
	}
	for r := range logs {
		checkLog(t, logs[r], want) // the database was empty: the log starts at 1
	}
	if !slices.Equal(logs[0], logs[1]) {
		t.Fatal("the replicas' followers read different logs")
	}
}
