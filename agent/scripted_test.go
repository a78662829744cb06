package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/agent"
	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// scripted is a control plane whose agent routes answer as a test says:
// answer gives the status and body of each call (by route, and how many
// calls of that route came before), and every call is recorded with its
// time (in a synctest bubble, the fake clock's).
type scripted struct {
	mu     sync.Mutex
	calls  []scriptedCall
	answer func(ctx context.Context, route string, n int, body map[string]any) (int, any)
}

type scriptedCall struct {
	route string
	at    time.Time
	body  map[string]any
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := r.URL.Path[strings.LastIndex(r.URL.Path, "/agent/")+len("/agent/"):]
	var body map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &body)
	s.mu.Lock()
	n := 0
	for _, c := range s.calls {
		if c.route == route {
			n++
		}
	}
	s.calls = append(s.calls, scriptedCall{route: route, at: time.Now(), body: body})
	s.mu.Unlock()
	status, out := http.StatusNoContent, any(nil)
	if s.answer != nil {
		status, out = s.answer(r.Context(), route, n, body)
	}
	if out != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	w.WriteHeader(status)
}

// of returns the calls of a route.
func (s *scripted) of(route string) []scriptedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []scriptedCall
	for _, c := range s.calls {
		if c.route == route {
			out = append(out, c)
		}
	}
	return out
}

// claimOnce answers the first claim with w and the others, after the
// claim's wait, with 204; the other routes with 204.
func claimOnce(w *controlplane.AgentWork) func(context.Context, string, int, map[string]any) (int, any) {
	return func(ctx context.Context, route string, n int, _ map[string]any) (int, any) {
		if route == "claim" {
			if n == 0 {
				return http.StatusOK, w
			}
			longPoll(ctx)
			return http.StatusNoContent, nil
		}
		return http.StatusNoContent, nil
	}
}

// blocking is a Deployer whose Deploy waits for its context's end and
// records its cause.
type blocking struct {
	started chan struct{}
	cause   chan error
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 1), cause: make(chan error, 1)}
}

func (b *blocking) Deploy(ctx context.Context, _ *controlplane.Work, _ controlplane.Reporter) error {
	b.started <- struct{}{}
	<-ctx.Done()
	b.cause <- context.Cause(ctx)
	return nil
}

func (b *blocking) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

func deployWork(leaseSeconds int) *controlplane.AgentWork {
	return &controlplane.AgentWork{Lease: "lease-1", Kind: controlplane.AgentDeploy, LeaseSeconds: leaseSeconds,
		Work: &controlplane.Work{Tenant: "t", Deployment: controlplane.Deployment{ID: "d1"},
			Revision: controlplane.Revision{ID: "r1", Status: controlplane.RevisionQueued, Source: controlplane.SourceExternalDocker}}}
}

// newScriptedAgent is an agent of listener l1 over h, in process.
func newScriptedAgent(t *testing.T, h http.Handler, d controlplane.Deployer, log io.Writer) *agent.Agent {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	a, err := agent.New(&agent.Options{ControlPlane: "http://cp.test", ListenerID: "l1", Token: "dpl_lt_test",
		HTTPClient: &http.Client{Transport: agent.InProcess(h)}, Deployer: d, Version: "test",
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The lease is renewed every third of its length while Deploy runs; once
// the control plane answers 409 the Deployer's context ends with cause
// ErrLeaseLost, and the agent neither fails nor gives back the work (it
// is another agent's now).
func TestLeaseRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &scripted{}
		claim := claimOnce(deployWork(30))
		cp.answer = func(ctx context.Context, route string, n int, body map[string]any) (int, any) {
			if route == "renew" && n == 2 {
				return http.StatusConflict, map[string]string{"detail": "The lease is lost."}
			}
			return claim(ctx, route, n, body)
		}
		d := newBlocking()
		a := newScriptedAgent(t, cp, d, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		start := time.Now()
		go func() { done <- a.Run(ctx) }()
		<-d.started
		if cause := <-d.cause; !errors.Is(cause, controlplane.ErrLeaseLost) {
			t.Errorf("the Deployer's context ended with %v, want ErrLeaseLost", cause)
		}
		synctest.Wait()
		var at []time.Duration
		for _, c := range cp.of("renew") {
			at = append(at, c.at.Sub(start))
			if c.body["lease"] != "lease-1" {
				t.Errorf("renew body %v", c.body)
			}
		}
		if want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}; !equal(at, want) {
			t.Errorf("renewals at %v, want %v", at, want)
		}
		for _, r := range []string{"fail", "release", "report"} {
			if n := len(cp.of(r)); n != 0 {
				t.Errorf("%d %s calls after the lease was lost", n, r)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// When Run stops, the work it holds is given back at once (retry false),
// and the renewals stop.
func TestStopGivesWorkBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &scripted{answer: claimOnce(deployWork(30))}
		d := newBlocking()
		a := newScriptedAgent(t, cp, d, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- a.Run(ctx) }()
		<-d.started
		time.Sleep(15 * time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if cause := <-d.cause; !errors.Is(cause, context.Canceled) {
			t.Errorf("the Deployer's context ended with %v", cause)
		}
		rel := cp.of("release")
		if len(rel) != 1 || rel[0].body["lease"] != "lease-1" || rel[0].body["retry"] != false {
			t.Errorf("releases %+v, want one of lease-1 with retry false", rel)
		}
		if n := len(cp.of("renew")); n != 1 {
			t.Errorf("%d renewals in 15 s, want 1", n)
		}
	})
}

// A control plane that answers 503 is tried again with capped exponential
// backoff (each wait within [d/2, d] of its step), logged once for the
// whole series and once when it answers again; then the agent claims as
// usual.
func TestClaimBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const failures = 8
		cp := &scripted{}
		cp.answer = func(ctx context.Context, route string, n int, _ map[string]any) (int, any) {
			if route == "claim" {
				if n < failures {
					return http.StatusServiceUnavailable, map[string]string{"detail": "Too busy."}
				}
				longPoll(ctx)
			}
			return http.StatusNoContent, nil
		}
		var log syncBuffer
		a := newScriptedAgent(t, cp, newBlocking(), &log)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(10 * time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		claims := cp.of("claim")
		if len(claims) < failures+2 {
			t.Fatalf("%d claims, want more than %d", len(claims), failures+1)
		}
		step := agent.DefaultMinBackoff
		for i := 1; i <= failures; i++ {
			if d := claims[i].at.Sub(claims[i-1].at); d < step/2 || d > step {
				t.Errorf("wait before claim %d: %s, want within [%s, %s]", i, d, step/2, step)
			}
			step = min(2*step, agent.DefaultMaxBackoff)
		}
		// After a claim that answered, the next one follows at once.
		if d := claims[failures+1].at.Sub(claims[failures].at); d != agent.DefaultClaimWait {
			t.Errorf("after the first answer the next claim came %s later, want the claim's wait", d)
		}
		if n := strings.Count(log.String(), "claiming work failed"); n != 1 {
			t.Errorf("the failure was logged %d times, want once:\n%s", n, log.String())
		}
		if n := strings.Count(log.String(), "claiming work works again"); n != 1 {
			t.Errorf("the recovery was logged %d times, want once:\n%s", n, log.String())
		}
	})
}

// A control plane shutting down answers claims at once with no work; the
// agent asks again after a backoff, not in a loop, and goes back to its
// long polls once the claims wait again.
func TestEmptyClaimsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &scripted{answer: func(ctx context.Context, route string, n int, _ map[string]any) (int, any) {
			if route == "claim" && n >= 5 {
				longPoll(ctx)
			}
			return http.StatusNoContent, nil
		}}
		a := newScriptedAgent(t, cp, newBlocking(), nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- a.Run(ctx) }()
		time.Sleep(5 * time.Minute)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		claims := cp.of("claim")
		step := agent.DefaultMinBackoff
		for i := 1; i <= 5; i++ {
			if d := claims[i].at.Sub(claims[i-1].at); d < step/2 || d > step {
				t.Errorf("wait before claim %d: %s, want within [%s, %s]", i, d, step/2, step)
			}
			step *= 2
		}
		for i := 6; i < len(claims); i++ {
			if d := claims[i].at.Sub(claims[i-1].at); d != agent.DefaultClaimWait {
				t.Errorf("wait before claim %d: %s, want the claim's wait", i, d)
			}
		}
	})
}

// A 401 (a revoked listener token) stops Run with an error that says so.
func TestRefusedTokenStopsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &scripted{answer: func(ctx context.Context, route string, n int, _ map[string]any) (int, any) {
			if route == "heartbeat" && n > 0 {
				return http.StatusUnauthorized, map[string]string{"detail": "Invalid authentication credentials."}
			}
			if route == "claim" {
				longPoll(ctx)
			}
			return http.StatusNoContent, nil
		}}
		a := newScriptedAgent(t, cp, newBlocking(), nil)
		start := time.Now()
		err := a.Run(t.Context())
		if !errors.Is(err, agent.ErrRefused) || !strings.Contains(err.Error(), "revoked") || !strings.Contains(err.Error(), "listener token") {
			t.Errorf("Run: %v, want ErrRefused saying the listener token was revoked", err)
		}
		if d := time.Since(start); d != controlplane.AgentHeartbeatInterval {
			t.Errorf("Run returned after %s, want at the second heartbeat (%s)", d, controlplane.AgentHeartbeatInterval)
		}
	})
}

// longPoll waits as a claim without work does: the claim's wait, or until
// the request ends.
func longPoll(ctx context.Context) {
	t := time.NewTimer(agent.DefaultClaimWait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failingTeardowns is a Deployer whose Teardown always fails.
type failingTeardowns struct{ blocking }

func (failingTeardowns) Teardown(context.Context, string, *controlplane.Deployment) error {
	return errors.New("cluster edge is unreachable")
}

// A failed Teardown is recorded with teardown-failed and its error; a
// control plane without that route (404 Not Found) gets the work back with
// release, retry true, to be tried again later.
func TestFailedTeardownReported(t *testing.T) {
	teardown := &controlplane.AgentWork{Lease: "lease-t", Kind: controlplane.AgentTeardown, LeaseSeconds: 30,
		Deployment: &controlplane.Deployment{ID: "d1", TenantID: "t"}}
	for _, tt := range []struct {
		name    string
		noRoute bool
	}{{"the route", false}, {"no such route", true}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				claim := claimOnce(teardown)
				cp := &scripted{answer: func(ctx context.Context, route string, n int, body map[string]any) (int, any) {
					if route == "teardown-failed" && tt.noRoute {
						return http.StatusNotFound, map[string]string{"detail": "Not Found"}
					}
					return claim(ctx, route, n, body)
				}}
				a := newScriptedAgent(t, cp, &failingTeardowns{}, nil)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				go func() { done <- a.Run(ctx) }()
				time.Sleep(time.Second)
				synctest.Wait()
				failed := cp.of("teardown-failed")
				if len(failed) != 1 || failed[0].body["lease"] != "lease-t" || failed[0].body["message"] != "cluster edge is unreachable" {
					t.Errorf("teardown-failed calls %+v, want one with the lease and the error", failed)
				}
				rel := cp.of("release")
				switch {
				case tt.noRoute && (len(rel) != 1 || rel[0].body["lease"] != "lease-t" || rel[0].body["retry"] != true):
					t.Errorf("releases %+v, want one of lease-t with retry true", rel)
				case !tt.noRoute && len(rel) != 0:
					t.Errorf("releases %+v after teardown-failed, want none", rel)
				}
				if n := len(cp.of("teardown-done")); n != 0 {
					t.Errorf("%d teardown-done calls for a failed teardown", n)
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		})
	}
}

// A State call's 404 is a not found (apierr.ErrNotFound, which the
// deployers read as "deleted") only when it names what was asked: the
// deployment, or the revision. A 404 of a path the control plane does not
// serve (a wrong -control-plane URL, a proxy's page) or of the listener is
// another error, and a deployer's reconcile removes nothing for it.
func TestStateNotFoundNamesWhatWasAsked(t *testing.T) {
	for _, tt := range []struct {
		detail   string
		notFound bool
	}{
		{"Deployment ID d1 not found.", true},
		{"Revision ID r1 not found.", true},
		{"Not Found", false},
		{"Listener ID l1 not found.", false},
		{"", false},
	} {
		cp := &scripted{answer: func(context.Context, string, int, map[string]any) (int, any) {
			return http.StatusNotFound, map[string]string{"detail": tt.detail}
		}}
		c, err := agent.NewClient(&agent.Options{ControlPlane: "http://cp.test", ListenerID: "l1", Token: "dpl_lt_test",
			HTTPClient: &http.Client{Transport: agent.InProcess(cp)}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, derr := c.GetDeployment(ctx, "t", "d1")
		_, rerr := c.GetRevision(ctx, "t", "d1", "r1")
		_, lerr := c.ListLogs(ctx, "t", "d1", "r1", &controlplane.LogQuery{Type: controlplane.LogDeploy})
		aerr := c.AppendLogs(ctx, "t", "d1", "r1", controlplane.LogLine{Type: controlplane.LogDeploy, Message: "m"})
		wantDeployment := tt.notFound && strings.HasPrefix(tt.detail, "Deployment")
		for _, c := range []struct {
			call string
			err  error
			want bool
		}{{"GetDeployment", derr, wantDeployment}, {"GetRevision", rerr, tt.notFound}, {"ListLogs", lerr, tt.notFound},
			{"AppendLogs", aerr, tt.notFound}} {
			if c.err == nil || errors.Is(c.err, apierr.ErrNotFound) != c.want {
				t.Errorf("%s answered 404 %q: %v, want not found %v", c.call, tt.detail, c.err, c.want)
			}
		}
	}
}

// When a renewal is refused, the agent asks what became of the revision:
// answered INTERRUPTED or SKIPPED, or not found, the Deployer's context
// ends with a cause matching controlplane.ErrRevisionEnded (its deployer
// removes what it made); answered in any other status (another agent
// took the work over), or when no answer comes, with ErrLeaseLost alone.
func TestRefusedRenewalTellsAnEndFromATakeover(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   any
		ended  bool
	}{
		{"interrupted", http.StatusOK, map[string]any{"id": "r1", "status": "INTERRUPTED"}, true},
		{"skipped", http.StatusOK, map[string]any{"id": "r1", "status": "SKIPPED"}, true},
		{"removed with its deployment", http.StatusNotFound, map[string]any{"detail": "Deployment ID d1 not found."}, true},
		{"taken over", http.StatusOK, map[string]any{"id": "r1", "status": "DEPLOYING"}, false},
		{"a proxy's not found", http.StatusNotFound, map[string]any{"detail": "Not Found"}, false},
		{"no answer", http.StatusServiceUnavailable, map[string]any{"detail": "down"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cp := &scripted{}
				claim := claimOnce(deployWork(30))
				cp.answer = func(ctx context.Context, route string, n int, body map[string]any) (int, any) {
					switch route {
					case "renew":
						return http.StatusConflict, map[string]string{"detail": "The lease is lost."}
					case "deployments/d1/revisions/r1":
						return tc.status, tc.body
					}
					return claim(ctx, route, n, body)
				}
				d := newBlocking()
				a := newScriptedAgent(t, cp, d, nil)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error)
				go func() { done <- a.Run(ctx) }()
				<-d.started
				cause := <-d.cause
				if !errors.Is(cause, controlplane.ErrLeaseLost) || errors.Is(cause, controlplane.ErrRevisionEnded) != tc.ended {
					t.Errorf("the Deployer's context ended with %v; want ErrLeaseLost, and ErrRevisionEnded %v", cause, tc.ended)
				}
				if len(cp.of("deployments/d1/revisions/r1")) == 0 {
					t.Error("the agent did not ask what became of the revision")
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		})
	}
}
