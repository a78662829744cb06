// Package eventlog keeps each tenant's event log: events appended to an
// outbox in the caller's store transaction, numbered 1, 2, 3, ... per
// tenant by a sequencer, read by followers that wait for the next ones,
// and pruned by count and age.
//
// An Event is a kind, a change, the deployment (and revision) it is
// about, a time and opaque payload bytes. Which events a change produces,
// what a payload means and who may read the log are the caller's; the
// caller names the events that begin and end a deployment's events
// (Options.Created, Options.Deleted).
//
// Storage:
//
//	cp_event_outbox  tenant/D/<16 hex clock>/<4 hex i> -> an event not yet numbered
//	cp_event_clocks  tenant/D                          -> the deployment's last clock, decimal (absent: 0)
//	cp_events        tenant/n                          -> the tenant's last event number, decimal
//	cp_events        tenant/e/<16 hex>                 -> one numbered event
//	cp_sequencer     lease                             -> the lease's holder/Unix micros it lapses
//
// An event is stored as "1\n", then its kind, change, deployment, revision
// and time (Unix microseconds, decimal), each followed by "\n", then the
// payload.
//
// Append reads nothing that other deployments' changes write (a counter
// per tenant would make any two changes of a tenant conflict, and
// PostgreSQL commit them one at a time): the events of deployment D carry D's clock,
// which each Update with events of D advances, except the Update that
// creates D, whose clock is 0; i numbers the events of one Update.
// Numbering D's deleted event removes its clock.
//
// The sequencer takes up to 1024 events of a tenant's outbox in one
// Update, orders them (each deployment's by clock and i, between
// deployments by time), gives them the numbers after the tenant's counter
// and moves them to cp_events. Followers read only numbered events, so
// none misses an event numbered later. It runs in a follower before it
// reads, in whoever calls Sequence or SequenceAll, and in Committed every
// SequenceEvery events a Log commits, unless another Log holds the
// sequencer lease (taken for two seconds), since replicas that write at
// one pace would otherwise run it at once and make each other's runs
// fail. A Log coalesces its runs: callers at once share one run that
// began after their calls. Committed reports its runs, so that the caller
// can finish deferred work of its own at that pace and under that lease
// (the control plane folds its order counts then); the log does not know
// what that work is, so it stays the caller's.
//
// Retention: a log holds its tenant's newest Options.Retention events, no
// more. Each batch deletes, by their keys, the events its numbers push out
// of them, as many as it numbers once the log is full, in the Update that
// numbers them. A batch whose numbers reach a multiple of 64 also deletes,
// oldest first, the events older than Options.MaxAge before the newest and
// any left beyond the retention (by a Log with a larger one), up to 1024
// an Update; the run goes on with another Update at once until none is
// left. A Log's first SequenceAll does so for every tenant whose log holds
// such events, events to number or not. Deletions are Discards in the
// sequencer's own Updates: two Logs that prune at once delete the same
// keys, and the store serializes them. A Stream whose next event was
// pruned returns a gap first.
package eventlog

import (
	"bytes"
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

// The collections of the log.
const (
	// Events holds the numbered events and each tenant's counter.
	Events = "cp_events"
	// Outbox holds the events appended and not yet numbered.
	Outbox = "cp_event_outbox"
	// Clocks holds each deployment's last clock.
	Clocks = "cp_event_clocks"
	// Lease holds the sequencer lease.
	Lease = "cp_sequencer"
)

// ErrNewerFormat is wrapped by the error of a read that meets an event
// stored in a format newer than this build's.
var ErrNewerFormat = errors.New("eventlog: an event record of a newer format")

// Event is an event as appended and as read.
type Event struct {
	// Kind is what the event is about (a deployment, a revision, a log
	// line, ...). Kind, Change, Deployment and Revision hold no line
	// break.
	Kind string
	// Change is what happened to it.
	Change string
	// Deployment is the deployment whose chain of events it is in: a
	// deployment's events are numbered in the order they were appended.
	Deployment string
	// Revision is a revision it is about, or "".
	Revision string
	// At is the time of the change, stored at the microsecond; between
	// deployments, events appended at once are numbered by it.
	At time.Time
	// Payload is stored as is.
	Payload []byte
}

// Match names events by their Kind and Change. The zero Match matches
// none.
type Match struct{ Kind, Change string }

func (m Match) matches(e *Event) bool {
	return m.Kind != "" && e.Kind == m.Kind && e.Change == m.Change
}

// Options tune a Log. Zero fields take the defaults.
type Options struct {
	// Retention is how many of each tenant's newest events the log
	// keeps: no more, and no fewer unless MaxAge prunes them. Default
	// DefaultRetention.
	Retention int
	// MaxAge is how long before the tenant's newest event an event is
	// kept at most, pruned each time the tenant's numbers reach a
	// multiple of 64. Default DefaultMaxAge.
	MaxAge time.Duration
	// PollInterval is how often a Stream that waits looks in the store
	// for events committed through other Logs. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// Clock is the sequencer lease's clock. Default time.Now.
	Clock func() time.Time
	// Created is the event an Update that creates a deployment appends
	// first: the deployment's events of that Update take clock 0, and
	// no clock record is read or written. Zero: every Update reads the
	// deployment's clock.
	Created Match
	// Deleted is a deployment's last event: numbering it deletes the
	// deployment's clock, and a Stream that follows the deployment ends
	// after it. Zero: clocks are kept, and Streams do not end.
	Deleted Match
}

// The defaults of Options.
const (
	DefaultRetention    = 10000
	DefaultMaxAge       = 24 * time.Hour
	DefaultPollInterval = time.Second
)

// Log appends, numbers and serves a store's event logs. It is safe for
// concurrent use; the Logs of several processes may share one store.
type Log struct {
	st store.Store
	o  Options
	id string // the Log's name as the sequencer lease's holder

	mu    sync.Mutex
	waits map[string]chan struct{} // tenant -> closed at its next commit here
	gens  map[string]uint64        // tenant -> commits notified since its tail was made
	tails map[string]*tail         // tenant -> its followers' shared tail

	seqMu    sync.Mutex
	flights  map[string]*flight // tenant -> its sequencer runs here
	unpruned map[string]bool    // tenants whose next run prunes (SequenceAll's first)
	all      flight             // runs of SequenceAll
	swept    bool               // a run of SequenceAll has pruned every tenant (in all's runs only)

	written atomic.Int64 // events committed since the last SequenceAll began
}

// New returns the Log of st; nil o means the defaults.
func New(st store.Store, o *Options) *Log {
	l := &Log{st: st, waits: map[string]chan struct{}{}, gens: map[string]uint64{}, tails: map[string]*tail{},
		flights: map[string]*flight{}, unpruned: map[string]bool{},
		// Its own random id: a lease holder's name is nothing else's.
		id: uuid.NewString()}
	if o != nil {
		l.o = *o
	}
	if l.o.Retention <= 0 {
		l.o.Retention = DefaultRetention
	}
	if l.o.MaxAge <= 0 {
		l.o.MaxAge = DefaultMaxAge
	}
	if l.o.PollInterval <= 0 {
		l.o.PollInterval = DefaultPollInterval
	}
	if l.o.Clock == nil {
		l.o.Clock = time.Now
	}
	return l
}

// Options returns the options in force, defaults filled in.
func (l *Log) Options() Options { return l.o }

// Batch is what the appends of one Update did: the clock each
// deployment's events took, and the tenants whose events it holds. The
// zero Batch is ready. A store may run an Update's closure more than
// once: take a new Batch for each run, and pass the last one to Committed
// once the Update has committed.
type Batch struct {
	chains  map[chainKey]*chain
	tenants []string
	events  int
}

// chainKey names a deployment's chain of events in an Update.
type chainKey struct{ tenant, deployment string }

// chain is the clock an Update gave a deployment's events, and the index
// of its next event.
type chain struct {
	clock uint64
	next  uint32
}

func (b *Batch) touch(tenant string) {
	for _, x := range b.tenants {
		if x == tenant {
			return
		}
	}
	b.tenants = append(b.tenants, tenant)
}

// Append writes e as the tenant's next event of e.Deployment to the
// outbox, in tx: it commits with the change it records, or not at all,
// and the sequencer numbers it later. b, which may be nil, is the
// Update's Batch: with it, the events of one deployment in one Update
// read and write its clock once, and Committed wakes the tenant's
// followers.
func (l *Log) Append(tx store.Tx, b *Batch, tenant string, e *Event) error {
	if err := check(e); err != nil {
		return err
	}
	ck := chainKey{tenant, e.Deployment}
	var c *chain
	if b != nil {
		c = b.chains[ck]
	}
	if c == nil {
		c = &chain{}
		// The Update that creates the deployment gives its events clock
		// 0, which an absent clock record stands for: it neither reads
		// nor writes one.
		if !l.o.Created.matches(e) {
			n, err := getDecimal(tx, Clocks, clockKey(tenant, e.Deployment))
			if err != nil {
				return err
			}
			c.clock = n + 1
			if err := tx.Put(Clocks, clockKey(tenant, e.Deployment), []byte(strconv.FormatUint(c.clock, 10))); err != nil {
				return err
			}
		}
		if b != nil {
			if b.chains == nil {
				b.chains = map[chainKey]*chain{}
			}
			b.chains[ck] = c
		}
	}
	// The events of the Update that creates a deployment (clock 0) have
	// keys that hold its new id, which no record has (store.Insert); two
	// Updates that change one deployment at once may give their events
	// one key before one of them is refused for conflicting with the
	// other, so theirs are Puts.
	k, v := outboxKey(tenant, e.Deployment, c.clock, c.next), encode(e)
	var err error
	if c.clock == 0 {
		err = store.Insert(tx, Outbox, k, v)
	} else {
		err = tx.Put(Outbox, k, v)
	}
	if err != nil {
		return err
	}
	c.next++
	if b != nil {
		b.touch(tenant)
		b.events++
	}
	return nil
}

// Committed is for the Update whose Batch b is, once it has committed: it
// wakes the followers in this process of the tenants whose events b holds.
// Once this Log has committed SequenceEvery events since its last
// SequenceAll began, it claims the sequencer lease and, unless another
// Log holds it, runs SequenceAll; ran reports that it did (even when the
// run failed, with its error). The events wait in the outbox for a later
// run when it did not.
func (l *Log) Committed(ctx context.Context, b *Batch) (ran bool, err error) {
	if b == nil {
		return false, nil
	}
	for _, t := range b.tenants {
		l.notify(t)
	}
	if b.events == 0 || l.written.Add(int64(b.events)) < SequenceEvery {
		return false, nil
	}
	l.written.Store(0)
	held, err := l.claimLease(ctx)
	if err != nil || !held {
		return false, err
	}
	return true, l.SequenceAll(ctx)
}

// check refuses an event that encode could not write.
func check(e *Event) error {
	for _, f := range [...]string{e.Kind, e.Change, e.Deployment, e.Revision} {
		if e.Kind == "" || strings.IndexByte(f, '\n') >= 0 {
			return fmt.Errorf("eventlog: an event of kind %q, change %q, deployment %q, revision %q: no kind, or a line break",
				e.Kind, e.Change, e.Deployment, e.Revision)
		}
	}
	return nil
}

// encode is the stored form of e.
func encode(e *Event) []byte {
	head := "1\n" + e.Kind + "\n" + e.Change + "\n" + e.Deployment + "\n" + e.Revision + "\n" + strconv.FormatInt(e.At.UnixMicro(), 10) + "\n"
	return append([]byte(head), e.Payload...)
}

// decode reads an event's stored form; Payload shares b's bytes.
func decode(b []byte) (Event, error) {
	var f [6]string
	rest := b
	for i := range f {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return Event{}, errors.New("eventlog: a malformed event record")
		}
		f[i], rest = string(rest[:j]), rest[j+1:]
	}
	if f[0] != "1" {
		return Event{}, fmt.Errorf("eventlog: an event record of format %q, newer than this build: %w", f[0], ErrNewerFormat)
	}
	at, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return Event{}, errors.New("eventlog: a malformed event record")
	}
	return Event{Kind: f[1], Change: f[2], Deployment: f[3], Revision: f[4], At: time.UnixMicro(at).UTC(), Payload: rest}, nil
}

func counterKey(tenant string) string           { return tenant + "/n" }
func eventPrefix(tenant string) string          { return tenant + "/e/" }
func eventKey(tenant string, n uint64) string   { return fmt.Sprintf("%s/e/%016x", tenant, n) }
func clockKey(tenant, deployment string) string { return tenant + "/" + deployment }

// outboxKey is the key of the i-th event of a deployment's change whose
// clock is clock.
func outboxKey(tenant, deployment string, clock uint64, i uint32) string {
	return fmt.Sprintf("%s/%s/%016x/%04x", tenant, deployment, clock, i)
}

// eventNumber is the number of an event key of the tenant's prefix.
func eventNumber(prefix, k string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(k, prefix), 16, 64)
	return n, err == nil
}

// Head is the number of the tenant's last numbered event (0: none yet).
func Head(r store.Reader, tenant string) (uint64, error) {
	return getDecimal(r, Events, counterKey(tenant))
}

// getDecimal reads a decimal counter (0 when absent).
func getDecimal(r store.Reader, col, k string) (uint64, error) {
	b, err := r.Get(col, k)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("eventlog: malformed counter %s %q", col, b)
	}
	return n, nil
}

// Deleted reports whether the deployment's Deleted event (Options.Deleted)
// is among the tenant's numbered events after number after.
func (l *Log) Deleted(r store.Reader, tenant, deployment string, after uint64) (bool, error) {
	var deleted bool
	err := r.Scan(Events, eventPrefix(tenant), &store.ScanOptions{Start: eventKey(tenant, after+1)}, func(k string, v []byte) (bool, error) {
		e, err := decode(v)
		deleted = err == nil && l.o.Deleted.matches(&e) && e.Deployment == deployment
		return !deleted, nil
	})
	return deleted, err
}
