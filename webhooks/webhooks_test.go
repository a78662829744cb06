package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/internal/pgtest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/storepg"
	"github.com/deployplane/deployplane/webhooks"
)

const (
	tenantA = "0194c0de-0000-7000-8000-00000000000a"
	tenantB = "0194c0de-0000-7000-8000-00000000000b"
	// specSecret and specSignature are the Standard Webhooks test vector
	// (its reference libraries' signing test).
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignSpecVector(t *testing.T) {
	got, err := webhooks.Sign(specSecret, specID, time.Unix(specTimestamp, 0), []byte(specPayload))
	if err != nil {
		t.Fatal(err)
	}
	if got != specSignature {
		t.Fatalf("Sign = %s, want the specification's %s", got, specSignature)
	}
	if want := independentSignature(t, specSecret, specID, strconv.Itoa(specTimestamp), []byte(specPayload)); got != want {
		t.Fatalf("Sign = %s, the test's own HMAC = %s", got, want)
	}
	if _, err := webhooks.Sign("not-a-secret", specID, time.Unix(specTimestamp, 0), nil); err == nil {
		t.Fatal("Sign accepted a secret without whsec_")
	}
}

// independentSignature computes the signature as the specification says,
// without the package: base64(HMAC-SHA256(base64decode(secret after
// "whsec_"), id + "." + timestamp + "." + body)).
func independentSignature(t *testing.T, secret, id, ts string, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, ts)
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// received is one request a receiver got.
type received struct {
	id, ts, sig string
	body        []byte
}

// receiver is an endpoint on loopback that records what it receives and
// answers what status says (200 by default).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	status func(n int) int // n: the request's number, from 1
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), b})
		n, status := len(rc.got), rc.status
		rc.mu.Unlock()
		code := http.StatusOK
		if status != nil {
			code = status(n)
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d", n)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// loopback is an egress policy that lets the tests reach 127.0.0.1.
func loopback(t *testing.T) *egress.Policy {
	t.Helper()
	p, err := egress.New(&egress.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// replica is a control plane with its reconcile loop (the simulated
// deployer) and a webhooks Service running over st.
type replica struct {
	cp   *controlplane.ControlPlane
	svc  *webhooks.Service
	stop func() // stops its loops (also at the test's end)
}

func startReplica(t *testing.T, st store.Store, clk *testclock.Clock, o *webhooks.Options) *replica {
	t.Helper()
	cp := controlplane.New(st, &controlplane.Options{EventPollInterval: 10 * time.Millisecond})
	opts := webhooks.Options{Egress: loopback(t), Clock: clk.Now, PollInterval: 5 * time.Millisecond,
		Backoff: []time.Duration{5 * time.Second, 30 * time.Second}}
	if o != nil {
		opts = *o
	}
	svc, err := webhooks.New(cp, &opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = cp.Run(ctx, deploysim.New(&deploysim.Options{Step: time.Millisecond})) }()
	go func() {
		defer wg.Done()
		if err := svc.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return &replica{cp: cp, svc: svc, stop: stop}
}

// eventually waits until cond holds (the dispatcher polls every few
// milliseconds; the bound is only against a hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func createDeployment(t *testing.T, cp *controlplane.ControlPlane, tenant, name string) *controlplane.Deployment {
	t.Helper()
	req := &controlplane.CreateDeploymentRequest{
		Name:                 new(name),
		Source:               new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/" + name + ":1.0.0")},
	}
	d, err := cp.CreateDeployment(context.Background(), tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type body struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		Change       string          `json:"change"`
		DeploymentID string          `json:"deployment_id"`
		RevisionID   string          `json:"revision_id"`
		Deployment   json.RawMessage `json:"deployment"`
		Revision     *struct {
			Status string `json:"status"`
		} `json:"revision"`
	} `json:"data"`
}

func decode(t *testing.T, b []byte) body {
	t.Helper()
	var v body
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("a delivery's body %s: %v", b, err)
	}
	return v
}

// TestDeliversEvents: a deployment deployed by the simulated deployer
// reaches the receiver as deployment.created and revision.deployed, each
// signed as the specification says, and the delivery log says so.
func TestDeliversEvents(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	r := startReplica(t, storemem.New(), clk, nil)
	rc := newReceiver(t)
	ctx := context.Background()
	wh, err := r.svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL + "/hook",
		Events: []string{webhooks.EventDeploymentCreated, webhooks.EventRevisionDeployed, webhooks.EventPreviewCreated}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(wh.Secret, "whsec_") {
		t.Fatalf("generated secret %q", wh.Secret)
	}
	if key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(wh.Secret, "whsec_")); len(key) != 24 {
		t.Fatalf("the generated secret has %d bytes, want 24", len(key))
	}
	d := createDeployment(t, r.cp, tenantA, "agent")
	e := createDeployment(t, r.cp, tenantA, "other")
	eventually(t, "four deliveries", func() bool { return len(rc.requests()) >= 4 })
	types := map[string]string{} // type and deployment -> id
	for _, got := range rc.requests() {
		if want := independentSignature(t, wh.Secret, got.id, got.ts, got.body); got.sig != want {
			t.Errorf("webhook-signature %s, want %s", got.sig, want)
		}
		if ts, err := strconv.ParseInt(got.ts, 10, 64); err != nil || ts != clk.Now().Unix() {
			t.Errorf("webhook-timestamp %q, want the clock's %d", got.ts, clk.Now().Unix())
		}
		b := decode(t, got.body)
		if _, err := time.Parse(time.RFC3339, b.Timestamp); err != nil {
			t.Errorf("timestamp %q: %v", b.Timestamp, err)
		}
		k := b.Type + " " + b.Data.DeploymentID
		if types[k] != "" {
			t.Errorf("%s delivered twice", k)
		}
		types[k] = got.id
		switch b.Type {
		case webhooks.EventDeploymentCreated, webhooks.EventPreviewCreated:
			if len(b.Data.Deployment) == 0 || b.Data.Change != "created" {
				t.Errorf("%s without its deployment: %s", b.Type, got.body)
			}
		case webhooks.EventRevisionDeployed:
			if b.Data.Revision == nil || b.Data.Revision.Status != "DEPLOYED" || b.Data.RevisionID == "" {
				t.Errorf("revision.deployed: %s", got.body)
			}
		}
	}
	for _, k := range []string{"deployment.created " + d.ID, "revision.deployed " + d.ID, "deployment.created " + e.ID,
		"revision.deployed " + e.ID} {
		if types[k] == "" {
			t.Errorf("no %s among %v", k, types)
		}
	}
	if len(types) != 4 {
		t.Errorf("deliveries %v", types)
	}
	var page *webhooks.DeliveryPage
	eventually(t, "the log to say so", func() bool {
		page, err = r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, dl := range page.Resources {
			if dl.Status == webhooks.StatusPending {
				return false
			}
		}
		return true
	})
	if len(page.Resources) != 4 || page.Offset != 4 {
		t.Fatalf("delivery log %+v", page)
	}
	for i, dl := range page.Resources {
		if dl.Status != webhooks.StatusSucceeded || dl.Attempts != 1 || dl.ResponseStatusCode == nil || *dl.ResponseStatusCode != 200 ||
			dl.NextAttemptAt != nil || len(dl.AttemptLog) != 1 || dl.ResponseBody == nil || !strings.HasPrefix(*dl.ResponseBody, "answer ") {
			t.Errorf("delivery %d: %+v", i, dl)
		}
		if i > 0 {
			a, _ := strconv.Atoi(page.Resources[i-1].EventID)
			b, _ := strconv.Atoi(dl.EventID)
			if a < b {
				t.Errorf("delivery log not newest first: event %d before %d", a, b)
			}
		}
	}
	// Paged like other lists.
	two, err := r.svc.ListDeliveries(ctx, tenantA, wh.ID, &webhooks.ListQuery{Limit: new(2), Offset: 3})
	if err != nil || len(two.Resources) != 1 || two.Offset != 4 || two.Resources[0].ID != page.Resources[3].ID {
		t.Fatalf("page at offset 3: %+v, %v", two, err)
	}
}

// TestRetriesWithBackoff: an endpoint that answers 500 gets the delivery
// again after the first backoff on the injected clock, with the same
// webhook-id, and each attempt is in the delivery log.
func TestRetriesWithBackoff(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	r := startReplica(t, storemem.New(), clk, nil)
	rc := newReceiver(t)
	rc.status = func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
	ctx := context.Background()
	wh, err := r.svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL, Events: []string{webhooks.EventDeploymentCreated},
		Secret: new(specSecret + "AAAAAAAAAAAAAAAAAAAAAA==")})
	if err != nil {
		t.Fatal(err)
	}
	if wh.Secret != "" {
		t.Fatal("a given secret was answered")
	}
	createDeployment(t, r.cp, tenantA, "agent")
	var first webhooks.Delivery
	eventually(t, "the first attempt recorded", func() bool {
		page, err := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
		if err != nil || len(page.Resources) != 1 || page.Resources[0].Attempts != 1 || page.Resources[0].ResponseStatusCode == nil {
			return false
		}
		first = page.Resources[0]
		return true
	})
	start := clk.Now()
	if first.Status != webhooks.StatusPending || *first.ResponseStatusCode != 500 || first.Error == nil ||
		first.NextAttemptAt == nil || !first.NextAttemptAt.Time().Equal(start.Add(5*time.Second)) {
		t.Fatalf("after a 500: %+v (next attempt %v, want %v)", first, first.NextAttemptAt, start.Add(5*time.Second))
	}
	clk.Advance(5 * time.Second)
	eventually(t, "the retry", func() bool {
		page, err := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
		return err == nil && page.Resources[0].Status == webhooks.StatusSucceeded
	})
	page, _ := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
	dl := page.Resources[0]
	if dl.Attempts != 2 || len(dl.AttemptLog) != 2 || *dl.AttemptLog[0].ResponseStatusCode != 500 || *dl.AttemptLog[1].ResponseStatusCode != 200 ||
		dl.Error != nil || dl.NextAttemptAt != nil {
		t.Fatalf("after the retry: %+v", dl)
	}
	got := rc.requests()
	if len(got) != 2 || got[0].id != got[1].id || got[0].id != dl.ID {
		t.Fatalf("requests %+v, delivery id %s", got, dl.ID)
	}
	if string(got[0].body) != string(got[1].body) {
		t.Fatal("a retry sent another body")
	}
}

// TestFailsAfterLastAttempt: an endpoint that always fails gets
// len(Backoff)+1 attempts, and the delivery fails.
func TestFailsAfterLastAttempt(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	r := startReplica(t, storemem.New(), clk, nil)
	rc := newReceiver(t)
	rc.status = func(int) int { return http.StatusServiceUnavailable }
	ctx := context.Background()
	wh, err := r.svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL, Events: []string{webhooks.EventDeploymentCreated}})
	if err != nil {
		t.Fatal(err)
	}
	createDeployment(t, r.cp, tenantA, "agent")
	for n, wait := range []time.Duration{5 * time.Second, 30 * time.Second, 0} {
		eventually(t, fmt.Sprintf("attempt %d", n+1), func() bool { return len(rc.requests()) == n+1 })
		eventually(t, "its record", func() bool {
			page, err := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
			return err == nil && len(page.Resources[0].AttemptLog) == n+1
		})
		clk.Advance(wait)
	}
	page, _ := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
	if dl := page.Resources[0]; dl.Status != webhooks.StatusFailed || dl.Attempts != 3 || dl.NextAttemptAt != nil {
		t.Fatalf("after the last attempt: %+v", dl)
	}
}

// TestGoneDisables: an endpoint that answers 410 Gone has its webhook
// disabled, as the Standard Webhooks specification asks: the delivery
// fails at once (no retry), the events that follow are not delivered, and
// enabling it again delivers the events after that.
func TestGoneDisables(t *testing.T) {
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	r := startReplica(t, storemem.New(), clk, nil)
	rc := newReceiver(t)
	rc.status = func(n int) int {
		if n == 1 {
			return http.StatusGone
		}
		return http.StatusOK
	}
	ctx := context.Background()
	wh, err := r.svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL, Events: []string{webhooks.EventDeploymentCreated}})
	if err != nil {
		t.Fatal(err)
	}
	createDeployment(t, r.cp, tenantA, "first")
	eventually(t, "the webhook disabled", func() bool {
		w, err := r.svc.GetWebhook(ctx, tenantA, wh.ID)
		return err == nil && !w.Enabled
	})
	page, err := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Resources) != 1 {
		t.Fatalf("%d deliveries, want 1", len(page.Resources))
	}
	dl := page.Resources[0]
	if dl.Status != webhooks.StatusFailed || dl.Attempts != 1 || dl.NextAttemptAt != nil || dl.Error == nil ||
		!strings.Contains(*dl.Error, "410") || *dl.ResponseStatusCode != http.StatusGone {
		t.Fatalf("the delivery answered 410: %+v", dl)
	}
	// Disabled: the next event is not delivered, even after every
	// backoff. A second webhook of the tenant witnesses that the
	// dispatcher has read that event (they share the tenant's cursor).
	witness := newReceiver(t)
	if _, err := r.svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: witness.srv.URL, Events: []string{webhooks.EventDeploymentCreated}}); err != nil {
		t.Fatal(err)
	}
	second := createDeployment(t, r.cp, tenantA, "second")
	eventually(t, "the witness's delivery", func() bool {
		got := witness.requests()
		return len(got) > 0 && decode(t, got[len(got)-1].body).Data.DeploymentID == second.ID
	})
	clk.Advance(time.Hour)
	if _, err := r.svc.UpdateWebhook(ctx, tenantA, wh.ID, &webhooks.UpdateWebhookRequest{Enabled: new(true)}); err != nil {
		t.Fatal(err)
	}
	third := createDeployment(t, r.cp, tenantA, "third")
	eventually(t, "the delivery after enabling", func() bool { return len(rc.requests()) == 2 })
	got := rc.requests()
	if b := decode(t, got[1].body); b.Data.DeploymentID != third.ID {
		t.Fatalf("after enabling, the delivery of %s, want the third deployment %s", b.Data.DeploymentID, third.ID)
	}
	page, _ = r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
	if len(page.Resources) != 2 {
		t.Fatalf("%d deliveries, want 2 (none for the event while disabled)", len(page.Resources))
	}
}

// TestTwoDispatchers: two replicas over one store deliver each event of
// several tenants exactly once.
func TestTwoDispatchers(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"storemem": func(*testing.T) store.Store { return storemem.New() },
		"storebolt": func(t *testing.T) store.Store {
			st, err := storebolt.Open(filepath.Join(t.TempDir(), "db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"storepg": func(t *testing.T) store.Store {
			dsn := pgtest.DSN(t)
			schema := pgtest.Schema(t, dsn, "webhooks_test_")
			st, err := storepg.Open(context.Background(), dsn, &storepg.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
			reps := []*replica{startReplica(t, st, clk, nil), startReplica(t, st, clk, nil)}
			rc := newReceiver(t)
			ctx := context.Background()
			tenants := []string{tenantA, tenantB, "0194c0de-0000-7000-8000-00000000000c"}
			hooks := map[string]string{}
			for i, tenant := range tenants {
				wh, err := reps[i%2].svc.CreateWebhook(ctx, tenant, &webhooks.CreateWebhookRequest{URL: rc.srv.URL,
					Events: []string{webhooks.EventDeploymentCreated}})
				if err != nil {
					t.Fatal(err)
				}
				hooks[tenant] = wh.ID
			}
			const perTenant = 4
			want := map[string]bool{}
			for i := range perTenant {
				for j, tenant := range tenants {
					d := createDeployment(t, reps[(i+j)%2].cp, tenant, fmt.Sprintf("d%d", i))
					want[d.ID] = true
				}
			}
			eventually(t, "every delivery recorded", func() bool {
				for _, tenant := range tenants {
					page, err := reps[1].svc.ListDeliveries(ctx, tenant, hooks[tenant], nil)
					if err != nil || len(page.Resources) != perTenant {
						return false
					}
					for _, dl := range page.Resources {
						if dl.Status == webhooks.StatusPending {
							return false
						}
					}
				}
				return true
			})
			if n := len(rc.requests()); n != len(want) {
				t.Errorf("%d requests, want %d", n, len(want))
			}
			seen := map[string]bool{}
			for _, got := range rc.requests() {
				b := decode(t, got.body)
				if seen[b.Data.DeploymentID] {
					t.Errorf("deployment %s delivered twice", b.Data.DeploymentID)
				}
				seen[b.Data.DeploymentID] = true
				if !want[b.Data.DeploymentID] {
					t.Errorf("unexpected delivery %s", got.body)
				}
			}
			for _, tenant := range tenants {
				page, err := reps[0].svc.ListDeliveries(ctx, tenant, hooks[tenant], nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Resources) != perTenant {
					t.Errorf("tenant %s: %d deliveries, want %d", tenant, len(page.Resources), perTenant)
				}
				for _, dl := range page.Resources {
					if dl.Attempts != 1 || dl.Status != webhooks.StatusSucceeded {
						t.Errorf("tenant %s: %+v", tenant, dl)
					}
				}
			}
		})
	}
}

// TestEgressRefused: a url the policy refuses is a 422 when registered,
// and a delivery whose dial the policy refuses fails without a request.
func TestEgressRefused(t *testing.T) {
	cp := controlplane.New(storemem.New(), nil)
	strict, err := webhooks.New(cp, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ url, typ string }{
		{"http://example.com/hook", apierr.TypeURLScheme},
		{"https://127.0.0.1/hook", apierr.TypeURLHost},
		{"https://10.0.0.8/hook", apierr.TypeURLHost},
		{"https://[::1]:8443/hook", apierr.TypeURLHost},
		{"https://localhost/hook", apierr.TypeURLHost},
		{"https://169.254.169.254/latest", apierr.TypeURLHost},
	} {
		_, err := strict.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: tc.url, Events: []string{"*"}})
		var ve *apierr.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Type != tc.typ || fmt.Sprint(ve.Problems[0].Loc) != "[body url]" {
			t.Errorf("%s: %v, want a %s problem at body.url", tc.url, err, tc.typ)
		}
	}

	// Registered through a replica whose operator allows loopback, then
	// dispatched by one whose policy is strict: the dial is refused.
	st := storemem.New()
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	rc := newReceiver(t)
	allowing, err := webhooks.New(controlplane.New(st, nil), &webhooks.Options{Egress: loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	wh, err := allowing.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL, Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	strictOpts := &webhooks.Options{Clock: clk.Now, PollInterval: 5 * time.Millisecond, Backoff: []time.Duration{time.Hour}}
	r := startReplica(t, st, clk, strictOpts)
	createDeployment(t, r.cp, tenantA, "agent")
	eventually(t, "a refused attempt recorded", func() bool {
		// Attempts counts an attempt from its claim; the log holds it once
		// its outcome is recorded.
		page, err := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
		return err == nil && len(page.Resources) > 0 && len(page.Resources[len(page.Resources)-1].AttemptLog) == 1
	})
	page, _ := r.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
	dl := page.Resources[len(page.Resources)-1]
	if dl.Error == nil || !strings.Contains(*dl.Error, "egress") || dl.ResponseStatusCode != nil || dl.Status != webhooks.StatusPending {
		t.Fatalf("refused delivery: %+v", dl)
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}

// TestEventsLost: events the event log no longer retains when the
// dispatcher reads them are a failed events.lost delivery in the log.
func TestEventsLost(t *testing.T) {
	st := storemem.New()
	cp := controlplane.New(st, &controlplane.Options{EventRetention: 3})
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	svc, err := webhooks.New(cp, &webhooks.Options{Egress: loopback(t), Clock: clk.Now, PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	ctx := context.Background()
	wh, err := svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL, Events: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	// The dispatcher is not running: many events pass, and the oldest
	// are pruned once numbered.
	for i := range 10 {
		createDeployment(t, cp, tenantA, fmt.Sprintf("d%d", i))
	}
	if _, err := cp.EventHead(ctx, tenantA); err != nil { // numbers them, pruning beyond the retention
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the gap recorded", func() bool {
		page, err := svc.ListDeliveries(ctx, tenantA, wh.ID, &webhooks.ListQuery{Limit: new(100)})
		if err != nil {
			return false
		}
		for _, dl := range page.Resources {
			if dl.EventType == webhooks.EventEventsLost {
				return dl.Status == webhooks.StatusFailed && dl.Error != nil && strings.Contains(*dl.Error, "lost")
			}
		}
		return false
	})
}

// TestCRUD: the secret is never answered after the create, PATCH changes
// what it names, disabling fails pending deliveries, another tenant's
// webhook is not found, and DELETE removes it.
func TestCRUD(t *testing.T) {
	cp := controlplane.New(storemem.New(), nil)
	svc, err := webhooks.New(cp, &webhooks.Options{Egress: loopback(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wh, err := svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: "https://hooks.example.com/a", Events: []string{"*"},
		Description: new("ops")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := svc.GetWebhook(ctx, tenantA, wh.ID)
	if err != nil || got.URL != wh.URL || !got.Enabled || *got.Description != "ops" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), "secret") || strings.Contains(string(b), wh.Secret) {
		t.Fatalf("GET answers the secret: %s", b)
	}
	if _, err := svc.GetWebhook(ctx, tenantB, wh.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("another tenant's webhook: %v", err)
	}
	up, err := svc.UpdateWebhook(ctx, tenantA, wh.ID, &webhooks.UpdateWebhookRequest{Events: []string{webhooks.EventRevisionFailed},
		Enabled: new(false)})
	if err != nil || up.Enabled || len(up.Events) != 1 || up.URL != wh.URL {
		t.Fatalf("patch: %+v, %v", up, err)
	}
	list, err := svc.ListWebhooks(ctx, tenantA, nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].Enabled {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := svc.DeleteWebhook(ctx, tenantB, wh.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("another tenant's delete: %v", err)
	}
	if err := svc.DeleteWebhook(ctx, tenantA, wh.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GetWebhook(ctx, tenantA, wh.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// TestLeaseHandover: a replica that stops gives its tenants' leases back,
// and another one goes on delivering their events, none twice.
func TestLeaseHandover(t *testing.T) {
	st := storemem.New()
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	a := startReplica(t, st, clk, nil)
	rc := newReceiver(t)
	ctx := context.Background()
	wh, err := a.svc.CreateWebhook(ctx, tenantA, &webhooks.CreateWebhookRequest{URL: rc.srv.URL, Events: []string{webhooks.EventDeploymentCreated}})
	if err != nil {
		t.Fatal(err)
	}
	recorded := func(n int) func() bool {
		return func() bool {
			page, err := a.svc.ListDeliveries(ctx, tenantA, wh.ID, nil)
			if err != nil || len(page.Resources) != n {
				return false
			}
			for _, dl := range page.Resources {
				if dl.Status != webhooks.StatusSucceeded || dl.Attempts != 1 {
					return false
				}
			}
			return true
		}
	}
	createDeployment(t, a.cp, tenantA, "before")
	eventually(t, "the first delivery", recorded(1))
	// b starts while a holds the tenant (the clock stands still: a's
	// lease never runs out), and takes it over once a stops.
	b := startReplica(t, st, clk, nil)
	a.stop()
	createDeployment(t, b.cp, tenantA, "after")
	eventually(t, "the second delivery, by the other replica", recorded(2))
	if n := len(rc.requests()); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}
