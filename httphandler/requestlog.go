package httphandler

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
)

// DefaultLogBuffer is the default number of request records waiting for
// the Logger's handler (Options.LogBuffer).
const DefaultLogBuffer = 1024

// requestLog hands the request records to the Logger from one goroutine of
// its own, so that a request pays for appending its record (a few words,
// no allocation) to a buffer, not for formatting and writing it, and the
// writes are not contended by every request at once.
//
// When the Logger's handler is NewLogHandler's, the goroutine formats the
// records itself (logformat.go) into one buffer and writes it with one
// Write per batch; otherwise it hands each record to the handler as a
// slog.Record.
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
	h     slog.Handler
	lines *logHandler // h, when it is NewLogHandler's: the lines are written here
	max   int

	mu       sync.Mutex
	pending  []pendingRecord
	spare    []pendingRecord // the drained batch's array, reused
	draining bool            // a drain goroutine runs
	room     sync.Cond       // signalled when pending shrinks
	idle     sync.Cond       // signalled when draining ends

	buf []byte // the lines of a batch; the drain goroutine's own
}

// pendingRecord is a record and the context of the request that made it
// (its values stay readable to a Logger's handler; its end does not
// matter).
type pendingRecord struct {
	ctx context.Context
	rec requestRecord
}

// maxLogWrite is the most a batch writes at once: longer batches are
// written in several Writes of whole lines.
const maxLogWrite = 64 << 10

func newRequestLog(h slog.Handler, max int) *requestLog {
	if max <= 0 {
		max = DefaultLogBuffer
	}
	l := &requestLog{h: h, max: max}
	l.lines, _ = h.(*logHandler)
	l.room.L = &l.mu
	l.idle.L = &l.mu
	return l
}

// add queues rec, waiting while the buffer is full.
func (l *requestLog) add(ctx context.Context, rec *requestRecord) {
	l.mu.Lock()
	for len(l.pending) >= l.max {
		l.room.Wait()
	}
	l.pending = append(l.pending, pendingRecord{ctx, *rec})
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
	yielded := false
	for {
		l.mu.Lock()
		if batch != nil {
			clear(batch) // drop the contexts and strings for the collector
			l.spare = batch[:0]
			batch = nil
		}
		if len(l.pending) == 0 {
			if !yielded {
				// Let the requests running meanwhile add theirs before
				// ending: under load the next record is usually a
				// moment away, and starting a goroutine for it costs
				// more than this.
				yielded = true
				l.mu.Unlock()
				runtime.Gosched()
				continue
			}
			l.draining = false
			l.idle.Broadcast()
			l.mu.Unlock()
			return
		}
		yielded = false
		batch, l.pending = l.pending, l.spare
		l.spare = nil
		l.room.Broadcast()
		l.mu.Unlock()
		if l.lines != nil {
			l.write(batch)
			continue
		}
		for i := range batch {
			l.handle(&batch[i])
		}
	}
}

// write formats batch as NewLogHandler's lines and writes them, in Writes
// of whole lines of at most about maxLogWrite bytes. A writer's error has
// nowhere to go (as with slog's handlers); a writer's panic loses the
// lines of that Write, rather than end the process or stop the log.
func (l *requestLog) write(batch []pendingRecord) {
	b := l.buf[:0]
	for i := range batch {
		if l.lines.json {
			b = batch[i].rec.appendJSON(b)
		} else {
			b = batch[i].rec.appendText(b)
		}
		if len(b) >= maxLogWrite {
			l.flushLines(b)
			b = b[:0]
		}
	}
	if len(b) > 0 {
		l.flushLines(b)
	}
	if cap(b) <= 4*maxLogWrite {
		l.buf = b[:0]
	}
}

func (l *requestLog) flushLines(b []byte) {
	defer func() { _ = recover() }()
	_, _ = l.lines.out.Write(b)
}

// handle hands p to the handler. A handler's error has nowhere to go (as
// with slog.Logger); a handler's panic skips the record, rather than end
// the process (no request is there for net/http to recover) or stop the
// log with records waiting.
func (l *requestLog) handle(p *pendingRecord) {
	defer func() { _ = recover() }()
	_ = l.h.Handle(p.ctx, p.rec.slogRecord())
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
