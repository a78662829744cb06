package eventlog

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/store"
)

// seqBatch caps the outbox events one sequencer Update numbers.
const seqBatch = 1024

// SequenceEvery is how many events a Log commits before it runs the
// sequencer itself (Committed), so that the outbox stays short when
// nothing else runs it.
const SequenceEvery = 512

// pruneEvery: a batch whose numbers reach a multiple of pruneEvery looks
// for events beyond the retention from the tenant's oldest (prune).
const pruneEvery = 64

// pruneBatch caps the events prune deletes in one Update; a batch that
// deleted that many is followed by another at once.
const pruneBatch = 1024

// flight coalesces runs of one function: a caller waits until a run that
// began after its call has ended, and returns its error.
type flight struct {
	state   sync.Mutex
	started uint64 // runs begun
	okUpTo  uint64 // the last run (by number) that ended without error

	run chan struct{} // a one-slot semaphore: holds the right to run
}

// do runs fn, or waits for a run that began after the call and succeeded.
func (f *flight) do(ctx context.Context, fn func(context.Context) error) error {
	f.state.Lock()
	if f.run == nil {
		f.run = make(chan struct{}, 1)
	}
	ticket := f.started // a run numbered above ticket began after this call
	run := f.run
	f.state.Unlock()
	select {
	case run <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-run }()
	f.state.Lock()
	if f.okUpTo > ticket {
		f.state.Unlock()
		return nil
	}
	f.started++
	n := f.started
	f.state.Unlock()
	err := fn(ctx)
	if err == nil {
		f.state.Lock()
		f.okUpTo = n
		f.state.Unlock()
	}
	return err
}

// Sequence numbers the tenant's events that committed before the call,
// here or through other Logs over the same store.
func (l *Log) Sequence(ctx context.Context, tenant string) error {
	l.seqMu.Lock()
	f := l.flights[tenant]
	if f == nil {
		f = &flight{}
		l.flights[tenant] = f
	}
	l.seqMu.Unlock()
	return f.do(ctx, func(ctx context.Context) error { return l.sequenceTenant(ctx, tenant) })
}

// SequenceAll numbers the events of every tenant that committed before
// the call. A Log's first run also prunes every tenant's log that holds
// events beyond its retention or age (prune). It does not ask for the
// sequencer lease.
func (l *Log) SequenceAll(ctx context.Context) error {
	return l.all.do(ctx, func(ctx context.Context) error {
		l.written.Store(0)
		tenants, err := l.tenants(ctx, Outbox)
		if err != nil {
			return err
		}
		if !l.swept {
			// The first run also prunes the logs that hold more than the
			// retention without events to number: a store written
			// before this retention was, or under a larger one.
			over, err := l.overRetained(ctx)
			if err != nil {
				return err
			}
			l.seqMu.Lock()
			for _, t := range over {
				l.unpruned[t] = true
			}
			l.seqMu.Unlock()
			tenants = append(tenants, over...)
			slices.Sort(tenants)
			tenants = slices.Compact(tenants)
		}
		for _, t := range tenants {
			if err := l.Sequence(ctx, t); err != nil {
				return err
			}
		}
		l.swept = true
		return nil
	})
}

// The sequencer lease. Replicas that write events at the same pace reach
// SequenceEvery at the same time, and their runs then read and remove the
// same outbox events: under PostgreSQL's serializable transactions all but
// one fail and run again, and again, until they run alone, which stops
// every other Update meanwhile. So a run that Committed starts first
// claims the lease, a record whose value is the holder and the time it
// lapses, in an Update of its own; a Log that finds it held skips its
// run. The lease lapses leaseTTL after it was taken, so that a holder
// that died holds nothing for long; a run longer than that may meet
// another Log's, which costs retries, never correctness. The lease only
// spares work: Sequence, SequenceAll and Streams sequence without it.
const (
	leaseKey = "lease"
	leaseTTL = 2 * time.Second
)

// claimLease takes or renews the sequencer lease for l, unless another
// holder has it and it has not lapsed (held false). A View looks first, so
// that a Log that finds the lease held writes nothing and cannot conflict
// with the holder.
func (l *Log) claimLease(ctx context.Context) (held bool, err error) {
	now := l.o.Clock().UnixMicro()
	othersUntil := func(r store.Reader) (bool, error) {
		b, err := r.Get(Lease, leaseKey)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		other, until, ok := strings.Cut(string(b), "/")
		t, perr := strconv.ParseInt(until, 10, 64)
		return ok && perr == nil && other != l.id && now < t, nil
	}
	var taken bool
	if err := l.st.View(ctx, func(r store.Reader) (err error) {
		taken, err = othersUntil(r)
		return err
	}); err != nil || taken {
		return false, err
	}
	err = l.st.Update(ctx, func(tx store.Tx) error {
		taken, err := othersUntil(tx)
		if err != nil || taken {
			held = false
			return err
		}
		held = true
		return tx.Put(Lease, leaseKey, []byte(l.id+"/"+strconv.FormatInt(now+leaseTTL.Microseconds(), 10)))
	})
	return held, err
}

// tenants lists the tenants with records in the collection (Outbox or
// Events): one seek a tenant.
func (l *Log) tenants(ctx context.Context, col string) ([]string, error) {
	var ts []string
	err := l.st.View(ctx, func(r store.Reader) error {
		ts = ts[:0]
		start := ""
		for {
			found := ""
			err := r.Scan(col, "", &store.ScanOptions{Start: start}, func(k string, _ []byte) (bool, error) {
				found, _, _ = strings.Cut(k, "/")
				return false, nil
			})
			if err != nil || found == "" {
				return err
			}
			ts = append(ts, found)
			start = found + "0" // '0' follows '/': the next tenant's keys
		}
	})
	return ts, err
}

// overRetained lists the tenants whose oldest numbered event is beyond
// their newest Options.Retention or more than Options.MaxAge older than
// their newest: one seek and two reads a tenant.
func (l *Log) overRetained(ctx context.Context) ([]string, error) {
	var over []string
	err := l.st.View(ctx, func(r store.Reader) error {
		over = over[:0]
		start := ""
		for {
			var found string
			var oldest uint64
			var at int64
			err := r.Scan(Events, "", &store.ScanOptions{Start: start}, func(k string, v []byte) (bool, error) {
				found, _, _ = strings.Cut(k, "/")
				var ok bool
				if oldest, ok = eventNumber(eventPrefix(found), k); ok {
					if e, err := decode(v); err == nil {
						at = e.At.UnixMicro()
					}
				}
				return false, nil
			})
			if err != nil || found == "" {
				return err
			}
			start = found + "0" // '0' follows '/': the next tenant's keys
			if oldest == 0 {
				continue // the counter alone: no event kept ("e" sorts before "n")
			}
			head, err := Head(r, found)
			if err != nil {
				return err
			}
			newest, err := l.eventTime(r, found, head)
			if err != nil {
				return err
			}
			if oldest+uint64(l.o.Retention) <= head || at < l.cutoff(newest) {
				over = append(over, found)
			}
		}
	})
	return over, err
}

// cutoff is the time (Unix microseconds) before which events are older
// than Options.MaxAge before the newest's time, now; none for the least
// time (eventTime's for an event not kept).
func (l *Log) cutoff(now int64) int64 {
	if now == math.MinInt64 {
		return now
	}
	return now - l.o.MaxAge.Microseconds()
}

// eventTime is the time (Unix microseconds) of the tenant's event n, or
// the least time when it is not kept.
func (l *Log) eventTime(r store.Reader, tenant string, n uint64) (int64, error) {
	b, err := r.Get(Events, eventKey(tenant, n))
	if errors.Is(err, store.ErrNotFound) {
		return math.MinInt64, nil
	}
	if err != nil {
		return 0, err
	}
	e, err := decode(b)
	if err != nil {
		return 0, err
	}
	return e.At.UnixMicro(), nil
}

// outboxEvent is an event of the outbox, parsed from its key.
type outboxEvent struct {
	key        string
	deployment string
	clock      uint64
	i          uint64
	value      []byte
	at         int64
	deleted    bool // the deployment's Deleted event
}

// sequenceTenant numbers the tenant's outbox events, seqBatch per Update,
// until the outbox holds none of the tenant's and no pruning is left
// (prune), and wakes the tenant's followers here when it numbered some.
func (l *Log) sequenceTenant(ctx context.Context, tenant string) error {
	l.seqMu.Lock()
	check := l.unpruned[tenant]
	l.seqMu.Unlock()
	for {
		n, more := 0, false
		err := l.st.Update(ctx, func(tx store.Tx) error {
			var err error
			n, more, err = l.sequenceBatch(tx, tenant, check)
			return err
		})
		if err != nil {
			return err
		}
		if n > 0 {
			l.notify(tenant)
		}
		if n < seqBatch && !more {
			l.seqMu.Lock()
			delete(l.unpruned, tenant)
			l.seqMu.Unlock()
			return nil
		}
		// A full batch numbered, or a full batch pruned: go on at once,
		// pruning again after the latter.
		check = more
	}
}

// sequenceBatch numbers up to seqBatch of the tenant's outbox events in tx
// and returns how many it took. It deletes the events that its numbers
// push out of the tenant's newest Options.Retention and, when its numbers
// reach a multiple of pruneEvery or check is set, prunes; more reports that
// prune deleted a full batch and may have left some.
func (l *Log) sequenceBatch(tx store.Tx, tenant string, check bool) (numbered int, more bool, err error) {
	prefix := tenant + "/"
	var evs []outboxEvent
	err = tx.Scan(Outbox, prefix, nil, func(k string, v []byte) (bool, error) {
		parts := strings.Split(k[len(prefix):], "/")
		if len(parts) != 3 {
			return false, fmt.Errorf("eventlog: a malformed outbox key %q", k)
		}
		clock, err1 := strconv.ParseUint(parts[1], 16, 64)
		i, err2 := strconv.ParseUint(parts[2], 16, 32)
		e, err3 := decode(v)
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("eventlog: a malformed outbox key %q", k)
		}
		if err3 != nil {
			return false, err3
		}
		evs = append(evs, outboxEvent{key: k, deployment: parts[0], clock: clock, i: i, value: v, at: e.At.UnixMicro(),
			deleted: l.o.Deleted.matches(&e)})
		return len(evs) < seqBatch, nil
	})
	if err != nil || len(evs) == 0 && !check {
		return 0, false, err
	}
	last, err := Head(tx, tenant)
	if err != nil {
		return 0, false, err
	}
	if len(evs) == 0 {
		// Nothing to number: prune alone, by the newest event's time.
		newest, err := l.eventTime(tx, tenant, last)
		if err != nil {
			return 0, false, err
		}
		more, err = l.prune(tx, tenant, last, newest)
		return 0, more, err
	}
	n := last
	var newest int64
	// The events first, then the outbox's removals: a store that holds
	// writes back (storepg) sends a run of Inserts as one statement. The
	// events' numbers follow the tenant's counter, read in this Update,
	// so no event has them yet: Inserts.
	for _, e := range orderOutbox(evs) {
		n++
		if err := store.Insert(tx, Events, eventKey(tenant, n), e.value); err != nil {
			return 0, false, err
		}
		newest = max(newest, e.at)
	}
	for _, e := range evs {
		// Discards, not Deletes: the keys were just read or need not be
		// there, and a store may send a run of Discards at once.
		if err := store.Discard(tx, Outbox, e.key); err != nil {
			return 0, false, err
		}
		if e.deleted {
			if err := store.Discard(tx, Clocks, clockKey(tenant, e.deployment)); err != nil {
				return 0, false, err
			}
		}
	}
	if err := tx.Put(Events, counterKey(tenant), []byte(strconv.FormatUint(n, 10))); err != nil {
		return 0, false, err
	}
	// The events these numbers push out of the newest Retention, by their
	// keys, read or not: each batch deletes as many as it numbers once
	// the log is full, so that it never holds more than the retention.
	r := uint64(l.o.Retention)
	for k := max(last, r) - r + 1; k+r <= n; k++ {
		if err := store.Discard(tx, Events, eventKey(tenant, k)); err != nil {
			return 0, false, err
		}
	}
	if check || n/pruneEvery != last/pruneEvery {
		if more, err = l.prune(tx, tenant, n, newest); err != nil {
			return 0, false, err
		}
	}
	return len(evs), more, nil
}

// prune deletes, oldest first, up to pruneBatch events of the tenant that
// are beyond the newest Options.Retention (last is the newest's number) or
// more than Options.MaxAge older than now (Unix microseconds, the newest's
// time): those left by a store written under a larger retention, or
// before the batches deleted what they pushed out, and those aged out.
// more reports that it deleted pruneBatch, and may have left some.
func (l *Log) prune(tx store.Tx, tenant string, last uint64, now int64) (more bool, err error) {
	var keep uint64 // events numbered keep or less go
	if last > uint64(l.o.Retention) {
		keep = last - uint64(l.o.Retention)
	}
	cutoff := l.cutoff(now)
	prefix := eventPrefix(tenant)
	var old []string
	err = tx.Scan(Events, prefix, nil, func(k string, v []byte) (bool, error) {
		n, ok := eventNumber(prefix, k)
		if ok && n > keep {
			e, err := decode(v)
			if err == nil && e.At.UnixMicro() >= cutoff {
				return false, nil
			}
		}
		old = append(old, k)
		return len(old) < pruneBatch, nil
	})
	if err != nil {
		return false, err
	}
	// Discards, not Deletes: the keys were just read, and a store may
	// send a run of Discards at once where each Delete waits for its
	// answer (storepg: one round trip a Delete).
	for _, k := range old {
		if err := store.Discard(tx, Events, k); err != nil {
			return false, err
		}
	}
	return len(old) == pruneBatch, nil
}

// orderOutbox orders outbox events for numbering: each deployment's in
// the order of its clock and index (the order of its changes), and
// between deployments by the events' times, the earliest first (a merge
// of the deployments' chains by the time of their next event). evs is in
// key order: each deployment's events together, in chain order.
func orderOutbox(evs []outboxEvent) []outboxEvent {
	var h chainHeap
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].deployment == evs[i].deployment {
			j++
		}
		h = append(h, evs[i:j])
		i = j
	}
	heap.Init(&h)
	out := make([]outboxEvent, 0, len(evs))
	for h.Len() > 0 {
		c := h[0]
		out = append(out, c[0])
		if h[0] = c[1:]; len(h[0]) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

// chainHeap holds deployments' chains of outbox events, the chain whose
// next event is the earliest (then the smallest key) first.
type chainHeap [][]outboxEvent

func (h chainHeap) Len() int { return len(h) }
func (h chainHeap) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(h[i][0].at, h[j][0].at), strings.Compare(h[i][0].key, h[j][0].key)) < 0
}
func (h chainHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *chainHeap) Push(x any)   { *h = append(*h, x.([]outboxEvent)) }
func (h *chainHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
