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

// The detail of a 500; the cause goes to the log only.
const detailInternal = "Internal Server Error"

// errorReply maps an error to its status and body: the one place where
// errors become HTTP, one case per error of the shared vocabulary (package
// apierr), whichever domain returned it. internal reports whether the
// cause must be logged.
func errorReply(err error) (status int, body any, internal bool) {
	var se *statusError
	var ve *apierr.ValidationError
	switch {
	case errors.As(err, &se):
		return se.status, errorBody{se.detail}, false
	case errors.As(err, &ve):
		var tp *typeProblems
		more := 0
		if errors.As(err, &tp) {
			more = tp.more
		}
		return http.StatusUnprocessableEntity, problemsBody{capProblems(ve.Problems, more)}, false
	case errors.Is(err, apierr.ErrNotFound):
		return http.StatusNotFound, errorBody{err.Error()}, false
	case errors.Is(err, apierr.ErrConflict):
		return http.StatusConflict, errorBody{err.Error()}, false
	case errors.Is(err, apierr.ErrInvalidState):
		return http.StatusBadRequest, errorBody{err.Error()}, false
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The client went away or the server is shutting down; nobody
		// reads this answer, but it is not the service's fault either.
		return http.StatusServiceUnavailable, errorBody{"Service Unavailable"}, false
	}
	return http.StatusInternalServerError, errorBody{detailInternal}, true
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
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
