package httphandler

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// DefaultEventHeartbeat is the default Options.EventHeartbeat.
const DefaultEventHeartbeat = 15 * time.Second

// eventWriteTimeout bounds each write of an event stream: a client that
// reads nothing for that long is dropped (its stream ends).
const eventWriteTimeout = 30 * time.Second

// detailShuttingDown is the 503 of an event stream asked for after Close.
const detailShuttingDown = "The server is shutting down. Retry after the delay in Retry-After."

// streamed is the body of an endpoint that wrote its answer itself (an
// event stream): serve writes nothing more.
type streamed struct{}

// tenantEvents serves GET /v2/events: the tenant's whole event stream.
func (h *handler) tenantEvents(c *call) (int, any, error) {
	return h.streamEvents(c, "")
}

// deploymentEvents serves GET /v2/deployments/{deployment_id}/events.
func (h *handler) deploymentEvents(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	return h.streamEvents(c, ids[0])
}

// streamEvents answers with the Server-Sent Events of the tenant's event
// log (one deployment's when deploymentID is set), from Last-Event-ID or
// from now, until the client goes away, the followed deployment is removed
// (after its deleted event) or the Handler is closed. Errors before the
// stream starts (404, 422, 503) are ordinary answers.
func (h *handler) streamEvents(c *call, deploymentID string) (int, any, error) {
	p := newQueryParser(c.r.URL.RawQuery)
	var logs []controlplane.LogType
	for _, t := range p.list("logs") {
		logs = append(logs, controlplane.LogType(t))
	}
	if len(p.ps) > 0 {
		return 0, nil, apierr.Validation(p.ps...)
	}
	if h.closing.Err() != nil {
		c.w.Header().Set("Retry-After", retryAfterBusy)
		return 0, nil, &statusError{status: http.StatusServiceUnavailable, detail: detailShuttingDown}
	}
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	defer context.AfterFunc(h.closing, cancel)()
	s, err := h.cp.FollowEvents(ctx, c.tenant, &controlplane.FollowOptions{
		DeploymentID: deploymentID,
		LastEventID:  c.r.Header.Get("Last-Event-ID"),
		Logs:         logs,
	})
	if err != nil {
		return 0, nil, err
	}
	hd := c.w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no") // proxies that buffer (nginx) pass each event on at once
	rc := http.NewResponseController(c.w)
	_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
	c.w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil || c.r.Method == http.MethodHead {
		return http.StatusOK, streamed{}, nil
	}
	var buf bytes.Buffer
	for {
		next, stop := context.WithTimeout(ctx, h.heartbeat)
		evs, err := s.Next(next)
		stop()
		buf.Reset()
		switch {
		case err == nil:
			for _, e := range evs {
				writeEvent(&buf, e)
			}
		case errors.Is(err, io.EOF), ctx.Err() != nil:
			// The followed deployment is gone, the client went away, or
			// the Handler is closing: the stream ends.
			return http.StatusOK, streamed{}, nil
		case errors.Is(err, context.DeadlineExceeded):
			buf.WriteString(": heartbeat\n\n")
		default:
			h.log.Error("httphandler: event stream failed", "path", logPath(c.r), "err", err)
			return http.StatusOK, streamed{}, nil
		}
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		if _, err := c.w.Write(buf.Bytes()); err != nil {
			return http.StatusOK, streamed{}, nil
		}
		if rc.Flush() != nil {
			return http.StatusOK, streamed{}, nil
		}
	}
}

// writeEvent writes e in the text/event-stream format. Its data is one
// line of JSON.
func writeEvent(buf *bytes.Buffer, e controlplane.Event) {
	buf.WriteString("event: ")
	buf.WriteString(e.Name)
	buf.WriteString("\nid: ")
	buf.WriteString(e.ID)
	buf.WriteString("\ndata: ")
	buf.Write(e.Data)
	buf.WriteString("\n\n")
}

// waitRevision serves GET
// /v2/deployments/{deployment_id}/revisions/{revision_id}?wait=terminal:
// the revision once terminal, or as it is after the timeout or when the
// Handler is closed.
func (h *handler) waitRevision(c *call, deploymentID, revisionID string) (int, any, error) {
	p := newQueryParser(c.r.URL.RawQuery)
	q := &controlplane.WaitRevisionQuery{Wait: p.str("wait"), Timeout: p.intp("timeout")}
	if len(p.ps) > 0 {
		return 0, nil, joinProblems(apierr.Validation(p.ps...), q.Validate())
	}
	if err := q.Validate(); err != nil {
		return 0, nil, err
	}
	timeout := controlplane.DefaultWaitTimeout
	if q.Timeout != nil {
		timeout = *q.Timeout
	}
	// The server's WriteTimeout may be shorter than the wait (as for
	// /v2/auth/wait).
	_ = http.NewResponseController(c.w).SetWriteDeadline(time.Now().Add(time.Duration(timeout)*time.Second + waitSlack))
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	defer context.AfterFunc(h.closing, cancel)()
	rev, err := h.cp.WaitRevision(ctx, c.tenant, deploymentID, revisionID, q)
	if err != nil && ctx.Err() != nil && c.r.Context().Err() == nil {
		// Closed: answer the revision as it is.
		rev, err = h.cp.GetRevision(c.r.Context(), c.tenant, deploymentID, revisionID)
	}
	return http.StatusOK, rev, err
}
