package controlplane

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
)

// The event log (wire contract section 9: GET /v2/events and
// /v2/deployments/{deployment_id}/events). Every change of a deployment or
// a revision writes its events in the same Update as the change
// (putDeployment, removeDeployment and putRevision call deploymentEvent
// and revisionEvent), so an event exists if and only if its change
// committed. The change does not number them: it writes them to an outbox,
// and a sequencer (sequencer.go) numbers them later, in batches. Layout:
//
//	cp_event_outbox  tenant/D/<16 hex clock>/<4 hex i> -> an event not yet numbered (eventRecord.encode)
//	cp_event_clocks  tenant/D                       -> the deployment's last clock, decimal (absent: 0)
//	cp_events        tenant/n                       -> the tenant's last event number, decimal
//	cp_events        tenant/e/<16 hex>              -> one numbered event (eventRecord.encode)
//
// Why an outbox: when every change read and wrote the tenant's counter,
// every two changes of a tenant conflicted, and PostgreSQL (storepg)
// committed them one at a time. A change now reads nothing that other
// deployments' changes write: the events of deployment D carry D's clock,
// which every Update with events of D reads and advances (changes of one
// deployment conflict anyway), except the Update that creates D, which
// knows it is 0 and neither reads nor writes the clock record (an absent
// record stands for 0, so a create writes one record fewer); i numbers
// the events of one Update. So
// the outbox keeps each deployment's events in the order of its changes.
// The sequencer deletes a deployment's clock when it numbers the
// deployment's deleted event, the last it has.
//
// The sequencer (sequenceTenant) takes the outbox of a tenant, up to
// seqBatch events, in one Update: it orders them (each deployment's by
// clock and i; between deployments by the events' times), gives them the
// numbers after the tenant's counter, moves them to cp_events and
// advances the counter. Numbers are thus 1, 2, 3, ... per tenant, dense,
// and a batch's numbers follow every earlier batch's: an event committed
// after a batch was taken gets a larger number than all of that batch's.
// Followers read only numbered events, so a follower never misses an
// event that is given a smaller number later. Sequencer runs of two
// replicas conflict on the counter, and the stores' serializable
// transactions let one of them commit first: numbers stay dense across
// replicas. Their decimal form is the SSE id.
//
// Who runs the sequencer: a follower before it reads (FollowEvents, and
// Next each time it looks), so what it reads includes every event
// committed before it looked; Run at each of its wake-ups and polls; and
// the process that has written eventSeqEvery events since its last run,
// so that the outbox stays short when nobody follows and nothing runs.
// Within a process, runs for a tenant are coalesced (seqFlight): a caller
// waits for a run that began after its call, and shares it with the
// callers that came meanwhile.
//
// Retention: a sequencer batch whose numbers reach a multiple of
// eventPruneBatch deletes, oldest first, up to 2*eventPruneBatch events
// that are beyond the tenant's newest EventRetention or older than
// EventMaxAge. A follower whose next event was pruned gets an EventGap
// event first.
//
// A deployment event stores the deployment in its storage form (secrets
// sealed as in cp_deployments) and is turned into its wire JSON when read;
// a revision event stores the revision's wire JSON (which has no secrets);
// a log event stores the log line's wire JSON.
const (
	colEvents      = "cp_events"
	colEventOutbox = "cp_event_outbox"
	colEventClocks = "cp_event_clocks"
)

// Event names (the SSE event field).
const (
	// EventDeployment is a change of a deployment; its data is
	// {"change", "deployment_id", "deployment"} ("deployment" is the wire
	// JSON GET answers, absent when change is "deleted").
	EventDeployment = "deployment"
	// EventRevision is a change of a revision; its data is {"change",
	// "deployment_id", "revision_id", "revision"} (the wire JSON GET
	// answers).
	EventRevision = "revision"
	// EventLog is a log line of a revision, sent only to followers that
	// ask for its type (FollowOptions.Logs); its data is {"type",
	// "deployment_id", "revision_id", "log"}.
	EventLog = "log"
	// EventGap tells a follower that events it has not seen are no longer
	// retained: it should read the resources it follows again. Its data is
	// {"detail"}; its id is that of the last event lost.
	EventGap = "gap"
)

// The changes of deployment and revision events (their data's "change").
const (
	ChangeCreated = "created"
	ChangeUpdated = "updated" // a change that leaves the status as it was
	ChangeStatus  = "status"  // the status changed (with whatever else changed)
	ChangeDeleted = "deleted" // a deployment removed with its revisions (after AWAITING_DELETE)
)

// Defaults of the event Options.
const (
	DefaultEventRetention    = 10000
	DefaultEventMaxAge       = 24 * time.Hour
	DefaultEventPollInterval = time.Second
)

// eventPruneBatch: every eventPruneBatch-th append of a tenant prunes.
const eventPruneBatch = 64

// eventReadBatch caps the events one Next returns.
const eventReadBatch = 256

// Event is one event of a tenant's log, ready for an SSE stream.
type Event struct {
	// ID is the event's id: opaque to clients, increasing: a deployment's
	// events (its revisions' included) in the order of its changes, and
	// an event committed after another was given its id gets a larger
	// one. A follower resumes after it (LastEventID).
	ID string
	// Name is EventDeployment, EventRevision, EventLog or EventGap.
	Name string
	// Data is the event's JSON, on one line.
	Data []byte
}

// eventRecord is an event as cp_events stores it.
type eventRecord struct {
	kind       string // EventDeployment, EventRevision, EventLog
	change     string // a Change* for deployments and revisions, the log type for logs
	deployment string
	revision   string // "" for deployment events
	at         int64  // Unix microseconds of the ControlPlane's clock
	payload    []byte
}

// encode is "1\n" kind, change, deployment, revision and at, each followed
// by "\n", then the payload.
func (e *eventRecord) encode() []byte {
	head := "1\n" + e.kind + "\n" + e.change + "\n" + e.deployment + "\n" + e.revision + "\n" + strconv.FormatInt(e.at, 10) + "\n"
	return append([]byte(head), e.payload...)
}

func decodeEventRecord(b []byte) (eventRecord, error) {
	var e eventRecord
	var f [6]string
	rest := b
	for i := range f {
		j := bytes.IndexByte(rest, '\n')
		if j < 0 {
			return e, errors.New("controlplane: a malformed event record")
		}
		f[i], rest = string(rest[:j]), rest[j+1:]
	}
	if f[0] != "1" {
		return e, fmt.Errorf("controlplane: an event record of format %q, newer than this build: %w", f[0], ErrNewerRecord)
	}
	at, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return e, errors.New("controlplane: a malformed event record")
	}
	return eventRecord{kind: f[1], change: f[2], deployment: f[3], revision: f[4], at: at, payload: rest}, nil
}

func eventCounterKey(tenant string) string    { return tenant + "/n" }
func eventPrefix(tenant string) string        { return tenant + "/e/" }
func eventKey(tenant string, n uint64) string { return fmt.Sprintf("%s/e/%016x", tenant, n) }

// eventNumber is the number of an event key of the tenant's prefix.
func eventNumber(prefix, k string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(k, prefix), 16, 64)
	return n, err == nil
}

// lastEvent is the number of the tenant's last event (0: none yet).
func lastEvent(r store.Reader, tenant string) (uint64, error) {
	b, err := r.Get(colEvents, eventCounterKey(tenant))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(b), 10, 64)
}

// deploymentEvent appends the event of putDeployment(tx, tenant, old, r):
// created when old is nil, status when the status changes, else updated.
// stored is r's storage form as putDeployment writes it (secrets sealed),
// which the event keeps rather than sealing the record a second time.
func (cp *ControlPlane) deploymentEvent(tx store.Tx, tenant string, old, r *deploymentRecord, stored []byte) error {
	change := ChangeUpdated
	switch {
	case old == nil:
		change = ChangeCreated
	case old.Status != r.Status:
		change = ChangeStatus
	}
	return cp.appendEvent(tx, tenant, &eventRecord{kind: EventDeployment, change: change, deployment: r.ID,
		at: micros(r.UpdatedAt), payload: stored})
}

// deploymentDeletedEvent appends the event of removeDeployment.
func (cp *ControlPlane) deploymentDeletedEvent(tx store.Tx, tenant string, r *deploymentRecord) error {
	return cp.appendEvent(tx, tenant, &eventRecord{kind: EventDeployment, change: ChangeDeleted, deployment: r.ID,
		at: micros(r.UpdatedAt)})
}

// revisionEvent appends the event of putRevision(tx, tenant, rev, isNew),
// before the revision is written: created when new, status when its stored
// status differs, else updated.
func (cp *ControlPlane) revisionEvent(tx store.Tx, tenant string, rev *revisionRecord, isNew bool) error {
	change := ChangeCreated
	if !isNew {
		change = ChangeUpdated
		old, err := cp.getRevision(tx, tenant, rev.DeploymentID, rev.ID)
		if err != nil {
			return err
		}
		if old.Status != rev.Status {
			change = ChangeStatus
		}
	}
	b, err := json.Marshal(rev.wire()) // the answer form: both config path names
	if err != nil {
		return err
	}
	return cp.appendEvent(tx, tenant, &eventRecord{kind: EventRevision, change: change, deployment: rev.DeploymentID,
		revision: rev.ID, at: micros(rev.UpdatedAt), payload: b})
}

// logEvent appends a log line of a revision (logType LogBuild or
// LogDeploy; line is the line's wire JSON, at its time) to the tenant's
// event log, in the caller's Update. Followers that asked for logType
// receive it.
func (cp *ControlPlane) logEvent(tx store.Tx, tenant, deploymentID, revisionID string, logType LogType, at time.Time, line []byte) error {
	return cp.appendEvent(tx, tenant, &eventRecord{kind: EventLog, change: string(logType), deployment: deploymentID,
		revision: revisionID, at: at.UnixMicro(), payload: line})
}

// appendEvent writes e as the tenant's next event of e.deployment to the
// outbox, in tx: it commits with the change it records, or not at all, and
// the sequencer numbers it later. e.at is the change's time (the
// resource's updated_at): the clock is not read. The Update that creates
// a deployment (its created event) reads and writes no clock: its clock
// is 0.
// The tenant's followers in this process are woken once the Update has
// committed.
func (cp *ControlPlane) appendEvent(tx store.Tx, tenant string, e *eventRecord) error {
	et, _ := tx.(*eventTx)
	var c *eventChain
	if et != nil {
		c = et.chains[eventChainKey{tenant, e.deployment}]
	}
	if c == nil {
		c = &eventChain{}
		// The Update that creates the deployment gives its events clock
		// 0, which an absent clock record stands for: it neither reads
		// nor writes one.
		if created := e.kind == EventDeployment && e.change == ChangeCreated; !created {
			n, err := getDecimal(tx, colEventClocks, eventClockKey(tenant, e.deployment))
			if err != nil {
				return err
			}
			c.clock = n + 1
			if err := tx.Put(colEventClocks, eventClockKey(tenant, e.deployment), []byte(strconv.FormatUint(c.clock, 10))); err != nil {
				return err
			}
		}
		if et != nil {
			if et.chains == nil {
				et.chains = map[eventChainKey]*eventChain{}
			}
			et.chains[eventChainKey{tenant, e.deployment}] = c
		}
	}
	// The events of the Update that creates a deployment (clock 0) have
	// keys that hold its new id, which no record has (store.Insert); two
	// Updates that change one deployment at once may give their events
	// one key before one of them is refused for conflicting with the
	// other, so theirs are Puts.
	if err := writer(tx, c.clock == 0)(colEventOutbox, outboxKey(tenant, e.deployment, c.clock, c.next), e.encode()); err != nil {
		return err
	}
	c.next++
	if et != nil {
		et.touch(tenant)
		et.events++
	}
	return nil
}

// eventChainKey names a deployment's chain of events in an Update.
type eventChainKey struct{ tenant, deployment string }

// eventChain is the clock an Update gave a deployment's events, and the
// index of its next event.
type eventChain struct {
	clock uint64
	next  uint32
}

func eventClockKey(tenant, deployment string) string { return tenant + "/" + deployment }

// outboxKey is the key of the i-th event of a deployment's change whose
// clock is clock.
func outboxKey(tenant, deployment string, clock uint64, i uint32) string {
	return fmt.Sprintf("%s/%s/%016x/%04x", tenant, deployment, clock, i)
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
		return 0, fmt.Errorf("controlplane: malformed counter %s %q", col, b)
	}
	return n, nil
}

// pruneEvents deletes, oldest first, up to 2*eventPruneBatch events of the
// tenant that are beyond the newest EventRetention (last is the newest's
// number) or more than EventMaxAge older than now (Unix microseconds, the
// newest's time).
func (cp *ControlPlane) pruneEvents(tx store.Tx, tenant string, last uint64, now int64) error {
	var keep uint64 // events numbered keep or less go
	if last > uint64(cp.ev.retention) {
		keep = last - uint64(cp.ev.retention)
	}
	cutoff := now - cp.ev.maxAge.Microseconds()
	prefix := eventPrefix(tenant)
	var old []string
	err := tx.Scan(colEvents, prefix, nil, func(k string, v []byte) (bool, error) {
		n, ok := eventNumber(prefix, k)
		if ok && n > keep {
			e, err := decodeEventRecord(v)
			if err == nil && e.at >= cutoff {
				return false, nil
			}
		}
		old = append(old, k)
		return len(old) < 2*eventPruneBatch, nil
	})
	if err != nil {
		return err
	}
	// Discards, not Deletes: the keys were just read, and a store may
	// send a run of Discards at once where each Delete waits for its
	// answer (storepg: 128 round trips a prune).
	for _, k := range old {
		if err := store.Discard(tx, colEvents, k); err != nil {
			return err
		}
	}
	return nil
}

// eventLog is a ControlPlane's side of the event log: its options, the
// followers' wake-ups, and the rendered data of recent events.
type eventLog struct {
	retention int
	maxAge    time.Duration
	poll      time.Duration

	mu    sync.Mutex
	waits map[string]chan struct{} // tenant -> closed at its next commit here
	gens  map[string]uint64        // tenant -> commits notified since its tail was made
	tails map[string]*eventTail    // tenant -> its followers' shared tail
	cache map[eventCacheKey][]byte // rendered Data of recent events
	ring  []eventCacheKey          // cache keys, oldest replaced first
	next  int
}

type eventCacheKey struct {
	tenant string
	n      uint64
}

// eventCacheSize bounds the rendered events kept for followers that read
// the same events (every follower of a tenant decodes each deployment
// event once per process, not once per follower).
const eventCacheSize = 1024

func newEventLog(o *Options) *eventLog {
	l := &eventLog{retention: o.EventRetention, maxAge: o.EventMaxAge, poll: o.EventPollInterval,
		waits: map[string]chan struct{}{}, gens: map[string]uint64{}, tails: map[string]*eventTail{}, cache: map[eventCacheKey][]byte{}, ring: make([]eventCacheKey, eventCacheSize)}
	if l.retention <= 0 {
		l.retention = DefaultEventRetention
	}
	if l.maxAge <= 0 {
		l.maxAge = DefaultEventMaxAge
	}
	if l.poll <= 0 {
		l.poll = DefaultEventPollInterval
	}
	return l
}

// wait returns a channel closed at the tenant's next commit through this
// ControlPlane, and the tenant's generation: the number of such commits
// notified so far. Take them before reading the store, so that no commit
// falls between the read and the wait.
func (l *eventLog) wait(tenant string) (<-chan struct{}, uint64) {
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
func (l *eventLog) generation(tenant string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gens[tenant]
}

// notify wakes the tenant's followers. The generation is counted only for
// tenants someone follows (it needs no more: a tail starts at 0 too).
func (l *eventLog) notify(tenant string) {
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
func (l *eventLog) tailOf(tenant string) *eventTail {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.tails[tenant]
	if t == nil {
		t = &eventTail{}
		l.tails[tenant] = t
		l.gens[tenant]++ // a read before this notify counted nothing
	}
	return t
}

// eventTailSize bounds the events a tail keeps (a follower further behind
// reads the store alone).
const eventTailSize = eventReadBatch

// eventTail is the newest events of a tenant read from the store, shared
// by the tenant's followers in this process: when a commit wakes them all,
// one reads the store and the others take what it read, instead of a store
// read each.
type eventTail struct {
	mu   sync.Mutex
	gen  uint64       // the tenant's generation when the last complete read began
	read bool         // recs holds the result of a complete read
	recs []tailRecord // consecutive numbers, oldest first
}

// tailRecord is an event read from the store, decoded.
type tailRecord struct {
	n uint64
	e eventRecord
}

// after returns the tenant's events after number after (up to
// eventReadBatch): from the tail when it is as recent as generation gen and
// covers them, else from the store, updating the tail.
func (t *eventTail) after(ctx context.Context, cp *ControlPlane, tenant string, after, gen uint64, forced bool) ([]tailRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	covers := t.read && (len(t.recs) == 0 || t.recs[0].n <= after+1)
	if covers && !forced && t.gen >= gen {
		return t.since(after), nil
	}
	if len(t.recs) > 0 && t.recs[0].n > after+1 {
		// Behind the tail: read for this follower alone.
		return readEvents(ctx, cp, tenant, after, eventReadBatch)
	}
	from := after
	if t.read && len(t.recs) > 0 {
		from = max(after, t.recs[len(t.recs)-1].n)
	}
	begun := cp.ev.generation(tenant)
	rs, err := readEvents(ctx, cp, tenant, from, eventReadBatch)
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
	if extra := len(t.recs) - eventTailSize; extra > 0 {
		t.recs = append(t.recs[:0], t.recs[extra:]...)
	}
	if len(rs) < eventReadBatch { // the read reached the end of the log
		t.read, t.gen = true, begun
	} else {
		t.read = false
	}
	return out, nil
}

// since is the tail's records after number after, up to eventReadBatch.
func (t *eventTail) since(after uint64) []tailRecord {
	i, _ := slices.BinarySearchFunc(t.recs, after+1, func(r tailRecord, n uint64) int { return cmp.Compare(r.n, n) })
	out := t.recs[i:min(len(t.recs), i+eventReadBatch)]
	return slices.Clone(out)
}

// readEvents reads up to limit of the tenant's events after number after,
// from the store.
func readEvents(ctx context.Context, cp *ControlPlane, tenant string, after uint64, limit int) ([]tailRecord, error) {
	prefix := eventPrefix(tenant)
	var rs []tailRecord
	err := cp.st.View(ctx, func(r store.Reader) error {
		rs = rs[:0]
		return r.Scan(colEvents, prefix, &store.ScanOptions{Start: eventKey(tenant, after+1)},
			func(k string, v []byte) (bool, error) {
				n, ok := eventNumber(prefix, k)
				if !ok {
					return true, nil
				}
				e, err := decodeEventRecord(v)
				if err != nil {
					return false, err
				}
				rs = append(rs, tailRecord{n, e})
				return len(rs) < limit, nil
			})
	})
	if err != nil {
		return nil, cp.storeErr("read events", err)
	}
	return rs, nil
}

func (l *eventLog) cached(k eventCacheKey) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.cache[k]
	return b, ok
}

func (l *eventLog) remember(k eventCacheKey, b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.cache[k]; ok {
		return
	}
	delete(l.cache, l.ring[l.next])
	l.ring[l.next] = k
	l.next = (l.next + 1) % len(l.ring)
	l.cache[k] = b
}

// eventStore is the ControlPlane's store: st, with the tenants whose
// events an Update wrote woken once it has committed, and the sequencer
// run once this process has written eventSeqEvery events since its last
// run.
type eventStore struct {
	store.Store
	log     *eventLog
	seq     *sequencer
	tenants *tenantCache
}

func (s eventStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var tx eventTx
	err := s.Store.Update(ctx, func(t store.Tx) error {
		tx = eventTx{Tx: t} // the closure may run more than once
		return fn(&tx)
	})
	if err == nil {
		for t, p := range tx.prefixes {
			s.tenants.put(t, p) // committed now
		}
		for _, t := range tx.tenants {
			s.log.notify(t)
		}
		if tx.events > 0 && s.seq != nil {
			s.seq.wrote(ctx, tx.events)
		}
	}
	return err
}

// eventTx is the Tx of an eventStore Update: it notes the tenants whose
// events it wrote, how many, and the clocks it gave deployments.
type eventTx struct {
	store.Tx
	tenants []string
	events  int
	chains  map[eventChainKey]*eventChain
	// prefixes are the tenant prefixes the Update read or assigned.
	prefixes map[string]string
}

// Discard passes a Discard on to the store's Tx (store.Discard), which
// the embedded Tx alone would hide.
func (t *eventTx) Discard(collection, key string) error {
	return store.Discard(t.Tx, collection, key)
}

// Insert passes an Insert on to the store's Tx (store.Insert), which the
// embedded Tx alone would hide.
func (t *eventTx) Insert(collection, key string, value []byte) error {
	return store.Insert(t.Tx, collection, key, value)
}

// prefix is the tenant's prefix if the Update has read or assigned it.
func (t *eventTx) prefix(tenant string) (string, bool) {
	if t == nil {
		return "", false
	}
	p, ok := t.prefixes[tenant]
	return p, ok
}

// notePrefix remembers the tenant's prefix for the rest of the Update, and
// for the tenant cache once the Update has committed.
func (t *eventTx) notePrefix(tenant, p string) {
	if t == nil {
		return
	}
	if t.prefixes == nil {
		t.prefixes = map[string]string{}
	}
	t.prefixes[tenant] = p
}

func (t *eventTx) touch(tenant string) {
	for _, x := range t.tenants {
		if x == tenant {
			return
		}
	}
	t.tenants = append(t.tenants, tenant)
}

// FollowOptions say which events FollowEvents follows, and from where.
type FollowOptions struct {
	// DeploymentID follows one deployment's events (its own and its
	// revisions'); "" follows the tenant's whole log.
	DeploymentID string
	// LastEventID resumes after the event with this id (an SSE client's
	// Last-Event-ID): the stream continues with the next retained event,
	// with no gap and no duplicate while the events after it are
	// retained, else with an EventGap event first. An id this log never
	// gave is a gap too. "" starts with the events committed after
	// FollowEvents returns.
	LastEventID string
	// Logs lists the log types (LogBuild, LogDeploy) whose log events to
	// include; none by default.
	Logs []LogType
}

// EventStream is a follower of a tenant's event log, made by
// FollowEvents. It is not safe for concurrent use.
type EventStream struct {
	cp         *ControlPlane
	tenant     string
	deployment string
	logs       map[string]bool
	after      uint64  // the last event number seen
	pending    []Event // to return before reading (a gap found when following)
	ended      bool    // the followed deployment's deleted event was returned
}

// FollowEvents starts following the tenant's event log (or one
// deployment's events, with o.DeploymentID), from the end or after
// o.LastEventID. Errors: *apierr.NotFoundError when the deployment does
// not exist (unless its deleted event is retained after o.LastEventID: a
// client reconnecting after the deployment was removed then receives the
// events it missed, the deleted event last, and the stream ends);
// *apierr.ValidationError for an unknown log type (loc ["query", "logs"]).
func (cp *ControlPlane) FollowEvents(ctx context.Context, tenant string, o *FollowOptions) (*EventStream, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if o == nil {
		o = &FollowOptions{}
	}
	s := &EventStream{cp: cp, tenant: tenant, logs: map[string]bool{}}
	for _, t := range o.Logs {
		if t != LogBuild && t != LogDeploy {
			return nil, apierr.Validation(apierr.Problem{Loc: []any{"query", "logs"}, Type: apierr.TypeLiteralError,
				Msg: "Input should be a comma-separated list of 'build' and 'deploy'"})
		}
		s.logs[string(t)] = true
	}
	if o.DeploymentID != "" {
		id, ok := pathID(o.DeploymentID)
		if !ok {
			return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: o.DeploymentID}
		}
		s.deployment = id
	}
	// Number what committed before this call, so that the head read
	// below follows it.
	if err := cp.seq.tenant(ctx, tenant); err != nil {
		return nil, cp.storeErr("follow events", err)
	}
	resume, resumeErr := strconv.ParseUint(o.LastEventID, 10, 64)
	var head uint64
	var exists, deleted bool
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		if head, err = lastEvent(r, tenant); err != nil {
			return err
		}
		if s.deployment == "" {
			return nil
		}
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		_, err = r.Get(colDeployments, deploymentKey(tp, s.deployment))
		exists = err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if exists || resumeErr != nil || resume >= head {
			return nil
		}
		// Removed: is its deleted event among those after the client's?
		prefix := eventPrefix(tenant)
		return r.Scan(colEvents, prefix, &store.ScanOptions{Start: eventKey(tenant, resume+1)}, func(k string, v []byte) (bool, error) {
			e, err := decodeEventRecord(v)
			deleted = err == nil && e.kind == EventDeployment && e.change == ChangeDeleted && e.deployment == s.deployment
			return !deleted, nil
		})
	})
	if err != nil {
		return nil, cp.storeErr("follow events", err)
	}
	known := o.LastEventID != "" && resumeErr == nil && resume <= head
	if s.deployment != "" && !exists && !deleted {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: s.deployment}
	}
	switch {
	case o.LastEventID == "":
		s.after = head
	case known:
		s.after = resume
	default:
		s.after = head
		s.pending = []Event{gapEvent(head, "The Last-Event-ID is not one of this event log's ids; events may have been missed.")}
	}
	return s, nil
}

// gapEvent tells a follower that events up to last may have been missed.
func gapEvent(last uint64, detail string) Event {
	b, _ := json.Marshal(struct {
		Detail string `json:"detail"`
	}{detail})
	return Event{ID: strconv.FormatUint(last, 10), Name: EventGap, Data: b}
}

// Next returns the next events of the stream, at least one, waiting until
// there are some: it wakes when the tenant's events commit through this
// ControlPlane, and looks in the store every EventPollInterval for those
// other replicas commit. It returns ctx's error when ctx is done first,
// and io.EOF once the followed deployment's deleted event has been
// returned (nothing can follow it).
func (s *EventStream) Next(ctx context.Context) ([]Event, error) {
	if len(s.pending) > 0 {
		out := s.pending
		s.pending = nil
		return out, nil
	}
	forced := false
	for {
		if s.ended {
			return nil, io.EOF
		}
		// Number the events committed so far (here or in other
		// replicas), then read.
		if err := s.cp.seq.tenant(ctx, s.tenant); err != nil {
			return nil, s.cp.storeErr("read events", err)
		}
		wake, gen := s.cp.ev.wait(s.tenant)
		evs, err := s.read(ctx, gen, forced)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		t := time.NewTimer(s.cp.ev.poll)
		select {
		case <-wake:
			forced = false
		case <-t.C:
			forced = true // other replicas' commits wake nobody here: look
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// read returns the events after s.after that s follows (up to
// eventReadBatch read), moving s.after past every event read. gen is the
// tenant's commit generation when s last took a wake-up channel; forced
// says to look in the store even if the shared tail is that recent.
func (s *EventStream) read(ctx context.Context, gen uint64, forced bool) ([]Event, error) {
	rs, err := s.cp.ev.tailOf(s.tenant).after(ctx, s.cp, s.tenant, s.after, gen, forced)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, x := range rs {
		if x.n > s.after+1 {
			out = append(out, gapEvent(x.n-1, fmt.Sprintf(
				"Events %d to %d are no longer retained; read the resources again.", s.after+1, x.n-1)))
		}
		s.after = x.n
		e := &x.e
		if s.deployment != "" && e.deployment != s.deployment || e.kind == EventLog && !s.logs[e.change] {
			continue
		}
		data, err := s.cp.renderEvent(s.tenant, x.n, e)
		if err != nil {
			return nil, err
		}
		out = append(out, Event{ID: strconv.FormatUint(x.n, 10), Name: e.kind, Data: data})
		if s.deployment != "" && e.kind == EventDeployment && e.change == ChangeDeleted {
			s.ended = true
			break
		}
	}
	return out, nil
}

// renderEvent is the Data of the tenant's event n.
func (cp *ControlPlane) renderEvent(tenant string, n uint64, e *eventRecord) ([]byte, error) {
	ck := eventCacheKey{tenant, n}
	if b, ok := cp.ev.cached(ck); ok {
		return b, nil
	}
	var v any
	switch e.kind {
	case EventDeployment:
		d := struct {
			Change       string      `json:"change"`
			DeploymentID string      `json:"deployment_id"`
			Deployment   *Deployment `json:"deployment,omitempty"`
		}{Change: e.change, DeploymentID: e.deployment}
		if e.change != ChangeDeleted {
			rec, err := cp.secrets.decodeDeployment(e.payload, tenant, e.deployment)
			if err != nil {
				return nil, err
			}
			d.Deployment = rec.wire()
		}
		v = d
	case EventRevision:
		v = struct {
			Change       string          `json:"change"`
			DeploymentID string          `json:"deployment_id"`
			RevisionID   string          `json:"revision_id"`
			Revision     json.RawMessage `json:"revision"`
		}{e.change, e.deployment, e.revision, e.payload}
	case EventLog:
		v = struct {
			Type         string          `json:"type"`
			DeploymentID string          `json:"deployment_id"`
			RevisionID   string          `json:"revision_id"`
			Log          json.RawMessage `json:"log"`
		}{e.change, e.deployment, e.revision, e.payload}
	default:
		return nil, fmt.Errorf("controlplane: an event of unknown kind %q", e.kind)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	cp.ev.remember(ck, b)
	return b, nil
}

// MaxWaitTimeout is the longest a WaitRevision waits (wire contract
// section 9: S <= 60).
const MaxWaitTimeout = 60

// DefaultWaitTimeout is the timeout of a WaitRevisionQuery without one.
const DefaultWaitTimeout = 30

// WaitRevisionQuery is the query of GET
// /v2/deployments/{deployment_id}/revisions/{revision_id}?wait=terminal.
type WaitRevisionQuery struct {
	// Wait is what to wait for: "terminal" (the only value), a status
	// IsTerminal reports.
	Wait string
	// Timeout is how many seconds to wait at most, 0 to MaxWaitTimeout;
	// nil means DefaultWaitTimeout.
	Timeout *int
}

// Validate reports the query's problems as a *apierr.ValidationError at
// ["query", "wait"] and ["query", "timeout"].
func (q *WaitRevisionQuery) Validate() error {
	var ps []apierr.Problem
	if q.Wait != "terminal" {
		ps = append(ps, apierr.Problem{Loc: []any{"query", "wait"}, Type: apierr.TypeLiteralError, Msg: "Input should be 'terminal'"})
	}
	if t := q.Timeout; t != nil {
		switch {
		case *t < 0:
			ps = append(ps, apierr.Problem{Loc: []any{"query", "timeout"}, Type: apierr.TypeGreaterThanEqual,
				Msg: "Input should be greater than or equal to 0"})
		case *t > MaxWaitTimeout:
			ps = append(ps, apierr.Problem{Loc: []any{"query", "timeout"}, Type: apierr.TypeLessThanEqual,
				Msg: fmt.Sprintf("Input should be less than or equal to %d", MaxWaitTimeout)})
		}
	}
	return apierr.Validation(ps...)
}

// WaitRevision answers like GetRevision once the revision's status is
// terminal (IsTerminal), or as it is when q's timeout has passed. It wakes
// when the tenant's changes commit through this ControlPlane and looks in
// the store every EventPollInterval for those of other replicas. Errors:
// those of GetRevision, *apierr.ValidationError for a bad q, and ctx's
// error when ctx is done first.
func (cp *ControlPlane) WaitRevision(ctx context.Context, tenant, deploymentID, revisionID string, q *WaitRevisionQuery) (*Revision, error) {
	if q == nil {
		q = &WaitRevisionQuery{Wait: "terminal"}
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	timeout := DefaultWaitTimeout
	if q.Timeout != nil {
		timeout = *q.Timeout
	}
	deadline := time.NewTimer(time.Duration(timeout) * time.Second)
	defer deadline.Stop()
	for {
		wake, _ := cp.ev.wait(tenant)
		rev, err := cp.GetRevision(ctx, tenant, deploymentID, revisionID)
		if err != nil || IsTerminal(rev.Status) {
			return rev, err
		}
		t := time.NewTimer(cp.ev.poll)
		select {
		case <-wake:
		case <-t.C:
		case <-deadline.C:
			t.Stop()
			return cp.GetRevision(ctx, tenant, deploymentID, revisionID)
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}
