package httphandler

import (
	"errors"
	"net/http"
	"runtime"
	"sync/atomic"
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

// LoadLimits bound the work the handler takes on: how many requests it
// serves at once, how many long polls it holds open, and how fast each
// client may send requests. A nil *LoadLimits, and every zero field, means
// the default; see the package documentation's "Load" section.
type LoadLimits struct {
	// MaxInFlight caps the requests in service at once, long polls aside.
	// One more is answered at once with 503, Retry-After: 1 and a JSON
	// detail. Default (0): DefaultMaxInFlight().
	// Negative: no cap.
	MaxInFlight int
	// MaxLongPolls caps the long polls open at once (GET
	// /v2/auth/wait/{auth_id}), which wait for minutes and so have their
	// own cap: they never take a place of MaxInFlight, and ordinary
	// requests never take theirs. Default (0): DefaultMaxLongPolls.
	// Negative: no cap.
	MaxLongPolls int
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

// leave gives back a place taken by enter; a nil gate has none.
func (g *gate) leave() {
	if g != nil && g.max > 0 {
		g.n.Add(-1)
	}
}

// load is a handler's admission control: the two gates and the rate
// limiter (nil: none).
type load struct {
	inFlight  gate
	longPolls gate
	rate      *rateLimiter
}

// newLoad builds the admission control of opts (nil: defaults).
func newLoad(opts *LoadLimits) *load {
	var o LoadLimits
	if opts != nil {
		o = *opts
	}
	l := &load{}
	switch {
	case o.MaxInFlight == 0:
		l.inFlight.max = int64(DefaultMaxInFlight())
	case o.MaxInFlight > 0:
		l.inFlight.max = int64(o.MaxInFlight)
	}
	switch {
	case o.MaxLongPolls == 0:
		l.longPolls.max = DefaultMaxLongPolls
	case o.MaxLongPolls > 0:
		l.longPolls.max = int64(o.MaxLongPolls)
	}
	l.rate = newRateLimiter(o.RateLimit)
	return l
}

// gateOf is the gate r goes through: none (nil) for the health routes,
// which must answer while the server is saturated (a load balancer or
// Kubernetes would otherwise take a busy server for a dead one and pull
// it, moving its load onto the others), the long-poll gate for requests
// that wait, the in-flight gate for every other request, unrouted ones
// included. Routes that wait are named here, so that new ones (event
// streams, ?wait= on a revision) take the long-poll gate where they are
// added.
func (l *load) gateOf(rt route, r *http.Request) *gate {
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

// admit decides whether the handler serves r, before the endpoint runs:
// the concurrency caps (503), then the credentials (for routes that need
// them) and the rate limit (429). It returns the tenant of an
// authenticated request and the gate whose place the request holds, which
// the caller must leave (defer release.leave()) when the request is done;
// nil, which leaves nothing, when it holds none. Headers of the answer
// (Retry-After, RateLimit-*) are set on w.
func (h *handler) admit(w http.ResponseWriter, r *http.Request, rt route) (tenant string, release *gate, err error) {
	g := h.load.gateOf(rt, r)
	if g == nil {
		// The health routes: no cap, no rate limit.
		if !rt.public {
			_, tenant, err = h.authenticate(r)
		}
		return tenant, nil, err
	}
	if !g.enter() {
		w.Header().Set("Retry-After", retryAfterBusy)
		detail := detailBusy
		if g == &h.load.longPolls {
			detail = detailBusyLongPoll
		}
		return "", nil, &statusError{status: http.StatusServiceUnavailable, detail: detail}
	}
	release = g
	rl := h.load.rate
	if rl == nil {
		if !rt.public {
			_, tenant, err = h.authenticate(r)
		}
		return tenant, release, err
	}
	now := rl.now()
	addr := rl.clientAddr(r)
	if rt.public {
		return "", release, rl.take(w, publicKey(addr), now)
	}
	// An address that has spent its allowance on failed attempts is not
	// heard again until it refills, valid keys or not: guessing keys costs
	// an attacker the address's rate, and the server little more.
	if err := rl.check(w, failedKey(addr), now); err != nil {
		return "", release, err
	}
	p, tenant, err := h.authenticate(r)
	if p == nil {
		if isUnauthorized(err) {
			_ = rl.take(w, failedKey(addr), now) // the 401 stands; the attempt is charged
		}
		return "", release, err
	}
	// Every request of an authenticated principal is charged to it, the
	// 403s included; its address is not charged, so that clients sharing
	// one (behind NAT) do not share a bucket.
	if lerr := rl.take(w, principalKey(p, addr), now); lerr != nil {
		return "", release, lerr
	}
	return tenant, release, err
}

// isUnauthorized reports whether err is the handler's 401.
func isUnauthorized(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.status == http.StatusUnauthorized
}
