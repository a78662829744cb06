package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/internal/seal"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// The event types a webhook may subscribe to.
const (
	EventDeploymentCreated = "deployment.created"
	EventDeploymentUpdated = "deployment.updated" // any change of a deployment, its status included
	EventDeploymentDeleted = "deployment.deleted"
	EventRevisionCreated   = "revision.created"
	EventRevisionDeployed  = "revision.deployed" // a revision became DEPLOYED
	EventRevisionFailed    = "revision.failed"   // a revision became *_FAILED
	EventPreviewCreated    = "preview.created"   // a deployment created with is_preview true (beside deployment.created)
	// EventAll subscribes to every event type.
	EventAll = "*"
	// EventEventsLost is the type of the failed delivery recorded in every
	// webhook's log when events were lost before they could be turned into
	// deliveries (the event log no longer retained them); it is never sent.
	EventEventsLost = "events.lost"
)

// EventTypes lists the event types a webhook may name, EventAll last.
func EventTypes() []string {
	return []string{EventDeploymentCreated, EventDeploymentUpdated, EventDeploymentDeleted, EventRevisionCreated,
		EventRevisionDeployed, EventRevisionFailed, EventPreviewCreated, EventAll}
}

// Limits of a webhook's members and of a tenant's webhooks.
const (
	MaxWebhooks       = 20   // a tenant's webhooks
	MaxURLLen         = 2048 // bytes of url
	MaxDescriptionLen = 500  // characters of description
	// SecretPrefix starts every secret (Standard Webhooks' symmetric
	// secret serialization): the base64 of 24 to 64 random bytes follows.
	SecretPrefix   = "whsec_"
	minSecretBytes = 24
	maxSecretBytes = 64
)

// Webhook is a tenant's webhook as GET answers it. The secret is
// write-only: no Webhook carries it.
type Webhook struct {
	ID          string        `json:"id"`
	URL         string        `json:"url"`
	Events      []string      `json:"events"`
	Description *string       `json:"description"`
	Enabled     bool          `json:"enabled"`
	CreatedAt   wiretime.Time `json:"created_at"`
	UpdatedAt   wiretime.Time `json:"updated_at"`
}

// CreatedWebhook is the answer of CreateWebhook: the webhook, and the
// secret when the server generated it (the only time it is answered).
type CreatedWebhook struct {
	ID          string        `json:"id"`
	URL         string        `json:"url"`
	Events      []string      `json:"events"`
	Description *string       `json:"description"`
	Enabled     bool          `json:"enabled"`
	CreatedAt   wiretime.Time `json:"created_at"`
	UpdatedAt   wiretime.Time `json:"updated_at"`
	// Secret is the generated signing secret ("whsec_..."); absent when
	// the request gave one.
	Secret string `json:"secret,omitempty"`
}

// WebhookPage is a page of a tenant's webhooks, newest first.
type WebhookPage struct {
	Resources []Webhook `json:"resources"`
	// Offset is the offset of the next page.
	Offset int `json:"offset"`
}

// CreateWebhookRequest is the body of POST /v2/webhooks.
type CreateWebhookRequest struct {
	// URL receives the deliveries: https (http only to hosts the
	// operator allows), a host the egress policy lets the server reach.
	URL string `json:"url"`
	// Events are the event types to deliver (EventTypes; "*" for all).
	Events []string `json:"events"`
	// Secret is the signing secret, "whsec_" and the base64 of 24 to 64
	// bytes; absent or null: the server generates one and answers it once.
	Secret *string `json:"secret,omitempty"`
	// Description is free text, at most MaxDescriptionLen characters.
	Description *string `json:"description,omitempty"`
}

// UpdateWebhookRequest is the body of PATCH /v2/webhooks/{webhook_id}:
// absent or null members are left as they are.
type UpdateWebhookRequest struct {
	URL         *string  `json:"url,omitempty"`
	Events      []string `json:"events,omitempty"`
	Secret      *string  `json:"secret,omitempty"`
	Description *string  `json:"description,omitempty"`
	// Enabled false stops the webhook: no event is turned into a delivery
	// for it, and its pending deliveries fail; true starts it again with
	// the events that follow.
	Enabled *bool `json:"enabled,omitempty"`
}

// ListQuery is the query of a list: Limit 1 to controlplane.MaxPageLimit
// (nil: controlplane.DefaultPageLimit), Offset >= 0.
type ListQuery struct {
	Limit  *int
	Offset int
}

// Validate reports the query's problems at ["query", "limit"] and
// ["query", "offset"].
func (q *ListQuery) Validate() error {
	var ps []apierr.Problem
	if l := q.Limit; l != nil && *l < 1 {
		ps = append(ps, apierr.Problem{Loc: []any{"query", "limit"}, Type: apierr.TypeGreaterThanEqual, Msg: "Input should be greater than or equal to 1"})
	} else if l != nil && *l > controlplane.MaxPageLimit {
		ps = append(ps, apierr.Problem{Loc: []any{"query", "limit"}, Type: apierr.TypeLessThanEqual,
			Msg: fmt.Sprintf("Input should be less than or equal to %d", controlplane.MaxPageLimit)})
	}
	if q.Offset < 0 {
		ps = append(ps, apierr.Problem{Loc: []any{"query", "offset"}, Type: apierr.TypeGreaterThanEqual, Msg: "Input should be greater than or equal to 0"})
	}
	return apierr.Validation(ps...)
}

func (q *ListQuery) limit() int {
	if q == nil || q.Limit == nil {
		return controlplane.DefaultPageLimit
	}
	return *q.Limit
}

// Options configure a Service; nil means every default.
type Options struct {
	// Egress is the policy of the deliveries: a webhook's url is checked
	// against it when registered (CheckURL) and each delivery's connection
	// when dialled. Default: the strict policy.
	Egress *egress.Policy
	// SecretKey, 32 bytes, seals the signing secrets at rest (AES-256-GCM,
	// the control plane's key); nil stores them as given.
	SecretKey []byte
	// Clock is the time of records, backoff and leases; default time.Now.
	Clock func() time.Time
	// Backoff is the wait before each retry: a delivery is attempted
	// len(Backoff)+1 times at most, then fails. Default DefaultBackoff.
	Backoff []time.Duration
	// AttemptTimeout bounds one attempt; default DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// LeaseTTL is how long a replica's claim on a tenant's dispatch lasts
	// unless renewed (it is renewed every third of it); default
	// DefaultLeaseTTL. A replica that dies leaves the tenant to another
	// after it.
	LeaseTTL time.Duration
	// PollInterval is how often Run looks for tenants to dispatch and for
	// deliveries whose time has come; default DefaultPollInterval.
	PollInterval time.Duration
	// Retention is how many deliveries each webhook's log keeps (the
	// oldest finished ones go first); default DefaultRetention.
	Retention int
	// Logger logs the dispatcher's failures; default slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultLeaseTTL       = 30 * time.Second
	DefaultPollInterval   = time.Second
	DefaultRetention      = 1000
	// responsePrefix is how many bytes of an answer's body a delivery keeps.
	responsePrefix = 256
)

// DefaultBackoff is the retry schedule: 8 attempts over about two hours.
var DefaultBackoff = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute,
	30 * time.Minute, time.Hour, time.Hour}

// Service keeps a ControlPlane's tenants' webhooks, in the control
// plane's store, and delivers their events (Run). It is safe for
// concurrent use.
type Service struct {
	cp     *controlplane.ControlPlane
	st     store.Store
	egress *egress.Policy
	sealer *seal.Sealer
	now    func() time.Time
	o      Options
	log    *slog.Logger
	holder string // this Service's id in leases
	wake   chan struct{}
}

// New returns the Service of cp's tenants' webhooks (nil opts: defaults).
// It fails on a SecretKey that is not 32 bytes.
func New(cp *controlplane.ControlPlane, opts *Options) (*Service, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	s := &Service{cp: cp, st: cp.Store(), egress: o.Egress, now: o.Clock, log: o.Logger, wake: make(chan struct{}, 1)}
	if s.egress == nil {
		p, err := egress.New(nil)
		if err != nil {
			return nil, err
		}
		s.egress = p
	}
	if o.SecretKey != nil {
		sl, err := seal.New(o.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		s.sealer = sl
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	s.o = o
	s.holder = newID()
	return s, nil
}

// CreateWebhook registers a webhook of the tenant. It receives the events
// numbered after its registration. Errors: *apierr.ValidationError (loc
// ["body", member]), apierr.ErrConflict beyond MaxWebhooks, the store's.
func (s *Service) CreateWebhook(ctx context.Context, tenant string, req *CreateWebhookRequest) (*CreatedWebhook, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if err := s.ValidateCreate(req); err != nil {
		return nil, err
	}
	var generated string
	secret := ""
	if req.Secret != nil {
		secret = *req.Secret
	} else {
		generated = NewSecret()
		secret = generated
	}
	head, err := s.cp.EventHead(ctx, tenant)
	if err != nil {
		return nil, err
	}
	after, _ := strconv.ParseUint(head, 10, 64)
	now := wiretime.New(s.now())
	rec := &webhookRecord{ID: newID(), URL: req.URL, Events: slices.Clone(req.Events), Description: req.Description,
		Enabled: true, After: after, CreatedAt: now, UpdatedAt: now}
	rec.Secret = s.sealSecret(tenant, rec.ID, secret)
	err = s.st.Update(ctx, func(tx store.Tx) error {
		n := 0
		if err := tx.Scan(colWebhooks, tenant+"/", nil, func(string, []byte) (bool, error) { n++; return true, nil }); err != nil {
			return err
		}
		if n >= MaxWebhooks {
			return apierr.Conflictf("A workspace may have at most %d webhooks.", MaxWebhooks)
		}
		c, err := getCursor(tx, tenant)
		if errors.Is(err, store.ErrNotFound) {
			// The tenant's first webhook: its events are followed from here.
			c, err = &cursorRecord{After: after}, nil
		}
		if err != nil {
			return err
		}
		c.Made++
		rec.Seq = c.Made
		if err := putJSON(tx, colCursors, tenant, c); err != nil {
			return err
		}
		return putJSON(tx, colWebhooks, webhookKey(tenant, rec.ID), rec)
	})
	if err != nil {
		return nil, err
	}
	s.poke()
	w := rec.wire()
	return &CreatedWebhook{ID: w.ID, URL: w.URL, Events: w.Events, Description: w.Description, Enabled: w.Enabled,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Secret: generated}, nil
}

// ListWebhooks answers a page of the tenant's webhooks, newest first.
// Errors: *apierr.ValidationError for a bad q, the store's.
func (s *Service) ListWebhooks(ctx context.Context, tenant string, q *ListQuery) (*WebhookPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &ListQuery{}
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	var all []webhookRecord
	err := s.st.View(ctx, func(r store.Reader) error {
		all = nil
		return r.Scan(colWebhooks, tenant+"/", nil, func(_ string, v []byte) (bool, error) {
			var rec webhookRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return false, err
			}
			all = append(all, rec)
			return true, nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq > all[j].Seq })
	page := []Webhook{}
	for i := q.Offset; i < len(all) && len(page) < q.limit(); i++ {
		page = append(page, all[i].wire())
	}
	return &WebhookPage{Resources: page, Offset: q.Offset + len(page)}, nil
}

// GetWebhook answers the tenant's webhook. Errors: *apierr.NotFoundError
// (another tenant's webhook too), the store's.
func (s *Service) GetWebhook(ctx context.Context, tenant, id string) (*Webhook, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	var rec *webhookRecord
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = getWebhook(r, tenant, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	w := rec.wire()
	return &w, nil
}

// UpdateWebhook changes the members req gives. Disabling a webhook fails
// its pending deliveries. Errors: those of GetWebhook,
// *apierr.ValidationError.
func (s *Service) UpdateWebhook(ctx context.Context, tenant, id string, req *UpdateWebhookRequest) (*Webhook, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if err := s.ValidateUpdate(req); err != nil {
		return nil, err
	}
	var rec *webhookRecord
	err := s.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if rec, err = getWebhook(tx, tenant, id); err != nil {
			return err
		}
		now := s.now()
		if req.URL != nil {
			rec.URL = *req.URL
		}
		if req.Events != nil {
			rec.Events = slices.Clone(req.Events)
		}
		if req.Secret != nil {
			rec.Secret = s.sealSecret(tenant, rec.ID, *req.Secret)
		}
		if req.Description != nil {
			rec.Description = req.Description
		}
		if req.Enabled != nil && *req.Enabled != rec.Enabled {
			rec.Enabled = *req.Enabled
			if !rec.Enabled {
				if err := failPending(tx, tenant, rec.ID, now, "The webhook was disabled before the delivery succeeded."); err != nil {
					return err
				}
			} else {
				// Started again: with the events that follow, not those
				// that passed while it was stopped.
				c, err := getCursor(tx, tenant)
				if err != nil {
					return err
				}
				rec.After = c.After
			}
		}
		rec.UpdatedAt = wiretime.New(now)
		return putJSON(tx, colWebhooks, webhookKey(tenant, rec.ID), rec)
	})
	if err != nil {
		return nil, err
	}
	w := rec.wire()
	return &w, nil
}

// DeleteWebhook removes the tenant's webhook and its delivery log; its
// pending deliveries are not sent. Errors: those of GetWebhook.
func (s *Service) DeleteWebhook(ctx context.Context, tenant, id string) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	return s.st.Update(ctx, func(tx store.Tx) error {
		rec, err := getWebhook(tx, tenant, id)
		if err != nil {
			return err
		}
		var keys []string
		prefix := deliveryPrefix(tenant, rec.ID)
		err = tx.Scan(colDeliveries, prefix, nil, func(k string, v []byte) (bool, error) {
			var d deliveryRecord
			if err := json.Unmarshal(v, &d); err != nil {
				return false, err
			}
			keys = append(keys, k)
			if d.Due != 0 {
				keys = append(keys, "\x00"+pendingKey(tenant, d.Due, rec.ID, strings.TrimPrefix(k, prefix)))
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			col := colDeliveries
			if pk, ok := strings.CutPrefix(k, "\x00"); ok {
				col, k = colPending, pk
			}
			if err := tx.Delete(col, k); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if err := tx.Delete(colWebhooks, webhookKey(tenant, rec.ID)); err != nil {
			return err
		}
		// The tenant's last webhook: its events are no longer followed.
		more := false
		if err := tx.Scan(colWebhooks, tenant+"/", nil, func(string, []byte) (bool, error) { more = true; return false, nil }); err != nil {
			return err
		}
		if !more {
			return tx.Delete(colCursors, tenant)
		}
		return nil
	})
}

// ListDeliveries answers a page of the webhook's delivery log, newest
// first. Errors: those of GetWebhook, *apierr.ValidationError for a bad q.
func (s *Service) ListDeliveries(ctx context.Context, tenant, id string, q *ListQuery) (*DeliveryPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &ListQuery{}
	}
	if err := q.Validate(); err != nil {
		return nil, err
	}
	page := &DeliveryPage{Resources: []Delivery{}}
	err := s.st.View(ctx, func(r store.Reader) error {
		page.Resources = page.Resources[:0]
		rec, err := getWebhook(r, tenant, id)
		if err != nil {
			return err
		}
		skip, limit := q.Offset, q.limit()
		return r.Scan(colDeliveries, deliveryPrefix(tenant, rec.ID), &store.ScanOptions{Reverse: true}, func(_ string, v []byte) (bool, error) {
			if skip > 0 {
				skip--
				return true, nil
			}
			var d deliveryRecord
			if err := json.Unmarshal(v, &d); err != nil {
				return false, err
			}
			page.Resources = append(page.Resources, d.Delivery)
			return len(page.Resources) < limit, nil
		})
	})
	if err != nil {
		return nil, err
	}
	page.Offset = q.Offset + len(page.Resources)
	return page, nil
}

// ValidateCreate reports req's problems as a *apierr.ValidationError.
func (s *Service) ValidateCreate(req *CreateWebhookRequest) error {
	var ps []apierr.Problem
	if req.URL == "" {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "url"}, Type: apierr.TypeMissing, Msg: "Field required"})
	} else {
		ps = s.checkURL(ps, req.URL)
	}
	if req.Events == nil {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "events"}, Type: apierr.TypeMissing, Msg: "Field required"})
	} else {
		ps = checkEvents(ps, req.Events)
	}
	if req.Secret != nil {
		ps = checkSecret(ps, *req.Secret)
	}
	if req.Description != nil {
		ps = checkDescription(ps, *req.Description)
	}
	return apierr.Validation(ps...)
}

// ValidateUpdate reports req's problems as a *apierr.ValidationError.
func (s *Service) ValidateUpdate(req *UpdateWebhookRequest) error {
	var ps []apierr.Problem
	if req.URL != nil {
		ps = s.checkURL(ps, *req.URL)
	}
	if req.Events != nil {
		ps = checkEvents(ps, req.Events)
	}
	if req.Secret != nil {
		ps = checkSecret(ps, *req.Secret)
	}
	if req.Description != nil {
		ps = checkDescription(ps, *req.Description)
	}
	return apierr.Validation(ps...)
}

func (s *Service) checkURL(ps []apierr.Problem, raw string) []apierr.Problem {
	loc := []any{"body", "url"}
	add := func(typ, msg string) []apierr.Problem {
		return append(ps, apierr.Problem{Loc: loc, Type: typ, Msg: msg})
	}
	if len(raw) > MaxURLLen {
		return add(apierr.TypeStringTooLong, fmt.Sprintf("String should have at most %d characters", MaxURLLen))
	}
	u, err := url.Parse(raw)
	switch {
	case strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' }):
		return add(apierr.TypeURLParsing, "URL must be printable ASCII without spaces (percent-encode the rest, punycode for hosts)")
	case err != nil || !u.IsAbs() || u.Host == "" || u.Hostname() == "":
		return add(apierr.TypeURLParsing, "Input should be a valid absolute URL")
	case u.User != nil:
		return add(apierr.TypeURLParsing, "URL must not contain credentials")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return add(apierr.TypeURLParsing, "URL must not contain a fragment")
	}
	var re *egress.RefusedError
	switch err := s.egress.CheckURL(u); {
	case err == nil:
		return ps
	case errors.As(err, &re) && re.Scheme != "":
		return add(apierr.TypeURLScheme, "URL scheme should be 'https' ('http' only for hosts the server's operator allows)")
	case errors.As(err, &re) && re.Addr.IsValid():
		return add(apierr.TypeURLHost, "URL host "+re.Addr.String()+" is not a public address ("+re.Reason+
			"); this server reaches such hosts only when its operator allows them")
	default:
		return add(apierr.TypeURLHost, "URL host "+u.Hostname()+" is this server itself; this server reaches such hosts only when its operator allows them")
	}
}

func checkEvents(ps []apierr.Problem, events []string) []apierr.Problem {
	if len(events) == 0 {
		return append(ps, apierr.Problem{Loc: []any{"body", "events"}, Type: apierr.TypeTooShort, Msg: "List should have at least 1 item"})
	}
	known := EventTypes()
	for i, e := range events {
		loc := []any{"body", "events", i}
		switch {
		case !slices.Contains(known, e):
			ps = append(ps, apierr.Problem{Loc: loc, Type: apierr.TypeLiteralError, Msg: literalMsg(known)})
		case slices.Index(events, e) < i:
			ps = append(ps, apierr.Problem{Loc: loc, Type: apierr.TypeDuplicate, Msg: "Event type " + strconv.Quote(e) + " is given twice"})
		}
	}
	return ps
}

func checkSecret(ps []apierr.Problem, secret string) []apierr.Problem {
	if _, err := secretKey(secret); err != nil {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "secret"}, Type: apierr.TypeStringPatternMismatch,
			Msg: fmt.Sprintf("Secret should be 'whsec_' and the base64 of %d to %d bytes", minSecretBytes, maxSecretBytes)})
	}
	return ps
}

func checkDescription(ps []apierr.Problem, d string) []apierr.Problem {
	if n := len([]rune(d)); n > MaxDescriptionLen {
		ps = append(ps, apierr.Problem{Loc: []any{"body", "description"}, Type: apierr.TypeStringTooLong,
			Msg: fmt.Sprintf("String should have at most %d characters", MaxDescriptionLen)})
	}
	return ps
}

// literalMsg is "Input should be 'a', 'b' or 'c'".
func literalMsg(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = "'" + v + "'"
	}
	return "Input should be " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// NewSecret returns a fresh signing secret: "whsec_" and the base64 of 24
// random bytes.
func NewSecret() string {
	b := make([]byte, minSecretBytes)
	_, _ = rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// newID is a random (version 4) UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// sealSecret is the stored form of the webhook's secret.
func (s *Service) sealSecret(tenant, id, secret string) []byte {
	if s.sealer == nil {
		return []byte(secret)
	}
	return s.sealer.Seal([]byte(secret), sealAAD(tenant, id))
}

// openSecret is the secret of the webhook's stored form.
func (s *Service) openSecret(tenant string, rec *webhookRecord) (string, error) {
	if s.sealer == nil {
		return string(rec.Secret), nil
	}
	b, err := s.sealer.Open(rec.Secret, sealAAD(tenant, rec.ID))
	return string(b), err
}

func sealAAD(tenant, id string) string { return "webhooks/" + tenant + "/" + id }
