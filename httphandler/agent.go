package httphandler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/deployplane/deployplane/apierr"
	cp "github.com/deployplane/deployplane/controlplane"
)

// The routes of a listener's agents (wire contract section 11; docs/api.md,
// "Agents"): the listener tokens, which
// an API key creates, lists and revokes, and the agent routes under
// /v2/listeners/{listener_id}/agent, where an agent claims the
// listener's work with a long poll and reports it through the lease of
// its claim. A listener token reaches only the agent routes of its own
// listener (authenticate); an API key reaches those of every listener of
// its tenant (the hosted listener's way), which agentRequest checks.
// Every POST body is a JSON object; the claim's answer is the only one
// that carries secrets, and nothing of a body is logged.

// agentClaimPath is the claim's path, a long poll (poolOf).
const agentClaimPath = "/v2/listeners/{listener_id}/agent/claim"

// The claim's wait, in seconds: its default and its most.
const (
	defaultAgentWait = 30
	maxAgentWait     = 60
)

// agentClaimRequest is the body of POST .../agent/claim.
type agentClaimRequest struct {
	// WaitSeconds is how long to wait for work, 0 to 60; nil means 30.
	WaitSeconds *int `json:"wait_seconds"`
	// Version is the agent's version ("" leaves the listener's as it is).
	Version string `json:"version"`
}

// agentHeartbeatRequest is the body of POST .../agent/heartbeat.
type agentHeartbeatRequest struct {
	Version string `json:"version"`
}

// agentLeaseRequest is the body of POST .../agent/renew and
// .../agent/teardown-done.
type agentLeaseRequest struct {
	Lease string `json:"lease"`
}

// agentReportRequest is the body of POST .../agent/report.
type agentReportRequest struct {
	Lease string   `json:"lease"`
	Step  *cp.Step `json:"step"`
}

// agentFailRequest is the body of POST .../agent/fail and
// .../agent/teardown-failed.
type agentFailRequest struct {
	Lease   string `json:"lease"`
	Message string `json:"message"`
}

// agentLogsRequest is the body of POST .../agent/logs.
type agentLogsRequest struct {
	Lease string       `json:"lease"`
	Lines []cp.LogLine `json:"lines"`
}

// agentReleaseRequest is the body of POST .../agent/release.
type agentReleaseRequest struct {
	Lease string `json:"lease"`
	Retry bool   `json:"retry"`
}

// agentLinesRequest is the body of POST
// .../agent/deployments/{deployment_id}/revisions/{revision_id}/logs.
type agentLinesRequest struct {
	Lines []cp.LogLine `json:"lines"`
}

// agentStatusRequest is the body of POST
// .../agent/deployments/{deployment_id}/status.
type agentStatusRequest struct {
	// Status is the deployment's new status: READY, UNUSED or UNKNOWN.
	Status cp.DeploymentStatus `json:"status"`
}

// agentUnhealthyRequest is the body of POST
// .../agent/deployments/{deployment_id}/revisions/{revision_id}/unhealthy.
type agentUnhealthyRequest struct {
	// Reason says how the revision failed its health checks.
	Reason string `json:"reason"`
}

// agentBody is the body of an agent route: problems lists the members it
// lacks or has out of range (at ["body", member]), which the transport
// requires; the ControlPlane checks the rest.
type agentBody interface {
	problems() []apierr.Problem
}

func missing(name string) apierr.Problem {
	return apierr.Problem{Loc: []any{"body", name}, Type: apierr.TypeMissing, Msg: apierr.MsgFieldRequired}
}

// leaseProblems requires a lease.
func leaseProblems(lease string) []apierr.Problem {
	if lease == "" {
		return []apierr.Problem{missing("lease")}
	}
	return nil
}

func (r *agentClaimRequest) problems() []apierr.Problem {
	switch w := r.WaitSeconds; {
	case w == nil:
	case *w < 0:
		return []apierr.Problem{{Loc: []any{"body", "wait_seconds"}, Type: apierr.TypeGreaterThanEqual,
			Msg: "Input should be greater than or equal to 0"}}
	case *w > maxAgentWait:
		return []apierr.Problem{{Loc: []any{"body", "wait_seconds"}, Type: apierr.TypeLessThanEqual,
			Msg: fmt.Sprintf("Input should be less than or equal to %d", maxAgentWait)}}
	}
	return nil
}

func (*agentHeartbeatRequest) problems() []apierr.Problem { return nil }

func (r *agentLeaseRequest) problems() []apierr.Problem { return leaseProblems(r.Lease) }

func (r *agentReportRequest) problems() []apierr.Problem {
	ps := leaseProblems(r.Lease)
	if r.Step == nil {
		ps = append(ps, missing("step"))
	}
	return ps
}

func (r *agentFailRequest) problems() []apierr.Problem { return leaseProblems(r.Lease) }

func (r *agentLogsRequest) problems() []apierr.Problem {
	ps := leaseProblems(r.Lease)
	if r.Lines == nil {
		ps = append(ps, missing("lines"))
	}
	return ps
}

func (r *agentReleaseRequest) problems() []apierr.Problem { return leaseProblems(r.Lease) }

func (r *agentStatusRequest) problems() []apierr.Problem {
	if r.Status == "" {
		return []apierr.Problem{missing("status")}
	}
	return nil
}

func (r *agentUnhealthyRequest) problems() []apierr.Problem {
	if r.Reason == "" {
		return []apierr.Problem{missing("reason")}
	}
	return nil
}

func (r *agentLinesRequest) problems() []apierr.Problem {
	if r.Lines == nil {
		return []apierr.Problem{missing("lines")}
	}
	return nil
}

// agentRequest reads an agent route's path ids (listener_id first, then
// names) and its body into body (nil: none), and checks that the
// caller's tenant has the listener (404 otherwise) before the body is
// looked at; a listener token's listener was checked with the token. A
// 422 lists the problems of the path and the body together.
func (h *handler) agentRequest(c *call, body agentBody, names ...string) ([]string, error) {
	ids, pathErr := pathIDs(c.r, append([]string{"listener_id"}, names...)...)
	if pathErr == nil && !isListenerToken(credentials(c.r)) {
		if _, err := h.cp.GetListener(c.r.Context(), c.tenant, ids[0]); err != nil {
			return nil, err
		}
	}
	if body == nil {
		return ids, pathErr
	}
	validate := func() error { return apierr.Validation(body.problems()...) }
	err := h.decodeChecked(c, body, false, nil, validate)
	if err == nil {
		err = validate()
	}
	if err := joinProblems(pathErr, err); err != nil {
		return nil, err
	}
	return ids, nil
}

// agentClaim serves the claim: a unit of the listener's work with its
// lease (200), or 204 once wait_seconds pass without any, or when the
// Handler is closed. The claim counts as a heartbeat, with the agent's
// version. Work claimed for a client that went away meanwhile is taken
// over once its lease expires.
func (h *handler) agentClaim(c *call) (int, any, error) {
	var req agentClaimRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	ctx := c.r.Context()
	if err := h.cp.AgentHeartbeat(ctx, c.tenant, ids[0], req.Version); err != nil {
		return 0, nil, err
	}
	wait := defaultAgentWait * time.Second
	if req.WaitSeconds != nil {
		wait = time.Duration(*req.WaitSeconds) * time.Second
	}
	// The server's WriteTimeout may be shorter than the wait (as for
	// ?wait=terminal).
	_ = http.NewResponseController(c.w).SetWriteDeadline(time.Now().Add(wait + waitSlack))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.closing, cancel)()
	w, err := h.cp.WaitAgentWork(wctx, c.tenant, ids[0], wait)
	switch {
	case err != nil && wctx.Err() != nil && ctx.Err() == nil:
		return http.StatusNoContent, nil, nil // closed: nothing claimed
	case err != nil:
		return 0, nil, err
	case w == nil:
		return http.StatusNoContent, nil, nil
	case wctx.Err() != nil:
		// The agent went (or the server closes) while the claim was
		// made: give the work back at once rather than leave it held
		// until its lease expires.
		if err := h.cp.ReleaseAgentWork(context.WithoutCancel(ctx), c.tenant, ids[0], w.Lease, false); err != nil {
			h.log.Warn("httphandler: giving back the work of an agent that went during its claim", "listener", ids[0], "err", err)
		}
		return http.StatusNoContent, nil, nil
	}
	// Written here, so that a claim whose answer cannot reach the agent
	// (it went as the answer was written) is given back at once.
	return http.StatusOK, servedBy{http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h.writeJSON(rw, http.StatusOK, w)
		// A writer that cannot flush (an in-process transport's) has the
		// answer already; only a failed flush or a gone client lose it.
		err := http.NewResponseController(rw).Flush()
		if err != nil && !errors.Is(err, http.ErrNotSupported) || r.Context().Err() != nil {
			if err := h.cp.ReleaseAgentWork(context.WithoutCancel(ctx), c.tenant, ids[0], w.Lease, false); err != nil {
				h.log.Warn("httphandler: giving back the work of an agent that went during its claim", "listener", ids[0], "err", err)
			}
		}
	})}, nil
}

func (h *handler) agentHeartbeat(c *call) (int, any, error) {
	var req agentHeartbeatRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.AgentHeartbeat(c.r.Context(), c.tenant, ids[0], req.Version)
}

func (h *handler) agentRenew(c *call) (int, any, error) {
	var req agentLeaseRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.RenewAgentLease(c.r.Context(), c.tenant, ids[0], req.Lease)
}

func (h *handler) agentReport(c *call) (int, any, error) {
	var req agentReportRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.ReportAgent(c.r.Context(), c.tenant, ids[0], req.Lease, *req.Step)
}

func (h *handler) agentFail(c *call) (int, any, error) {
	var req agentFailRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.FailAgentWork(c.r.Context(), c.tenant, ids[0], req.Lease, req.Message)
}

func (h *handler) agentLogs(c *call) (int, any, error) {
	var req agentLogsRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.LogAgent(c.r.Context(), c.tenant, ids[0], req.Lease, req.Lines...)
}

func (h *handler) agentRelease(c *call) (int, any, error) {
	var req agentReleaseRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.ReleaseAgentWork(c.r.Context(), c.tenant, ids[0], req.Lease, req.Retry)
}

func (h *handler) agentTeardownDone(c *call) (int, any, error) {
	var req agentLeaseRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.FinishAgentTeardown(c.r.Context(), c.tenant, ids[0], req.Lease)
}

func (h *handler) agentTeardownFailed(c *call) (int, any, error) {
	var req agentFailRequest
	ids, err := h.agentRequest(c, &req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.FailAgentTeardown(c.r.Context(), c.tenant, ids[0], req.Lease, req.Message)
}

func (h *handler) agentDeployments(c *call) (int, any, error) {
	ids, err := h.agentRequest(c, nil)
	p := newQueryParser(c.r.URL.RawQuery)
	q := &cp.AgentDeploymentsQuery{Limit: p.int("limit"), After: p.str("after")}
	if err := joinProblems(err, apierr.Validation(p.ps...)); err != nil {
		return 0, nil, err
	}
	page, err := h.cp.ListAgentDeployments(c.r.Context(), c.tenant, ids[0], q)
	return http.StatusOK, page, err
}

func (h *handler) agentDeployment(c *call) (int, any, error) {
	ids, err := h.agentRequest(c, nil, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	d, err := h.cp.AgentDeployment(c.r.Context(), c.tenant, ids[0], ids[1])
	return http.StatusOK, d, err
}

func (h *handler) agentRevision(c *call) (int, any, error) {
	ids, err := h.agentRequest(c, nil, "deployment_id", "revision_id")
	if err != nil {
		return 0, nil, err
	}
	rev, err := h.cp.AgentRevision(c.r.Context(), c.tenant, ids[0], ids[1], ids[2])
	return http.StatusOK, rev, err
}

func (h *handler) agentDeploymentStatus(c *call) (int, any, error) {
	var req agentStatusRequest
	ids, err := h.agentRequest(c, &req, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.AgentReportDeploymentStatus(c.r.Context(), c.tenant, ids[0], ids[1], req.Status)
}

func (h *handler) agentUnhealthy(c *call) (int, any, error) {
	var req agentUnhealthyRequest
	ids, err := h.agentRequest(c, &req, "deployment_id", "revision_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.AgentReportUnhealthy(c.r.Context(), c.tenant, ids[0], ids[1], ids[2], req.Reason)
}

func (h *handler) agentAppendLogs(c *call) (int, any, error) {
	var req agentLinesRequest
	ids, err := h.agentRequest(c, &req, "deployment_id", "revision_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.AgentAppendLogs(c.r.Context(), c.tenant, ids[0], ids[1], ids[2], req.Lines...)
}

func (h *handler) agentListLogs(c *call) (int, any, error) {
	ids, pathErr := h.agentRequest(c, nil, "deployment_id", "revision_id")
	q, qErr := parseLogQuery(c.r.URL.RawQuery)
	if validationOf(pathErr) != nil && qErr == nil {
		qErr = q.Validate() // list the query's problems with the path's
	}
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	page, err := h.cp.AgentListLogs(c.r.Context(), c.tenant, ids[0], ids[1], ids[2], q)
	return http.StatusOK, page, err
}

func (h *handler) createListenerToken(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "listener_id")
	if err != nil {
		return 0, nil, err
	}
	t, err := h.cp.CreateListenerToken(c.r.Context(), c.tenant, ids[0])
	return http.StatusCreated, t, err
}

func (h *handler) listListenerTokens(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "listener_id")
	q, qErr := parseListListeners(c.r.URL.RawQuery, h.cp.Limits())
	if pathErr != nil && qErr == nil {
		qErr = q.ValidateWith(h.cp.Limits()) // list the query's problems with the path's
	}
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	p, err := h.cp.ListListenerTokens(c.r.Context(), c.tenant, ids[0], q)
	return http.StatusOK, p, err
}

func (h *handler) deleteListenerToken(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "listener_id", "token_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.DeleteListenerToken(c.r.Context(), c.tenant, ids[0], ids[1])
}

// listenerTokenRoutes are the routes of a listener's tokens; page are
// the limit and offset parameters of lists.
func listenerTokenRoutes(page []param) []route {
	return []route{
		{method: http.MethodPost, path: "/v2/listeners/{listener_id}/tokens", serve: (*handler).createListenerToken,
			summary: "Create a token for the listener's agents (the token is in this answer only)",
			status:  http.StatusCreated, resp: cp.NewListenerToken{}},
		{method: http.MethodGet, path: "/v2/listeners/{listener_id}/tokens", serve: (*handler).listListenerTokens,
			summary: "List the listener's tokens, newest first (never the tokens themselves)",
			status:  http.StatusOK, resp: cp.ListenerTokenPage{}, query: page},
		{method: http.MethodDelete, path: "/v2/listeners/{listener_id}/tokens/{token_id}", serve: (*handler).deleteListenerToken,
			summary: "Revoke a listener token: it is refused (401) from then on", status: http.StatusNoContent},
	}
}

// agentRoutes are the routes of a listener's agents.
func agentRoutes() []route {
	const base = "/v2/listeners/{listener_id}/agent"
	lease := []int{http.StatusConflict} // the lease is lost: stop this work
	revision := base + "/deployments/{deployment_id}/revisions/{revision_id}"
	return []route{
		{method: http.MethodPost, path: agentClaimPath, serve: (*handler).agentClaim, agent: true,
			summary: "Claim a unit of the listener's work with a lease; a long poll (204 when nothing came within wait_seconds)",
			description: "Counts as a heartbeat, with the agent's version. The answer carries the revision to drive " +
				"(kind deploy, secrets included) or the deployment to tear down (kind teardown), and the lease every " +
				"later call about it names; renew the lease every third of lease_seconds.",
			body: agentClaimRequest{}, status: http.StatusOK, resp: cp.AgentWork{}, noContent: true},
		{method: http.MethodPost, path: base + "/heartbeat", serve: (*handler).agentHeartbeat, agent: true,
			summary: "Record that an agent of the listener is alive, and its version (every 10 seconds)",
			body:    agentHeartbeatRequest{}, status: http.StatusNoContent},
		{method: http.MethodPost, path: base + "/renew", serve: (*handler).agentRenew, agent: true,
			summary: "Renew a lease for lease_seconds more", body: agentLeaseRequest{}, status: http.StatusNoContent, errors: lease},
		{method: http.MethodPost, path: base + "/report", serve: (*handler).agentReport, agent: true,
			summary: "Report a step of the lease's revision (idempotent: a step it already took changes nothing)",
			body:    agentReportRequest{}, status: http.StatusNoContent, errors: lease},
		{method: http.MethodPost, path: base + "/fail", serve: (*handler).agentFail, agent: true,
			summary: "Fail the phase the lease's revision is in, with a message (idempotent)",
			body:    agentFailRequest{}, status: http.StatusNoContent, errors: lease},
		{method: http.MethodPost, path: base + "/logs", serve: (*handler).agentLogs, agent: true,
			summary: "Write lines to the logs of the lease's revision (renews the lease)",
			body:    agentLogsRequest{}, status: http.StatusNoContent, errors: lease},
		{method: http.MethodPost, path: base + "/release", serve: (*handler).agentRelease, agent: true,
			summary: "Give the lease's work back: at once, or with retry after the server's poll interval",
			body:    agentReleaseRequest{}, status: http.StatusNoContent},
		{method: http.MethodPost, path: base + "/teardown-done", serve: (*handler).agentTeardownDone, agent: true,
			summary: "Remove the deployment of a teardown's lease once its resources are gone (idempotent)",
			body:    agentLeaseRequest{}, status: http.StatusNoContent, errors: lease},
		{method: http.MethodPost, path: base + "/teardown-failed", serve: (*handler).agentTeardownFailed, agent: true,
			summary: "Record that the teardown of the lease's deployment failed, with a message: the deployment stays " +
				"AWAITING_DELETE with the message as its status_message, and the teardown is offered again after a backoff",
			description: "The backoff starts at 2 seconds and doubles with each failure in a row, up to 5 minutes; " +
				"the work's lease ends with this call.",
			body: agentFailRequest{}, status: http.StatusNoContent, errors: lease},
		{method: http.MethodGet, path: base + "/deployments", serve: (*handler).agentDeployments, agent: true,
			summary: "A page of the ids of the listener's deployments, oldest first (those being deleted included)",
			status:  http.StatusOK, resp: cp.AgentDeploymentPage{},
			query: []param{
				qInt("limit", "Page size (0: the default).", 0, cp.MaxAgentPageLimit, cp.DefaultAgentPageLimit),
				qStr("after", "The next of the previous page; absent for the first."),
			}},
		{method: http.MethodGet, path: base + "/deployments/{deployment_id}", serve: (*handler).agentDeployment, agent: true,
			summary: "Get a deployment placed on the listener", status: http.StatusOK, resp: cp.Deployment{}},
		{method: http.MethodPost, path: base + "/deployments/{deployment_id}/status", serve: (*handler).agentDeploymentStatus, agent: true,
			summary: "Set the status of a deployment placed on the listener outside a lease: UNUSED once the agent " +
				"scaled it to zero, READY once it serves again, UNKNOWN when the agent cannot tell",
			description: "400 for another status, for READY before a revision is active, and for a deployment " +
				"being deleted; setting the status the deployment has changes nothing.",
			body: agentStatusRequest{}, status: http.StatusNoContent},
		{method: http.MethodGet, path: revision, serve: (*handler).agentRevision, agent: true,
			summary: "Get a revision of a deployment placed on the listener", status: http.StatusOK, resp: cp.Revision{}},
		{method: http.MethodPost, path: revision + "/unhealthy", serve: (*handler).agentUnhealthy, agent: true,
			summary: "Report that the active revision of a deployment placed on the listener failed its health " +
				"checks after it became active: the deployment rolls back automatically when source_config.auto_rollback " +
				"asks for it, within the server's window",
			description: "Sent by an agent that watches the revisions its work asked it to (health_watch_seconds). " +
				"400 when nothing is to be done (auto_rollback off, the revision no longer active, past the window, " +
				"the deployment pinned or being deleted); a repeated report changes nothing.",
			body: agentUnhealthyRequest{}, status: http.StatusNoContent},
		{method: http.MethodPost, path: revision + "/logs", serve: (*handler).agentAppendLogs, agent: true,
			summary: "Write lines to a revision's logs outside a lease (a running server's output)",
			body:    agentLinesRequest{}, status: http.StatusNoContent},
		{method: http.MethodGet, path: revision + "/logs", serve: (*handler).agentListLogs, agent: true,
			summary: "Read a revision's build or deploy log, a page at a time", status: http.StatusOK, resp: cp.LogPage{},
			query: logQueryParams},
	}
}
