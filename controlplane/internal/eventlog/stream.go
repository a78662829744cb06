package eventlog

import (
	"cmp"
	"context"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/deployplane/deployplane/store"
)

// ReadBatch caps the events a Stream reads at once, and the events the
// tenant's followers in one process share (a follower further behind
// reads the store alone).
const ReadBatch = 256

// FollowOptions say which events a Stream returns, and from where.
type FollowOptions struct {
	// After is the number of the last event the follower has seen: the
	// Stream returns the events after it.
	After uint64
	// Deployment, when set, keeps only the deployment's events, and ends
	// the Stream after its Deleted event (Options.Deleted).
	Deployment string
	// Kinds, for each kind it names, lists the changes of the events of
	// that kind to keep (none: leave the kind out). The events of kinds
	// it does not name are kept.
	Kinds map[string][]string
}

// Entry is what a Stream returns: a numbered event, or a gap.
type Entry struct {
	// N is the event's number; for a gap, the number of the last event
	// lost.
	N uint64
	// LostFrom is, for a gap, the number of the first event lost (events
	// LostFrom to N are no longer retained); 0 for an event.
	LostFrom uint64
	// Event is the event; zero for a gap.
	Event Event
}

// Stream follows a tenant's numbered events. It is not safe for
// concurrent use.
type Stream struct {
	l          *Log
	tenant     string
	deployment string
	kinds      map[string]map[string]bool
	after      uint64 // the last event number seen
	ended      bool   // the followed deployment's Deleted event was returned
}

// Follow returns a Stream of the tenant's events after o.After; nil o
// follows every event from the first.
func (l *Log) Follow(tenant string, o *FollowOptions) *Stream {
	s := &Stream{l: l, tenant: tenant}
	if o != nil {
		s.after, s.deployment = o.After, o.Deployment
		if len(o.Kinds) > 0 {
			s.kinds = map[string]map[string]bool{}
			for k, cs := range o.Kinds {
				s.kinds[k] = map[string]bool{}
				for _, c := range cs {
					s.kinds[k][c] = true
				}
			}
		}
	}
	return s
}

// Next returns the next entries of the stream, at least one, waiting
// until there are some. Before it reads, it numbers the tenant's events
// committed so far (Sequence). It wakes when the tenant's events commit
// through this Log (Committed) or are numbered by it, and looks in the
// store every Options.PollInterval for those of other Logs. An event
// whose predecessors were pruned since the stream last read comes after
// a gap. It returns ctx's error when ctx is done first, and io.EOF once
// the followed deployment's Deleted event has been returned.
func (s *Stream) Next(ctx context.Context) ([]Entry, error) {
	forced := false
	for {
		if s.ended {
			return nil, io.EOF
		}
		// Number the events committed so far (here or through other
		// Logs), then read.
		if err := s.l.Sequence(ctx, s.tenant); err != nil {
			return nil, err
		}
		wake, gen := s.l.wait(s.tenant)
		es, err := s.read(ctx, gen, forced)
		if err != nil || len(es) > 0 {
			return es, err
		}
		t := time.NewTimer(s.l.o.PollInterval)
		select {
		case <-wake:
			forced = false
		case <-t.C:
			forced = true // other Logs' commits wake nobody here: look
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// read returns the entries after s.after that s follows (up to ReadBatch
// events read), moving s.after past every event read. gen is the tenant's
// commit generation when s last took a wake-up channel; forced says to
// look in the store even if the shared tail is that recent.
func (s *Stream) read(ctx context.Context, gen uint64, forced bool) ([]Entry, error) {
	rs, err := s.l.tailOf(s.tenant).after(ctx, s.l, s.tenant, s.after, gen, forced)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, x := range rs {
		if x.n > s.after+1 {
			out = append(out, Entry{N: x.n - 1, LostFrom: s.after + 1})
		}
		s.after = x.n
		if !s.keeps(&x.e) {
			continue
		}
		out = append(out, Entry{N: x.n, Event: x.e})
		if s.deployment != "" && s.l.o.Deleted.matches(&x.e) {
			s.ended = true
			break
		}
	}
	return out, nil
}

// keeps reports whether s returns e.
func (s *Stream) keeps(e *Event) bool {
	if s.deployment != "" && e.Deployment != s.deployment {
		return false
	}
	if cs, ok := s.kinds[e.Kind]; ok && !cs[e.Change] {
		return false
	}
	return true
}

// Wake returns a channel closed at the tenant's next commit through this
// Log (Committed), or the next numbering of its events here. Take it
// before reading the store, so that no commit falls between the read and
// the wait.
func (l *Log) Wake(tenant string) <-chan struct{} {
	ch, _ := l.wait(tenant)
	return ch
}

// wait is Wake, and the tenant's generation: the number of such commits
// notified so far.
func (l *Log) wait(tenant string) (<-chan struct{}, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := l.waits[tenant]
	if ch == nil {
		ch = make(chan struct{})
		l.waits[tenant] = ch
	}
	return ch, l.gens[tenant]
}

// generation is the tenant's generation (wait).
func (l *Log) generation(tenant string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gens[tenant]
}

// notify wakes the tenant's followers. The generation is counted only for
// tenants someone follows (it needs no more: a tail starts at 0 too).
func (l *Log) notify(tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch := l.waits[tenant]; ch != nil {
		close(ch)
		delete(l.waits, tenant)
	}
	if _, ok := l.tails[tenant]; ok {
		l.gens[tenant]++
	}
}

// tailOf is the tenant's shared tail, made on first use.
func (l *Log) tailOf(tenant string) *tail {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tails[tenant]
	if t == nil {
		t = &tail{}
		l.tails[tenant] = t
		l.gens[tenant]++ // a read before this notify counted nothing
	}
	return t
}

// tailSize bounds the events a tail keeps.
const tailSize = ReadBatch

// tail is the newest events of a tenant read from the store, shared by
// the tenant's followers in this process: when a commit wakes them all,
// one reads the store and the others take what it read, instead of a store
// read each.
type tail struct {
	mu   sync.Mutex
	gen  uint64       // the tenant's generation when the last complete read began
	read bool         // recs holds the result of a complete read
	recs []tailRecord // consecutive numbers, oldest first
}

// tailRecord is an event read from the store, decoded.
type tailRecord struct {
	n uint64
	e Event
}

// after returns the tenant's events after number after (up to
// ReadBatch): from the tail when it is as recent as generation gen and
// covers them, else from the store, updating the tail.
func (t *tail) after(ctx context.Context, l *Log, tenant string, after, gen uint64, forced bool) ([]tailRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	covers := t.read && (len(t.recs) == 0 || t.recs[0].n <= after+1)
	if covers && !forced && t.gen >= gen {
		return t.since(after), nil
	}
	if len(t.recs) > 0 && t.recs[0].n > after+1 {
		// Behind the tail: read for this follower alone.
		return l.readEvents(ctx, tenant, after, ReadBatch)
	}
	from := after
	if t.read && len(t.recs) > 0 {
		from = max(after, t.recs[len(t.recs)-1].n)
	}
	begun := l.generation(tenant)
	rs, err := l.readEvents(ctx, tenant, from, ReadBatch)
	if err != nil {
		return nil, err
	}
	if len(rs) > 0 && (len(t.recs) == 0 || rs[0].n != t.recs[len(t.recs)-1].n+1) {
		t.recs = t.recs[:0] // not contiguous with what the tail holds: start again
	}
	t.recs = append(t.recs, rs...)
	out := rs
	if len(t.recs) > 0 && t.recs[0].n <= after+1 {
		out = t.since(after) // before the trim, which may drop some of them
	}
	if extra := len(t.recs) - tailSize; extra > 0 {
		t.recs = append(t.recs[:0], t.recs[extra:]...)
	}
	if len(rs) < ReadBatch { // the read reached the end of the log
		t.read, t.gen = true, begun
	} else {
		t.read = false
	}
	return out, nil
}

// since is the tail's records after number after, up to ReadBatch.
func (t *tail) since(after uint64) []tailRecord {
	i, _ := slices.BinarySearchFunc(t.recs, after+1, func(r tailRecord, n uint64) int { return cmp.Compare(r.n, n) })
	out := t.recs[i:min(len(t.recs), i+ReadBatch)]
	return slices.Clone(out)
}

// readEvents reads up to limit of the tenant's events after number after,
// from the store.
func (l *Log) readEvents(ctx context.Context, tenant string, after uint64, limit int) ([]tailRecord, error) {
	prefix := eventPrefix(tenant)
	var rs []tailRecord
	err := l.st.View(ctx, func(r store.Reader) error {
		rs = rs[:0]
		return r.Scan(Events, prefix, &store.ScanOptions{Start: eventKey(tenant, after+1)},
			func(k string, v []byte) (bool, error) {
				n, ok := eventNumber(prefix, k)
				if !ok {
					return true, nil
				}
				e, err := decode(v)
				if err != nil {
					return false, err
				}
				rs = append(rs, tailRecord{n, e})
				return len(rs) < limit, nil
			})
	})
	return rs, err
}
