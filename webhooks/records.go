package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// The collections of the webhooks in the control plane's store.
//
//	wh_webhooks    tenant/webhook_id                  the webhook (webhookRecord)
//	wh_cursors     tenant                             the id of the last event turned into deliveries (cursorRecord); present while the tenant has webhooks
//	wh_leases      tenant                             which Service dispatches the tenant, until when (leaseRecord)
//	wh_deliveries  tenant/webhook_id/seq              a delivery (deliveryRecord); seq orders a webhook's deliveries oldest first
//	wh_pending     tenant/due/webhook_id/seq          a pending delivery's next attempt, in time order (no value)
const (
	colWebhooks   = "wh_webhooks"
	colCursors    = "wh_cursors"
	colLeases     = "wh_leases"
	colDeliveries = "wh_deliveries"
	colPending    = "wh_pending"
)

// Delivery statuses.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Delivery is one event sent (or to be sent) to one webhook, with its
// attempts.
type Delivery struct {
	// ID is the delivery's id, sent as the webhook-id header: the same on
	// every attempt, so a receiver dedupes by it.
	ID string `json:"id"`
	// EventType is the type sent (EventTypes), or EventEventsLost.
	EventType string `json:"event_type"`
	// EventID is the id of the event-log event it delivers (GET
	// /v2/events' ids).
	EventID string `json:"event_id"`
	// Status is pending, succeeded or failed.
	Status string `json:"status"`
	// Attempts is how many attempts were made.
	Attempts int `json:"attempts"`
	// ResponseStatusCode is the HTTP status the last attempt got; null
	// without one (no attempt yet, or the request failed).
	ResponseStatusCode *int `json:"response_status_code"`
	// ResponseBody is the first bytes of the last answer's body.
	ResponseBody *string `json:"response_body"`
	// Error says why the last attempt failed; null after a success.
	Error *string `json:"error"`
	// NextAttemptAt is when the next attempt is due; null once the
	// delivery succeeded or failed.
	NextAttemptAt *wiretime.Time `json:"next_attempt_at"`
	// LastAttemptAt is when the last attempt was made; null before one.
	LastAttemptAt *wiretime.Time `json:"last_attempt_at"`
	// AttemptLog lists every attempt, oldest first.
	AttemptLog []Attempt     `json:"attempt_log"`
	CreatedAt  wiretime.Time `json:"created_at"`
	UpdatedAt  wiretime.Time `json:"updated_at"`
}

// Attempt is one attempt of a delivery.
type Attempt struct {
	At                 wiretime.Time `json:"at"`
	ResponseStatusCode *int          `json:"response_status_code"`
	Error              *string       `json:"error"`
}

// DeliveryPage is a page of a webhook's delivery log, newest first.
type DeliveryPage struct {
	Resources []Delivery `json:"resources"`
	// Offset is the offset of the next page.
	Offset int `json:"offset"`
}

// webhookRecord is a webhook as stored.
type webhookRecord struct {
	ID          string        `json:"id"`
	URL         string        `json:"url"`
	Events      []string      `json:"events"`
	Description *string       `json:"description,omitempty"`
	Enabled     bool          `json:"enabled"`
	Secret      []byte        `json:"secret"` // sealed when the Service has a key
	After       uint64        `json:"after"`  // events after this one are delivered to it
	Deliveries  int           `json:"deliveries"`
	Seq         uint64        `json:"seq"` // its place among the tenant's webhooks (cursorRecord.Made)
	CreatedAt   wiretime.Time `json:"created_at"`
	UpdatedAt   wiretime.Time `json:"updated_at"`
}

func (r *webhookRecord) wire() Webhook {
	return Webhook{ID: r.ID, URL: r.URL, Events: append([]string{}, r.Events...), Description: r.Description,
		Enabled: r.Enabled, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// wants reports whether the webhook receives events of type t.
func (r *webhookRecord) wants(t string) bool {
	for _, e := range r.Events {
		if e == EventAll || e == t {
			return true
		}
	}
	return false
}

// cursorRecord is the id of the tenant's last event that was turned into
// deliveries.
type cursorRecord struct {
	After uint64 `json:"after"`
	// Made counts the webhooks the tenant made since its first one (their
	// order, newest first in lists).
	Made uint64 `json:"made"`
}

// leaseRecord says which Service dispatches a tenant, until when.
type leaseRecord struct {
	Holder string    `json:"holder"`
	Until  time.Time `json:"until"`
}

// deliveryRecord is a delivery as stored: its wire form, the body every
// attempt sends, and while pending the time its wh_pending entry is
// under (unix nanoseconds; 0 once finished).
type deliveryRecord struct {
	Delivery
	Body []byte `json:"body,omitempty"`
	Due  int64  `json:"due,omitempty"`
}

func webhookKey(tenant, id string) string     { return tenant + "/" + id }
func deliveryPrefix(tenant, id string) string { return tenant + "/" + id + "/" }

// seqOf is a delivery's place in its webhook's log: its event's number
// and its index among the deliveries of that event.
func seqOf(event uint64, i int) string { return fmt.Sprintf("%020d.%d", event, i) }

func pendingKey(tenant string, due int64, webhookID, seq string) string {
	return fmt.Sprintf("%s/%020d/%s/%s", tenant, due, webhookID, seq)
}

// parsePending splits a wh_pending key after its tenant prefix.
func parsePending(rest string) (due int64, webhookID, seq string, ok bool) {
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return 0, "", "", false
	}
	if _, err := fmt.Sscanf(parts[0], "%d", &due); err != nil {
		return 0, "", "", false
	}
	return due, parts[1], parts[2], true
}

func putJSON(tx store.Tx, col, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Put(col, key, b)
}

func getJSON(r store.Reader, col, key string, v any) error {
	b, err := r.Get(col, key)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// getWebhook reads the tenant's webhook; a missing one (or an id that is
// no key) is a *apierr.NotFoundError.
func getWebhook(r store.Reader, tenant, id string) (*webhookRecord, error) {
	notFound := &apierr.NotFoundError{Kind: apierr.KindWebhook, ID: id}
	if id == "" || strings.ContainsAny(id, "/") || len(id) > 64 {
		return nil, notFound
	}
	var rec webhookRecord
	err := getJSON(r, colWebhooks, webhookKey(tenant, id), &rec)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

func getCursor(r store.Reader, tenant string) (*cursorRecord, error) {
	var c cursorRecord
	if err := getJSON(r, colCursors, tenant, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// setDue moves the delivery's wh_pending entry to due (0: removes it).
func setDue(tx store.Tx, tenant, webhookID, seq string, d *deliveryRecord, due time.Time) error {
	if d.Due != 0 {
		if err := tx.Delete(colPending, pendingKey(tenant, d.Due, webhookID, seq)); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		d.Due = 0
	}
	if due.IsZero() {
		return nil
	}
	d.Due = due.UnixNano()
	return tx.Put(colPending, pendingKey(tenant, d.Due, webhookID, seq), []byte{})
}

// failPending fails the webhook's pending deliveries with msg.
func failPending(tx store.Tx, tenant, webhookID string, now time.Time, msg string) error {
	prefix := deliveryPrefix(tenant, webhookID)
	type found struct {
		seq string
		d   deliveryRecord
	}
	var pending []found
	err := tx.Scan(colDeliveries, prefix, nil, func(k string, v []byte) (bool, error) {
		var d deliveryRecord
		if err := json.Unmarshal(v, &d); err != nil {
			return false, err
		}
		if d.Status == StatusPending {
			pending = append(pending, found{strings.TrimPrefix(k, prefix), d})
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, f := range pending {
		d := f.d
		if err := setDue(tx, tenant, webhookID, f.seq, &d, time.Time{}); err != nil {
			return err
		}
		d.finish(StatusFailed, now)
		m := msg
		d.Error = &m
		if err := putJSON(tx, colDeliveries, prefix+f.seq, &d); err != nil {
			return err
		}
	}
	return nil
}

// finish ends the delivery with status at now.
func (d *deliveryRecord) finish(status string, now time.Time) {
	d.Status = status
	d.NextAttemptAt = nil
	d.UpdatedAt = wiretime.New(now)
	d.Body = nil // never sent again
}
