package workqueue_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Tenant prefixes: one byte for the first 23 tenants, then a length byte
// and the number.
var (
	tenantA = keyenc.TenantPrefix(1)
	tenantB = keyenc.TenantPrefix(2)
	tenantC = keyenc.TenantPrefix(42)
)

// id is the id part of the UUID numbered n.
func id(n int) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[8:], uint64(n))
	return keyenc.ID(uuid.UUID(u).String())
}

// textID is the id part of an id that is no UUID.
func textID(s string) string { return keyenc.ID(s) }

// tail is a revision's tail: the time key of at, then id(n).
func tail(at time.Time, n int) string { return keyenc.Time(at) + id(n) }

func revision(rg workqueue.Range, d, r int) workqueue.Unit {
	return workqueue.Unit{Range: rg, Deployment: id(d), Revision: tail(t0.Add(time.Duration(r)*time.Second), r)}
}

func teardown(rg workqueue.Range, d int) workqueue.Unit {
	return workqueue.Unit{Range: rg, Deployment: id(d)}
}

// tb is what the helpers need of a *testing.T or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// add adds units in one Update.
func add(t tb, st store.Store, us ...workqueue.Unit) {
	t.Helper()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for _, u := range us {
			if err := workqueue.Add(tx, u); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stored returns the record of u, and whether there is one.
func stored(t tb, st store.Store, u workqueue.Unit) (string, bool) {
	t.Helper()
	recs, err := storetest.Dump(context.Background(), st, workqueue.Collection)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := recs[workqueue.Collection][u.Key()]
	return v, ok
}

func newQueue(st store.Store, o *workqueue.Options) *workqueue.Queue {
	c := workqueue.Options{NewID: func() string { return "owner" }}
	if o != nil {
		c = *o
		c.NewID = func() string { return "owner" }
	}
	return workqueue.New(st, &c)
}

// TestKeyLayout: the keys are the storage layout's, byte for byte, and
// Parse splits them back; the agents' ranges sort before the server's.
func TestKeyLayout(t *testing.T) {
	ts := tail(t0, 2)
	for _, tc := range []struct {
		u    workqueue.Unit
		want string
	}{
		{workqueue.Unit{Range: workqueue.Range{Tenant: tenantA}, Deployment: id(1), Revision: ts}, "r" + tenantA + id(1) + ts},
		{workqueue.Unit{Range: workqueue.Range{Tenant: tenantC}, Deployment: id(1)}, "d" + tenantC + id(1)},
		{workqueue.Unit{Range: workqueue.Range{Tenant: tenantA, Listener: id(9)}, Deployment: id(1), Revision: ts}, "a" + tenantA + id(9) + "r" + id(1) + ts},
		{workqueue.Unit{Range: workqueue.Range{Tenant: tenantB, Listener: textID("l")}, Deployment: textID("dep")}, "a" + tenantB + textID("l") + "d" + textID("dep")},
	} {
		if got := tc.u.Key(); got != tc.want {
			t.Errorf("%+v: key %q, want %q", tc.u, got, tc.want)
		}
		if u, ok := workqueue.Parse(tc.want); !ok || u != tc.u {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.want, u, ok, tc.u)
		}
	}
	for _, k := range []string{
		"", "r", "x" + tenantA + id(1), "r\x00" + id(1) + ts, "r\x20" + id(1) + ts, "\x19\x01",
		"r" + tenantA + id(1),                        // no tail
		"r" + tenantA + id(1) + ts[:8],               // no revision id
		"r" + tenantA + id(1) + ts + "x",             // more after it
		"d" + tenantA + id(1)[:10],                   // a short id
		"d" + tenantA + "\x02\x05ab",                 // a short text id
		"a" + tenantA + id(9),                        // no kind
		"a" + tenantA + id(9) + "a" + id(1),          // no such kind
		"d" + tenantA + id(1) + "x",                  // more after a teardown
		"a" + tenantA + id(9) + "d" + id(1) + "\x00", // more after an agent's teardown
	} {
		if u, ok := workqueue.Parse(k); ok {
			t.Errorf("Parse(%q) = %+v, want no unit", k, u)
		}
	}
	if agent, server := (workqueue.Unit{Range: workqueue.Range{Tenant: "\x1f" + strings.Repeat("\xff", 8), Listener: id(1)}, Deployment: id(1)}).Key(),
		(workqueue.Unit{Range: workqueue.Range{Tenant: tenantA}, Deployment: id(1)}).Key(); agent >= server {
		t.Errorf("an agent's key %q sorts after a server's %q", agent, server)
	}
	rapid.Check(t, func(rt *rapid.T) {
		part := func(label string) string {
			if rapid.Bool().Draw(rt, label+" uuid") {
				return id(rapid.Int().Draw(rt, label))
			}
			return textID(rapid.String().Draw(rt, label))
		}
		u := workqueue.Unit{Range: workqueue.Range{Tenant: rapid.SampledFrom([]string{tenantA, tenantB, tenantC, "\x1f\x01\x02\x03\x04\x05\x06\x07\x08"}).Draw(rt, "tenant")},
			Deployment: part("deployment")}
		if rapid.Bool().Draw(rt, "agent") {
			u.Range.Listener = part("listener")
		}
		if rapid.Bool().Draw(rt, "revision") {
			u.Revision = tail(time.UnixMicro(rapid.Int64().Draw(rt, "at")), 0)[:8] + part("revision")
		}
		if got, ok := workqueue.Parse(u.Key()); !ok || got != u {
			rt.Fatalf("Parse(%q) = %+v, %v; want %+v", u.Key(), got, ok, u)
		}
	})
}

// TestLeaseFormat: the records' values, byte for byte: free, a claim's
// lease ("token expiry", the expiry in Unix microseconds), a unit given
// back until a time ("retry expiry"), and the count of failures after
// them, which a free lease keeps with an expiry long past.
func TestLeaseFormat(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	q := newQueue(st, &workqueue.Options{Lease: 30 * time.Second})
	u := revision(workqueue.Range{Tenant: tenantA}, 1, 1)
	add(t, st, u)
	want := func(what, v string) {
		t.Helper()
		if got, ok := stored(t, st, u); !ok || got != v {
			t.Errorf("%s: %q (%v), want %q", what, got, ok, v)
		}
	}
	want("new", "")
	l, err := q.Claim(ctx, t0)
	if err != nil || l == nil || l.Token != "owner:1" || l.Failures != 0 || l.Takeover {
		t.Fatalf("Claim = %+v, %v", l, err)
	}
	want("claimed", fmt.Sprintf("owner:1 %d", t0.Add(30*time.Second).UnixMicro()))
	if err := q.Renew(ctx, l, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	want("renewed", fmt.Sprintf("owner:1 %d", t0.Add(31*time.Second).UnixMicro()))
	if err := q.Release(ctx, l, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	want("given back until a time", fmt.Sprintf("retry %d", t0.Add(5*time.Second).UnixMicro()))
	l, _ = q.Claim(ctx, t0.Add(5*time.Second))
	if err := q.Release(ctx, l, time.Time{}); err != nil {
		t.Fatal(err)
	}
	want("given back at once", "")

	l, _ = q.Claim(ctx, t0)
	err = st.Update(ctx, func(tx store.Tx) error {
		back := *l
		back.Failures = 3
		return workqueue.Requeue(tx, &back, t0.Add(time.Minute))
	})
	if err != nil {
		t.Fatal(err)
	}
	want("given back with failures", fmt.Sprintf("retry %d 3", t0.Add(time.Minute).UnixMicro()))
	l, _ = q.Claim(ctx, t0.Add(time.Minute))
	want("claimed with failures", fmt.Sprintf("owner:4 %d 3", t0.Add(time.Minute+30*time.Second).UnixMicro()))
	if err := q.Release(ctx, l, time.Time{}); err != nil {
		t.Fatal(err)
	}
	want("free with failures", " 0 3")
}

// TestLeaseFailures: a lease keeps a teardown's count of failures through
// claims, renewals and releases, and its expiry reads as before; a lease
// without failures keeps none.
func TestLeaseFailures(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	q := newQueue(st, nil)
	u := teardown(workqueue.Range{Tenant: tenantA}, 1)
	add(t, st, u)
	l, err := q.Claim(ctx, t0)
	if err != nil || l == nil || l.Failures != 0 {
		t.Fatalf("a free lease: %+v, %v", l, err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		cur, err := workqueue.Own(tx, l)
		if err != nil || cur == nil {
			return fmt.Errorf("Own = %v, %v", cur, err)
		}
		cur.Failures = 3
		return workqueue.Requeue(tx, cur, t0.Add(time.Minute))
	})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := q.Claim(ctx, t0.Add(time.Minute-time.Microsecond)); l != nil || err != nil {
		t.Fatalf("claimed before the retry time: %+v, %v", l, err)
	}
	at := t0.Add(time.Minute)
	for _, step := range []string{"claim", "renew", "release", "claim again"} {
		switch step {
		case "claim", "claim again":
			if l, err = q.Claim(ctx, at); err != nil || l == nil || l.Failures != 3 || l.Takeover {
				t.Fatalf("%s: %+v, %v; want 3 failures, no takeover", step, l, err)
			}
		case "renew":
			err = q.Renew(ctx, l, at)
		case "release":
			err = q.Release(ctx, l, time.Time{})
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		err = st.View(ctx, func(r store.Reader) error {
			cur, err := workqueue.Own(r, l)
			if step == "release" {
				if !errors.Is(err, workqueue.ErrLeaseLost) {
					return fmt.Errorf("Own of a released lease: %v", err)
				}
				return nil
			}
			if err != nil || cur == nil || cur.Failures != 3 {
				return fmt.Errorf("Own = %+v, %v; want 3 failures", cur, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("after %s: %v", step, err)
		}
	}
	if l.Text() == "" {
		t.Fatal("no text")
	}
	back, ok := workqueue.ParseText(l.Text())
	if !ok || back.Key() != l.Key() || back.Token != l.Token || back.Failures != 0 {
		t.Fatalf("ParseText(Text) = %+v, %v", back, ok)
	}
	err = st.View(ctx, func(r store.Reader) error {
		cur, err := workqueue.Own(r, back)
		if err != nil || cur == nil || cur.Failures != 3 {
			return fmt.Errorf("Own of the parsed lease = %+v, %v; want the stored 3 failures", cur, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLeases: a lease holds its unit until it expires, when another claim
// takes it over; the first claim's Own, Renew and Release then see it
// lost (Release quietly), and a unit removed is gone for its lease. A unit
// given back until a time is not taken over when claimed.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	q := newQueue(st, &workqueue.Options{Lease: time.Minute})
	other := workqueue.New(st, &workqueue.Options{NewID: func() string { return "other" }})
	u := revision(workqueue.Range{Tenant: tenantA}, 1, 1)
	add(t, st, u)
	first, err := q.Claim(ctx, t0)
	if err != nil || first == nil {
		t.Fatal(first, err)
	}
	if l, err := other.Claim(ctx, t0.Add(time.Minute-time.Microsecond)); l != nil || err != nil {
		t.Fatalf("claimed a held unit: %+v, %v", l, err)
	}
	second, err := other.Claim(ctx, t0.Add(time.Minute))
	if err != nil || second == nil || !second.Takeover || second.Key() != first.Key() {
		t.Fatalf("the claim after the expiry: %+v, %v; want a takeover", second, err)
	}
	if err := q.Renew(ctx, first, t0.Add(time.Minute)); !errors.Is(err, workqueue.ErrLeaseLost) {
		t.Errorf("Renew of a lost lease: %v", err)
	}
	if err := q.Release(ctx, first, time.Time{}); err != nil {
		t.Errorf("Release of a lost lease: %v", err)
	}
	if v, _ := stored(t, st, u); !strings.HasPrefix(v, second.Token+" ") {
		t.Errorf("after the lost lease's Release: %q, want the second claim's", v)
	}
	if err := other.Release(ctx, second, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	third, err := q.Claim(ctx, t0.Add(2*time.Minute))
	if err != nil || third == nil || third.Takeover {
		t.Fatalf("the claim of a unit given back: %+v, %v; want no takeover", third, err)
	}
	err = st.Update(ctx, func(tx store.Tx) error { return workqueue.Remove(tx, u) })
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		if cur, err := workqueue.Own(tx, third); cur != nil || err != nil {
			return fmt.Errorf("Own of a removed unit = %+v, %v", cur, err)
		}
		return workqueue.Remove(tx, u) // again: no error
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Renew(ctx, third, t0.Add(2*time.Minute)); !errors.Is(err, workqueue.ErrLeaseLost) {
		t.Errorf("Renew of a removed unit: %v", err)
	}
	if err := q.Release(ctx, third, time.Time{}); err != nil {
		t.Errorf("Release of a removed unit: %v", err)
	}
}

// TestRanges: Claim takes the server's units in key order (teardowns,
// then revisions by tenant, deployment and age) and never an agent's;
// ClaimIn takes only its listener's; Revisions and RemoveDeployment see
// one range; Count counts every range.
func TestRanges(t *testing.T) {
	ctx := context.Background()
	st := storemem.New()
	defer st.Close()
	q := newQueue(st, nil)
	server, agents, others := workqueue.Range{Tenant: tenantA}, workqueue.Range{Tenant: tenantA, Listener: id(7)}, workqueue.Range{Tenant: tenantA, Listener: id(8)}
	add(t, st, revision(server, 2, 1), revision(server, 1, 3), revision(server, 1, 2), teardown(server, 3),
		revision(workqueue.Range{Tenant: tenantB}, 1, 4), revision(agents, 1, 5), teardown(agents, 2), revision(others, 1, 6))

	c := count(t, st, t0)
	if want := (workqueue.Counts{RevisionsWaiting: 6, TeardownsWaiting: 2}); c != want {
		t.Errorf("Count = %+v, want %+v", c, want)
	}
	var got []workqueue.Unit
	for {
		l, err := q.Claim(ctx, t0)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			break
		}
		got = append(got, l.Unit)
	}
	want := []workqueue.Unit{teardown(server, 3), revision(server, 1, 2), revision(server, 1, 3), revision(server, 2, 1),
		revision(workqueue.Range{Tenant: tenantB}, 1, 4)}
	if !slices.Equal(got, want) {
		t.Errorf("Claim took %v, want %v", got, want)
	}
	got = got[:0]
	for {
		l, err := q.ClaimIn(ctx, agents, t0)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			break
		}
		got = append(got, l.Unit)
	}
	if want := []workqueue.Unit{teardown(agents, 2), revision(agents, 1, 5)}; !slices.Equal(got, want) {
		t.Errorf("ClaimIn took %v, want %v", got, want)
	}
	if _, err := q.ClaimIn(ctx, server, t0); err == nil {
		t.Error("ClaimIn of the server's range: no error")
	}
	c = count(t, st, t0)
	if want := (workqueue.Counts{RevisionsWaiting: 1, RevisionsHeld: 5, TeardownsHeld: 2}); c != want {
		t.Errorf("Count = %+v, want %+v", c, want)
	}

	err := st.Update(ctx, func(tx store.Tx) error {
		us, err := workqueue.Revisions(tx, server, id(1))
		if want := []workqueue.Unit{revision(server, 1, 2), revision(server, 1, 3)}; err != nil || !slices.Equal(us, want) {
			return fmt.Errorf("Revisions = %v, %v; want %v", us, err, want)
		}
		for _, rg := range []workqueue.Range{server, agents} {
			for _, d := range []int{1, 2, 3} {
				if err := workqueue.RemoveDeployment(tx, rg, id(d)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c = count(t, st, t0)
	if want := (workqueue.Counts{RevisionsWaiting: 1, RevisionsHeld: 1}); c != want {
		t.Errorf("Count after RemoveDeployment = %+v, want %+v (tenant B's and the other listener's)", c, want)
	}
}

func count(t *testing.T, st store.Store, now time.Time) workqueue.Counts {
	t.Helper()
	var c workqueue.Counts
	err := st.View(context.Background(), func(r store.Reader) error {
		var err error
		c, err = workqueue.Count(r, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClaimPassesOverAFullTenantCheaply: a claim passes over the waiting
// work of a tenant at its share without reading it record by record: with
// hundreds of tenant A's revisions waiting in front of B's one in key
// order, claiming B's reads a few records.
func TestClaimPassesOverAFullTenantCheaply(t *testing.T) {
	ctx := context.Background()
	mem := storemem.New()
	defer mem.Close()
	st := &scanCounter{Store: mem, collection: workqueue.Collection}
	q := newQueue(st, &workqueue.Options{TenantShare: 1})
	const waiting = 300
	var us []workqueue.Unit
	for i := range waiting {
		us = append(us, revision(workqueue.Range{Tenant: tenantA}, i, i))
	}
	b := revision(workqueue.Range{Tenant: tenantB}, waiting, waiting)
	add(t, st, append(us, b)...)

	first, err := q.Claim(ctx, t0)
	if err != nil || first == nil || first.Range.Tenant != tenantA {
		t.Fatalf("the first claim took %+v, %v; want A's (first in key order)", first, err)
	}
	st.reset()
	second, err := q.Claim(ctx, t0)
	if err != nil || second == nil || second.Unit != b {
		t.Fatalf("the second claim took %+v, %v; want tenant B's: tenant A is at its share", second, err)
	}
	if n := st.read(); n > 4 {
		t.Errorf("the claim read %d records to pass over tenant A's %d; want a few", n, waiting-1)
	}
	q.Done(first)
	if third, err := q.Claim(ctx, t0); err != nil || third == nil || third.Range.Tenant != tenantA {
		t.Fatalf("the claim after Done took %+v, %v; want A's", third, err)
	}
}

// TestTenantShare: for random units of a few tenants, shares and claims
// given back in random order: no tenant ever holds more than its share,
// and whenever Claim finds nothing, every tenant with units waiting holds
// its full share (nobody starves). In the end every unit was claimed.
func TestTenantShare(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		st := storemem.New()
		defer st.Close()
		share := rapid.IntRange(1, 4).Draw(rt, "share")
		q := newQueue(st, &workqueue.Options{TenantShare: share})
		tenants := []string{tenantA, tenantB, tenantC}
		waiting := map[string]int{}
		for i := range rapid.IntRange(1, 24).Draw(rt, "units") {
			tn := rapid.SampledFrom(tenants).Draw(rt, "tenant")
			add(rt, st, revision(workqueue.Range{Tenant: tn}, i, i))
			waiting[tn]++
		}
		var held []*workqueue.Lease
		holding := func(tn string) int {
			n := 0
			for _, l := range held {
				if l.Range.Tenant == tn {
					n++
				}
			}
			return n
		}
		for {
			l, err := q.Claim(ctx, t0)
			if err != nil {
				rt.Fatal(err)
			}
			if l != nil {
				held = append(held, l)
				waiting[l.Range.Tenant]--
				if n := holding(l.Range.Tenant); n > share {
					rt.Fatalf("tenant %q holds %d units, its share is %d", l.Range.Tenant, n, share)
				}
				continue
			}
			for _, tn := range tenants {
				if waiting[tn] > 0 && holding(tn) != share {
					rt.Fatalf("tenant %q has %d waiting and holds %d of its %d, and Claim finds nothing: it starves",
						tn, waiting[tn], holding(tn), share)
				}
			}
			if len(held) == 0 {
				break
			}
			i := rapid.IntRange(0, len(held)-1).Draw(rt, "done")
			err = st.Update(ctx, func(tx store.Tx) error { return workqueue.Remove(tx, held[i].Unit) })
			if err != nil {
				rt.Fatal(err)
			}
			q.Done(held[i])
			held = slices.Delete(held, i, i+1)
		}
		for tn, n := range waiting {
			if n != 0 {
				rt.Fatalf("tenant %q has %d units never claimed", tn, n)
			}
		}
	})
}

// scanCounter counts the records Scans of one collection pass to their
// callbacks, in Views and Updates.
type scanCounter struct {
	store.Store
	collection string
	mu         sync.Mutex
	n          int
}

func (s *scanCounter) reset() { s.mu.Lock(); s.n = 0; s.mu.Unlock() }

func (s *scanCounter) read() int { s.mu.Lock(); defer s.mu.Unlock(); return s.n }

func (s *scanCounter) View(ctx context.Context, fn func(store.Reader) error) error {
	return s.Store.View(ctx, func(r store.Reader) error { return fn(countingReader{r, s}) })
}

func (s *scanCounter) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(countingTx{tx, countingReader{tx, s}}) })
}

type countingReader struct {
	store.Reader
	s *scanCounter
}

func (r countingReader) Scan(collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	return r.Reader.Scan(collection, prefix, opts, func(k string, v []byte) (bool, error) {
		if collection == r.s.collection {
			r.s.mu.Lock()
			r.s.n++
			r.s.mu.Unlock()
		}
		return fn(k, v)
	})
}

type countingTx struct {
	store.Tx
	r countingReader
}

func (t countingTx) Scan(collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	return t.r.Scan(collection, prefix, opts, fn)
}
