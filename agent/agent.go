package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// The defaults of Options.
const (
	// DefaultConcurrency is how many units of work an agent drives at
	// once.
	DefaultConcurrency = 4
	// DefaultClaimWait is how long a claim waits at the control plane for
	// work (the protocol's default; at most MaxClaimWait).
	DefaultClaimWait = 30 * time.Second
	// MaxClaimWait is the longest claim wait the protocol allows.
	MaxClaimWait = 60 * time.Second
	// DefaultRequestTimeout bounds each call to the control plane (a
	// claim: its wait and this).
	DefaultRequestTimeout = 30 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the waits between
	// tries of a call that failed for a reason that may pass (the control
	// plane unreachable, a 5xx or 429 answer).
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
	// releaseTimeout bounds the release of held work when Run stops.
	releaseTimeout = 5 * time.Second
)

// Options configure an Agent. ControlPlane, ListenerID, a credential
// (Token, or APIKey) and Deployer are required; zero fields of the others
// mean their defaults.
type Options struct {
	// ControlPlane is the control plane's base URL
	// (https://deploy.example.com); the agent routes are under it at
	// /v2/listeners/{listener_id}/agent/.
	ControlPlane string
	// ListenerID is the listener whose work the agent does.
	ListenerID string
	// Token is a listener token of the listener (dpl_lt_..., POST
	// /v2/listeners/{listener_id}/tokens), sent as a bearer token.
	Token string
	// APIKey is a tenant API key, instead of a Token (the hosted
	// listener's way); TenantID names the tenant when the key has
	// several.
	APIKey   string
	TenantID string
	// HTTPClient sends the calls. Default: DefaultHTTPClient().
	HTTPClient *http.Client
	// Client is the connection to use (NewClient), when the Deployer
	// needs it as its State before the Agent is made: the connection
	// fields above are then not read. Default: NewClient(these Options).
	Client *Client

	// Deployer does the work, as Run does in the control plane: Deploy
	// for a revision, Teardown for a deployment being deleted.
	Deployer controlplane.Deployer
	// Version is the agent's version, which the listener shows (its
	// version field) once the agent heartbeats.
	Version string
	// Logger receives what the agent does and its failures (never a
	// secret). Default slog.Default().
	Logger *slog.Logger
	// Concurrency is how many units of work the agent drives at once.
	// Default DefaultConcurrency.
	Concurrency int
	// ClaimWait is how long each claim waits at the control plane for
	// work, 1 s to MaxClaimWait. Default DefaultClaimWait.
	ClaimWait time.Duration
	// RequestTimeout bounds each call. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the waits, with jitter, between
	// tries of a call that failed for a reason that may pass. Defaults
	// DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
}

// Agent does the work of one listener: it claims it from the control
// plane and drives it with its Deployer (see the package documentation).
type Agent struct {
	c           *Client
	d           controlplane.Deployer
	log         *slog.Logger
	version     string
	concurrency int
	wait        time.Duration
	backoff     backoffPolicy
	running     atomic.Bool

	mu   sync.Mutex
	stop context.CancelCauseFunc // the running Run's; nil when none
}

// New returns an Agent. Errors: a required field missing, or one
// malformed.
func New(o *Options) (*Agent, error) {
	if o == nil {
		return nil, errors.New("agent: Options are required")
	}
	if o.Deployer == nil {
		return nil, errors.New("agent: Options.Deployer is required")
	}
	if o.ClaimWait != 0 && (o.ClaimWait < time.Second || o.ClaimWait > MaxClaimWait) {
		return nil, fmt.Errorf("agent: Options.ClaimWait must be 1s to %s, not %s", MaxClaimWait, o.ClaimWait)
	}
	c := o.Client
	if c == nil {
		var err error
		if c, err = NewClient(o); err != nil {
			return nil, err
		}
	}
	a := &Agent{c: c, d: o.Deployer, log: o.Logger, version: o.Version, concurrency: o.Concurrency,
		wait: o.ClaimWait, backoff: newBackoffPolicy(o)}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.concurrency <= 0 {
		a.concurrency = DefaultConcurrency
	}
	if a.wait == 0 {
		a.wait = DefaultClaimWait
	}
	c.refused = a.refused
	return a, nil
}

// State is the agent's Client: the deployers' State over the agent
// routes.
func (a *Agent) State() *Client { return a.c }

// refused stops the running Run: the control plane refused the
// credentials.
func (a *Agent) refused(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop != nil {
		a.stop(err)
	}
}

// Run does the listener's work until ctx ends, then gives back the work it
// holds (so that another agent of the listener, or this one restarted,
// takes it at once) and returns nil. It heartbeats every
// controlplane.AgentHeartbeatInterval, claims work with a long poll, and
// drives up to Options.Concurrency units at once, each in its own
// goroutine: a revision through Deployer.Deploy with a Reporter over the
// agent routes and its lease renewed every third of its length; a
// deployment being deleted through Deployer.Teardown. A call that fails
// for a reason that may pass (the control plane unreachable, 5xx, 429) is
// tried again with capped exponential backoff and jitter, and logged once
// per distinct failure. When the control plane refuses the credentials
// (401, 403: the listener token was revoked, or is wrong), or answers that
// the listener does not exist, Run stops its work and returns an error
// that says so (matching ErrRefused for the credentials). One Run at a
// time.
func (a *Agent) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("agent: Run is running already")
	}
	defer a.running.Store(false)
	rctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	a.mu.Lock()
	a.stop = stop
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.stop = nil
		a.mu.Unlock()
	}()
	a.log.Info("agent: running", "control_plane", a.c.base, "listener", a.c.listenerID(), "version", a.version, "concurrency", a.concurrency)

	var wg sync.WaitGroup
	wg.Go(func() { a.heartbeats(rctx, stop) })
	slots := make(chan struct{}, a.concurrency)
	a.claims(rctx, stop, slots, &wg)
	wg.Wait()
	if err := context.Cause(rctx); ctx.Err() == nil && err != nil {
		a.log.Error("agent: stopped", "err", err)
		return err
	}
	a.log.Info("agent: stopped")
	return nil
}

// errNoListener is matched by the error Run stops with when the control
// plane does not know the listener.
var errNoListener = errors.New("agent: the control plane has no such listener")

// noListener wraps a 404 of a listener's route.
func (a *Agent) noListener(err error) error {
	return fmt.Errorf("%w %s (it was deleted, the listener id is wrong, or the control plane has no agent routes): %w", errNoListener, a.c.listenerID(), err)
}

// heartbeats tells the control plane every AgentHeartbeatInterval that the
// agent is alive, from the start, until ctx ends.
func (a *Agent) heartbeats(ctx context.Context, stop context.CancelCauseFunc) {
	tr := &trouble{log: a.log, what: "heartbeat"}
	for {
		err := a.c.heartbeat(ctx, a.version)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			tr.ok()
		case errors.Is(err, ErrRefused):
			stop(err)
			return
		case isNotFound(err):
			stop(a.noListener(err))
			return
		default:
			tr.failed(err)
		}
		if !sleep(ctx, controlplane.AgentHeartbeatInterval) {
			return
		}
	}
}

// claims claims work while ctx lasts, one unit per free slot, and starts a
// goroutine (in wg) for each unit claimed.
func (a *Agent) claims(ctx context.Context, stop context.CancelCauseFunc, slots chan struct{}, wg *sync.WaitGroup) {
	tr := &trouble{log: a.log, what: "claiming work"}
	b := a.backoff.start()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		asked := time.Now()
		w, err := a.c.claim(ctx, a.wait, a.version)
		switch {
		case ctx.Err() != nil:
			if w != nil {
				a.giveBack(ctx, w.Lease, a.log) // claimed as Run stops
			}
			return
		case errors.Is(err, ErrRefused):
			stop(err)
			return
		case isNotFound(err):
			stop(a.noListener(err))
			return
		case err != nil:
			<-slots
			tr.failed(err)
			if !sleep(ctx, b.next(retryAfterOf(err))) {
				return
			}
			continue
		}
		tr.ok()
		if w == nil {
			<-slots
			if time.Since(asked) >= a.wait/2 {
				b.reset()
				continue
			}
			// No work, long before the wait passed: the control plane
			// is shutting down (its handler then answers at once). Ask
			// again after a backoff, not in a loop.
			if !sleep(ctx, b.next(0)) {
				return
			}
			continue
		}
		b.reset()
		wg.Go(func() {
			defer func() { <-slots }()
			a.do(ctx, w)
		})
	}
}
