package httphandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
)

// statusError is an answer decided by the handler itself: a 401, 403, 404,
// 405 or 413 with its detail sentence.
type statusError struct {
	status int
	detail string
	allow  string // the Allow header of a 405
}

func (e *statusError) Error() string { return e.detail }

// maxProblems is the most problems a 422 lists. When there are more, the
// last one listed is a too_many_errors problem at ["body"] saying how many
// were left out, so that the answer to a large body of mistakes stays
// small.
const maxProblems = 100

// capProblems returns the problems to list for ps and more problems found
// but not stored: all of them when they are at most maxProblems, else the
// first maxProblems-1 and a too_many_errors problem counting the rest.
func capProblems(ps []apierr.Problem, more int) []apierr.Problem {
	if len(ps)+more <= maxProblems {
		if ps == nil {
			ps = []apierr.Problem{}
		}
		return ps
	}
	left := len(ps) + more - (maxProblems - 1)
	out := append(ps[:maxProblems-1:maxProblems-1], apierr.Problem{Loc: []any{"body"}, Type: apierr.TypeTooManyErrors,
		Msg: fmt.Sprintf("Too many problems: %d more problems not shown", left)})
	return out
}

// errorBody is {"detail": "..."}.
type errorBody struct {
	Detail string `json:"detail"`
}

// problemsBody is the 422 body, {"detail": [{"loc", "msg", "type"}, ...]}.
type problemsBody struct {
	Detail []apierr.Problem `json:"detail"`
}

// detailLeaseLost is the 409 of an agent's call with a lease it no longer
// holds.
const detailLeaseLost = "The lease is lost: another agent of the listener holds this work now, or the work ended. Stop working on it."

// The detail of a 500; the cause goes to the log only.
const detailInternal = "Internal Server Error"

// errorClass is the one table from errors to statuses, for the JSON
// answers (errorReply) and the HTML pages (htmlStatus) alike: one case per
// error of the shared vocabulary (package apierr), whichever domain
// returned it, and per sentinel of the browser flows (the GitHub App
// installation, the OAuth callback). detail is the sentence of the JSON
// body (err.Error() but where noted; unused for a 422); internal reports
// whether the cause must be logged.
func errorClass(err error) (status int, detail string, internal bool) {
	var se *statusError
	var ve *apierr.ValidationError
	var ae *oauthflow.AuthorizationError
	switch {
	case errors.As(err, &se):
		return se.status, se.detail, false
	case errors.As(err, &ve):
		return http.StatusUnprocessableEntity, "", false
	case errors.Is(err, apierr.ErrNotFound):
		return http.StatusNotFound, err.Error(), false
	case errors.Is(err, apierr.ErrConflict):
		return http.StatusConflict, err.Error(), false
	case errors.Is(err, controlplane.ErrLeaseLost):
		// An agent's lease: the agent stops this work (IsRefusal).
		return http.StatusConflict, detailLeaseLost, false
	case errors.Is(err, apierr.ErrInvalidState), errors.Is(err, controlplane.ErrUnknownInstallState),
		errors.Is(err, oauthflow.ErrUnknownState), errors.As(err, &ae):
		return http.StatusBadRequest, err.Error(), false
	case errors.Is(err, controlplane.ErrInstallationForbidden):
		return http.StatusForbidden, err.Error(), false
	case errors.Is(err, controlplane.ErrGitHubUnavailable), errors.Is(err, oauthflow.ErrExchangeFailed):
		return http.StatusBadGateway, err.Error(), false
	case errors.Is(err, controlplane.ErrGitHubAppNotConfigured):
		return http.StatusServiceUnavailable, err.Error(), false
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The client went away or the server is shutting down; nobody
		// reads this answer, but it is not the service's fault either.
		return http.StatusServiceUnavailable, "Service Unavailable", false
	}
	return http.StatusInternalServerError, detailInternal, true
}

// errorReply maps an error to its status and JSON body (errorClass).
// internal reports whether the cause must be logged.
func errorReply(err error) (status int, body any, internal bool) {
	status, detail, internal := errorClass(err)
	if ve := validationOf(err); ve != nil {
		var tp *typeProblems
		more := 0
		if errors.As(err, &tp) {
			more = tp.more
		}
		return status, problemsBody{capProblems(ve.Problems, more)}, false
	}
	return status, errorBody{detail}, internal
}

// htmlStatus is the status of an HTML page's error (errorClass), but for
// a *apierr.ValidationError, a 400: the query of a page a browser lands on
// comes from a provider's redirect, not from a client that can fix it.
func htmlStatus(err error) (status int, internal bool) {
	status, _, internal = errorClass(err)
	if validationOf(err) != nil {
		status = http.StatusBadRequest
	}
	return status, internal
}

// validationOf is the *apierr.ValidationError errorClass answers err with
// (a 422), or nil.
func validationOf(err error) *apierr.ValidationError {
	var se *statusError
	var ve *apierr.ValidationError
	if errors.As(err, &se) || !errors.As(err, &ve) {
		return nil
	}
	return ve
}

// logInternal logs the cause of an HTML page's 500, as serve logs a JSON
// answer's.
func (h *handler) logInternal(c *call, err error) {
	h.log.Error("httphandler: internal error", "request_id", c.w.Header().Get("X-Request-Id"), "method", c.r.Method,
		"path", logPath(c.r), "err", err)
}

// writeJSON writes v as the JSON body of a status answer, encoding it into
// a pooled buffer.
func (h *handler) writeJSON(w http.ResponseWriter, status int, v any) {
	buf, _ := h.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	buf.Reset()
	defer func() {
		if buf.Cap() <= 64<<10 {
			h.bufs.Put(buf)
		}
	}()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// Every body is a plain struct of the controlplane; this cannot
		// happen short of a bug, which must not leak as a half answer.
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"detail":"Internal Server Error"}` + "\n")
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	if status == http.StatusConflict {
		// A conflict (a name taken, an installation owned elsewhere) does
		// not go away by itself: SDKs generated by Stainless retry a 409
		// unless told not to (wire contract section 9).
		hd.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
