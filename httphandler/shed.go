package httphandler

import (
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Load shedding: how much work the handler takes on at once (wire contract
// section 9, "Refused load is 503 (Retry-After)"). A request beyond a cap is
// answered at once; nothing waits in a queue, so the requests admitted keep
// their latency when a burst arrives.

// DefaultMaxInFlightPerCPU is the default cap of requests in service at
// once, per processor the Go runtime uses (GOMAXPROCS), and never below
// 64: 64 on one or two, 256 on eight. See the package documentation's
// "Load" section for how it was chosen.
const DefaultMaxInFlightPerCPU = 32

// DefaultMaxInFlight is the default cap of requests in service at once:
// DefaultMaxInFlightPerCPU times GOMAXPROCS, at least 64.
func DefaultMaxInFlight() int { return max(64, DefaultMaxInFlightPerCPU*runtime.GOMAXPROCS(0)) }

// DefaultMaxLongPolls is the default cap of long polls open at once.
const DefaultMaxLongPolls = 256

// DefaultMaxUploads is the default cap of upload PUTs streaming at once.
const DefaultMaxUploads = 64

// DefaultMinUploadRate is the default minimum rate of an upload PUT, in
// bytes a second (16 KiB/s), measured over DefaultUploadRateWindow.
const DefaultMinUploadRate = 16 << 10

// DefaultUploadRateWindow is the default span over which an upload's
// rate is measured.
const DefaultUploadRateWindow = 30 * time.Second

// DefaultPublicMaxBodyBytes is the default limit of a request body on the
// public routes (64 KiB): the dashboard's forms and sign-in, the
// registry realm, the OAuth callback. The GitHub webhook has its own
// (Options.WebhookMaxBodyBytes), and uploads theirs (package uploads).
const DefaultPublicMaxBodyBytes = 64 << 10

// DefaultPublicReadTimeout is the default time a public route's request
// body has to arrive.
const DefaultPublicReadTimeout = 10 * time.Second

// minShare is the smallest default share of a cap: a tenant may hold at
// least this many places (or the whole cap, when it is smaller).
const minShare = 8

// LoadLimits bound the work the handler takes on: how many requests it
// serves at once, how many long polls it holds open and how many uploads
// it receives, how much of each one client may take, how long it waits
// for request bodies, and how fast each client may send requests. A nil
// *LoadLimits, and every zero field, means the default; see the package
// documentation's "Load" section.
//
// A client is the tenant of an authenticated request (the one it acts
// for), the tenant an upload URL names, and the client address
// (RateLimit.ClientAddr) of a request to any other public route.
type LoadLimits struct {
	// MaxInFlight caps the requests in service at once, long polls and
	// uploads aside. One more is answered at once with 503, Retry-After: 1
	// and a JSON detail. Default (0): DefaultMaxInFlight().
	// Negative: no cap.
	MaxInFlight int
	// MaxInFlightPerTenant caps the places of MaxInFlight one client
	// holds at once; one more of its requests is a 503 naming its share,
	// while other clients are served. Default (0): half of MaxInFlight,
	// at least 8 (and at most MaxInFlight); none when MaxInFlight has no
	// cap. Negative: no share.
	MaxInFlightPerTenant int
	// MaxLongPolls caps the long polls open at once (GET
	// /v2/auth/wait/{auth_id}, the event streams, GET of a revision with
	// ?wait=, an agent's claim), which wait for minutes and so have their
	// own cap: they never take a place of MaxInFlight, and ordinary
	// requests never take theirs. Default (0): DefaultMaxLongPolls.
	// Negative: no cap.
	MaxLongPolls int
	// MaxLongPollsPerTenant caps the long polls one client holds open.
	// Default (0): a quarter of MaxLongPolls, at least 8 (and at most
	// MaxLongPolls); none when MaxLongPolls has no cap. Negative: no
	// share.
	MaxLongPollsPerTenant int
	// MaxUploads caps the upload PUTs (Options.Uploads) streaming at once;
	// they take no place of MaxInFlight, since they last as long as their
	// client takes to send. Default (0): DefaultMaxUploads. Negative: no
	// cap.
	MaxUploads int
	// MaxUploadsPerTenant caps the upload PUTs of one tenant (the one
	// the URL names) at once. Default (0): an eighth of MaxUploads, at
	// least 8 (and at most MaxUploads); none when MaxUploads has no cap.
	// Negative: no share.
	MaxUploadsPerTenant int
	// MinUploadRate is the rate, in bytes a second, below which an upload
	// PUT is cut: each UploadRateWindow of waiting for the client must
	// bring MinUploadRate times its seconds in bytes, or the read ends,
	// the upload fails (400) and a Warn record "upload cut: below the
	// minimum rate" says so. Time the server itself takes (storing what
	// it read) does not count. Default (0): DefaultMinUploadRate.
	// Negative: no minimum (an upload may take until its URL expires).
	MinUploadRate int64
	// UploadRateWindow is the span over which MinUploadRate is measured.
	// Default (0): DefaultUploadRateWindow.
	UploadRateWindow time.Duration
	// PublicMaxBodyBytes limits the request body of the public routes
	// (413 beyond) but the GitHub webhook, whose limit is
	// Options.WebhookMaxBodyBytes, and uploads, which stream. Default
	// (0): DefaultPublicMaxBodyBytes.
	PublicMaxBodyBytes int64
	// PublicReadTimeout is how long the server waits for the request body
	// of a public route (the GitHub webhook's included, uploads aside),
	// from when it starts reading it; beyond it the answer is 408 and
	// the connection is closed. Default (0): DefaultPublicReadTimeout.
	PublicReadTimeout time.Duration
	// RateLimit limits each client's request rate. Default nil: no rate
	// limit (cmd/deployplane sets one).
	RateLimit *RateLimit
}

// retryAfterBusy is the Retry-After of a 503 for load: one second, long
// enough for the requests in service to finish, short enough that a
// client retrying does not wait for nothing.
const retryAfterBusy = "1"

// The details of the 503 answers for load.
const (
	detailBusy         = "The server is busy: too many requests are in progress. Retry after the delay in Retry-After."
	detailBusyLongPoll = "The server is busy: too many long polls are open. Retry after the delay in Retry-After."
	detailBusyUploads  = "The server is busy: too many uploads are in progress. Retry after the delay in Retry-After."
)

// gate is a non-blocking counting semaphore: enter succeeds while fewer
// than max holders are in, and fails at once otherwise. A max of 0 or less
// admits everyone.
type gate struct {
	max int64
	n   atomic.Int64
}

func (g *gate) enter() bool {
	if g.max <= 0 {
		return true
	}
	for {
		n := g.n.Load()
		if n >= g.max {
			return false
		}
		if g.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// leave gives back a place taken by enter.
func (g *gate) leave() {
	if g.max > 0 {
		g.n.Add(-1)
	}
}

// pool is a cap of places (gate) and each client's share of it: at most
// share places held by one client key (0: no share).
type pool struct {
	total gate
	share int
	busy  string // the detail of a 503 when the cap is full
	what  string // what a place is, for the detail of a 503 when a share is: "requests in progress"

	mu   sync.Mutex
	held map[string]*share // by client key
	idle int               // the shares of held that hold no place
}

// maxIdleShares is the most shares holding no place a pool keeps, so that
// a client's requests find its key: beyond, they are all dropped.
const maxIdleShares = 1024

// share is the places one client holds of a pool.
type share struct {
	key string // the client key, as held's key
	n   int
}

// newPool returns a pool of max places (0 or less: no cap) and shares of
// perClient places (0 or less: none).
func newPool(max, perClient int, busy, what string) pool {
	return pool{total: gate{max: int64(max)}, share: perClient, busy: busy, what: what, held: map[string]*share{}}
}

// enterShare takes a place of the share of the client key prefix+name,
// and returns that key; ok is false when the client holds its share
// already. While the client holds places the key is the table's, so that
// its next requests do not build it again. Without shares it takes
// nothing and returns "".
func (p *pool) enterShare(prefix, name string) (key string, ok bool) {
	if p.share <= 0 {
		return "", true
	}
	var buf [96]byte
	k := append(append(buf[:0], prefix...), name...)
	p.mu.Lock()
	defer p.mu.Unlock()
	sh := p.held[string(k)]
	if sh == nil {
		sh = &share{key: string(k)}
		p.held[sh.key] = sh
		p.idle++
	}
	if sh.n >= p.share {
		return sh.key, false
	}
	if sh.n == 0 {
		p.idle--
	}
	sh.n++
	return sh.key, true
}

// leaveShare gives back a place of key's share.
func (p *pool) leaveShare(key string) {
	if p.share <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sh := p.held[key]
	if sh == nil || sh.n == 0 {
		return
	}
	if sh.n--; sh.n > 0 {
		return
	}
	if p.idle++; p.idle > maxIdleShares {
		for k, sh := range p.held {
			if sh.n == 0 {
				delete(p.held, k)
			}
		}
		p.idle = 0
	}
}

// busyErr is the 503 of a full cap; Retry-After is set on w.
func (p *pool) busyErr(w http.ResponseWriter) error {
	w.Header().Set("Retry-After", retryAfterBusy)
	return &statusError{status: http.StatusServiceUnavailable, detail: p.busy}
}

// shareErr is the 503 of a full share of key; Retry-After is set on w.
func (p *pool) shareErr(w http.ResponseWriter, key string) error {
	who := "workspace"
	if strings.HasPrefix(key, addrClient) {
		who = "client address"
	}
	w.Header().Set("Retry-After", retryAfterBusy)
	return &statusError{status: http.StatusServiceUnavailable, detail: fmt.Sprintf(
		"The server is busy: this %s already has %d %s, its share of the server. Retry after the delay in Retry-After.",
		who, p.share, p.what)}
}

// The client keys of shares: a tenant, or the address of a request to a
// public route.
const (
	tenantClient = "tenant "
	addrClient   = "addr "
)

// ticket is what one request holds of a pool: a place of its cap and,
// once its client is known, one of the client's share. A nil ticket holds
// nothing.
type ticket struct {
	p      *pool
	client string // the share's key; "" while the client is unknown
	held   bool   // whether the places are held
}

// take takes the ticket's places again after leave: 503 when the cap or
// the client's share is full (Retry-After set on w). A nil ticket takes
// nothing.
func (t *ticket) take(w http.ResponseWriter) error {
	if t == nil {
		return nil
	}
	if !t.p.total.enter() {
		return t.p.busyErr(w)
	}
	if t.client != "" {
		if _, ok := t.p.enterShare(t.client, ""); !ok {
			t.p.total.leave()
			return t.p.shareErr(w, t.client)
		}
	}
	t.held = true
	return nil
}

// leave gives back the places the ticket holds, if any.
func (t *ticket) leave() {
	if t == nil || !t.held {
		return
	}
	t.held = false
	if t.client != "" {
		t.p.leaveShare(t.client)
	}
	t.p.total.leave()
}

// load is a handler's admission control: the three pools, the rate
// limiter (nil: none), and the limits on reading request bodies.
type load struct {
	inFlight  pool
	longPolls pool
	uploads   pool
	rate      *rateLimiter
	addr      func(*http.Request) string // the client address of a public request

	minUploadRate int64         // 0: none
	uploadWindow  time.Duration // over which minUploadRate is measured
	publicMaxBody int64
	publicTimeout time.Duration
}

// newLoad builds the admission control of opts (nil: defaults).
func newLoad(opts *LoadLimits) *load {
	var o LoadLimits
	if opts != nil {
		o = *opts
	}
	inFlight := capOf(o.MaxInFlight, DefaultMaxInFlight())
	longPolls := capOf(o.MaxLongPolls, DefaultMaxLongPolls)
	uploads := capOf(o.MaxUploads, DefaultMaxUploads)
	l := &load{
		inFlight:      newPool(inFlight, shareOf(o.MaxInFlightPerTenant, inFlight, 2), detailBusy, "requests in progress"),
		longPolls:     newPool(longPolls, shareOf(o.MaxLongPollsPerTenant, longPolls, 4), detailBusyLongPoll, "long polls open"),
		uploads:       newPool(uploads, shareOf(o.MaxUploadsPerTenant, uploads, 8), detailBusyUploads, "uploads in progress"),
		rate:          newRateLimiter(o.RateLimit),
		addr:          remoteAddr,
		minUploadRate: o.MinUploadRate,
		uploadWindow:  o.UploadRateWindow,
		publicMaxBody: o.PublicMaxBodyBytes,
		publicTimeout: o.PublicReadTimeout,
	}
	if o.RateLimit != nil && o.RateLimit.ClientAddr != nil {
		l.addr = o.RateLimit.ClientAddr
	}
	switch {
	case l.minUploadRate == 0:
		l.minUploadRate = DefaultMinUploadRate
	case l.minUploadRate < 0:
		l.minUploadRate = 0
	}
	if l.uploadWindow <= 0 {
		l.uploadWindow = DefaultUploadRateWindow
	}
	if l.publicMaxBody <= 0 {
		l.publicMaxBody = DefaultPublicMaxBodyBytes
	}
	if l.publicTimeout <= 0 {
		l.publicTimeout = DefaultPublicReadTimeout
	}
	return l
}

// capOf is the cap a LoadLimits field sets: def for 0, none (0) for a
// negative value.
func capOf(set, def int) int {
	switch {
	case set == 0:
		return def
	case set < 0:
		return 0
	}
	return set
}

// shareOf is the share a LoadLimits field sets of a cap of total places
// (0: none): by default total/div, at least minShare and at most total;
// none (0) for a negative value or a pool without a cap.
func shareOf(set, total, div int) int {
	switch {
	case set < 0:
		return 0
	case set > 0:
		return set
	case total <= 0:
		return 0
	}
	return min(total, max(minShare, total/div))
}

// poolOf is the pool r draws from: none (nil) for the health routes,
// which must answer while the server is saturated (a load balancer or
// Kubernetes would otherwise take a busy server for a dead one and pull
// it, moving its load onto the others), the uploads' for the PUTs of
// upload URLs, the long polls' for requests that wait, the in-flight
// pool for every other request, unrouted ones included. Routes that wait
// are named here, so that new ones (event streams, ?wait= on a revision)
// take the long-poll pool where they are added.
func (l *load) poolOf(rt route, r *http.Request) *pool {
	if rt.upload {
		return &l.uploads
	}
	if rt.path == agentClaimPath {
		return &l.longPolls
	}
	if rt.method != http.MethodGet {
		return &l.inFlight
	}
	switch rt.path {
	case "/healthz", "/readyz":
		return nil
	case "/v2/auth/wait/{auth_id}", "/v2/events", "/v2/deployments/{deployment_id}/events", "/ui/stream/{stream...}":
		return &l.longPolls
	case "/v2/deployments/{deployment_id}/revisions/{revision_id}":
		if r.URL.Query().Has("wait") {
			return &l.longPolls
		}
	}
	return &l.inFlight
}

// admit decides whether the handler serves c's request, before the
// endpoint runs: the pool's cap (503), then the credentials (for routes
// that need them) and the rate limit (429), then the client's share of
// the pool (503). It returns the tenant of an authenticated request and
// the ticket of the places the request holds (c.held), which the caller
// must leave (defer t.leave()) when the request is done; nil, which
// leaves nothing, when it holds none. Headers of the answer
// (Retry-After, RateLimit-*) are set on c's. start is when the request
// began, the rate limit's time unless RateLimit.Now sets its clock.
func (h *handler) admit(c *call, rt route, start time.Time) (tenant string, t *ticket, err error) {
	r := c.r
	p := h.load.poolOf(rt, r)
	if p == nil {
		// The health routes: no cap, no rate limit.
		if !rt.public {
			_, tenant, err = h.authenticate(r, rt)
		}
		return tenant, nil, err
	}
	if !p.total.enter() {
		return "", nil, p.busyErr(c.w)
	}
	t = &c.held
	*t = ticket{p: p, held: true}
	tenant, err = h.check(c, rt, start)
	if err != nil {
		return tenant, t, err
	}
	prefix, name := h.load.clientOf(r, rt, tenant)
	client, ok := p.enterShare(prefix, name)
	if !ok {
		return "", t, p.shareErr(c.w, client)
	}
	t.client = client
	return tenant, t, nil
}

// clientOf is the key of r's share, as a prefix and a name: its tenant
// when it has one, the tenant an upload URL names, the client address
// otherwise.
func (l *load) clientOf(r *http.Request, rt route, tenant string) (prefix, name string) {
	if tenant != "" {
		return tenantClient, tenant
	}
	if rt.upload {
		if c, ok := CanonicalTenant(r.PathValue("tenant")); ok {
			return tenantClient, c
		}
	}
	return addrClient, l.addr(r)
}

// check checks the credentials of c's request (for routes that need
// them) and the rate limit, and returns the tenant of an authenticated
// request. The client address is read only when the rate limit needs
// it: for a public route, while some address has failed attempts in the
// table, for a failed attempt, and for a principal without an ID.
func (h *handler) check(c *call, rt route, start time.Time) (tenant string, err error) {
	r := c.r
	rl := h.load.rate
	if rl == nil {
		if !rt.public {
			_, tenant, err = h.authenticate(r, rt)
		}
		return tenant, err
	}
	now := start
	if rl.now != nil {
		now = rl.now()
	}
	addr, haveAddr := "", false
	clientAddr := func() string {
		if !haveAddr {
			addr, haveAddr = rl.clientAddr(r), true
		}
		return addr
	}
	if rt.public {
		return "", rl.take(&c.hdr, keyPublic, clientAddr(), now)
	}
	// An address that has spent its allowance on failed attempts is not
	// heard again until it refills, valid keys or not: guessing keys costs
	// an attacker the address's rate, and the server little more.
	if rl.anyFailed() {
		if err := rl.check(&c.hdr, keyFailed, clientAddr(), now); err != nil {
			return "", err
		}
	}
	p, tenant, err := h.authenticate(r, rt)
	if p == nil {
		if isUnauthorized(err) {
			_ = rl.take(&c.hdr, keyFailed, clientAddr(), now) // the 401 stands; the attempt is charged
		}
		return "", err
	}
	// Every request of an authenticated principal is charged to it, the
	// 403s included; its address is not charged, so that clients sharing
	// one (behind NAT) do not share a bucket.
	prefix, name := keyPrincipal, p.ID
	if p.ID == "" {
		prefix, name = keyAnonymous, clientAddr()
	}
	if lerr := rl.take(&c.hdr, prefix, name, now); lerr != nil {
		return "", lerr
	}
	return tenant, err
}

// isUnauthorized reports whether err is the handler's 401.
func isUnauthorized(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == http.StatusUnauthorized
}
