package httphandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

// The load tests run their own server (loadServer): an Authenticator that
// holds the requests of loadHoldKey until the test lets them go, so that
// the caps fill without any timing, and a count of the requests in
// ServeHTTP, to know when the places they held are free again.

const (
	loadTenant   = "0194c0de-0000-7000-8000-0000000000c1"
	loadTenant2  = "0194c0de-0000-7000-8000-0000000000c2"
	loadKeyA     = "load-key-a"
	loadKeyB     = "load-key-b"
	loadHoldKey  = "load-key-held"
	loadHoldKeyB = "load-key-held-b" // of loadTenant2
	loadWrongKey = "load-key-unknown"
	// loadAuthID is an auth_id no flow has: its long poll with timeout=0
	// answers {"status": "not_found"} at once.
	loadAuthID = "0194c0de-0000-7000-8000-0000000000ff"
)

// holdingAuth authenticates with a KeyTable, holding the requests of
// loadHoldKey (each one announced on entered) until release is closed,
// and counting its calls.
type holdingAuth struct {
	keys    *httphandler.KeyTable
	entered chan struct{}
	release chan struct{}
	calls   atomic.Int64
}

func (a *holdingAuth) Authenticate(ctx context.Context, c httphandler.Credentials) (*httphandler.Principal, error) {
	a.calls.Add(1)
	if c.APIKey == loadHoldKey || c.APIKey == loadHoldKeyB {
		a.entered <- struct{}{}
		<-a.release
	}
	return a.keys.Authenticate(ctx, c)
}

type loadServer struct {
	t      *testing.T
	url    string
	auth   *holdingAuth
	active sync.WaitGroup // requests inside the handler's ServeHTTP
	once   sync.Once
}

func newLoadServer(t *testing.T, load *httphandler.LoadLimits) *loadServer {
	t.Helper()
	keys, err := httphandler.NewKeyTable([]httphandler.Key{
		{SHA256: httphandler.HashKey(loadKeyA), Tenants: []string{loadTenant}},
		{SHA256: httphandler.HashKey(loadKeyB), Tenants: []string{loadTenant2}},
		{SHA256: httphandler.HashKey(loadHoldKey), Tenants: []string{loadTenant}},
		{SHA256: httphandler.HashKey(loadHoldKeyB), Tenants: []string{loadTenant2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &loadServer{t: t, auth: &holdingAuth{keys: keys, entered: make(chan struct{}), release: make(chan struct{})}}
	srv := httptest.NewUnstartedServer(nil)
	s.url = "http://" + srv.Listener.Addr().String()
	oauth, err := oauthflow.New(storemem.New(), &oauthflow.Options{SecretKey: bytes.Repeat([]byte{7}, 32), PublicURL: s.url})
	if err != nil {
		t.Fatal(err)
	}
	h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{
		Authenticator: s.auth, OAuth: oauth, Load: load,
	})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.active.Done()
		h.ServeHTTP(w, r)
	})
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		// A request is counted from the moment its connection turns
		// active, before the test can wait for it.
		if st == http.StateActive {
			s.active.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	// Cleanups run last first: held requests are let go before Close
	// waits for them, even when the test failed half-way.
	t.Cleanup(s.letGo)
	return s
}

// letGo lets the held requests go (once).
func (s *loadServer) letGo() { s.once.Do(func() { close(s.auth.release) }) }

type loadReply struct {
	status int
	header http.Header
	body   []byte
}

func (s *loadServer) get(key, path string) loadReply {
	s.t.Helper()
	r, err := s.do(key, path)
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// do is get for any goroutine: it returns its error.
func (s *loadServer) do(key, path string) (loadReply, error) {
	req, err := http.NewRequest("GET", s.url+path, nil)
	if err != nil {
		return loadReply{}, err
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	// A connection per request: a held request keeps its connection busy.
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return loadReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return loadReply{resp.StatusCode, resp.Header, b}, err
}

// hold starts a request of loadHoldKey and returns once it is held inside
// the handler; its reply arrives on the channel after release.
func (s *loadServer) hold(path string) <-chan loadReply {
	s.t.Helper()
	return s.holdAs(loadHoldKey, path)
}

// holdAs is hold with key, loadHoldKey or loadHoldKeyB.
func (s *loadServer) holdAs(key, path string) <-chan loadReply {
	s.t.Helper()
	out := make(chan loadReply, 1)
	go func() {
		r, err := s.do(key, path)
		if err != nil {
			r = loadReply{body: []byte(err.Error())}
		}
		out <- r
	}()
	select {
	case <-s.auth.entered:
		return out
	case r := <-out:
		s.t.Fatalf("a request to hold was answered instead: %d %s", r.status, r.body)
		return nil
	}
}

// wantDetail checks that r is status with a JSON {"detail": "..."} body and
// the headers want (name, value pairs).
func wantDetail(t *testing.T, what string, r loadReply, status int, want ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
	}
	var b struct {
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Detail == "" {
		t.Errorf("%s: body %q is not {\"detail\": ...}", what, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Errorf("%s: no X-Request-Id", what)
	}
	wantHeaders(t, what, r, want...)
}

func wantHeaders(t *testing.T, what string, r loadReply, want ...string) {
	t.Helper()
	for i := 0; i+1 < len(want); i += 2 {
		if got := r.header.Get(want[i]); got != want[i+1] {
			t.Errorf("%s: %s %q, want %q", what, want[i], got, want[i+1])
		}
	}
}

func TestLoadShedding(t *testing.T) {
	s := newLoadServer(t, &httphandler.LoadLimits{MaxInFlight: 2, MaxLongPolls: 1})
	const list = "/v2/deployments"
	const poll = "/v2/auth/wait/" + loadAuthID + "?timeout=0"

	// Two requests fill the in-flight cap.
	held := []<-chan loadReply{s.hold(list), s.hold(list)}
	wantDetail(t, "the third request", s.get(loadKeyA, list), http.StatusServiceUnavailable, "Retry-After", "1")
	wantDetail(t, "a public route", s.get("", "/openapi.json"), http.StatusServiceUnavailable, "Retry-After", "1")
	wantDetail(t, "an unknown path", s.get(loadKeyA, "/nowhere"), http.StatusServiceUnavailable, "Retry-After", "1")
	if n := s.auth.calls.Load(); n != 2 {
		t.Errorf("the authenticator ran %d times; a refused request must not reach it", n)
	}
	// Long polls have their own cap.
	if r := s.get(loadKeyA, poll); r.status != http.StatusOK {
		t.Fatalf("a long poll while the in-flight cap is full: %d %s", r.status, r.body)
	}
	held = append(held, s.hold(poll))
	wantDetail(t, "the second long poll", s.get(loadKeyA, poll), http.StatusServiceUnavailable, "Retry-After", "1")

	s.letGo()
	for i, c := range held {
		if r := <-c; r.status != http.StatusOK {
			t.Errorf("held request %d: %d %s", i, r.status, r.body)
		}
	}
	s.active.Wait()
	// The places are free again.
	for range 3 {
		if r := s.get(loadKeyA, list); r.status != http.StatusOK {
			t.Fatalf("after the held requests ended: %d %s", r.status, r.body)
		}
		if r := s.get(loadKeyA, poll); r.status != http.StatusOK {
			t.Fatalf("a long poll after the held requests ended: %d %s", r.status, r.body)
		}
	}
}

// A long poll that waits does not take a place of ordinary requests.
func TestLoadLongPollsDoNotStarveRequests(t *testing.T) {
	s := newLoadServer(t, &httphandler.LoadLimits{MaxInFlight: 1, MaxLongPolls: 3})
	poll := "/v2/auth/wait/" + loadAuthID + "?timeout=0"
	held := []<-chan loadReply{s.hold(poll), s.hold(poll), s.hold(poll)}
	wantDetail(t, "the fourth long poll", s.get(loadKeyA, poll), http.StatusServiceUnavailable, "Retry-After", "1")
	if r := s.get(loadKeyA, "/v2/deployments"); r.status != http.StatusOK {
		t.Errorf("an ordinary request while the long polls are full: %d %s", r.status, r.body)
	}
	s.letGo()
	for _, c := range held {
		<-c
	}
}

// The default cap: DefaultMaxInFlight() requests in service at once, and
// not one more. (Held while their credentials are checked, the requests
// hold no place of their tenant's share yet; half are of each tenant, so
// that each share, half the cap, takes them all once they go on.)
func TestLoadDefaults(t *testing.T) {
	s := newLoadServer(t, nil)
	n := httphandler.DefaultMaxInFlight()
	if n < 64 {
		t.Fatalf("DefaultMaxInFlight() = %d, want at least 64", n)
	}
	var held []<-chan loadReply
	for i := range n {
		held = append(held, s.holdAs([]string{loadHoldKey, loadHoldKeyB}[i%2], "/v2/deployments"))
	}
	wantDetail(t, "one request beyond the default cap", s.get(loadKeyA, "/v2/deployments"), http.StatusServiceUnavailable, "Retry-After", "1")
	s.letGo()
	for _, c := range held {
		if r := <-c; r.status != http.StatusOK {
			t.Errorf("a held request: %d %s", r.status, r.body)
		}
	}
}

var loadStart = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func TestRateLimit(t *testing.T) {
	clock := testclock.New(loadStart, 0)
	s := newLoadServer(t, &httphandler.LoadLimits{RateLimit: &httphandler.RateLimit{PerSecond: 2, Burst: 4, Now: clock.Now}})
	const list = "/v2/deployments"
	// Each request spends a token; the bucket refills at 2 a second, so
	// it is full again (RateLimit-Reset) after (4 - remaining) / 2 s.
	for i, reset := range []string{"1", "1", "2", "2"} {
		r := s.get(loadKeyA, list)
		if r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
		wantHeaders(t, "request "+strconv.Itoa(i), r,
			"RateLimit-Limit", "4", "RateLimit-Remaining", strconv.Itoa(3-i), "RateLimit-Reset", reset, "Retry-After", "")
	}
	// The next token comes in half a second: Retry-After rounds it up.
	wantDetail(t, "the fifth request", s.get(loadKeyA, list), http.StatusTooManyRequests,
		"Retry-After", "1", "RateLimit-Limit", "4", "RateLimit-Remaining", "0", "RateLimit-Reset", "2")
	// Another key has its own bucket.
	wantHeaders(t, "key B", s.get(loadKeyB, list), "RateLimit-Remaining", "3")
	if r := s.get(loadKeyB, list); r.status != http.StatusOK {
		t.Errorf("key B: %d %s", r.status, r.body)
	}
	// Half a second later there is one token again.
	clock.Advance(500 * time.Millisecond)
	r := s.get(loadKeyA, list)
	if r.status != http.StatusOK {
		t.Fatalf("after 500ms: %d %s", r.status, r.body)
	}
	wantHeaders(t, "after 500ms", r, "RateLimit-Remaining", "0", "RateLimit-Reset", "2")
	wantDetail(t, "again", s.get(loadKeyA, list), http.StatusTooManyRequests, "Retry-After", "1")
	// A full refill: the whole burst.
	clock.Advance(2 * time.Second)
	wantHeaders(t, "after 2s", s.get(loadKeyA, list), "RateLimit-Remaining", "3")
}

// A slow rate: Retry-After and RateLimit-Reset count whole seconds of the
// injected clock, rounded up.
func TestRateLimitSlow(t *testing.T) {
	clock := testclock.New(loadStart, 0)
	s := newLoadServer(t, &httphandler.LoadLimits{RateLimit: &httphandler.RateLimit{PerSecond: 0.25, Burst: 1, Now: clock.Now}})
	steps := []struct {
		advance time.Duration
		status  int
		headers []string
	}{
		{0, 200, []string{"RateLimit-Limit", "1", "RateLimit-Remaining", "0", "RateLimit-Reset", "4"}},
		{0, 429, []string{"Retry-After", "4", "RateLimit-Remaining", "0", "RateLimit-Reset", "4"}},
		{1500 * time.Millisecond, 429, []string{"Retry-After", "3", "RateLimit-Reset", "3"}}, // 2.5 s to go
		{1500 * time.Millisecond, 429, []string{"Retry-After", "1", "RateLimit-Reset", "1"}}, // 1 s to go
		{time.Second, 200, []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "4"}},
	}
	for i, st := range steps {
		clock.Advance(st.advance)
		r := s.get(loadKeyA, "/v2/deployments")
		what := "step " + strconv.Itoa(i)
		if st.status == 429 {
			wantDetail(t, what, r, 429, st.headers...)
			continue
		}
		if r.status != st.status {
			t.Fatalf("%s: %d %s", what, r.status, r.body)
		}
		wantHeaders(t, what, r, st.headers...)
	}
}

// Failed credentials are charged to the client's address, and an address
// out of attempts is refused before its credentials are even checked.
func TestRateLimitFailedCredentials(t *testing.T) {
	clock := testclock.New(loadStart, 0)
	s := newLoadServer(t, &httphandler.LoadLimits{RateLimit: &httphandler.RateLimit{PerSecond: 1, Burst: 3, Now: clock.Now}})
	const list = "/v2/deployments"
	// A key's own requests do not spend its address's attempts.
	for range 3 {
		if r := s.get(loadKeyA, list); r.status != http.StatusOK {
			t.Fatalf("key A: %d %s", r.status, r.body)
		}
	}
	for i, key := range []string{loadWrongKey, "", loadWrongKey} {
		r := s.get(key, list)
		wantDetail(t, "failed attempt "+strconv.Itoa(i), r, http.StatusUnauthorized,
			"RateLimit-Remaining", strconv.Itoa(2-i))
	}
	calls := s.auth.calls.Load()
	wantDetail(t, "the fourth failed attempt", s.get(loadWrongKey, list), http.StatusTooManyRequests,
		"Retry-After", "1", "RateLimit-Limit", "3", "RateLimit-Remaining", "0", "RateLimit-Reset", "3")
	wantDetail(t, "a valid key from the same address", s.get(loadKeyB, list), http.StatusTooManyRequests, "Retry-After", "1")
	if n := s.auth.calls.Load(); n != calls {
		t.Errorf("the authenticator ran %d more times for an address out of attempts", n-calls)
	}
	// Public routes have their own bucket per address.
	if r := s.get("", "/openapi.json"); r.status != http.StatusOK {
		t.Errorf("a public route: %d", r.status)
	}
	clock.Advance(time.Second)
	wantDetail(t, "a failed attempt a second later", s.get(loadWrongKey, list), http.StatusUnauthorized, "RateLimit-Remaining", "0")
	if r := s.get(loadKeyB, list); r.status != http.StatusTooManyRequests {
		t.Errorf("the attempt spent the new token; key B: %d %s", r.status, r.body)
	}
	clock.Advance(time.Second)
	if r := s.get(loadKeyB, list); r.status != http.StatusOK {
		t.Errorf("key B once the address has a token: %d %s", r.status, r.body)
	}
}

// Public routes are limited by the client's address, apart from the keys.
func TestRateLimitPublicRoutes(t *testing.T) {
	clock := testclock.New(loadStart, 0)
	s := newLoadServer(t, &httphandler.LoadLimits{RateLimit: &httphandler.RateLimit{PerSecond: 1, Burst: 2, Now: clock.Now}})
	for i := range 2 {
		r := s.get("", "/openapi.json")
		if r.status != http.StatusOK {
			t.Fatalf("request %d: %d", i, r.status)
		}
		wantHeaders(t, "public", r, "RateLimit-Limit", "2", "RateLimit-Remaining", strconv.Itoa(1-i))
	}
	wantDetail(t, "the third", s.get("", "/openapi.json"), http.StatusTooManyRequests, "Retry-After", "1", "RateLimit-Reset", "2")
	wantDetail(t, "an unknown path", s.get("", "/nowhere"), http.StatusTooManyRequests, "Retry-After", "1")
	if r := s.get(loadKeyA, "/v2/deployments"); r.status != http.StatusOK {
		t.Errorf("a key from the same address: %d %s", r.status, r.body)
	}
}

// Many clients come and go: a bucket that has refilled is dropped, and
// one still spending keeps its state.
func TestRateLimitForgetsIdleClients(t *testing.T) {
	clock := testclock.New(loadStart, 0)
	// Every request from a new address: ClientAddr reads a test header.
	s := newLoadServer(t, &httphandler.LoadLimits{RateLimit: &httphandler.RateLimit{
		PerSecond: 1, Burst: 2, MaxClients: 4, Now: clock.Now,
		ClientAddr: func(r *http.Request) string { return r.Header.Get("X-Test-Client") },
	}})
	get := func(client string) loadReply {
		req, _ := http.NewRequest("GET", s.url+"/openapi.json", nil)
		req.Header.Set("X-Test-Client", client)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return loadReply{status: resp.StatusCode, header: resp.Header}
	}
	for i := range 50 {
		// Every bucket refills; "busy" spends its burst, and a new client
		// arrives (50 of them in a table of 4), which sweeps the table.
		clock.Advance(2 * time.Second)
		get("busy")
		get("busy")
		if r := get("busy"); r.status != http.StatusTooManyRequests {
			t.Fatalf("round %d: the busy client's third request: %d", i, r.status)
		}
		if r := get("idle-" + strconv.Itoa(i)); r.status != http.StatusOK {
			t.Fatalf("round %d: a new client: %d", i, r.status)
		}
		if r := get("busy"); r.status != http.StatusTooManyRequests {
			t.Fatalf("round %d: the busy client's bucket was forgotten: %d", i, r.status)
		}
	}
}
