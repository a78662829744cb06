package httphandler

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// Health: GET /healthz and GET /readyz (wire contract section 9), public,
// answering no data of any tenant. Both are outside the load caps and the
// rate limit (shed.go's poolOf), so that a saturated server is not taken
// for a dead one.

// readyTimeout bounds the checks of one GET /readyz.
const readyTimeout = 5 * time.Second

// healthBody is the answer of /healthz, and of /readyz when ready.
type healthBody struct {
	// Status is "ok", or "unavailable" when not ready.
	Status string `json:"status"`
	// Clusters is, in /readyz's answer, the state of each Kubernetes
	// cluster the deployer drives (controlplane.ClusterHealthReporter):
	// "ok" or "unreachable" (the cause goes to the log). A cluster that
	// does not answer does not make the server unready.
	Clusters map[string]string `json:"clusters,omitempty"`
}

// notReadyBody is the 503 of /readyz: what is not ready, in words that
// carry no address, path or other detail of the installation (the causes
// go to the log).
type notReadyBody struct {
	Status string `json:"status"`
	Detail string `json:"detail"`
	// NotReady lists the components not ready: "store", "reconcile",
	// "deployer".
	NotReady []string `json:"not_ready"`
	// Clusters is as in healthBody.
	Clusters map[string]string `json:"clusters,omitempty"`
}

// readyWords says, for each component of controlplane.Ready, what is wrong.
var readyWords = map[string]string{
	controlplane.ComponentStore:     "the store does not answer",
	controlplane.ComponentReconcile: "the reconcile loop is not running",
	controlplane.ComponentDeployer:  "the deployer cannot reach its engine",
}

// healthz answers 200 {"status": "ok"} as long as the process serves.
func (h *handler) healthz(*call) (int, any, error) {
	return http.StatusOK, healthBody{Status: "ok"}, nil
}

// readyz answers 200 {"status": "ok"} when the control plane is ready
// (controlplane.ControlPlane.Ready: the store answers, the reconcile loop
// runs, the deployer reaches its engine), 503 saying what is not otherwise;
// both with the clusters' states.
func (h *handler) readyz(c *call) (int, any, error) {
	clusters, err := h.ready.check(c.r.Context(), h)
	if err == nil {
		return http.StatusOK, healthBody{Status: "ok", Clusters: clusters}, nil
	}
	body := notReadyBody{Status: "unavailable", Clusters: clusters}
	var nr *controlplane.NotReadyError
	if errors.As(err, &nr) {
		for _, p := range nr.Problems {
			body.NotReady = append(body.NotReady, p.Component)
		}
	} else {
		// The probe's own request ended (its client left, the server
		// stops) before the check did.
		body.NotReady = []string{controlplane.ComponentStore}
	}
	words := make([]string, len(body.NotReady))
	for i, comp := range body.NotReady {
		words[i] = readyWords[comp]
	}
	body.Detail = "Not ready: " + strings.Join(words, "; ") + "."
	return http.StatusServiceUnavailable, body, nil
}

// readiness runs the checks of /readyz: probes that arrive while a check
// runs share its result instead of starting one each, so a flood of probes
// (the route is public and uncapped) costs one check at a time.
type readiness struct {
	mu      sync.Mutex
	running *readyCheck
	logged  string // the components not ready last logged; "" ready
}

// readyCheck is one run of the checks.
type readyCheck struct {
	done     chan struct{}
	err      error
	clusters map[string]string
}

// check returns the clusters' states (controlplane.ControlPlane.ClusterHealth,
// in words) and controlplane.Ready's verdict: those of the check
// under way, if any, else of a new one; or ctx's error if ctx ends first.
func (rd *readiness) check(ctx context.Context, h *handler) (map[string]string, error) {
	rd.mu.Lock()
	if c := rd.running; c != nil {
		rd.mu.Unlock()
		select {
		case <-c.done:
			return c.clusters, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &readyCheck{done: make(chan struct{})}
	rd.running = c
	rd.mu.Unlock()

	// The check runs to its end even if this probe's client leaves, as
	// others may be waiting for it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
	var wg sync.WaitGroup
	wg.Go(func() {
		for name, err := range h.cp.ClusterHealth(cctx) {
			if c.clusters == nil {
				c.clusters = map[string]string{}
			}
			c.clusters[name] = "ok"
			if err != nil {
				c.clusters[name] = "unreachable"
			}
		}
	})
	c.err = h.cp.Ready(cctx)
	wg.Wait()
	cancel()

	rd.mu.Lock()
	rd.running = nil
	rd.logState(h, c.err)
	rd.mu.Unlock()
	close(c.done)
	return c.clusters, c.err
}

// logState logs the readiness when it changes: the causes of what is not
// ready at Warn (they are not in the public answer), a return to ready at
// Info. rd.mu is held.
func (rd *readiness) logState(h *handler, err error) {
	state := ""
	var nr *controlplane.NotReadyError
	if errors.As(err, &nr) {
		var comps []string
		for _, p := range nr.Problems {
			comps = append(comps, p.Component)
		}
		slices.Sort(comps)
		state = strings.Join(comps, ",")
	}
	if state == rd.logged {
		return
	}
	rd.logged = state
	if state == "" {
		h.log.Info("httphandler: ready")
		return
	}
	h.log.Warn("httphandler: not ready", "not_ready", state, "err", err)
}
