package httphandler

import (
	"context"
	"log/slog"
	"sync"
)

// DefaultLogBuffer is the default number of request records waiting for
// the Logger's handler (Options.LogBuffer).
const DefaultLogBuffer = 1024

// requestLog hands the per-request Info records to a slog.Handler from
// one goroutine of its own, so that a request pays for building its record
// and appending it to a buffer, not for formatting and writing it, and the
// handler's writes are not contended by every request at once.
//
// The goroutine runs only while records wait: the first record into an
// empty buffer starts it, and it ends once the buffer is empty. A handler
// nobody closes therefore holds no goroutine while idle, and loses no
// record but those pending when the process exits.
//
// A full buffer makes the request wait for room (it never drops a record):
// the log then paces the server, as a synchronous log would. Records reach
// the handler in the order they were added.
type requestLog struct {
	h   slog.Handler
	max int

	mu       sync.Mutex
	pending  []pendingRecord
	spare    []pendingRecord // the drained batch's array, reused
	draining bool            // a drain goroutine runs
	room     sync.Cond       // signalled when pending shrinks
	idle     sync.Cond       // signalled when draining ends
}

// pendingRecord is a record and the context of the request that made it
// (its values stay readable to the handler; its end does not matter).
type pendingRecord struct {
	ctx context.Context
	rec slog.Record
}

func newRequestLog(h slog.Handler, max int) *requestLog {
	if max <= 0 {
		max = DefaultLogBuffer
	}
	l := &requestLog{h: h, max: max}
	l.room.L = &l.mu
	l.idle.L = &l.mu
	return l
}

// add queues rec, which add owns from now on (its attributes must not be
// shared with the caller), waiting while the buffer is full.
func (l *requestLog) add(ctx context.Context, rec slog.Record) {
	l.mu.Lock()
	for len(l.pending) >= l.max {
		l.room.Wait()
	}
	l.pending = append(l.pending, pendingRecord{ctx, rec})
	if !l.draining {
		l.draining = true
		go l.drain()
	}
	l.mu.Unlock()
}

// drain hands batches of pending records to the handler until none is
// left.
func (l *requestLog) drain() {
	var batch []pendingRecord
	for {
		l.mu.Lock()
		if batch != nil {
			clear(batch) // drop the contexts and records for the collector
			l.spare = batch[:0]
		}
		if len(l.pending) == 0 {
			l.draining = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		batch, l.pending = l.pending, l.spare
		l.spare = nil
		l.room.Broadcast()
		l.mu.Unlock()
		for _, p := range batch {
			l.handle(p)
		}
	}
}

// handle hands p to the handler. A handler's error has nowhere to go (as
// with slog.Logger); a handler's panic skips the record, rather than end
// the process (no request is there for net/http to recover) or stop the
// log with records waiting.
func (l *requestLog) handle(p pendingRecord) {
	defer func() { _ = recover() }()
	_ = l.h.Handle(p.ctx, p.rec)
}

// flush waits until every record added before it was called has been
// handed to the handler.
func (l *requestLog) flush() {
	l.mu.Lock()
	for l.draining {
		l.idle.Wait()
	}
	l.mu.Unlock()
}
