package httphandler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Request bodies are read without a place of the caps (shed.go): a
// request has taken its place, passed its credentials and the rate
// limit, then gives the place back while its body arrives, and takes it
// again once the body is read. A client that sends its body slowly, or
// not at all, holds a connection, never a place other clients need. The
// body is read whole (it is small: MaxBodyBytes, PublicMaxBodyBytes, or
// WebhookMaxBodyBytes) before the endpoint runs; on the public routes
// within PublicReadTimeout. Uploads stream instead, in a pool of their
// own, at LoadLimits.MinUploadRate at least (pacedBody).

// receive readies the body of c's request for the endpoint: an upload's
// is paced, any other is read into c.body without holding t's places.
// id is the request id, for the log.
func (h *handler) receive(c *call, rt route, t *ticket, id string) error {
	if rt.upload {
		h.pace(c, id)
		return nil
	}
	r := c.r
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	limit, timeout := h.maxBody, time.Duration(0)
	if rt.public {
		limit, timeout = h.load.publicMaxBody, h.load.publicTimeout
		if rt.path == webhookPath {
			limit = h.webhookMaxBody
		}
	}
	if r.ContentLength > limit {
		// Refused unread: the connection closes, rather than net/http
		// reading what the client sends before the answer goes out.
		c.w.Header().Set("Connection", "close")
		return tooLarge(limit)
	}
	t.leave()
	b, err := readAll(c.w, r, limit, timeout)
	if err != nil {
		return err
	}
	if err := t.take(c.w); err != nil {
		return err
	}
	r = r.WithContext(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	c.r, c.body = r, b
	return nil
}

// tooLarge is the 413 of a body beyond limit bytes.
func tooLarge(limit int64) error {
	return &statusError{status: http.StatusRequestEntityTooLarge,
		detail: fmt.Sprintf("Request body is larger than the limit of %d bytes.", limit)}
}

// readAll reads r's body, at most limit bytes (413 beyond), within
// timeout when it is not 0 (408 beyond). After an error the connection
// closes: the rest of the body is not read.
func readAll(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if timeout > 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
			// Once the body is read, the connection waits for the
			// client's next request (or its going away) with no
			// deadline of this request's: net/http sets its own when the
			// next request begins.
			defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
		}
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		return b, nil
	}
	w.Header().Set("Connection", "close")
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, &statusError{status: http.StatusRequestTimeout,
			detail: fmt.Sprintf("The request body did not arrive within %s.", timeout)}
	}
	return nil, &statusError{status: http.StatusBadRequest, detail: "The request body could not be read."}
}

// pace holds the body of c's upload to the minimum rate (none when
// LoadLimits.MinUploadRate is negative, or when the connection takes no
// deadlines).
func (h *handler) pace(c *call, id string) {
	l := h.load
	if l.minUploadRate <= 0 || c.r.Body == nil || c.r.Body == http.NoBody {
		return
	}
	need := max(1, int64(float64(l.minUploadRate)*l.uploadWindow.Seconds()))
	b := &pacedBody{ReadCloser: c.r.Body, rc: http.NewResponseController(c.w), need: need, window: l.uploadWindow}
	if b.rc.SetReadDeadline(time.Now().Add(b.window)) != nil {
		return
	}
	r := c.r
	b.cut = func(received int64) {
		h.log.Warn("upload cut: below the minimum rate", "request_id", id, "method", r.Method, "path", logPath(r),
			"tenant", r.PathValue("tenant"), "received", received, "min_rate", l.minUploadRate, "window", l.uploadWindow)
	}
	r = r.WithContext(r.Context())
	r.Body = b
	c.r = r
	c.w = &pacedWriter{ResponseWriter: c.w, body: b}
}

// errTooSlow is the read error of an upload cut for its rate.
var errTooSlow = errors.New("the upload is slower than the server's minimum rate")

// pacedBody is an upload's body held to a minimum rate: each window of
// time spent waiting in Read must bring need bytes. Before each Read the
// connection's read deadline is set to the end of the current window (or
// to the receiver's own deadline, when earlier); a Read that reaches the
// window's end cuts the upload. The time between Reads is the server's,
// and does not count.
type pacedBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	need   int64         // bytes a window must bring
	window time.Duration // the window
	cut    func(received int64)

	limit    time.Time     // the receiver's read deadline (pacedWriter); zero: none
	got      int64         // bytes of the current window
	waited   time.Duration // time spent in Read in the current window
	received int64         // bytes in all
	failed   bool          // cut already
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.failed {
		return 0, errTooSlow
	}
	start := time.Now()
	deadline, paced := start.Add(b.window-b.waited), true
	if !b.limit.IsZero() && b.limit.Before(deadline) {
		deadline, paced = b.limit, false
	}
	_ = b.rc.SetReadDeadline(deadline)
	n, err := b.ReadCloser.Read(p)
	b.waited += time.Since(start)
	b.got += int64(n)
	b.received += int64(n)
	if b.got >= b.need {
		b.got, b.waited = 0, 0
	}
	switch {
	case err == io.EOF:
		// The body is whole: the connection keeps the receiver's own
		// deadline while the upload is stored.
		_ = b.rc.SetReadDeadline(b.limit)
	case err != nil && paced && errors.Is(err, os.ErrDeadlineExceeded):
		b.failed = true
		b.cut(b.received)
		return n, errTooSlow
	}
	return n, err
}

// pacedWriter is the ResponseWriter of a paced upload: the read deadline
// its receiver sets (http.ResponseController.SetReadDeadline) bounds the
// upload's windows instead of replacing them.
type pacedWriter struct {
	http.ResponseWriter
	body *pacedBody
}

// SetReadDeadline records the receiver's deadline; the next Read applies
// it.
func (w *pacedWriter) SetReadDeadline(t time.Time) error {
	w.body.limit = t
	return nil
}

// Unwrap lets http.ResponseController reach the connection.
func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
