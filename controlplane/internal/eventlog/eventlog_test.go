package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

const tenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The events that begin and end a deployment's chain in these tests.
var (
	created = eventlog.Match{Kind: "deployment", Change: "created"}
	deleted = eventlog.Match{Kind: "deployment", Change: "deleted"}
)

func open(t testing.TB) store.Store {
	t.Helper()
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	return st
}

// newLog is a Log over st that knows created and deleted; nil o means
// the defaults otherwise.
func newLog(st store.Store, o *eventlog.Options) *eventlog.Log {
	if o == nil {
		o = &eventlog.Options{}
	}
	o.Created, o.Deleted = created, deleted
	return eventlog.New(st, o)
}

// commit appends evs to the tenant's log in one Update and reports it
// committed, as a caller's store does; ran is Committed's.
func commit(t testing.TB, st store.Store, l *eventlog.Log, evs ...eventlog.Event) (ran bool) {
	t.Helper()
	ctx := context.Background()
	var b eventlog.Batch
	err := st.Update(ctx, func(tx store.Tx) error {
		b = eventlog.Batch{} // the closure may run more than once
		for i := range evs {
			if err := l.Append(tx, &b, tenant, &evs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ran, err = l.Committed(ctx, &b)
	if err != nil {
		t.Fatal(err)
	}
	return ran
}

func ev(kind, change, deployment string, at time.Time) eventlog.Event {
	return eventlog.Event{Kind: kind, Change: change, Deployment: deployment, At: at, Payload: []byte(`{"d":"` + deployment + `"}`)}
}

// follow follows the tenant's log from its end, or after o.After when o
// is set.
func follow(t testing.TB, st store.Store, l *eventlog.Log, o *eventlog.FollowOptions) *eventlog.Stream {
	t.Helper()
	if o != nil {
		return l.Follow(tenant, o)
	}
	ctx := context.Background()
	if err := l.Sequence(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	var head uint64
	if err := st.View(ctx, func(r store.Reader) (err error) {
		head, err = eventlog.Head(r, tenant)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return l.Follow(tenant, &eventlog.FollowOptions{After: head})
}

// next returns the stream's next entries, failing when there are none
// within a generous deadline.
func next(t testing.TB, s *eventlog.Stream) []eventlog.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func describe(es []eventlog.Entry) string {
	var out []string
	for _, e := range es {
		if e.LostFrom != 0 {
			out = append(out, fmt.Sprintf("gap %d-%d", e.LostFrom, e.N))
			continue
		}
		out = append(out, fmt.Sprintf("%d %s %s %s", e.N, e.Event.Deployment, e.Event.Kind, e.Event.Change))
	}
	return strings.Join(out, ", ")
}

// dump returns the records of a collection.
func dump(t testing.TB, st store.Store, col string) map[string]string {
	t.Helper()
	recs, err := storetest.Dump(context.Background(), st, col)
	if err != nil {
		t.Fatal(err)
	}
	return recs[col]
}

// TestRollBack: an Update that fails after appending an event leaves no
// event and no number used.
func TestRollBack(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	l := newLog(st, nil)
	s := follow(t, st, l, nil)
	boom := errors.New("boom")
	var b eventlog.Batch
	err := st.Update(ctx, func(tx store.Tx) error {
		b = eventlog.Batch{}
		e := ev("log", "build", "d", t0)
		if err := l.Append(tx, &b, tenant, &e); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	commit(t, st, l, ev("deployment", "created", "d", t0))
	if es := next(t, s); es[0].N != 1 || es[0].Event.Kind != "deployment" {
		t.Errorf("first event after a rolled-back one: %s", describe(es))
	}
}

// TestPruned: the log keeps a tenant's newest Retention events and none
// older than MaxAge (by the newest's time), pruning every 64th number; a
// follower from the start gets a gap before the first event kept.
func TestPruned(t *testing.T) {
	for _, c := range []struct {
		name string
		o    eventlog.Options
		step time.Duration // time between changes, beside a second per event
		kept string        // the first and last numbers kept after 128 events
	}{
		{"count", eventlog.Options{Retention: 50, MaxAge: time.Hour}, 0, "79 128"},
		{"age", eventlog.Options{Retention: 1000, MaxAge: 30 * time.Minute}, time.Minute, "99 128"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := open(t)
			l := newLog(st, &c.o)
			now := t0
			tick := func() time.Time { now = now.Add(time.Second); return now }
			commit(t, st, l, ev("deployment", "created", "a", tick()), ev("revision", "created", "a", tick())) // events 1, 2
			commit(t, st, l, ev("deployment", "created", "b", tick()), ev("revision", "created", "b", tick())) // 3, 4
			for range 124 {                                                                                    // events 5 to 128
				now = now.Add(c.step)
				commit(t, st, l, ev("deployment", "updated", "a", tick()))
			}
			if err := l.SequenceAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			var first, last uint64
			for k := range dump(t, st, eventlog.Events) {
				hex, ok := strings.CutPrefix(k, tenant+"/e/")
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
			es := next(t, l.Follow(tenant, &eventlog.FollowOptions{After: 0}))
			if got, want := describe(es[:2]), fmt.Sprintf("gap 1-%d, %d a deployment updated", first-1, first); got != want {
				t.Errorf("a follower from the start: %s, want %s", got, want)
			}
		})
	}
}

// TestFollowersShareTail: many followers of one tenant, some starting
// late and some reading slowly, each receive every event exactly once and
// in order while a producer commits more than a tail holds (the followers
// share reads through the tenant's tail, and those behind it read alone).
func TestFollowersShareTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := open(t)
		l := newLog(st, nil)
		commit(t, st, l, ev("deployment", "created", "d", t0), ev("revision", "created", "d", t0)) // events 1, 2
		const total = 2 + 3*eventlog.ReadBatch
		errs := make(chan error, 20)
		followFrom := func(after *uint64, slow bool) {
			var s *eventlog.Stream
			want := uint64(2) // from now: after the deployment's creation
			if after != nil {
				s, want = l.Follow(tenant, &eventlog.FollowOptions{After: *after}), *after
			} else {
				s = follow(t, st, l, nil)
			}
			go func() {
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				for want < total {
					es, err := s.Next(cctx)
					if err != nil {
						errs <- fmt.Errorf("after %d: %w", want, err)
						return
					}
					for _, e := range es {
						if want++; e.N != want || e.LostFrom != 0 {
							errs <- fmt.Errorf("entry %s, want %d", describe([]eventlog.Entry{e}), want)
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
			followFrom(nil, i%3 == 0)
		}
		one := uint64(1)
		for i := range 3 * eventlog.ReadBatch {
			commit(t, st, l, ev("deployment", "updated", "d", t0.Add(time.Duration(i)*time.Second)))
			if i%eventlog.ReadBatch == 7 {
				followFrom(&one, false) // from the start, behind the tail
			}
		}
		for range 13 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// TestOrder: each deployment's events are numbered in the order they were
// appended, whatever their times; between deployments, by their times.
func TestOrder(t *testing.T) {
	st := open(t)
	l := newLog(st, nil)
	s := l.Follow(tenant, nil)
	commit(t, st, l, ev("deployment", "created", "d1", t0.Add(10*time.Second)))
	commit(t, st, l, ev("deployment", "updated", "d1", t0.Add(5*time.Second))) // a replica whose clock is behind
	commit(t, st, l, ev("deployment", "created", "d2", t0.Add(7*time.Second)))
	want := "1 d2 deployment created, 2 d1 deployment created, 3 d1 deployment updated"
	if got := describe(next(t, s)); got != want {
		t.Errorf("numbered %s, want %s", got, want)
	}
}

// TestClocks: the Update that creates a deployment reads and writes no
// clock, later ones advance it, and numbering the deployment's deleted
// event removes it.
func TestClocks(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	l := newLog(st, nil)
	clocks := func() string { return fmt.Sprint(dump(t, st, eventlog.Clocks)) }
	commit(t, st, l, ev("deployment", "created", "d", t0), ev("revision", "created", "d", t0))
	if got := clocks(); got != "map[]" {
		t.Errorf("clocks after a create: %s", got)
	}
	commit(t, st, l, ev("deployment", "updated", "d", t0), ev("revision", "status", "d", t0))
	commit(t, st, l, ev("deployment", "status", "d", t0))
	if got, want := clocks(), "map["+tenant+"/d:2]"; got != want {
		t.Errorf("clocks after two changes: %s, want %s", got, want)
	}
	commit(t, st, l, ev("deployment", "deleted", "d", t0))
	if err := l.SequenceAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := clocks(); got != "map[]" {
		t.Errorf("clocks after the deleted event was numbered: %s", got)
	}
	if got := len(dump(t, st, eventlog.Outbox)); got != 0 {
		t.Errorf("%d events left in the outbox", got)
	}
}

// TestFollowFilters: a Stream keeps the kinds' changes it names and one
// deployment's events, and ends after that deployment's deleted event;
// Deleted finds that event after a number.
func TestFollowFilters(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	l := newLog(st, nil)
	commit(t, st, l, ev("deployment", "created", "d1", t0), ev("log", "build", "d1", t0), ev("log", "deploy", "d1", t0))
	commit(t, st, l, ev("deployment", "created", "d2", t0.Add(time.Second)))
	commit(t, st, l, ev("deployment", "deleted", "d1", t0.Add(2*time.Second)), ev("deployment", "updated", "d2", t0.Add(3*time.Second)))
	s := l.Follow(tenant, &eventlog.FollowOptions{Deployment: "d1", Kinds: map[string][]string{"log": {"build"}}})
	want := "1 d1 deployment created, 2 d1 log build, 5 d1 deployment deleted"
	if got := describe(next(t, s)); got != want {
		t.Errorf("d1's events with build logs: %s, want %s", got, want)
	}
	if _, err := s.Next(ctx); err != io.EOF {
		t.Errorf("Next after the deleted event: %v, want io.EOF", err)
	}
	all := l.Follow(tenant, &eventlog.FollowOptions{Kinds: map[string][]string{"log": nil}})
	want = "1 d1 deployment created, 4 d2 deployment created, 5 d1 deployment deleted, 6 d2 deployment updated"
	if got := describe(next(t, all)); got != want {
		t.Errorf("every deployment, no logs: %s, want %s", got, want)
	}
	for _, c := range []struct {
		deployment string
		after      uint64
		want       bool
	}{{"d1", 0, true}, {"d1", 4, true}, {"d1", 5, false}, {"d2", 0, false}} {
		var got bool
		if err := st.View(ctx, func(r store.Reader) (err error) {
			got, err = l.Deleted(r, tenant, c.deployment, c.after)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("Deleted(%s after %d) = %v, want %v", c.deployment, c.after, got, c.want)
		}
	}
}

// TestNextWakes: a follower waiting in Next is woken at once by a commit
// through its Log, and finds another Log's commit at its next poll.
func TestNextWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := open(t)
		const poll = time.Minute
		l := newLog(st, &eventlog.Options{PollInterval: poll})
		other := newLog(st, nil)
		s := follow(t, st, l, nil)
		for i, c := range []struct {
			via  *eventlog.Log
			wait time.Duration
		}{{l, 0}, {other, poll}} {
			got := make(chan []eventlog.Entry)
			go func() {
				es, err := s.Next(context.Background())
				if err != nil {
					t.Error(err)
				}
				got <- es
			}()
			synctest.Wait() // waiting
			start := time.Now()
			commit(t, st, c.via, ev("deployment", "created", fmt.Sprint("d", i), t0))
			es := <-got
			if waited := time.Since(start); waited != c.wait || len(es) != 1 {
				t.Errorf("commit %d: %s after %v, want one event after %v", i, describe(es), waited, c.wait)
			}
		}
	})
}

// TestAppendRefuses: an event without a kind, or with a line break in a
// field, is refused before anything is written.
func TestAppendRefuses(t *testing.T) {
	st := open(t)
	l := newLog(st, nil)
	for _, e := range []eventlog.Event{{Deployment: "d"}, {Kind: "log", Change: "a\nb", Deployment: "d"}} {
		err := st.Update(context.Background(), func(tx store.Tx) error { return l.Append(tx, nil, tenant, &e) })
		if err == nil {
			t.Errorf("Append(%+v) accepted", e)
		}
	}
	if got := len(dump(t, st, eventlog.Outbox)); got != 0 {
		t.Errorf("%d events in the outbox", got)
	}
}

// TestSequencerLease: of two Logs over one store, the first whose commits
// trigger a run takes the lease, the other skips its runs (its events wait
// in the outbox for the holder's) until the lease lapses; the holder
// renews it at each run.
func TestSequencerLease(t *testing.T) {
	ctx := context.Background()
	st := open(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, b := newLog(st, &eventlog.Options{Clock: clock}), newLog(st, &eventlog.Options{Clock: clock})

	const ttl = 2 * time.Second // the lease's life
	outbox := func() int { return len(dump(t, st, eventlog.Outbox)) }
	// trigger commits enough events through l to run its sequencer, and
	// reports whether it ran.
	trigger := func(l *eventlog.Log) bool {
		evs := make([]eventlog.Event, eventlog.SequenceEvery)
		for i := range evs {
			evs[i] = ev("log", "build", "trigger", now)
		}
		return commit(t, st, l, evs...)
	}
	createdVia := func(l *eventlog.Log, d string) {
		commit(t, st, l, ev("deployment", "created", d, now), ev("revision", "created", d, now))
	}

	createdVia(b, "from-b")
	if !trigger(a) { // a takes the lease and numbers b's events too
		t.Error("the first trigger did not run")
	}
	if n := outbox(); n != 0 {
		t.Fatalf("after the holder's run, %d events left in the outbox, want 0", n)
	}
	createdVia(b, "from-b-2")
	if trigger(b) || outbox() == 0 { // held by a: b skips
		t.Fatal("a Log ran the sequencer while another held the lease")
	}
	now = now.Add(ttl / 2)
	trigger(a) // the holder renews, and numbers them
	if n := outbox(); n != 0 {
		t.Fatalf("the holder's second run left %d events, want 0", n)
	}
	createdVia(b, "from-b-3")
	now = now.Add(ttl - time.Microsecond) // within the renewed lease
	if trigger(b) || outbox() == 0 {
		t.Fatal("a Log ran the sequencer within the renewed lease of another")
	}
	now = now.Add(time.Microsecond) // lapsed
	trigger(b)
	if n := outbox(); n != 0 {
		t.Fatalf("after the lease lapsed, the other Log's run left %d events, want 0", n)
	}
	// SequenceAll does not ask for the lease (b holds it now).
	createdVia(a, "from-a")
	if err := a.SequenceAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := outbox(); n != 0 {
		t.Fatalf("SequenceAll left %d events, want 0", n)
	}
}
