package httphandler

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/deployplane/deployplane/internal/testclock"
)

// Idle clients are dropped from the table once their bucket has refilled.
func TestRateLimiterDropsRefilledBuckets(t *testing.T) {
	clock := testclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), 0)
	l := newRateLimiter(&RateLimit{PerSecond: 10, Burst: 20, MaxClients: 1 << 20, Now: clock.Now})
	take := func(key string) error { return l.take(&replyHeaders{h: http.Header{}}, key, "", clock.Now()) }
	for i := range 5000 {
		if err := take("client-" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.len(); n != 5000 {
		t.Fatalf("%d buckets after 5000 clients within a refill time, want 5000", n)
	}
	// Two seconds refill every bucket (20 tokens at 10 a second). The
	// table is swept once it has doubled since the last sweep, so it
	// holds at most twice the clients active within a refill time.
	clock.Advance(2 * time.Second)
	_ = take("busy")
	for i := range 5000 {
		_ = take("later-" + strconv.Itoa(i))
		if n := l.len(); n > 8192 {
			t.Fatalf("%d buckets after %d new clients", n, i+1)
		}
	}
	if n := l.len(); n != 5001 {
		t.Errorf("%d buckets, want 5001: the refilled ones dropped, busy and the later ones kept", n)
	}
	if l.buckets["busy"] == nil {
		t.Error("a bucket not yet refilled was dropped")
	}
}

// However many clients are active at once, the table stays within
// MaxClients.
func TestRateLimiterBounded(t *testing.T) {
	clock := testclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), 0)
	const maxClients = 100
	l := newRateLimiter(&RateLimit{PerSecond: 1, Burst: 5, MaxClients: maxClients, Now: clock.Now})
	for i := range 10_000 {
		_ = l.take(&replyHeaders{h: http.Header{}}, "client-"+strconv.Itoa(i), "", clock.Now())
		if n := l.len(); n > maxClients {
			t.Fatalf("%d buckets after %d clients, more than MaxClients %d", n, i+1, maxClients)
		}
	}
}
