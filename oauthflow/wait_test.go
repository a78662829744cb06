package oauthflow_test

import (
	"context"
	"errors"
	"testing"
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

func TestWaitTimesOut(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 0); err != nil || w.Status != oauthflow.StatusPending {
		t.Errorf("Wait(0) = %+v, %v; want pending", w, err)
	}
	if w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 20*time.Millisecond); err != nil || w.Status != oauthflow.StatusTimeout {
		t.Errorf("Wait(20ms) = %+v, %v; want timeout", w, err)
	}
}

func TestWaitStopsWithContext(t *testing.T) {
	e := newEnv(t, nil)
	e.addProvider(t, tenantA, "fake", true)
	res, err := e.svc.Authenticate(context.Background(), tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := e.svc.Wait(ctx, tenantA, res.AuthID, oauthflow.MaxWaitTimeout); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
}

// A flow completed by another replica (another Service over the same store)
// is seen through the periodic re-read.
func TestWaitSeesOtherReplica(t *testing.T) {
	e := newEnv(t, func(o *oauthflow.Options) { o.PollInterval = 10 * time.Millisecond })
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	replica, err := oauthflow.New(e.st, &oauthflow.Options{
		SecretKey: testKey, PublicURL: testPublicURL, HTTPClient: e.prov.Client(), Clock: e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	waited := make(chan oauthflow.WaitResult, 1)
	go func() {
		w, err := e.svc.Wait(ctx, tenantA, res.AuthID, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		waited <- w
	}()
	time.Sleep(30 * time.Millisecond) // let the waiter settle into its loop
	if err := replica.Callback(ctx, visit(t, res.URL)); err != nil {
		t.Fatal(err)
	}
	if w := <-waited; w.Status != oauthflow.StatusCompleted || w.Token == "" {
		t.Errorf("Wait = %+v, want completed with a token", w)
	}
}

// Many waiters on one flow, and waiters on other flows, all wake correctly.
func TestManyWaiters(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	a := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	b := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "bob", Provider: "fake", Scopes: noScopes})
	type result struct {
		who string
		w   oauthflow.WaitResult
	}
	results := make(chan result, 20)
	for i := range 20 {
		who, id, timeout := "alice", a.AuthID, 20*time.Second
		if i%2 == 1 {
			who, id, timeout = "bob", b.AuthID, 50*time.Millisecond
		}
		go func() {
			w, err := e.svc.Wait(ctx, tenantA, id, timeout)
			if err != nil {
				t.Error(err)
			}
			results <- result{who, w}
		}()
	}
	if err := e.svc.Callback(ctx, visit(t, a.URL)); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]int{"alice": {}, "bob": {}}
	for range 20 {
		r := <-results
		got[r.who][r.w.Status]++
	}
	want := map[string]map[string]int{"alice": {"completed": 10}, "bob": {"timeout": 10}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("wait outcomes (-want +got):\n%s", diff)
	}
}
