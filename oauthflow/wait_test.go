package oauthflow_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/oauthflow"
)

func TestWaitTimeoutValidation(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		timeout time.Duration
		want    []problem
	}{
		{-time.Second, []problem{{"query.timeout", "greater_than_equal"}}},
		{oauthflow.MaxWaitTimeout + time.Second, []problem{{"query.timeout", "less_than_equal"}}},
		{0, nil},
		{oauthflow.MaxWaitTimeout, nil},
	} {
		// An unknown flow answers at once whatever the timeout.
		res, err := e.svc.Wait(context.Background(), tenantA, "unknown", tc.timeout)
		if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
			t.Errorf("timeout %v: problems (-want +got):\n%s", tc.timeout, diff)
		}
		if err == nil && res.Status != oauthflow.StatusNotFound {
			t.Errorf("timeout %v: status %q, want not_found", tc.timeout, res.Status)
		}
	}
}

// The long-poll tests run in a testing/synctest bubble, where timers run on
// a fake clock that advances only when every goroutine of the bubble is
// blocked: a 20-second timeout takes no real time and is exactly 20
// seconds, whatever the machine's load. The fake provider's server is
// started outside the bubble (newEnv before synctest.Test): a goroutine
// of the bubble blocked in network I/O would keep its clock from moving.

func TestWaitTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusPending {
			t.Errorf("Wait(0) = %+v, %v; want pending", w, err)
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("Wait(0) took %v, want no time", took)
		}
		if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 20*time.Second); err != nil || w.Status != oauthflow.StatusTimeout {
			t.Errorf("Wait(20s) = %+v, %v; want timeout", w, err)
		}
		if took := time.Since(start); took != 20*time.Second {
			t.Errorf("Wait(20s) took %v, want 20s", took)
		}
	})
}

func TestWaitStopsWithContext(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := e.svc.Wait(ctx, tenantA, res.AuthID, oauthflow.MaxWaitTimeout)
			done <- err
		}()
		synctest.Wait() // the waiter is blocked in its long poll
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v before the context ended", err)
		default:
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
	})
}

// outside runs functions on a goroutine started outside the synctest
// bubble, for network I/O that must not hold the bubble's clock still.
// Its channels are made outside the bubble too: the bubble's channels may
// not be used from outside.
type outside struct {
	do   chan func()
	done chan struct{}
}

func startOutside(t *testing.T) *outside {
	o := &outside{do: make(chan func()), done: make(chan struct{})}
	go func() {
		for f := range o.do {
			f()
			o.done <- struct{}{}
		}
	}()
	t.Cleanup(func() { close(o.do) })
	return o
}

// run runs f outside the bubble and returns when it has.
func (o *outside) run(f func()) {
	o.do <- f
	<-o.done
}

// A flow completed by another replica (another Service over the same store)
// is seen through the periodic re-read: at the first poll after it.
func TestWaitSeesOtherReplica(t *testing.T) {
	e := newEnv(t, func(o *oauthflow.Options) { o.PollInterval = 10 * time.Second })
	e.addProvider(t, tenantA, "fake", true)
	replica, err := oauthflow.New(e.st, &oauthflow.Options{
		SecretKey: testKey, PublicURL: testPublicURL, Egress: allowing(t, e.prov.Host()), Clock: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)
	net := startOutside(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		waited := make(chan oauthflow.WaitResult, 1)
		go func() {
			w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 300*time.Second)
			if err != nil {
				t.Error(err)
			}
			waited <- w
		}()
		synctest.Wait() // the waiter has read the store once and sleeps
		time.Sleep(25 * time.Second)
		var cbErr error
		// The bubble's clock stands still while the exchange runs.
		net.run(func() { cbErr = replica.Callback(ctx, cb) })
		if cbErr != nil {
			t.Fatal(cbErr)
		}
		if w := <-waited; w.Status != oauthflow.StatusCompleted || w.Token == "" {
			t.Errorf("Wait = %+v, want completed with a token", w)
		}
		if took := time.Since(start); took != 30*time.Second {
			t.Errorf("Wait answered after %v, want 30s (the third poll)", took)
		}
	})
}

// Many waiters on one flow, and waiters on other flows, all wake correctly:
// the Callback's notification wakes the waiters of its flow at once
// (PollInterval is an hour), the others time out.
func TestManyWaiters(t *testing.T) {
	// The Callback runs inside the bubble (its notification closes a
	// channel of the bubble); without keep-alives no connection outlives
	// it to hold the bubble's clock still.
	e := newEnv(t, func(o *oauthflow.Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	})
	e.addProvider(t, tenantA, "fake", true)
	a := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	b := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "bob", Provider: "fake", Scopes: noScopes})
	cb := visit(t, a.URL)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		type result struct {
			who  string
			w    oauthflow.WaitResult
			took time.Duration
		}
		results := make(chan result, 20)
		for i := range 20 {
			who, id, timeout := "alice", a.AuthID, 200*time.Second
			if i%2 == 1 {
				who, id, timeout = "bob", b.AuthID, 50*time.Second
			}
			go func() {
				w, err := e.svc.Wait(ctx, tenantA, id, timeout)
				if err != nil {
					t.Error(err)
				}
				results <- result{who, w, time.Since(start)}
			}()
		}
		synctest.Wait() // every waiter is in its long poll
		time.Sleep(10 * time.Second)
		if err := e.svc.Callback(ctx, cb); err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			status string
			took   time.Duration
		}
		got := map[string]map[outcome]int{"alice": {}, "bob": {}}
		for range 20 {
			r := <-results
			got[r.who][outcome{r.w.Status, r.took}]++
		}
		want := map[string]map[outcome]int{
			"alice": {{"completed", 10 * time.Second}: 10},
			"bob":   {{"timeout", 50 * time.Second}: 10},
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(outcome{})); diff != "" {
			t.Errorf("wait outcomes (-want +got):\n%s", diff)
		}
	})
}
