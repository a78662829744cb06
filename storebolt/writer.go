package storebolt

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/deployplane/deployplane/store"
)

// request is one Update waiting for, or being run by, the writer.
type request struct {
	fn   func(store.Tx) error
	done chan struct{} // closed by the writer once the outcome is set

	// queued is true while the request sits in Store.queue; guarded by
	// Store.mu. Update withdraws a request only while it is queued.
	queued bool

	// The outcome, written by the writer before done is closed.
	err      error
	panicked bool
	panicVal any
	goexit   bool // fn called runtime.Goexit
}

// result returns the outcome in the caller's goroutine, re-raising a panic
// or a runtime.Goexit that happened in fn.
func (r *request) result() error {
	if r.panicked {
		panic(r.panicVal)
	}
	if r.goexit {
		runtime.Goexit()
	}
	return r.err
}

// maxIdleYields is how many yields in a row that bring no new Update end
// the writer's wait for a batch to fill up (see next).
const maxIdleYields = 2

// writeLoop is the single writer: it takes every queued Update (up to
// maxBatchSize), runs them in one bbolt transaction, takes in those queued
// meanwhile, commits, and repeats. There is no timer: a lone Update is
// committed as soon as it arrives, and Updates that arrive during a commit
// make up the next batch.
func (s *Store) writeLoop() {
	batch := make([]*request, 0, 64)
	for {
		batch = s.next(batch[:0])
		if len(batch) == 0 {
			close(s.writerDone)
			return
		}
		batch = s.commitBatch(batch)
		clear(batch)
	}
}

// next waits until Updates are queued and takes up to maxBatchSize of them,
// in arrival order. It returns an empty batch once the store is closing and
// the queue is drained.
func (s *Store) next(batch []*request) []*request {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.queue) == 0 {
			if s.closing {
				return batch
			}
			s.cond.Wait()
		}
		// The callers the last commit released are runnable but may not
		// have queued their next Update yet: the first of them to arrive
		// would otherwise be committed nearly alone, and the rest would pay
		// a second fsync. Yield the processor while the queue is shorter
		// than the last batch and still growing. This is a scheduler yield,
		// not a timer: a lone writer (last batch of one) never yields, and
		// maxIdleYields yields in a row that bring no one end the wait.
		for idle := 0; idle < maxIdleYields; {
			n := len(s.queue)
			if n >= min(s.lastBatch, s.maxBatchSize) {
				break
			}
			s.mu.Unlock()
			runtime.Gosched()
			s.mu.Lock()
			if len(s.queue) == n {
				idle++
			} else {
				idle = 0
			}
		}
		// Withdrawals (Update's context done) may have emptied the queue
		// while the writer yielded.
		if len(s.queue) > 0 {
			return s.take(batch)
		}
	}
}

// more appends to batch the Updates queued since it was taken, up to
// maxBatchSize in all, without waiting.
func (s *Store) more(batch []*request) []*request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.take(batch)
}

// take moves queued Updates to batch, up to maxBatchSize in all. s.mu must
// be held.
func (s *Store) take(batch []*request) []*request {
	n := min(len(s.queue), s.maxBatchSize-len(batch))
	if n <= 0 {
		return batch
	}
	for _, r := range s.queue[:n] {
		r.queued = false
	}
	batch = append(batch, s.queue[:n]...)
	s.queue = slices.Delete(s.queue, 0, n)
	s.lastBatch = len(batch)
	return batch
}

// requeue puts requests back at the head of the queue, in order, to be run
// again in a later transaction.
func (s *Store) requeue(rs []*request) {
	if len(rs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		r.queued = true
		r.err, r.panicked, r.panicVal = nil, false, nil
	}
	s.queue = slices.Insert(s.queue, 0, rs...)
	s.cond.Signal()
}

// commitBatch runs batch in one bbolt write transaction and commits it.
// Updates queued while the batch runs join it (up to maxBatchSize), so the
// batch ends when the writer has caught up with its callers. It returns
// the batch as it grew.
//
// Each fn runs against the shared transaction through its own txn, which
// logs the previous value of every key it writes. When fn returns an error
// or panics, its writes are undone from that log, newest first, before the
// next fn runs, so the transaction holds exactly the writes of the fns that
// succeeded, applied in queue order. No fn runs twice in the normal course
// and none is ever run against state that does not get committed together
// with its own writes.
//
// If the commit fails, every fn that succeeded gets the commit error.
//
// If a fn calls runtime.Goexit, the writer goroutine is unwinding: the
// transaction is rolled back, the other requests are queued again, the
// Goexit is re-raised in the fn's caller, and a new writer goroutine carries
// on.
func (s *Store) commitBatch(batch []*request) []*request {
	btx, err := s.db.Begin(true)
	if err != nil {
		err = fmt.Errorf("storebolt: begin: %w", err)
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
		return batch
	}
	cur := 0
	returned := false
	defer func() {
		if returned {
			return
		}
		// batch[cur].fn called runtime.Goexit.
		_ = btx.Rollback()
		r := batch[cur]
		r.goexit = true
		close(r.done)
		s.requeue(slices.Concat(batch[:cur], batch[cur+1:]))
		go s.writeLoop()
	}()

	ok := 0
	for cur = 0; cur < len(batch); cur++ {
		succeeded, undoErr := s.run(btx, batch[cur])
		if undoErr != nil {
			// The transaction now holds part of a failed fn's writes.
			// Drop it; the failed fn keeps its own outcome, the others
			// run again in a fresh transaction.
			_ = btx.Rollback()
			r := batch[cur]
			close(r.done)
			s.requeue(slices.Concat(batch[:cur], batch[cur+1:]))
			returned = true
			return batch
		}
		if succeeded {
			ok++
		}
		if cur == len(batch)-1 {
			batch = s.more(batch)
		}
	}
	returned = true

	if ok == 0 {
		_ = btx.Rollback()
	} else if err := s.observedCommit(btx, ok); err != nil {
		_ = btx.Rollback() // in case the commit left it open; ErrTxClosed otherwise
		err = fmt.Errorf("storebolt: commit %s: %w", s.path, err)
		for _, r := range batch {
			if !r.panicked && r.err == nil {
				r.err = err
			}
		}
	}
	for _, r := range batch {
		close(r.done)
	}
	return batch
}

// observedCommit commits btx, holding the writes of updates Updates, and
// reports it to Options.OnCommit.
func (s *Store) observedCommit(btx *bbolt.Tx, updates int) error {
	if s.onCommit == nil {
		return s.commit(btx)
	}
	start := time.Now()
	err := s.commit(btx)
	s.onCommit(updates, time.Since(start), err)
	return err
}

// run runs r.fn against btx. It reports whether fn succeeded; when fn failed
// (error or panic) its writes have been undone, unless undoing them failed,
// which run reports as undoErr.
func (s *Store) run(btx *bbolt.Tx, r *request) (succeeded bool, undoErr error) {
	t := &txn{btx: btx, writable: true, fillPercent: s.fillPercent}
	returned := false
	defer func() {
		t.end()
		if returned {
			return
		}
		p := recover()
		if p == nil {
			return // runtime.Goexit; commitBatch rolls everything back
		}
		r.panicked, r.panicVal = true, p
		undoErr = t.undoWrites()
	}()
	err := r.fn(t)
	returned = true
	if err != nil {
		r.err = err
		return false, t.undoWrites()
	}
	return true, nil
}
