package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// errLost is the error of a transaction that finds the tenant's lease held
// by another Service, or its cursor moved: this Service stops dispatching
// the tenant.
var errLost = errors.New("webhooks: the tenant's dispatch lease was lost")

// Run delivers the events of every tenant with webhooks until ctx is
// done, then gives back the leases it holds and returns nil (it logs the
// store's failures and carries on). Several Services over one store
// (replicas) share the tenants: each tenant is dispatched by the one that
// holds its lease.
func (s *Service) Run(ctx context.Context) error {
	type worker struct {
		cancel context.CancelFunc
		done   chan struct{}
	}
	workers := map[string]*worker{}
	defer func() {
		for _, w := range workers {
			w.cancel()
			<-w.done // which gives the lease back
		}
	}()
	t := time.NewTicker(s.o.PollInterval)
	defer t.Stop()
	for {
		for tenant, w := range workers {
			select {
			case <-w.done:
				delete(workers, tenant)
			default:
			}
		}
		tenants, err := s.tenants(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("webhooks: listing the tenants failed", "err", err)
		}
		for _, tenant := range tenants {
			if workers[tenant] != nil {
				continue
			}
			ok, err := s.acquire(ctx, tenant)
			if err != nil && ctx.Err() == nil {
				s.log.Error("webhooks: taking a tenant's lease failed", "tenant", tenant, "err", err)
			}
			if !ok {
				continue
			}
			wctx, cancel := context.WithCancel(ctx)
			w := &worker{cancel: cancel, done: make(chan struct{})}
			workers[tenant] = w
			go func() {
				defer close(w.done)
				defer cancel()
				s.dispatch(wctx, tenant)
				s.release(tenant) // a no-op when another took it over
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		}
	}
}

// poke makes Run look for tenants now (a tenant's first webhook).
func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// tenants lists the tenants with webhooks (those with a cursor).
func (s *Service) tenants(ctx context.Context) ([]string, error) {
	var out []string
	err := s.st.View(ctx, func(r store.Reader) error {
		out = out[:0]
		return r.Scan(colCursors, "", nil, func(k string, _ []byte) (bool, error) {
			out = append(out, k)
			return true, nil
		})
	})
	return out, err
}

// acquire takes or renews the tenant's lease: true when this Service holds
// it until LeaseTTL from now.
func (s *Service) acquire(ctx context.Context, tenant string) (bool, error) {
	// A look first, so that replicas do not write while another holds it.
	var held bool
	err := s.st.View(ctx, func(r store.Reader) error {
		var l leaseRecord
		err := getJSON(r, colLeases, tenant, &l)
		held = err == nil && l.Holder != s.holder && l.Until.After(s.now())
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil || held {
		return false, err
	}
	ok := false
	err = s.st.Update(ctx, func(tx store.Tx) error {
		ok = false
		now := s.now()
		var l leaseRecord
		switch err := getJSON(tx, colLeases, tenant, &l); {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case l.Holder != s.holder && l.Until.After(now):
			return nil
		}
		ok = true
		return putJSON(tx, colLeases, tenant, &leaseRecord{Holder: s.holder, Until: now.Add(s.o.LeaseTTL)})
	})
	return ok, err
}

// release gives the tenant's lease up, if this Service holds it, so that
// another replica takes the tenant at once.
func (s *Service) release(tenant string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.st.Update(ctx, func(tx store.Tx) error {
		var l leaseRecord
		if err := getJSON(tx, colLeases, tenant, &l); err != nil || l.Holder != s.holder {
			return nil
		}
		return tx.Delete(colLeases, tenant)
	})
}

// checkLease fails with errLost unless this Service holds the tenant's
// lease (expired or not: no other took it).
func (s *Service) checkLease(r store.Reader, tenant string) error {
	var l leaseRecord
	err := getJSON(r, colLeases, tenant, &l)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return errLost
	case err != nil:
		return err
	case l.Holder != s.holder:
		return errLost
	}
	return nil
}

// dispatch dispatches the tenant while this Service holds its lease: one
// goroutine turns its events into deliveries, this one renews the lease
// and makes the attempts that are due.
func (s *Service) dispatch(ctx context.Context, tenant string) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	due := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cancel()
		s.ingest(ctx, tenant, due)
	}()
	defer wg.Wait()
	t := time.NewTicker(s.o.PollInterval)
	defer t.Stop()
	renewed := s.now()
	// renew renews the lease every third of its time (before each
	// attempt too, so that a slow endpoint does not let it lapse); it
	// fails with errLost once the lease is another's or the tenant has no
	// webhook left.
	renew := func() error {
		now := s.now()
		if now.Sub(renewed) < s.o.LeaseTTL/3 {
			return nil
		}
		var gone bool
		err := s.st.View(ctx, func(r store.Reader) error {
			_, err := getCursor(r, tenant)
			gone = errors.Is(err, store.ErrNotFound)
			if gone {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		ok := false
		if !gone {
			if ok, err = s.acquire(ctx, tenant); err != nil {
				return err
			}
		}
		if !ok {
			return errLost
		}
		renewed = now
		return nil
	}
	for {
		err := renew()
		if err == nil {
			err = s.sendDue(ctx, tenant, renew)
		}
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errLost) {
				s.log.Error("webhooks: sending deliveries failed", "tenant", tenant, "err", err)
			}
			if errors.Is(err, errLost) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-due:
		}
	}
}

// ingest follows the tenant's events from its cursor and turns each into
// deliveries, advancing the cursor in the same transaction.
func (s *Service) ingest(ctx context.Context, tenant string, due chan<- struct{}) {
	for ctx.Err() == nil {
		var cur *cursorRecord
		err := s.st.View(ctx, func(r store.Reader) error {
			var err error
			cur, err = getCursor(r, tenant)
			return err
		})
		if errors.Is(err, store.ErrNotFound) {
			return // no webhook left
		}
		var stream *controlplane.EventStream
		if err == nil {
			stream, err = s.cp.FollowEvents(ctx, tenant, &controlplane.FollowOptions{LastEventID: strconv.FormatUint(cur.After, 10)})
		}
		for err == nil {
			var evs []controlplane.Event
			if evs, err = stream.Next(ctx); err != nil {
				break
			}
			if cur.After, err = s.record(ctx, tenant, cur.After, evs); err != nil {
				break
			}
			select {
			case due <- struct{}{}:
			default:
			}
		}
		switch {
		case ctx.Err() != nil, errors.Is(err, errLost):
			return
		case err != nil:
			s.log.Error("webhooks: following the events failed", "tenant", tenant, "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.o.PollInterval):
		}
	}
}

// record turns evs, the events after the cursor at, into deliveries and
// moves the cursor past them, in one transaction; it answers the new
// cursor.
func (s *Service) record(ctx context.Context, tenant string, at uint64, evs []controlplane.Event) (uint64, error) {
	type item struct {
		n     uint64
		types []string
		at    time.Time
		data  []byte
		lost  string // a gap's detail
	}
	now := s.now()
	var items []item
	last := at
	for _, e := range evs {
		n, err := strconv.ParseUint(e.ID, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("webhooks: an event id %q: %w", e.ID, err)
		}
		last = n
		if e.Name == controlplane.EventGap {
			var g struct {
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(e.Data, &g)
			items = append(items, item{n: n, lost: g.Detail})
			continue
		}
		types, ts := eventTypes(&e)
		if len(types) == 0 {
			continue
		}
		if ts.IsZero() {
			ts = now
		}
		items = append(items, item{n: n, types: types, at: ts, data: e.Data})
	}
	err := s.st.Update(ctx, func(tx store.Tx) error {
		if err := s.checkLease(tx, tenant); err != nil {
			return err
		}
		cur, err := getCursor(tx, tenant)
		if errors.Is(err, store.ErrNotFound) || err == nil && cur.After != at {
			return errLost
		}
		if err != nil {
			return err
		}
		var hooks []*webhookRecord
		err = tx.Scan(colWebhooks, tenant+"/", nil, func(_ string, v []byte) (bool, error) {
			var rec webhookRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return false, err
			}
			hooks = append(hooks, &rec)
			return true, nil
		})
		if err != nil {
			return err
		}
		stamp := wiretime.New(now)
		for _, h := range hooks {
			added := 0
			for _, it := range items {
				if !h.Enabled || it.n <= h.After {
					continue
				}
				if it.lost != "" {
					msg := "Events were lost before they could be delivered: " + it.lost
					d := deliveryRecord{Delivery: Delivery{ID: newMessageID(), EventType: EventEventsLost, EventID: strconv.FormatUint(it.n, 10),
						Status: StatusFailed, Error: &msg, AttemptLog: []Attempt{}, CreatedAt: stamp, UpdatedAt: stamp}}
					if err := putJSON(tx, colDeliveries, deliveryPrefix(tenant, h.ID)+seqOf(it.n, 0), &d); err != nil {
						return err
					}
					added++
					continue
				}
				for i, t := range it.types {
					if !h.wants(t) {
						continue
					}
					body, err := json.Marshal(payload{Type: t, Timestamp: wiretime.New(it.at), Data: json.RawMessage(it.data)})
					if err != nil {
						return err
					}
					next := stamp
					d := deliveryRecord{Delivery: Delivery{ID: newMessageID(), EventType: t, EventID: strconv.FormatUint(it.n, 10),
						Status: StatusPending, NextAttemptAt: &next, AttemptLog: []Attempt{}, CreatedAt: stamp, UpdatedAt: stamp}, Body: body}
					seq := seqOf(it.n, i)
					if err := setDue(tx, tenant, h.ID, seq, &d, now); err != nil {
						return err
					}
					if err := putJSON(tx, colDeliveries, deliveryPrefix(tenant, h.ID)+seq, &d); err != nil {
						return err
					}
					added++
				}
			}
			if added == 0 {
				continue
			}
			h.Deliveries += added
			if err := s.prune(tx, tenant, h); err != nil {
				return err
			}
			if err := putJSON(tx, colWebhooks, webhookKey(tenant, h.ID), h); err != nil {
				return err
			}
		}
		cur.After = last
		return putJSON(tx, colCursors, tenant, cur)
	})
	return last, err
}

// prune removes the webhook's oldest finished deliveries beyond the
// retention.
func (s *Service) prune(tx store.Tx, tenant string, h *webhookRecord) error {
	if h.Deliveries <= s.o.Retention {
		return nil
	}
	var drop []string
	over := h.Deliveries - s.o.Retention
	err := tx.Scan(colDeliveries, deliveryPrefix(tenant, h.ID), nil, func(k string, v []byte) (bool, error) {
		var d deliveryRecord
		if err := json.Unmarshal(v, &d); err != nil {
			return false, err
		}
		if d.Status != StatusPending {
			drop = append(drop, k)
		}
		return len(drop) < over, nil
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := tx.Delete(colDeliveries, k); err != nil {
			return err
		}
	}
	h.Deliveries -= len(drop)
	return nil
}

// payload is a delivery's body.
type payload struct {
	Type      string          `json:"type"`
	Timestamp wiretime.Time   `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// eventTypes are the webhook event types of an event of the log (none for
// most changes of a revision and for log lines), and the time of the
// change it records when the data carries one.
func eventTypes(e *controlplane.Event) ([]string, time.Time) {
	var d struct {
		Change     string `json:"change"`
		Deployment *struct {
			IsPreview bool          `json:"is_preview"`
			UpdatedAt wiretime.Time `json:"updated_at"`
		} `json:"deployment"`
		Revision *struct {
			Status    controlplane.RevisionStatus `json:"status"`
			UpdatedAt wiretime.Time               `json:"updated_at"`
		} `json:"revision"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return nil, time.Time{}
	}
	switch e.Name {
	case controlplane.EventDeployment:
		var at time.Time
		if d.Deployment != nil {
			at = d.Deployment.UpdatedAt.Time()
		}
		switch d.Change {
		case controlplane.ChangeCreated:
			if d.Deployment != nil && d.Deployment.IsPreview {
				return []string{EventDeploymentCreated, EventPreviewCreated}, at
			}
			return []string{EventDeploymentCreated}, at
		case controlplane.ChangeDeleted:
			return []string{EventDeploymentDeleted}, at
		default:
			return []string{EventDeploymentUpdated}, at
		}
	case controlplane.EventRevision:
		if d.Revision == nil {
			return nil, time.Time{}
		}
		at := d.Revision.UpdatedAt.Time()
		switch {
		case d.Change == controlplane.ChangeCreated:
			return []string{EventRevisionCreated}, at
		case d.Change != controlplane.ChangeStatus:
			return nil, at
		case d.Revision.Status == controlplane.RevisionDeployed:
			return []string{EventRevisionDeployed}, at
		case strings.HasSuffix(string(d.Revision.Status), "_FAILED"):
			return []string{EventRevisionFailed}, at
		}
	}
	return nil, time.Time{}
}

// newMessageID is a delivery's id: "msg_" and 32 hex digits.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

// sendDue makes the tenant's attempts that are due.
func (s *Service) sendDue(ctx context.Context, tenant string, renew func() error) error {
	type due struct {
		at             int64
		webhookID, seq string
	}
	var list []due
	now := s.now().UnixNano()
	err := s.st.View(ctx, func(r store.Reader) error {
		list = list[:0]
		return r.Scan(colPending, tenant+"/", nil, func(k string, _ []byte) (bool, error) {
			at, wid, seq, ok := parsePending(strings.TrimPrefix(k, tenant+"/"))
			if !ok {
				return true, nil
			}
			if at > now {
				return false, nil
			}
			list = append(list, due{at, wid, seq})
			return len(list) < 100, nil
		})
	})
	if err != nil {
		return err
	}
	for _, d := range list {
		if err := renew(); err != nil {
			return err
		}
		if err := s.attempt(ctx, tenant, d.webhookID, d.seq, d.at); err != nil {
			return err
		}
	}
	return nil
}

// attempt makes one attempt of a delivery due at due: it claims it (its
// next attempt moved past this one's end, so that no other Service makes
// it meanwhile), sends it, and records the result.
func (s *Service) attempt(ctx context.Context, tenant, webhookID, seq string, due int64) error {
	key := deliveryPrefix(tenant, webhookID) + seq
	var (
		url, secret, id string
		body            []byte
		attempts        int
		claimed         bool
	)
	now := s.now()
	err := s.st.Update(ctx, func(tx store.Tx) error {
		claimed = false
		if err := s.checkLease(tx, tenant); err != nil {
			return err
		}
		var d deliveryRecord
		if err := getJSON(tx, colDeliveries, key, &d); errors.Is(err, store.ErrNotFound) {
			return tx.Delete(colPending, pendingKey(tenant, due, webhookID, seq))
		} else if err != nil {
			return err
		}
		if d.Status != StatusPending || d.Due != due {
			return nil // another attempt moved it
		}
		h, err := getWebhook(tx, tenant, webhookID)
		if err != nil {
			return err
		}
		if secret, err = s.openSecret(tenant, h); err != nil {
			return fmt.Errorf("webhooks: opening the secret of webhook %s: %w", webhookID, err)
		}
		d.Attempts++
		stamp := wiretime.New(now)
		d.LastAttemptAt, d.UpdatedAt = &stamp, stamp
		// Should this attempt never be recorded (a crash), the next one
		// is due when the claim runs out.
		claimEnd := now.Add(s.o.AttemptTimeout + s.o.LeaseTTL)
		if err := setDue(tx, tenant, webhookID, seq, &d, claimEnd); err != nil {
			return err
		}
		next := wiretime.New(claimEnd)
		d.NextAttemptAt = &next
		url, id, body, attempts, claimed = h.URL, d.ID, d.Body, d.Attempts, true
		return putJSON(tx, colDeliveries, key, &d)
	})
	if err != nil || !claimed {
		return err
	}
	code, respBody, sendErr := s.send(ctx, url, secret, id, now, body)
	if ctx.Err() != nil {
		return ctx.Err() // the claim runs out and the attempt is made again
	}
	done := s.now()
	gone := false
	err = s.st.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
		gone = false
		var d deliveryRecord
		if err := getJSON(tx, colDeliveries, key, &d); errors.Is(err, store.ErrNotFound) {
			return nil // deleted with its webhook
		} else if err != nil {
			return err
		}
		if d.Status != StatusPending || d.Attempts != attempts {
			return nil
		}
		a := Attempt{At: wiretime.New(now)}
		d.Error, d.ResponseStatusCode, d.ResponseBody = nil, nil, nil
		if code != 0 {
			c := code
			a.ResponseStatusCode, d.ResponseStatusCode = &c, &c
			d.ResponseBody = &respBody
		}
		if sendErr != nil {
			msg := sendErr.Error()
			a.Error, d.Error = &msg, &msg
		}
		d.AttemptLog = append(d.AttemptLog, a)
		switch {
		case code == http.StatusGone:
			// The endpoint asks to be sent nothing more (as the Standard
			// Webhooks specification says a 410 means): the webhook is
			// disabled, this delivery and those pending fail.
			if err := setDue(tx, tenant, webhookID, seq, &d, time.Time{}); err != nil {
				return err
			}
			d.finish(StatusFailed, done)
			msg := goneMessage
			d.Error = &msg
			if err := putJSON(tx, colDeliveries, key, &d); err != nil {
				return err
			}
			var err error
			gone, err = s.disableGone(tx, tenant, webhookID, done)
			return err
		case sendErr == nil:
			if err := setDue(tx, tenant, webhookID, seq, &d, time.Time{}); err != nil {
				return err
			}
			d.finish(StatusSucceeded, done)
		case d.Attempts > len(s.o.Backoff):
			if err := setDue(tx, tenant, webhookID, seq, &d, time.Time{}); err != nil {
				return err
			}
			d.finish(StatusFailed, done)
		default:
			next := done.Add(s.o.Backoff[d.Attempts-1])
			if err := setDue(tx, tenant, webhookID, seq, &d, next); err != nil {
				return err
			}
			n := wiretime.New(next)
			d.NextAttemptAt, d.UpdatedAt = &n, wiretime.New(done)
		}
		return putJSON(tx, colDeliveries, key, &d)
	})
	if err == nil && gone {
		s.log.Warn("webhooks: the endpoint answered 410 Gone: the webhook is disabled", "tenant", tenant, "webhook_id", webhookID)
	}
	return err
}

// goneMessage is the error of the deliveries a 410 answer fails.
const goneMessage = "The endpoint answered 410 Gone: the webhook was disabled."

// disableGone disables a webhook whose endpoint answered 410 Gone and
// fails its pending deliveries, reporting whether it was enabled; enabling
// it again (UpdateWebhook) delivers the events that follow.
func (s *Service) disableGone(tx store.Tx, tenant, webhookID string, now time.Time) (bool, error) {
	h, err := getWebhook(tx, tenant, webhookID)
	if err != nil || !h.Enabled {
		return false, err
	}
	if err := failPending(tx, tenant, webhookID, now, goneMessage); err != nil {
		return false, err
	}
	h.Enabled = false
	h.UpdatedAt = wiretime.New(now)
	return true, putJSON(tx, colWebhooks, webhookKey(tenant, webhookID), h)
}

// send posts body to url, signed, within AttemptTimeout; it answers the
// status and the start of the answer's body, and an error unless the
// status is 2xx.
func (s *Service) send(ctx context.Context, url, secret, id string, at time.Time, body []byte) (int, string, error) {
	sig, err := Sign(secret, id, at, body)
	if err != nil {
		return 0, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "deployplane-webhooks")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(HeaderSignature, sig)
	client := &http.Client{Transport: s.egress.Transport(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	prefix, _ := io.ReadAll(io.LimitReader(resp.Body, responsePrefix))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so that the connection is reused
	text := strings.ToValidUTF8(string(prefix), "\uFFFD")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, text, fmt.Errorf("the endpoint answered %s", resp.Status)
	}
	return resp.StatusCode, text, nil
}
