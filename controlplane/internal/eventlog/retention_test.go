package eventlog_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
	"pgregory.net/rapid"
)

// tb is what these helpers need of a *testing.T, a *testing.B or a
// *rapid.T.
type tb interface {
	Helper()
	Error(args ...any)
	Fatal(args ...any)
	Errorf(format string, args ...any)
}

// records returns the records of a collection.
func records(t tb, st store.Store, col string) map[string]string {
	t.Helper()
	recs, err := storetest.Dump(context.Background(), st, col)
	if err != nil {
		t.Fatal(err)
	}
	return recs[col]
}

// tenantName is the i-th tenant of these tests.
func tenantName(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-000000000000", i) }

// load commits total events to each of the tenants in Updates of perUpdate
// events, the tenants in turn (load1).
func load(t tb, st store.Store, l *eventlog.Log, tenants []string, total, perUpdate int, at time.Time) {
	t.Helper()
	for i := 0; i < total; i += perUpdate {
		for _, tn := range tenants {
			load1(t, st, l, tn, fmt.Sprint("d", i), min(perUpdate, total-i), at)
		}
	}
}

// load1 commits n events of a new deployment d to the tenant's log in one
// Update, its created event first, and reports it Committed (which runs
// the sequencer every SequenceEvery events, as a control plane's creates
// do).
func load1(t tb, st store.Store, l *eventlog.Log, tn, d string, n int, at time.Time) {
	t.Helper()
	ctx := context.Background()
	var b eventlog.Batch
	err := st.Update(ctx, func(tx store.Tx) error {
		b = eventlog.Batch{}
		for j := range n {
			e := ev("revision", "created", d, at)
			if j == 0 {
				e = ev("deployment", "created", d, at)
			}
			if err := l.Append(tx, &b, tn, &e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
		return
	}
	if _, err := l.Committed(ctx, &b); err != nil {
		t.Error(err)
	}
}

// stored counts each tenant's numbered events in the store.
func stored(t tb, st store.Store) map[string]int {
	t.Helper()
	n := map[string]int{}
	for k := range records(t, st, eventlog.Events) {
		if tn, _, ok := strings.Cut(k, "/e/"); ok {
			n[tn]++
		}
	}
	return n
}

// TestRetentionAfterBulkLoad: however the events of a bulk load come (two
// an Update as creates write them, or a thousand an Update, or from
// several goroutines through two Logs), once a sequencer pass has run each
// tenant holds its newest Retention events, no more.
func TestRetentionAfterBulkLoad(t *testing.T) {
	const retention, total = 1000, 20000
	for _, perUpdate := range []int{2, 1000} {
		t.Run(fmt.Sprint(perUpdate, " an Update"), func(t *testing.T) {
			st := open(t)
			l := newLog(st, &eventlog.Options{Retention: retention})
			tenants := []string{tenantName(1), tenantName(2), tenantName(3)}
			load(t, st, l, tenants, total, perUpdate, t0)
			if err := l.SequenceAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			wantNewest(t, st, tenants, retention)
		})
	}
	t.Run("two Logs, 8 goroutines", func(t *testing.T) {
		st := open(t)
		ls := []*eventlog.Log{newLog(st, &eventlog.Options{Retention: retention}), newLog(st, &eventlog.Options{Retention: retention})}
		tenants := []string{tenantName(1), tenantName(2)}
		var next atomic.Int64
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := next.Add(1); i <= total/5; i = next.Add(1) {
					load1(t, st, ls[g%2], tenants[i%2], fmt.Sprint("d", i), 10, t0)
				}
			})
		}
		wg.Wait()
		if err := ls[1].SequenceAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantNewest(t, st, tenants, retention)
	})
}

// wantNewest checks that each tenant's log holds its newest retention
// events (all of them, when it has fewer) and nothing in its outbox.
func wantNewest(t tb, st store.Store, tenants []string, retention uint64) {
	t.Helper()
	kept := map[string][]uint64{}
	for k := range records(t, st, eventlog.Events) {
		tn, hex, ok := strings.Cut(k, "/e/")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		kept[tn] = append(kept[tn], n)
	}
	outbox := map[string]int{}
	for k := range records(t, st, eventlog.Outbox) {
		tn, _, _ := strings.Cut(k, "/")
		outbox[tn]++
	}
	for _, tn := range tenants {
		var head uint64
		if err := st.View(context.Background(), func(r store.Reader) (err error) {
			head, err = eventlog.Head(r, tn)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(kept[tn])
		want := []uint64{}
		for n := max(head, retention) - retention + 1; n <= head; n++ {
			want = append(want, n)
		}
		if got := kept[tn]; !slices.Equal(got, want) || outbox[tn] != 0 {
			t.Errorf("tenant %s of %d events holds %d (%s) and %d in its outbox, want the newest %d",
				tn, head, len(got), span(got), outbox[tn], len(want))
		}
	}
}

// span describes sorted numbers by their first and last.
func span(ns []uint64) string {
	if len(ns) == 0 {
		return "none"
	}
	return fmt.Sprint(ns[0], " to ", ns[len(ns)-1])
}

// TestRetentionCatchesUp: a log that holds more than the retention (a
// store written under a larger one, here by another Log) is pruned to it
// without new traffic, in one pass of several Updates: by a new Log's
// first SequenceAll, or by the next pass whose numbers reach a multiple
// of 64; a follower from before gets a gap.
func TestRetentionCatchesUp(t *testing.T) {
	const retention, backlog = 100, 3000 // more than a prune's batch
	tenants := []string{tenantName(1), tenantName(2)}
	t.Run("idle", func(t *testing.T) {
		st := open(t)
		load(t, st, newLog(st, &eventlog.Options{Retention: backlog}), tenants, backlog, 50, t0)
		if err := newLog(st, &eventlog.Options{Retention: backlog}).SequenceAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := stored(t, st)[tenants[0]]; n != backlog {
			t.Fatalf("the larger retention holds %d, want %d", n, backlog)
		}
		l := newLog(st, &eventlog.Options{Retention: retention})
		if err := l.SequenceAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantNewest(t, st, tenants, retention)
		es := next(t, l.Follow(tenants[0], &eventlog.FollowOptions{After: 5}))
		if got, want := describe(es[:2]), fmt.Sprintf("gap 6-%d, %d d%d deployment created", backlog-retention, backlog-retention+1, backlog-retention); got != want {
			t.Errorf("a follower after 5: %s, want %s", got, want)
		}
	})
	t.Run("replicas", func(t *testing.T) {
		st := open(t)
		l := newLog(st, &eventlog.Options{Retention: retention})
		if err := l.SequenceAll(context.Background()); err != nil { // its first: nothing to prune
			t.Fatal(err)
		}
		other := newLog(st, &eventlog.Options{Retention: backlog})
		load(t, st, other, tenants[:1], backlog, 50, t0)
		if err := other.SequenceAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		load(t, st, l, tenants[:1], 1, 1, t0) // event 3001 of a pass that does not reach 3008
		if err := l.Sequence(context.Background(), tenants[0]); err != nil {
			t.Fatal(err)
		}
		if n := stored(t, st)[tenants[0]]; n <= retention {
			t.Fatalf("the pass of one event pruned to %d; the test wants a backlog", n)
		}
		load(t, st, l, tenants[:1], 7, 7, t0) // events 3002 to 3008
		if err := l.Sequence(context.Background(), tenants[0]); err != nil {
			t.Fatal(err)
		}
		wantNewest(t, st, tenants[:1], retention)
	})
}

// TestRetentionByAgeCatchesUp: a pass that prunes by age removes every
// event older than MaxAge before the newest, however many, in one pass.
func TestRetentionByAgeCatchesUp(t *testing.T) {
	st := open(t)
	l := newLog(st, &eventlog.Options{Retention: 100_000, MaxAge: time.Hour})
	load(t, st, l, []string{tenant}, 3000, 100, t0)
	if err := l.SequenceAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, st, l, []string{tenant}, 64, 8, t0.Add(2*time.Hour)) // 3001 to 3064: reaches a multiple of 64
	if err := l.Sequence(context.Background(), tenant); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, st)[tenant]; got != 64 {
		t.Errorf("%d events kept, want the 64 within an hour of the newest", got)
	}
}

// TestRetentionProperty: whatever appends, passes and followers come, a
// log never holds more than its tenant's newest Retention events; once a
// pass has run it holds exactly those, and a follower from before them
// gets a gap, then the first of them.
func TestRetentionProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := storemem.New()
		defer st.Close()
		ctx := context.Background()
		retention := rapid.IntRange(1, 300).Draw(rt, "retention")
		l := newLog(st, &eventlog.Options{Retention: retention})
		tenants := []string{tenantName(1), tenantName(2)}
		heads := func() map[string]uint64 {
			h := map[string]uint64{}
			_ = st.View(ctx, func(r store.Reader) error {
				for _, tn := range tenants {
					h[tn], _ = eventlog.Head(r, tn)
				}
				return nil
			})
			return h
		}
		d := 0
		for range rapid.IntRange(1, 12).Draw(rt, "ops") {
			tn := rapid.SampledFrom(tenants).Draw(rt, "tenant")
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				n := rapid.SampledFrom([]int{1, 2, 7, 63, 64, 65, 500, 1100}).Draw(rt, "events")
				d++
				load1(rt, st, l, tn, fmt.Sprint("d", d), n, t0)
			case 2:
				if err := l.Sequence(ctx, tn); err != nil {
					rt.Fatal(err)
				}
				wantNewest(rt, st, []string{tn}, uint64(retention))
				head := heads()[tn]
				if head == 0 {
					continue
				}
				after := rapid.Uint64Range(0, head-1).Draw(rt, "after")
				es, err := l.Follow(tn, &eventlog.FollowOptions{After: after}).Next(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				first := max(head, uint64(retention)) - uint64(retention) + 1
				want := fmt.Sprint(after + 1)
				if after+1 < first {
					want = fmt.Sprintf("gap %d-%d, %d", after+1, first-1, first)
				}
				if got := describe(es); !strings.HasPrefix(got, want+" ") {
					rt.Fatalf("a follower after %d of %d: %s, want %s first", after, head, got, want)
				}
			case 3:
				if err := l.SequenceAll(ctx); err != nil {
					rt.Fatal(err)
				}
				wantNewest(rt, st, tenants, uint64(retention))
			}
			for tn, n := range stored(rt, st) {
				if n > retention {
					rt.Fatalf("tenant %s holds %d events, more than its retention", tn, n)
				}
			}
		}
	})
}

// BenchmarkRetentionBulkLoad loads 200,000 events into one tenant whose
// log keeps the default Retention (10,000), from 64 goroutines, each
// Update reported Committed: two events an Update as a bulk load of
// 100,000 creates writes them (creates), or a thousand (bulk). It then
// runs one sequencer pass and reports the events the tenant holds
// (stored-events) and their ratio to the retention (x-retention: 1 is the
// goal, more is events kept beyond it). The load's time is compared with
// the same load into a log whose retention holds it all, which deletes
// nothing (benchcmp.Interleave: x-baseline). Run it with -benchtime 4x.
func BenchmarkRetentionBulkLoad(b *testing.B) {
	const events, workers = 200_000, 64
	for _, c := range []struct {
		name      string
		perUpdate int
	}{{"creates", 2}, {"bulk", 1000}} {
		b.Run(c.name, func(b *testing.B) {
			held := -1
			run := func(retention int) func(n int) {
				return func(n int) {
					for range n {
						st := storemem.New()
						l := newLog(st, &eventlog.Options{Retention: retention})
						var next atomic.Int64
						var wg sync.WaitGroup
						for range workers {
							wg.Go(func() {
								for i := next.Add(1); i <= events/int64(c.perUpdate); i = next.Add(1) {
									load1(b, st, l, tenant, fmt.Sprint("d", i), c.perUpdate, t0)
								}
							})
						}
						wg.Wait()
						if err := l.SequenceAll(context.Background()); err != nil {
							b.Fatal(err)
						}
						if retention < events {
							held = max(held, stored(b, st)[tenant])
						}
						st.Close()
					}
				}
			}
			benchcmp.Interleave(b, run(events), run(eventlog.DefaultRetention))
			b.ReportMetric(float64(held), "stored-events")
			b.ReportMetric(float64(held)/eventlog.DefaultRetention, "x-retention")
		})
	}
}
