package storepg

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deployplane/deployplane/store"
)

// Combining concurrent Updates (see "Combined Updates" in the package
// documentation): when as many Updates are under way as the pool has
// connections, the Updates that come meanwhile queue, and the next
// transaction runs up to maxBatch of them, one after another, and commits
// them at once.

// DefaultMaxBatchSize is the most Updates one transaction runs when
// Options.MaxBatchSize is zero.
const DefaultMaxBatchSize = 16

// combiner holds the Updates waiting for a transaction and counts the
// transactions of Updates under way.
type combiner struct {
	mu      sync.Mutex
	queue   []*updateCall
	running int // transactions of Updates under way, at most Store.inFlight
}

// updateCall is one call of Update.
type updateCall struct {
	ctx  context.Context
	fn   func(*txn) error
	done chan callOutcome // the leader's word, sent once
}

// callOutcome is what an Update learns from the leader of its batch: its
// result, or that it must run alone (the batch failed, or a closure
// panicked), or that it leads the calls in lead (itself among them).
type callOutcome struct {
	err  error
	solo bool
	lead []*updateCall
}

// update is Update with combining: it runs c at once in a transaction of
// its own when fewer than s.inFlight transactions of Updates are under
// way, else queues it until a leader takes it into a batch.
func (s *Store) update(c *updateCall) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if !s.enter() {
		return store.ErrClosed
	}
	defer s.running.Done()
	s.comb.mu.Lock()
	if s.comb.running < s.inFlight {
		s.comb.running++
		s.comb.mu.Unlock()
		return s.lead(c, []*updateCall{c})
	}
	s.comb.queue = append(s.comb.queue, c)
	s.comb.mu.Unlock()
	var o callOutcome
	select {
	case o = <-c.done:
	case <-c.ctx.Done():
		if s.withdraw(c) {
			return c.ctx.Err()
		}
		o = <-c.done // a leader has taken it: wait for the outcome
	}
	switch {
	case o.lead != nil:
		return s.lead(c, o.lead)
	case o.solo:
		return s.runAlone(c)
	}
	return o.err
}

// runAlone runs c again in transactions of its own, after its batch failed.
func (s *Store) runAlone(c *updateCall) error {
	s.rerun.Add(1)
	return s.tries(c.ctx, true, nil, c.fn)
}

// withdraw removes c from the queue, and reports whether it was still
// there.
func (s *Store) withdraw(c *updateCall) bool {
	s.comb.mu.Lock()
	defer s.comb.mu.Unlock()
	for i, q := range s.comb.queue {
		if q == c {
			s.comb.queue = append(s.comb.queue[:i], s.comb.queue[i+1:]...)
			return true
		}
	}
	return false
}

// lead runs batch (c among its calls) in one transaction, hands the
// transaction's place to the first of the calls queued meanwhile, and
// tells every other call of the batch its outcome. If a closure ends the
// goroutine (runtime.Goexit), the other calls are told to run alone.
func (s *Store) lead(c *updateCall, batch []*updateCall) (err error) {
	told := false
	defer func() {
		if told {
			return
		}
		// A Goexit unwinds through here: the batch's outcome is unknown
		// to the other calls, which run alone.
		s.handOff()
		for _, m := range batch {
			if m != c {
				m.done <- callOutcome{solo: true}
			}
		}
	}()
	var outs []callOutcome
	if len(batch) == 1 {
		outs = []callOutcome{{err: s.tries(c.ctx, true, nil, c.fn)}}
	} else if outs = s.runBatch(batch, false); outs == nil {
		// An Insert was refused: once more, each closure's writes in a
		// savepoint of their own, so that the refusal fails only its own
		// Update.
		s.rerun.Add(int64(len(batch)))
		outs = s.runBatch(batch, true)
	}
	told = true
	s.handOff()
	var own callOutcome
	for i, m := range batch {
		if m == c {
			own = outs[i]
			continue
		}
		m.done <- outs[i]
	}
	if own.solo {
		return s.runAlone(c)
	}
	return own.err
}

// handOff gives the place of a transaction that has ended to the calls
// queued meanwhile (up to maxBatch of them, the first leading), or frees
// it.
func (s *Store) handOff() {
	s.comb.mu.Lock()
	if len(s.comb.queue) == 0 {
		s.comb.running--
		s.comb.mu.Unlock()
		return
	}
	n := min(len(s.comb.queue), s.maxBatch)
	next := make([]*updateCall, n)
	copy(next, s.comb.queue)
	s.comb.queue = append(s.comb.queue[:0], s.comb.queue[n:]...)
	s.comb.mu.Unlock()
	next[0].done <- callOutcome{lead: next}
}

// batchContext is a context for a batch's statements, with the values of
// the first call's: it is done once every call's context is done, so that
// no one caller's cancellation aborts the others' transaction.
func batchContext(batch []*updateCall) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var mu sync.Mutex
	live := len(batch)
	stops := make([]func() bool, 0, len(batch))
	for _, m := range batch {
		stops = append(stops, context.AfterFunc(m.ctx, func() {
			mu.Lock()
			live--
			all := live == 0
			mu.Unlock()
			if all {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// runBatch runs the closures of batch one after another in one
// transaction and commits it, once. A closure that returns an error has
// its writes taken back, if none has reached the server yet (they are
// held: txn.puts); otherwise, and whenever a statement fails or a closure
// panics, the transaction rolls back and every call is told to run alone,
// as the contract allows (a closure may run more than once). Those whose
// ctx was done before their turn get ctx.Err().
//
// One failure is answered otherwise: an Insert refused because its key is
// there (store.ErrAlreadyExists), as when two creates of one name meet in
// a batch. Without isolate, runBatch then returns nil, for the caller to
// run the batch again with isolate; with it, each closure's held writes
// are sent after it returns, in a savepoint of their own (flushSaved), and
// a refusal rolls back to it and fails that closure's Update alone, with
// the error it would have met alone.
func (s *Store) runBatch(batch []*updateCall, isolate bool) []callOutcome {
	outs := make([]callOutcome, len(batch))
	ctx, cancel := batchContext(batch)
	defer cancel()
	// skipped are the calls whose ctx was done before their turn: their
	// closure did not run, and their outcome is ctx.Err() whatever
	// becomes of the others.
	skipped := make([]bool, len(batch))
	settle := func(o callOutcome) []callOutcome {
		for i := range batch {
			if !skipped[i] {
				outs[i] = o
			}
		}
		return outs
	}
	alone := func() []callOutcome { return settle(callOutcome{solo: true}) }
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return startFailed(batch, outs, err)
	}
	defer conn.Release()
	t := &txn{ctx: ctx, conn: conn, q: &s.q, begin: s.q.beginUpdate}
	done := false
	defer func() {
		if !done {
			t.rollback()
		}
		t.ended = true
	}()
	committing := 0 // closures that returned nil
	for i, m := range batch {
		if err := m.ctx.Err(); err != nil {
			outs[i].err, skipped[i] = err, true
			continue
		}
		held, immediate := t.heldTotal, t.immediate
		ferr, panicked := callClosure(m.fn, t)
		if panicked {
			return alone()
		}
		if t.err != nil {
			return refusedOr(isolate, t.err, alone)
		}
		if ferr == nil && isolate {
			if refused := t.flushSaved(); t.err != nil {
				return alone()
			} else if refused != nil {
				outs[i].err = fmt.Errorf("storepg: %w", refused)
				continue
			}
		}
		if ferr == nil {
			committing++
			continue
		}
		if t.sentHeld > held || t.immediate != immediate {
			// Some of its writes reached the server: they cannot be
			// taken back apart from the others'.
			return alone()
		}
		t.puts = t.puts[:len(t.puts)-(t.heldTotal-held)]
		t.heldTotal = held
		// Its error stands if the transaction commits: it ran after the
		// closures before it, whose writes commit.
		outs[i].err = ferr
	}
	if committing == 0 {
		// Nothing to commit: every closure failed, and each saw none of
		// the others' writes (taken back), as if run alone.
		return outs
	}
	if t.xid == "" {
		t.flush()
		if t.err != nil {
			return refusedOr(isolate, t.err, alone)
		}
	}
	if ctx.Err() != nil {
		// Every caller has gone: abandon rather than commit.
		for i := range batch {
			if !skipped[i] {
				outs[i] = callOutcome{err: fmt.Errorf("storepg: abandoned before commit: %w", batch[i].ctx.Err())}
			}
		}
		return outs
	}
	done = true
	pid := conn.Conn().PgConn().PID()
	if err := s.observedCommit(t, true, committing); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || t.xid == "" {
			// Nothing took effect: the server refused the COMMIT or a
			// write sent with it.
			return refusedOr(isolate, err, alone)
		}
		conn.Release()
		committed, cerr := s.commitOutcome(ctx, t.xid, pid)
		switch {
		case cerr != nil:
			return settle(callOutcome{err: fmt.Errorf("storepg: commit: %w: %w; asking the server failed: %w", store.ErrOutcomeUnknown, err, cerr)})
		case !committed:
			return alone()
		}
	}
	return outs
}

// refusedOr is runBatch's answer to a failed statement err: nil, to run
// the batch again with isolate, when err is a refused Insert and it ran
// without; else alone's.
func refusedOr(isolate bool, err error, alone func() []callOutcome) []callOutcome {
	if !isolate && errors.Is(err, store.ErrAlreadyExists) {
		return nil
	}
	return alone()
}

// startFailed answers a batch that could not start: every call runs alone,
// except those whose ctx is done (the batch's ctx ends only with theirs).
func startFailed(batch []*updateCall, outs []callOutcome, err error) []callOutcome {
	for i, m := range batch {
		if cerr := m.ctx.Err(); cerr != nil {
			outs[i].err = fmt.Errorf("storepg: %w", errors.Join(cerr, err))
		} else {
			outs[i].solo = true
		}
	}
	return outs
}

// callClosure runs fn on t, and reports a panic instead of raising it:
// the closure is another caller's, whose own run raises it again.
func callClosure(fn func(*txn) error, t *txn) (err error, panicked bool) {
	panicked = true
	defer func() {
		if panicked {
			_ = recover()
		}
	}()
	err = fn(t)
	panicked = false
	return err, false
}
