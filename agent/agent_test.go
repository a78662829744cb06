package agent_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/agent"
	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/memnet"
	"github.com/deployplane/deployplane/storemem"
)

// These tests run agents against a real control plane: a ControlPlane
// that drives no listener itself (Options.Drives), its httphandler
// serving on an in-memory network, all in a synctest bubble, so that
// leases, heartbeats, long polls, backoff and the simulated deployer's
// steps pass in fake time.

const (
	tenant = "0194c0de-0000-7000-8000-000000000001"
	apiKey = "test-key"
	// simStep is the simulated deployer's delay per status.
	simStep = time.Second
	// deadline bounds every wait, in fake time; only a broken agent
	// reaches it.
	deadline = 10 * time.Minute
)

// world is a control plane served over an in-memory network, with one
// listener the server does not drive.
type world struct {
	t        *testing.T
	cp       *controlplane.ControlPlane
	keys     *httphandler.KeyTable
	api      *httphandler.Handler
	net      *memnet.Network
	addr     atomic.Value // string: the server's current address
	srv      *http.Server
	served   chan struct{}
	listener string
	token    *controlplane.NewListenerToken
	dials    atomic.Int64
}

// newWorld starts the control plane; call it in a bubble. The server
// stops when the test ends.
func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, net: &memnet.Network{}}
	w.cp = controlplane.New(storemem.New(), &controlplane.Options{Drives: func(*controlplane.Listener) bool { return false }})
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(apiKey), Tenants: []string{tenant}}})
	if err != nil {
		t.Fatal(err)
	}
	w.keys = keys
	w.serve()
	t.Cleanup(w.stop)
	ctx := context.Background()
	l, err := w.cp.CreateListener(ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("edge")})
	if err != nil {
		t.Fatal(err)
	}
	w.listener = l.ID
	if w.token, err = w.cp.CreateListenerToken(ctx, tenant, l.ID); err != nil {
		t.Fatal(err)
	}
	return w
}

// serve starts the server (a new handler over the control plane, as a
// restarted server has) at a fresh address, which the agents' client
// dials from now on.
func (w *world) serve() {
	w.api = httphandler.New(w.cp, &httphandler.Options{Authenticator: w.keys, Logger: slog.New(slog.DiscardHandler)})
	ln := w.net.Listen()
	w.srv = &http.Server{Handler: w.api}
	w.served = make(chan struct{})
	w.addr.Store(ln.Addr().String())
	go func() { defer close(w.served); _ = w.srv.Serve(ln) }()
}

// stop stops the server: connections are refused until serve.
func (w *world) stop() {
	if w.srv == nil {
		return
	}
	_ = w.api.Close()
	_ = w.srv.Close()
	<-w.served
	w.srv = nil
}

// client is an HTTP client that dials the server's current address,
// counting its dials.
func (w *world) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		w.dials.Add(1)
		return w.net.DialContext(ctx, network, w.addr.Load().(string))
	}}}
}

// newAgent is an agent of the listener with its token, driving d.
func (w *world) newAgent(d controlplane.Deployer, log io.Writer) *agent.Agent {
	w.t.Helper()
	if log == nil {
		log = io.Discard
	}
	a, err := agent.New(&agent.Options{ControlPlane: "http://cp.test", ListenerID: w.listener, Token: w.token.Token,
		HTTPClient: w.client(), Deployer: d, Version: "test-1", Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		w.t.Fatal(err)
	}
	return a
}

// running is an agent's Run in progress.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's, once done is closed
}

// run runs a until the test ends or stop is called.
func run(t *testing.T, a *agent.Agent) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); r.err = a.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// stop ends Run and returns its error.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// deploy creates an external_docker deployment on the listener.
func (w *world) deploy(name string) (*controlplane.Deployment, string) {
	w.t.Helper()
	d, err := w.cp.CreateDeployment(context.Background(), tenant, &controlplane.CreateDeploymentRequest{Name: new(name),
		Source: new(controlplane.SourceExternalDocker), SourceConfig: &controlplane.SourceConfig{ListenerID: &w.listener},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")}})
	if err != nil {
		w.t.Fatal(err)
	}
	return d, *d.LatestRevisionID
}

// waitFor polls f every fake second until it is true.
func (w *world) waitFor(what string, f func() bool) {
	w.t.Helper()
	end := time.Now().Add(deadline)
	for !f() {
		if time.Now().After(end) {
			w.t.Fatalf("%s: not after %s", what, deadline)
		}
		time.Sleep(time.Second)
	}
}

// status is a revision's status.
func (w *world) status(dep, rev string) controlplane.RevisionStatus {
	r, err := w.cp.GetRevision(context.Background(), tenant, dep, rev)
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Status
}

func sim() *deploysim.Deployer { return deploysim.New(&deploysim.Options{Step: simStep}) }

// An agent with a listener token drives a deployment of its listener to
// DEPLOYED with the simulated deployer, through the agent routes: the
// deployment is READY, its logs are written, the listener is CONNECTED
// with the agent's version; DELETE is torn down by the agent too.
func TestDeploysThroughTheRoutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		run(t, w.newAgent(sim(), nil))
		ctx := context.Background()
		d, rev := w.deploy("a")
		w.waitFor("DEPLOYED", func() bool { return controlplane.IsTerminal(w.status(d.ID, rev)) })
		if s := w.status(d.ID, rev); s != controlplane.RevisionDeployed {
			t.Fatalf("revision %s, want DEPLOYED", s)
		}
		got, err := w.cp.GetDeployment(ctx, tenant, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != controlplane.StatusReady || got.ActiveRevisionID == nil || *got.ActiveRevisionID != rev {
			t.Errorf("deployment %s active %v, want READY with %s", got.Status, got.ActiveRevisionID, rev)
		}
		logs, err := w.cp.ListLogs(ctx, tenant, d.ID, rev, &controlplane.LogQuery{Type: controlplane.LogDeploy})
		if err != nil {
			t.Fatal(err)
		}
		if len(logs.Logs) == 0 || !strings.HasPrefix(logs.Logs[0].Message, "[simulated]") {
			t.Errorf("deploy log %+v, want the simulated deployer's lines", logs.Logs)
		}
		l, err := w.cp.GetListener(ctx, tenant, w.listener)
		if err != nil {
			t.Fatal(err)
		}
		if l.Status != controlplane.ListenerConnected || l.Version != "test-1" {
			t.Errorf("listener %s version %q, want CONNECTED test-1", l.Status, l.Version)
		}
		if err := w.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
			t.Fatal(err)
		}
		w.waitFor("the deployment removed", func() bool {
			_, err := w.cp.GetDeployment(ctx, tenant, d.ID)
			return err != nil
		})
	})
}

// The Client sets the status of its listener's deployment outside a
// lease (what a Docker deployer scaling to zero reports): UNUSED, READY
// again; a status no deployer sets is a refusal, and another listener's
// deployment is not found.
func TestClientReportsDeploymentStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		run(t, w.newAgent(sim(), nil))
		ctx := context.Background()
		d, rev := w.deploy("a")
		w.waitFor("DEPLOYED", func() bool { return controlplane.IsTerminal(w.status(d.ID, rev)) })
		c, err := agent.NewClient(&agent.Options{ControlPlane: "http://cp.test", ListenerID: w.listener, Token: w.token.Token,
			HTTPClient: w.client()})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []controlplane.DeploymentStatus{controlplane.StatusUnused, controlplane.StatusReady} {
			if err := c.ReportDeploymentStatus(ctx, tenant, d.ID, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			if got, err := w.cp.GetDeployment(ctx, tenant, d.ID); err != nil || got.Status != s {
				t.Errorf("after %s: %v %v", s, got.Status, err)
			}
		}
		if err := c.ReportDeploymentStatus(ctx, tenant, d.ID, controlplane.StatusAwaitingDelete); !controlplane.IsRefusal(err) {
			t.Errorf("a status no deployer sets: %v, want a refusal", err)
		}
		l, err := w.cp.CreateListener(ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("other")})
		if err != nil {
			t.Fatal(err)
		}
		other, err := w.cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("b"),
			Source: new(controlplane.SourceExternalDocker), SourceConfig: &controlplane.SourceConfig{ListenerID: &l.ID},
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ReportDeploymentStatus(ctx, tenant, other.ID, controlplane.StatusUnused); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("another listener's deployment: %v, want not found", err)
		}
	})
}

// recording wraps a Deployer and records, per agent, the statuses its
// Reporter accepted and when.
type recording struct {
	controlplane.Deployer
	mu       sync.Mutex
	reported []controlplane.RevisionStatus
	at       []time.Time
	signal   chan controlplane.RevisionStatus
}

func newRecording(d controlplane.Deployer) *recording {
	return &recording{Deployer: d, signal: make(chan controlplane.RevisionStatus, 16)}
}

func (r *recording) Deploy(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter) error {
	return r.Deployer.Deploy(ctx, w, &recordingReporter{Reporter: rep, r: r})
}

type recordingReporter struct {
	controlplane.Reporter
	r *recording
}

func (rr *recordingReporter) Report(ctx context.Context, s controlplane.Step) error {
	err := rr.Reporter.Report(ctx, s)
	if err == nil && s.Status != "" {
		rr.r.mu.Lock()
		rr.r.reported = append(rr.r.reported, s.Status)
		rr.r.at = append(rr.r.at, time.Now())
		rr.r.mu.Unlock()
		rr.r.signal <- s.Status
	}
	return err
}

func (r *recording) got() ([]controlplane.RevisionStatus, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reported), slices.Clone(r.at)
}

// An agent stopped in the middle of a revision gives its work back: a
// second agent takes it over at once (well before the lease would have
// expired) and completes it from where the first left it, no status
// reported twice and no step's log written twice.
func TestTakeOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		first, second := newRecording(sim()), newRecording(sim())
		firstRun := run(t, w.newAgent(first, nil))
		d, rev := w.deploy("a")
		select {
		case s := <-first.signal:
			if s != controlplane.RevisionAwaitingDeploy {
				t.Fatalf("the first agent reported %s first", s)
			}
		case <-time.After(deadline):
			t.Fatal("the first agent reported nothing")
		}
		if err := firstRun.stop(); err != nil {
			t.Fatalf("the first agent's Run: %v", err)
		}
		stopped := time.Now()
		run(t, w.newAgent(second, nil))
		w.waitFor("DEPLOYED", func() bool { return controlplane.IsTerminal(w.status(d.ID, rev)) })
		if s := w.status(d.ID, rev); s != controlplane.RevisionDeployed {
			t.Fatalf("revision %s, want DEPLOYED", s)
		}
		a, _ := first.got()
		b, at := second.got()
		want := []controlplane.RevisionStatus{controlplane.RevisionAwaitingDeploy, controlplane.RevisionDeploying, controlplane.RevisionDeployed}
		if all := append(a, b...); !slices.Equal(all, want) || len(a) != 1 {
			t.Errorf("the first agent reported %v, the second %v; want %v between them, the first only the first", a, b, want)
		}
		if took := at[0].Sub(stopped); took > 2*simStep {
			t.Errorf("the second agent's first report came %s after the first agent stopped: the work was not given back", took)
		}
		logs, err := w.cp.ListLogs(context.Background(), tenant, d.ID, rev, &controlplane.LogQuery{Type: controlplane.LogDeploy})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, l := range logs.Logs {
			if seen[l.Message] {
				t.Errorf("log line written twice: %q", l.Message)
			}
			seen[l.Message] = true
		}
	})
}

// Revoking the agent's token stops its Run with an error that says so, at
// its next call (a heartbeat at the latest).
func TestRevokedTokenStopsTheAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		r := run(t, w.newAgent(sim(), nil))
		time.Sleep(time.Minute)
		if err := w.cp.DeleteListenerToken(context.Background(), tenant, w.listener, w.token.ID); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		select {
		case <-r.done:
		case <-time.After(deadline):
			t.Fatal("Run goes on with a revoked token")
		}
		if !errors.Is(r.err, agent.ErrRefused) || !strings.Contains(r.err.Error(), "revoked") {
			t.Errorf("Run: %v, want an error saying the token was revoked", r.err)
		}
		if d := time.Since(revoked); d > controlplane.AgentHeartbeatInterval {
			t.Errorf("Run returned %s after the revocation, want within a heartbeat interval", d)
		}
	})
}

// While the control plane cannot be reached the agent tries again with
// backoff, logging each distinct failure of each kind of call once (not
// once per try), and once it answers again the agent catches up: work
// queued meanwhile is DEPLOYED.
func TestControlPlaneAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		var log syncBuffer
		run(t, w.newAgent(sim(), &log))
		time.Sleep(time.Minute)
		w.stop()
		d, rev := w.deploy("while-away")
		dials := w.dials.Load()
		time.Sleep(5 * time.Minute)
		if n := w.dials.Load() - dials; n < 10 {
			t.Errorf("%d tries in 5 minutes away", n)
		}
		if s := w.status(d.ID, rev); s != controlplane.RevisionQueued {
			t.Fatalf("revision %s while the control plane is away, want QUEUED", s)
		}
		w.serve()
		w.waitFor("DEPLOYED", func() bool { return controlplane.IsTerminal(w.status(d.ID, rev)) })
		if s := w.status(d.ID, rev); s != controlplane.RevisionDeployed {
			t.Fatalf("revision %s, want DEPLOYED", s)
		}
		time.Sleep(controlplane.AgentHeartbeatInterval) // a heartbeat since
		for _, what := range []string{"claiming work", "heartbeat"} {
			failed := regexp.MustCompile(`agent: ` + what + ` failed.*connection refused`)
			if n := len(failed.FindAllString(log.String(), -1)); n != 1 {
				t.Errorf("%q with connection refused logged %d times, want once:\n%s", what+" failed", n, log.String())
			}
			if n := strings.Count(log.String(), "agent: "+what+" works again"); n != 1 {
				t.Errorf("%q logged %d times, want once:\n%s", what+" works again", n, log.String())
			}
		}
	})
}

// failingTeardown is a Deployer whose Teardown fails while failing is
// set, counting its calls.
type failingTeardown struct {
	controlplane.Deployer
	failing atomic.Bool
	calls   atomic.Int64
}

func (f *failingTeardown) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	f.calls.Add(1)
	if f.failing.Load() {
		return errors.New("cluster edge is unreachable")
	}
	return f.Deployer.Teardown(ctx, tenant, d)
}

// A Teardown that fails is recorded on the deployment (teardown-failed):
// it stays AWAITING_DELETE with a status_message saying why, the teardown
// is offered again after the control plane's backoff, and once Teardown
// succeeds the deployment is removed.
func TestFailedTeardownIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		d := &failingTeardown{Deployer: sim()}
		d.failing.Store(true)
		run(t, w.newAgent(d, nil))
		ctx := context.Background()
		dep, rev := w.deploy("a")
		w.waitFor("DEPLOYED", func() bool { return controlplane.IsTerminal(w.status(dep.ID, rev)) })
		if err := w.cp.DeleteDeployment(ctx, tenant, dep.ID); err != nil {
			t.Fatal(err)
		}
		var got *controlplane.Deployment
		w.waitFor("the failed teardown recorded", func() bool {
			var err error
			if got, err = w.cp.GetDeployment(ctx, tenant, dep.ID); err != nil {
				t.Fatal(err)
			}
			// Before the agent's attempt it says it waits for the agent;
			// after, why the attempt failed.
			return got.StatusMessage != nil && !strings.HasPrefix(*got.StatusMessage, "Waiting for the agent")
		})
		if got.Status != controlplane.StatusAwaitingDelete || !strings.Contains(*got.StatusMessage, "cluster edge is unreachable") {
			t.Errorf("the deployment after a failed teardown: %s %q, want AWAITING_DELETE saying why", got.Status, *got.StatusMessage)
		}
		w.waitFor("the teardown tried again", func() bool { return d.calls.Load() >= 2 })
		d.failing.Store(false)
		w.waitFor("the deployment removed", func() bool {
			_, err := w.cp.GetDeployment(ctx, tenant, dep.ID)
			return err != nil
		})
	})
}

// untilStopped is a Deployer that takes a revision to DEPLOYING, says so,
// and waits there until its ctx ends; it sends the cause, and the error
// of one more report.
type untilStopped struct {
	deploying chan struct{}
	cause     chan error
	report    chan error
}

func newUntilStopped() *untilStopped {
	return &untilStopped{deploying: make(chan struct{}, 1), cause: make(chan error, 1), report: make(chan error, 1)}
}

func (u *untilStopped) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	if _, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{}); err != nil {
		return err
	}
	u.deploying <- struct{}{}
	<-ctx.Done()
	u.cause <- context.Cause(ctx)
	u.report <- r.Report(context.WithoutCancel(ctx), controlplane.Step{Status: controlplane.RevisionDeployed})
	return nil
}

func (u *untilStopped) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

// A revision the agent drives, interrupted through the API, stops the
// agent's Deployer at its next lease renewal (within a third of the
// lease), with a cause matching controlplane.ErrRevisionEnded, which tells
// it from a lost lease: the deployer removes what it made for the
// revision. Its reports are refused, matching ErrRevisionEnded too, and
// the agent claims nothing more of it.
func TestInterruptStopsTheAgentsDeployer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t)
		u := newUntilStopped()
		run(t, w.newAgent(u, nil))
		d, rev := w.deploy("a")
		<-u.deploying
		interrupted := time.Now()
		if _, err := w.cp.InterruptRevision(context.Background(), tenant, d.ID, rev); err != nil {
			t.Fatal(err)
		}
		cause := <-u.cause
		if !errors.Is(cause, controlplane.ErrRevisionEnded) || !errors.Is(cause, controlplane.ErrLeaseLost) {
			t.Errorf("the Deploy's ctx ended with %v, want ErrRevisionEnded and ErrLeaseLost", cause)
		}
		if took, lease := time.Since(interrupted), controlplane.DefaultLeaseDuration; took > lease/3+time.Second {
			t.Errorf("the agent's Deploy stopped %s after the interrupt, want within a third of the %s lease", took, lease)
		}
		if err := <-u.report; !controlplane.IsRefusal(err) || !errors.Is(err, controlplane.ErrRevisionEnded) {
			t.Errorf("a report after the interrupt: %v, want a refusal matching ErrRevisionEnded", err)
		}
		time.Sleep(time.Minute)
		if s := w.status(d.ID, rev); s != controlplane.RevisionInterrupted {
			t.Errorf("revision %s, want INTERRUPTED", s)
		}
		select {
		case <-u.deploying:
			t.Error("the agent deployed the interrupted revision again")
		default:
		}
	})
}
