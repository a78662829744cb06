package httphandler

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Rate limits: a token bucket per client (wire contract section 9, "a rate
// limit is 429 (Retry-After, RateLimit-Limit, RateLimit-Remaining,
// RateLimit-Reset)").

// DefaultMaxRateClients is the default bound of the rate limiter's table of
// clients.
const DefaultMaxRateClients = 100_000

// RateLimit is a token bucket per client: a client may send Burst requests
// at once, and PerSecond a second after that. The client is the
// authenticated principal (Principal.ID) on the routes that need
// credentials, and the client address elsewhere: on the public routes, and
// for requests whose credentials fail, so that guessing keys is bounded by
// the address's rate.
type RateLimit struct {
	// PerSecond is the sustained rate of each client, in requests per
	// second. Zero or negative: no rate limit.
	PerSecond float64
	// Burst is how many requests a client may send at once (the bucket's
	// size, RateLimit-Limit). Default (0): twice PerSecond, at least 1.
	Burst int
	// MaxClients bounds the table of clients the limiter remembers.
	// Clients whose bucket has refilled are dropped first (which changes
	// nothing: a full bucket is what a new client gets); only with more
	// clients active at once than this are others dropped, at random.
	// Default (0): DefaultMaxRateClients.
	MaxClients int
	// ClientAddr names the client of a request when it has no principal,
	// for the rate limit and for the shares of LoadLimits (which use it
	// even when PerSecond sets no rate limit). Default nil: the IP address of Request.RemoteAddr, IPv6 addresses
	// by their /64 prefix (what one subscriber usually holds). Behind a
	// reverse proxy every request has the proxy's address; give a
	// function that reads the header the proxy sets (and that clients
	// cannot forge past it).
	ClientAddr func(r *http.Request) string
	// Now is the limiter's clock. Default nil: time.Now (the time the
	// request began).
	Now func() time.Time
}

// rateLimiter is a table of token buckets by client key.
type rateLimiter struct {
	limit      rate.Limit
	burst      int
	maxKeys    int
	now        func() time.Time // RateLimit.Now; nil: the request's start
	clientAddr func(*http.Request) string

	// The RateLimit-Limit and the detail every answer shares.
	limitHeader string
	detail      string
	// counts are the decimal strings of 0 to the burst, when it is small,
	// for RateLimit-Remaining.
	counts []string

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	sweepAt int // the table's size at which the next insert sweeps it
	// failed counts the buckets of failed attempts (keyFailed) in the
	// table, so that a request need not look for its address's while
	// there is none.
	failed atomic.Int64
}

// maxCounts is the largest burst whose counts are kept.
const maxCounts = 1024

// minSweep is the smallest table the limiter sweeps for refilled buckets.
const minSweep = 1024

// newRateLimiter returns the limiter of o, or nil when o sets no limit.
func newRateLimiter(o *RateLimit) *rateLimiter {
	if o == nil || !(o.PerSecond > 0) {
		return nil
	}
	l := &rateLimiter{
		limit:      rate.Limit(o.PerSecond),
		burst:      o.Burst,
		maxKeys:    o.MaxClients,
		now:        o.Now,
		clientAddr: o.ClientAddr,
		buckets:    map[string]*rate.Limiter{},
	}
	if l.burst <= 0 {
		l.burst = max(1, int(math.Ceil(2*o.PerSecond)))
	}
	if l.maxKeys <= 0 {
		l.maxKeys = DefaultMaxRateClients
	}
	if l.clientAddr == nil {
		l.clientAddr = remoteAddr
	}
	l.sweepAt = min(minSweep, l.maxKeys)
	l.limitHeader = strconv.Itoa(l.burst)
	if l.burst <= maxCounts {
		l.counts = make([]string, l.burst+1)
		for i := range l.counts {
			l.counts[i] = strconv.Itoa(i)
		}
	}
	l.detail = fmt.Sprintf("Rate limit exceeded: at most %s requests per second, in bursts of %d, per API key "+
		"(per client address for requests without valid credentials). Retry after the delay in Retry-After.",
		strconv.FormatFloat(o.PerSecond, 'f', -1, 64), l.burst)
	return l
}

// remoteAddr is the default RateLimit.ClientAddr.
func remoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}

// The table's keys, prefixes of a name: a principal (by its ID), one
// without an ID (an Authenticator may leave it empty; by its address),
// the public requests of an address, and the failed authentication
// attempts of an address. The last two are apart so that a client reading
// GET /openapi.json does not lock out the clients with valid keys that
// share its address.
const (
	keyPrincipal = "principal "
	keyAnonymous = "anonymous "
	keyPublic    = "public "
	keyFailed    = "failed "
)

// take spends a token of the bucket of the key prefix+name at now. It
// sets the RateLimit-* headers on hs and, when the bucket is empty,
// Retry-After, returning the 429.
func (l *rateLimiter) take(hs *replyHeaders, prefix, name string, now time.Time) error {
	var buf [128]byte
	k := append(append(buf[:0], prefix...), name...)
	l.mu.Lock()
	b := l.buckets[string(k)]
	if b == nil {
		b = l.insert(string(k), prefix == keyFailed, now)
	}
	ok := b.AllowN(now, 1)
	tokens := b.TokensAt(now)
	l.mu.Unlock()
	return l.answer(hs, ok, tokens)
}

// check is take without spending: it answers the 429 when the bucket of
// prefix+name is empty at now, and sets no header otherwise.
func (l *rateLimiter) check(hs *replyHeaders, prefix, name string, now time.Time) error {
	var buf [128]byte
	k := append(append(buf[:0], prefix...), name...)
	l.mu.Lock()
	b := l.buckets[string(k)]
	tokens := float64(l.burst)
	if b != nil {
		tokens = b.TokensAt(now)
	}
	l.mu.Unlock()
	if tokens >= 1 {
		return nil
	}
	return l.answer(hs, false, tokens)
}

// anyFailed reports whether the table may hold a bucket of failed
// attempts; while it holds none, check of keyFailed passes.
func (l *rateLimiter) anyFailed() bool { return l.failed.Load() > 0 }

// answer sets the headers of a bucket holding tokens, and returns the 429
// when the request was not allowed.
func (l *rateLimiter) answer(hs *replyHeaders, ok bool, tokens float64) error {
	hs.set("Ratelimit-Limit", l.limitHeader)
	hs.set("Ratelimit-Remaining", l.count(int(max(tokens, 0))))
	hs.set("Ratelimit-Reset", l.secondsFor(float64(l.burst)-tokens))
	if ok {
		return nil
	}
	hs.set("Retry-After", l.secondsFor(max(1-tokens, 0)))
	return &statusError{status: http.StatusTooManyRequests, detail: l.detail}
}

// count is n in decimal.
func (l *rateLimiter) count(n int) string {
	if n < len(l.counts) {
		return l.counts[n]
	}
	return strconv.Itoa(n)
}

// secondsFor is how many whole seconds, rounded up, the bucket takes to
// gain n tokens (at least 1 when n > 0, since HTTP counts in seconds).
func (l *rateLimiter) secondsFor(n float64) string {
	if n <= 1e-9 {
		return "0"
	}
	s := max(math.Ceil(n/float64(l.limit)-1e-9), 1)
	if s < 1<<31 {
		return l.count(int(s))
	}
	return strconv.FormatFloat(s, 'f', 0, 64)
}

// insert adds a full bucket for key, a new key, and returns it; failed
// says whether key is of keyFailed. l.mu is held.
func (l *rateLimiter) insert(key string, failed bool, now time.Time) *rate.Limiter {
	if len(l.buckets) >= l.sweepAt {
		l.sweep(now)
	}
	b := rate.NewLimiter(l.limit, l.burst)
	l.buckets[key] = b
	if failed {
		l.failed.Add(1)
	}
	return b
}

// remove drops key's bucket. l.mu is held.
func (l *rateLimiter) remove(key string) {
	delete(l.buckets, key)
	if strings.HasPrefix(key, keyFailed) {
		l.failed.Add(-1)
	}
}

// sweep drops the buckets that are full at now: a full bucket is what a
// new key gets, so dropping it changes nothing. When more than
// l.maxKeys-1 remain (that many clients active within a refill time),
// buckets are dropped at random until an eighth of the table is free:
// their clients start over with a full bucket, which errs on the side of
// serving them. The next sweep waits until the table has doubled (at most
// to l.maxKeys), so sweeping costs a constant per insert. l.mu is held.
func (l *rateLimiter) sweep(now time.Time) {
	full := float64(l.burst)
	for k, b := range l.buckets {
		if b.TokensAt(now) >= full {
			l.remove(k)
		}
	}
	if len(l.buckets) >= l.maxKeys {
		keep := l.maxKeys - max(1, l.maxKeys/8)
		for k := range l.buckets { // map order is random
			if len(l.buckets) <= keep {
				break
			}
			l.remove(k)
		}
	}
	l.sweepAt = min(max(2*len(l.buckets), minSweep), l.maxKeys)
}

// len is the number of buckets in the table (for tests).
func (l *rateLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
