package controlplane

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/store"
)

// The sequencer numbers the events of the outbox (events.go) and folds
// the pending order count changes into the counts (ordercounts.go): work
// that would otherwise make every create of a tenant read and write the
// same records, done later in batches, by whichever replica gets to it.

// seqBatch caps the outbox events one sequencer Update numbers, and the
// count changes one fold takes.
const seqBatch = 1024

// eventSeqEvery is how many events a process writes before it runs the
// sequencer itself (and folds the counts), so that the outbox and the
// pending count changes stay short when nothing else runs it.
const eventSeqEvery = 512

// sequencer runs the ControlPlane's sequencer and fold, coalescing the
// runs a process asks for at once.
type sequencer struct {
	cp *ControlPlane
	id string // this sequencer's name as the lease's holder

	mu      sync.Mutex
	tenants map[string]*seqFlight // tenant -> its sequencer runs here
	all     seqFlight             // runs of maintain

	written atomic.Int64 // events written since the last maintain began
}

func newSequencer(cp *ControlPlane) *sequencer {
	// Its own random id, not Options.NewID's: a lease holder's name is
	// never an id the API shows.
	return &sequencer{cp: cp, id: uuid.NewString(), tenants: map[string]*seqFlight{}}
}

// seqFlight coalesces runs of one function: a caller waits until a run
// that began after its call has ended, and returns its error.
type seqFlight struct {
	state   sync.Mutex
	started uint64 // runs begun
	okUpTo  uint64 // the last run (by number) that ended without error

	run chan struct{} // a one-slot semaphore: holds the right to run
}

// do runs f, or waits for a run that began after the call and succeeded.
func (f *seqFlight) do(ctx context.Context, fn func(context.Context) error) error {
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

// tenant numbers the tenant's events that committed before the call.
func (s *sequencer) tenant(ctx context.Context, tenant string) error {
	s.mu.Lock()
	f := s.tenants[tenant]
	if f == nil {
		f = &seqFlight{}
		s.tenants[tenant] = f
	}
	s.mu.Unlock()
	return f.do(ctx, func(ctx context.Context) error { return s.cp.sequenceTenant(ctx, tenant) })
}

// wrote counts n events written by this process, and runs maintain when
// eventSeqEvery have been written since it last began, unless another
// replica's run of it holds the lease (claimSequencer): that run numbers
// these events too, or a later one does. Its failure is logged: the
// events are in the outbox, and a later run numbers them.
func (s *sequencer) wrote(ctx context.Context, n int) {
	if s.written.Add(int64(n)) < eventSeqEvery {
		return
	}
	s.written.Store(0)
	held, err := s.cp.claimSequencer(ctx, s.id)
	if err == nil && held {
		err = s.maintain(ctx)
	}
	if err != nil && ctx.Err() == nil {
		s.cp.log.Error("controlplane: sequencing events failed", "err", err)
	}
}

// The sequencer lease. Replicas that write events at the same pace reach
// eventSeqEvery at the same time, and their runs then read and remove
// the same outbox events and pending count changes: under PostgreSQL's
// serializable transactions all but one fail and run again, and again,
// until they run alone, which stops every other Update meanwhile
// (BENCHMARKS.md, "The sequencer lease"). So a run that wrote triggers
// first claims the lease, a record whose value is the holder and the
// time it lapses, in an Update of its own; a replica that finds it held
// skips its run. The lease lapses seqLeaseTTL after it was taken, so
// that a holder that died holds nothing for long; a run longer than that
// may meet another replica's, as before the lease, which costs retries,
// never correctness. The lease only spares work: SequenceEvents,
// followers and Run sequence without it.
const (
	colSequencer = "cp_sequencer"
	seqLeaseKey  = "lease"
	seqLeaseTTL  = 2 * time.Second
)

// claimSequencer takes or renews the sequencer lease for holder, unless
// another holder has it and it has not lapsed (held false). A View looks
// first, so that a replica that finds the lease held writes nothing and
// cannot conflict with the holder.
func (cp *ControlPlane) claimSequencer(ctx context.Context, holder string) (held bool, err error) {
	now := cp.now().UnixMicro()
	othersUntil := func(r store.Reader) (bool, error) {
		b, err := r.Get(colSequencer, seqLeaseKey)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		other, until, ok := strings.Cut(string(b), "/")
		t, perr := strconv.ParseInt(until, 10, 64)
		return ok && perr == nil && other != holder && now < t, nil
	}
	var taken bool
	if err := cp.st.View(ctx, func(r store.Reader) (err error) {
		taken, err = othersUntil(r)
		return err
	}); err != nil || taken {
		return false, err
	}
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		taken, err := othersUntil(tx)
		if err != nil || taken {
			held = false
			return err
		}
		held = true
		return tx.Put(colSequencer, seqLeaseKey, []byte(holder+"/"+strconv.FormatInt(now+seqLeaseTTL.Microseconds(), 10)))
	})
	return held, err
}

// maintain numbers the outbox events of every tenant and folds the
// pending order count changes.
func (s *sequencer) maintain(ctx context.Context) error {
	return s.all.do(ctx, func(ctx context.Context) error {
		s.written.Store(0)
		tenants, err := s.cp.outboxTenants(ctx)
		if err != nil {
			return err
		}
		for _, t := range tenants {
			if err := s.tenant(ctx, t); err != nil {
				return err
			}
		}
		return s.cp.foldCounts(ctx)
	})
}

// SequenceEvents numbers the events of every tenant that have committed
// so far, in this replica and the others over the same store, and folds
// the pending changes of the order counts that unfiltered pages skip over
// (both are written by changes for a sequencer to finish later; see
// FollowEvents). Run calls it at each wake-up and poll, followers before
// they read, and a ControlPlane itself every few hundred events it
// writes; a program that calls none of them may call it now and then to
// keep the pending work short. Runs of one ControlPlane are coalesced:
// callers at once share one run that began after their call.
func (cp *ControlPlane) SequenceEvents(ctx context.Context) error {
	return cp.storeErr("sequence events", cp.seq.maintain(ctx))
}

// outboxTenants lists the tenants with events in the outbox.
func (cp *ControlPlane) outboxTenants(ctx context.Context) ([]string, error) {
	var ts []string
	err := cp.st.View(ctx, func(r store.Reader) error {
		ts = ts[:0]
		start := ""
		for {
			found := ""
			err := r.Scan(colEventOutbox, "", &store.ScanOptions{Start: start}, func(k string, _ []byte) (bool, error) {
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

// outboxEvent is an event of the outbox, parsed from its key.
type outboxEvent struct {
	key        string
	deployment string
	clock      uint64
	i          uint64
	value      []byte
	at         int64
	deleted    bool // the deployment's deleted event
}

// sequenceTenant numbers the tenant's outbox events, seqBatch per Update,
// until the outbox holds none of the tenant's.
func (cp *ControlPlane) sequenceTenant(ctx context.Context, tenant string) error {
	for {
		n := 0
		err := cp.st.Update(ctx, func(tx store.Tx) error {
			var err error
			n, err = cp.sequenceBatch(tx, tenant)
			return err
		})
		if err != nil {
			return err
		}
		if n < seqBatch {
			return nil
		}
	}
}

// sequenceBatch numbers up to seqBatch of the tenant's outbox events in tx
// and returns how many it took.
func (cp *ControlPlane) sequenceBatch(tx store.Tx, tenant string) (int, error) {
	prefix := tenant + "/"
	var evs []outboxEvent
	err := tx.Scan(colEventOutbox, prefix, nil, func(k string, v []byte) (bool, error) {
		parts := strings.Split(k[len(prefix):], "/")
		if len(parts) != 3 {
			return false, fmt.Errorf("controlplane: a malformed outbox key %q", k)
		}
		clock, err1 := strconv.ParseUint(parts[1], 16, 64)
		i, err2 := strconv.ParseUint(parts[2], 16, 32)
		e, err3 := decodeEventRecord(v)
		if err1 != nil || err2 != nil {
			return false, fmt.Errorf("controlplane: a malformed outbox key %q", k)
		}
		if err3 != nil {
			return false, err3
		}
		evs = append(evs, outboxEvent{key: k, deployment: parts[0], clock: clock, i: i, value: v, at: e.at,
			deleted: e.kind == EventDeployment && e.change == ChangeDeleted})
		return len(evs) < seqBatch, nil
	})
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	last, err := lastEvent(tx, tenant)
	if err != nil {
		return 0, err
	}
	n := last
	var newest int64
	// The events first, then the outbox's removals: a store that holds
	// writes back (storepg) sends a run of Inserts as one statement. The
	// events' numbers follow the tenant's counter, read in this Update,
	// so no event has them yet: Inserts.
	for _, e := range orderOutbox(evs) {
		n++
		if err := store.Insert(tx, colEvents, eventKey(tenant, n), e.value); err != nil {
			return 0, err
		}
		newest = max(newest, e.at)
	}
	for _, e := range evs {
		// Discards, not Deletes: the keys were just read or need not be
		// there, and a store may send a run of Discards at once.
		if err := store.Discard(tx, colEventOutbox, e.key); err != nil {
			return 0, err
		}
		if e.deleted {
			if err := store.Discard(tx, colEventClocks, eventClockKey(tenant, e.deployment)); err != nil {
				return 0, err
			}
		}
	}
	if err := tx.Put(colEvents, eventCounterKey(tenant), []byte(strconv.FormatUint(n, 10))); err != nil {
		return 0, err
	}
	if et, ok := tx.(*eventTx); ok {
		et.touch(tenant)
	}
	if n/eventPruneBatch != last/eventPruneBatch {
		if err := cp.pruneEvents(tx, tenant, n, newest); err != nil {
			return 0, err
		}
	}
	return len(evs), nil
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
