package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/eventlog"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// The event log (wire contract section 9: GET /v2/events and
// /v2/deployments/{deployment_id}/events). Every change of a deployment or
// a revision writes its events in the same Update as the change
// (putDeployment, removeDeployment and putRevision call deploymentEvent
// and revisionEvent), so an event exists if and only if its change
// committed. How events are kept, numbered, followed and pruned is
// controlplane/internal/eventlog's (the outbox, the sequencer and its
// lease); this file says which events a change produces, turns them into
// their wire form, and checks what a follower may ask for.
//
// A deployment event stores the deployment in its storage form (secrets
// sealed as in cp_deployments) and is turned into its wire JSON when read;
// a revision event stores the revision's wire JSON (which has no secrets);
// a log event stores the log line's wire JSON, and its change is the log
// type.

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
	DefaultEventRetention    = eventlog.DefaultRetention
	DefaultEventMaxAge       = eventlog.DefaultMaxAge
	DefaultEventPollInterval = eventlog.DefaultPollInterval
)

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

// newEventLog is the event log of a ControlPlane over st with options o:
// a deployment's created event begins its events, its deleted event ends
// them.
func newEventLog(st store.Store, o *Options) *eventlog.Log {
	return eventlog.New(st, &eventlog.Options{Retention: o.EventRetention, MaxAge: o.EventMaxAge,
		PollInterval: o.EventPollInterval, Clock: o.Clock,
		Created: eventlog.Match{Kind: EventDeployment, Change: ChangeCreated},
		Deleted: eventlog.Match{Kind: EventDeployment, Change: ChangeDeleted}})
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
	return cp.appendEvent(tx, tenant, &eventlog.Event{Kind: EventDeployment, Change: change, Deployment: r.ID,
		At: r.UpdatedAt.Time(), Payload: stored})
}

// deploymentDeletedEvent appends the event of removeDeployment.
func (cp *ControlPlane) deploymentDeletedEvent(tx store.Tx, tenant string, r *deploymentRecord) error {
	return cp.appendEvent(tx, tenant, &eventlog.Event{Kind: EventDeployment, Change: ChangeDeleted, Deployment: r.ID,
		At: r.UpdatedAt.Time()})
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
	return cp.appendEvent(tx, tenant, &eventlog.Event{Kind: EventRevision, Change: change, Deployment: rev.DeploymentID,
		Revision: rev.ID, At: rev.UpdatedAt.Time(), Payload: b})
}

// logEvent appends a log line of a revision (logType LogBuild or
// LogDeploy; line is the line's wire JSON, at its time) to the tenant's
// event log, in the caller's Update. Followers that asked for logType
// receive it.
func (cp *ControlPlane) logEvent(tx store.Tx, tenant, deploymentID, revisionID string, logType LogType, at time.Time, line []byte) error {
	return cp.appendEvent(tx, tenant, &eventlog.Event{Kind: EventLog, Change: string(logType), Deployment: deploymentID,
		Revision: revisionID, At: at, Payload: line})
}

// appendEvent appends e to the tenant's event log in tx (eventlog.Append):
// it commits with the change it records, or not at all. e.At is the
// change's time (the resource's updated_at): the clock is not read. The
// tenant's followers in this process are woken once the Update has
// committed.
func (cp *ControlPlane) appendEvent(tx store.Tx, tenant string, e *eventlog.Event) error {
	var b *eventlog.Batch
	if et, ok := tx.(*eventTx); ok {
		b = &et.batch
	}
	return cp.events.Append(tx, b, tenant, e)
}

// eventStore is the ControlPlane's store: st, with the tenant prefixes an
// Update read or assigned cached, and its events' followers woken, once it
// has committed (the event log runs its sequencer every few hundred events
// committed, and the order counts are folded with it).
type eventStore struct {
	store.Store
	cp *ControlPlane
}

func (s eventStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var tx eventTx
	err := s.Store.Update(ctx, func(t store.Tx) error {
		tx = eventTx{Tx: t} // the closure may run more than once
		return fn(&tx)
	})
	if err == nil {
		s.cp.tenants.Commit(&tx.tenants) // committed now
		ran, serr := s.cp.events.Committed(ctx, &tx.batch)
		if serr == nil && ran {
			serr = s.cp.fold(ctx)
		}
		// The events are in the outbox, and a later run numbers them.
		if serr != nil && ctx.Err() == nil {
			s.cp.log.Error("controlplane: sequencing events failed", "err", serr)
		}
	}
	return err
}

// eventTx is the Tx of an eventStore Update: it holds the Update's event
// Batch and the tenant prefixes it read or assigned.
type eventTx struct {
	store.Tx
	batch eventlog.Batch
	// tenants are the tenant prefixes the Update read or assigned
	// (writeTenant).
	tenants keyenc.Pending
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
	cp      *ControlPlane
	tenant  string
	s       *eventlog.Stream
	pending []Event // to return before reading (a gap found when following)
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
	f := eventlog.FollowOptions{Kinds: map[string][]string{EventLog: nil}}
	for _, t := range o.Logs {
		if t != LogBuild && t != LogDeploy {
			return nil, apierr.Validation(apierr.Problem{Loc: []any{"query", "logs"}, Type: apierr.TypeLiteralError,
				Msg: "Input should be a comma-separated list of 'build' and 'deploy'"})
		}
		f.Kinds[EventLog] = append(f.Kinds[EventLog], string(t))
	}
	if o.DeploymentID != "" {
		id, ok := pathID(o.DeploymentID)
		if !ok {
			return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: o.DeploymentID}
		}
		f.Deployment = id
	}
	// Number what committed before this call, so that the head read
	// below follows it.
	if err := cp.events.Sequence(ctx, tenant); err != nil {
		return nil, cp.eventErr("follow events", err)
	}
	resume, resumeErr := strconv.ParseUint(o.LastEventID, 10, 64)
	var head uint64
	var exists, deleted bool
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		if head, err = eventlog.Head(r, tenant); err != nil {
			return err
		}
		if f.Deployment == "" {
			return nil
		}
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		_, err = r.Get(colDeployments, deploymentKey(tp, f.Deployment))
		exists = err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if exists || resumeErr != nil || resume >= head {
			return nil
		}
		// Removed: is its deleted event among those after the client's?
		deleted, err = cp.events.Deleted(r, tenant, f.Deployment, resume)
		return err
	})
	if err != nil {
		return nil, cp.eventErr("follow events", err)
	}
	known := o.LastEventID != "" && resumeErr == nil && resume <= head
	if f.Deployment != "" && !exists && !deleted {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: f.Deployment}
	}
	s := &EventStream{cp: cp, tenant: tenant}
	switch {
	case o.LastEventID == "":
		f.After = head
	case known:
		f.After = resume
	default:
		f.After = head
		s.pending = []Event{gapEvent(head, "The Last-Event-ID is not one of this event log's ids; events may have been missed.")}
	}
	s.s = cp.events.Follow(tenant, &f)
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
	es, err := s.s.Next(ctx)
	switch {
	case err == io.EOF || err != nil && err == ctx.Err():
		return nil, err
	case err != nil:
		return nil, s.cp.eventErr("read events", err)
	}
	out := make([]Event, 0, len(es))
	for _, x := range es {
		if x.LostFrom != 0 {
			out = append(out, gapEvent(x.N, fmt.Sprintf(
				"Events %d to %d are no longer retained; read the resources again.", x.LostFrom, x.N)))
			continue
		}
		data, err := s.cp.renderEvent(s.tenant, x.N, &x.Event)
		if err != nil {
			return nil, err
		}
		out = append(out, Event{ID: strconv.FormatUint(x.N, 10), Name: x.Event.Kind, Data: data})
	}
	return out, nil
}

// eventErr is storeErr for the event log's errors; one for an event
// stored in a newer format wraps ErrNewerRecord.
func (cp *ControlPlane) eventErr(op string, err error) error {
	if errors.Is(err, eventlog.ErrNewerFormat) {
		err = fmt.Errorf("%w: %w", ErrNewerRecord, err)
	}
	return cp.storeErr(op, err)
}

// renderEvent is the Data of the tenant's event n.
func (cp *ControlPlane) renderEvent(tenant string, n uint64, e *eventlog.Event) ([]byte, error) {
	ck := renderKey{tenant, n}
	if b, ok := cp.renders.get(ck); ok {
		return b, nil
	}
	var v any
	switch e.Kind {
	case EventDeployment:
		d := struct {
			Change       string      `json:"change"`
			DeploymentID string      `json:"deployment_id"`
			Deployment   *Deployment `json:"deployment,omitempty"`
		}{Change: e.Change, DeploymentID: e.Deployment}
		if e.Change != ChangeDeleted {
			rec, err := cp.secrets.decodeDeployment(e.Payload, tenant, e.Deployment)
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
		}{e.Change, e.Deployment, e.Revision, e.Payload}
	case EventLog:
		v = struct {
			Type         string          `json:"type"`
			DeploymentID string          `json:"deployment_id"`
			RevisionID   string          `json:"revision_id"`
			Log          json.RawMessage `json:"log"`
		}{e.Change, e.Deployment, e.Revision, e.Payload}
	default:
		return nil, fmt.Errorf("controlplane: an event of unknown kind %q", e.Kind)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	cp.renders.put(ck, b)
	return b, nil
}

// renderCacheSize bounds the rendered events kept for followers that read
// the same events (every follower of a tenant decodes each deployment
// event once per process, not once per follower).
const renderCacheSize = 1024

type renderKey struct {
	tenant string
	n      uint64
}

// renderCache is the rendered Data of recent events, the oldest replaced
// first.
type renderCache struct {
	mu    sync.Mutex
	cache map[renderKey][]byte
	ring  []renderKey
	next  int
}

func newRenderCache() *renderCache {
	return &renderCache{cache: map[renderKey][]byte{}, ring: make([]renderKey, renderCacheSize)}
}

func (c *renderCache) get(k renderKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.cache[k]
	return b, ok
}

func (c *renderCache) put(k renderKey, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cache[k]; ok {
		return
	}
	delete(c.cache, c.ring[c.next])
	c.ring[c.next] = k
	c.next = (c.next + 1) % len(c.ring)
	c.cache[k] = b
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
		wake := cp.events.Wake(tenant)
		rev, err := cp.GetRevision(ctx, tenant, deploymentID, revisionID)
		if err != nil || IsTerminal(rev.Status) {
			return rev, err
		}
		t := time.NewTimer(cp.events.Options().PollInterval)
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

// EventHead returns the id of the tenant's newest event ("0" before its
// first), after numbering the events that committed before the call: a
// follower that keeps its own cursor (package webhooks) starts from it,
// and FollowOptions.LastEventID of it follows every event numbered after
// it, with no gap while they are retained.
func (cp *ControlPlane) EventHead(ctx context.Context, tenant string) (string, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return "", err
	}
	if err := cp.events.Sequence(ctx, tenant); err != nil {
		return "", cp.eventErr("event head", err)
	}
	var head uint64
	err := cp.st.View(ctx, func(r store.Reader) error {
		var err error
		head, err = eventlog.Head(r, tenant)
		return err
	})
	if err != nil {
		return "", cp.eventErr("event head", err)
	}
	return strconv.FormatUint(head, 10), nil
}
