package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	cp "github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/wiretime"
)

// The live streams follow the control plane's event log
// (ControlPlane.FollowEvents, the API's event streams' source) for a
// session. They send only what the pages show, re-encoded here: never a
// deployment's secrets, which the log's deployment events carry.

// liveDeployment is a deployment event as the pages read it.
type liveDeployment struct {
	Change           string  `json:"change"`
	ID               string  `json:"id"`
	Status           string  `json:"status,omitempty"`
	DisplayName      *string `json:"display_name,omitempty"`
	URL              *string `json:"url,omitempty"`
	ActiveRevisionID *string `json:"active_revision_id,omitempty"`
	LatestRevisionID *string `json:"latest_revision_id,omitempty"`
	ImageURI         *string `json:"image_uri,omitempty"`
	ImageVersion     *string `json:"image_version,omitempty"`
}

// liveRevision is a revision event as the pages read it.
type liveRevision struct {
	Change        string            `json:"change"`
	ID            string            `json:"id"`
	DeploymentID  string            `json:"deployment_id"`
	Status        string            `json:"status"`
	StatusMessage *string           `json:"status_message"`
	CreatedAt     wiretime.Time     `json:"created_at"`
	History       []cp.StatusChange `json:"status_history"`
}

// sse writes a stream's events.
type sse struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

// event adds one event (its data JSON-encoded) to the buffer.
func (s *sse) event(name, id string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.buf.WriteString("event: " + name + "\n")
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	s.buf.WriteString("data: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
}

// flush writes the buffer; false when the client is gone.
func (s *sse) flush() bool {
	if s.buf.Len() == 0 {
		return true
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	return err == nil && s.rc.Flush() == nil
}

// openStream checks the session and starts following the tenant's events.
// Without a session it answers 204, which tells EventSource not to
// reconnect (the page then reloads to reach the sign-in page).
func (h *Handler) openStream(w http.ResponseWriter, r *http.Request, o *cp.FollowOptions) (*sse, *cp.EventStream, context.Context, context.CancelFunc, bool) {
	sess, err := h.current(r)
	if err != nil || sess.Tenant == "" {
		w.WriteHeader(http.StatusNoContent)
		return nil, nil, nil, nil, false
	}
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(h.closing, cancel)
	o.LastEventID = r.Header.Get("Last-Event-ID")
	stream, err := h.cp.FollowEvents(ctx, sess.Tenant, o)
	if err != nil {
		stop()
		cancel()
		h.fail(w, r, sess, err)
		return nil, nil, nil, nil, false
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	s.buf.WriteString("retry: 2000\n\n")
	if !s.flush() {
		stop()
		cancel()
		return nil, nil, nil, nil, false
	}
	return s, stream, ctx, func() { stop(); cancel() }, true
}

// next waits for the stream's next events, or a heartbeat's time; false
// when the stream ends.
func (h *Handler) next(ctx context.Context, s *sse, stream *cp.EventStream) ([]cp.Event, bool) {
	wait, stop := context.WithTimeout(ctx, h.heartbeat)
	evs, err := stream.Next(wait)
	stop()
	switch {
	case err == nil:
		return evs, true
	case errors.Is(err, io.EOF), ctx.Err() != nil:
		return nil, false
	case errors.Is(err, context.DeadlineExceeded):
		s.buf.WriteString(": heartbeat\n\n")
		return nil, s.flush()
	default:
		h.log.Error("dashboard: a live stream failed", "err", err)
		return nil, false
	}
}

// eventStream serves GET /ui/stream/events[?deployment=ID]: the status of
// the tenant's deployments and revisions (one deployment's with
// ?deployment) as they change.
func (h *Handler) eventStream(w http.ResponseWriter, r *http.Request) {
	s, stream, ctx, done, ok := h.openStream(w, r, &cp.FollowOptions{DeploymentID: r.URL.Query().Get("deployment")})
	if !ok {
		return
	}
	defer done()
	// The state now, read after the stream opened: a change committed
	// between the page's rendering and this moment is in it, and any
	// later change comes through the stream.
	sess, err := h.current(r)
	if err != nil {
		return
	}
	in := r.URL.Query()
	if id := in.Get("deployment"); id != "" {
		h.snapshot(ctx, s, sess.Tenant, []string{id}, true)
	} else if ids := in.Get("ids"); ids != "" {
		list := strings.Split(ids, ",")
		if len(list) > cp.MaxPageLimit {
			list = list[:cp.MaxPageLimit]
		}
		h.snapshot(ctx, s, sess.Tenant, list, false)
	}
	if !s.flush() {
		return
	}
	for {
		evs, ok := h.next(ctx, s, stream)
		if !ok {
			return
		}
		for _, e := range evs {
			h.project(s, e)
		}
		if !s.flush() {
			return
		}
	}
}

// snapshot adds the current state of the deployments ids (and, with
// revisions, of their newest revisions) to s, as events without an id
// (change "snapshot"; "deleted" for a deployment that is gone).
func (h *Handler) snapshot(ctx context.Context, s *sse, tenant string, ids []string, revisions bool) {
	for _, id := range ids {
		dep, err := h.cp.GetDeployment(ctx, tenant, id)
		if errors.Is(err, apierr.ErrNotFound) {
			s.event("deployment", "", liveDeployment{Change: cp.ChangeDeleted, ID: id})
			continue
		}
		if err != nil {
			continue
		}
		s.event("deployment", "", liveOf("snapshot", dep))
		if !revisions {
			continue
		}
		page, err := h.cp.ListRevisions(ctx, tenant, id, &cp.ListRevisionsQuery{Limit: new(listPageSize)})
		if err != nil {
			continue
		}
		for _, rev := range page.Resources {
			s.event("revision", "", liveRevisionOf("snapshot", id, &rev))
		}
	}
}

// liveOf is a deployment as the pages read it.
func liveOf(change string, dep *cp.Deployment) liveDeployment {
	return liveDeployment{Change: change, ID: dep.ID, Status: string(dep.Status), DisplayName: dep.DisplayName, URL: dep.URL,
		ActiveRevisionID: dep.ActiveRevisionID, LatestRevisionID: dep.LatestRevisionID,
		ImageURI: dep.SourceRevisionConfig.ImageURI, ImageVersion: dep.ImageVersion}
}

// liveRevisionOf is a revision as the pages read it.
func liveRevisionOf(change, deploymentID string, rev *cp.Revision) liveRevision {
	return liveRevision{Change: change, ID: rev.ID, DeploymentID: deploymentID, Status: string(rev.Status),
		StatusMessage: rev.StatusMessage, CreatedAt: rev.CreatedAt, History: rev.StatusHistory}
}

// project adds the page's form of e to s.
func (h *Handler) project(s *sse, e cp.Event) {
	switch e.Name {
	case cp.EventDeployment:
		var d struct {
			Change       string         `json:"change"`
			DeploymentID string         `json:"deployment_id"`
			Deployment   *cp.Deployment `json:"deployment"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			return
		}
		out := liveDeployment{Change: d.Change, ID: d.DeploymentID}
		if d.Deployment != nil {
			out = liveOf(d.Change, d.Deployment)
		}
		s.event("deployment", e.ID, out)
	case cp.EventRevision:
		var d struct {
			Change       string      `json:"change"`
			DeploymentID string      `json:"deployment_id"`
			Revision     cp.Revision `json:"revision"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			return
		}
		s.event("revision", e.ID, liveRevisionOf(d.Change, d.DeploymentID, &d.Revision))
	case cp.EventGap:
		s.event("gap", e.ID, struct{}{})
	}
}

// logStream serves GET /ui/stream/logs/{id}/{rid}?type=&after=&level=&q=:
// the log's lines after the offset the page showed (read first, so none
// written meanwhile is missed; the page drops a line it has by its id),
// then each new line as it is written, with the revision's status.
func (h *Handler) logStream(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	id, rid := r.PathValue("id"), r.PathValue("rid")
	typ := cp.LogDeploy
	if in.Get("type") == string(cp.LogBuild) {
		typ = cp.LogBuild
	}
	level, query := strings.ToUpper(in.Get("level")), in.Get("q")
	s, stream, ctx, done, ok := h.openStream(w, r, &cp.FollowOptions{DeploymentID: id, Logs: []cp.LogType{typ}})
	if !ok {
		return
	}
	defer done()
	sess, err := h.current(r)
	if err != nil {
		return
	}
	// The revision's status now (the page may be older than it).
	if rev, err := h.cp.GetRevision(ctx, sess.Tenant, id, rid); err == nil {
		s.event("revision", "", liveRevisionOf("snapshot", id, rev))
	}
	if r.Header.Get("Last-Event-ID") == "" {
		// Catch up from the page's offset: the stream is already open, so
		// a line written from now on comes through it too.
		after := in.Get("after")
		for {
			page, err := h.cp.ListLogs(ctx, sess.Tenant, id, rid, &cp.LogQuery{Type: typ, Offset: after, Level: level,
				Query: query, Limit: new(maxLogLines)})
			if err != nil {
				return
			}
			for _, l := range page.Logs {
				s.event("line", "", l)
			}
			if !s.flush() {
				return
			}
			if page.NextOffset == nil || len(page.Logs) == 0 {
				break
			}
			after = *page.NextOffset
		}
	}
	lowQuery := strings.ToLower(query)
	for {
		evs, ok := h.next(ctx, s, stream)
		if !ok {
			return
		}
		for _, e := range evs {
			switch e.Name {
			case cp.EventLog:
				var d struct {
					Type       string      `json:"type"`
					RevisionID string      `json:"revision_id"`
					Log        cp.LogEntry `json:"log"`
				}
				if json.Unmarshal(e.Data, &d) != nil || d.RevisionID != rid || d.Type != string(typ) {
					continue
				}
				if (level != "" && string(d.Log.Level) != level) || (lowQuery != "" && !strings.Contains(strings.ToLower(d.Log.Message), lowQuery)) {
					continue
				}
				s.event("line", e.ID, d.Log)
			case cp.EventRevision:
				if bytes.Contains(e.Data, []byte(`"revision_id":"`+rid+`"`)) {
					h.project(s, e)
				}
			default:
				h.project(s, e)
			}
		}
		if !s.flush() {
			return
		}
	}
}
