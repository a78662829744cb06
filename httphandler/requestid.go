package httphandler

import (
	"net/http"
	"strconv"
)

// Request ids: every answer carries X-Request-Id, and the request's log
// record (and the Error record of a 500) carries the same id, so that a
// client's report can be found in the log.

// MaxRequestIDBytes is the longest X-Request-Id the handler takes from a
// client; a longer one is cut to this length.
const MaxRequestIDBytes = 128

// requestID is r's id: the client's X-Request-Id when it sent one, cut to
// MaxRequestIDBytes and stripped of every byte outside the safe set
// (letters, digits and - _ . : / + = @), so that it can go into a log line
// or a header unescaped; a fresh one (the handler's random prefix and a
// sequence number) when it sent none, or nothing safe.
func (h *handler) requestID(r *http.Request) string {
	if v := r.Header.Get("X-Request-Id"); v != "" {
		if id := sanitizeRequestID(v); id != "" {
			return id
		}
	}
	var b [64]byte // on the stack: the string is the one allocation
	id := append(append(b[:0], h.idPrefix...), '-')
	id = strconv.AppendUint(id, h.seq.Add(1), 10)
	return string(id)
}

// sanitizeRequestID keeps the safe bytes of v, at most MaxRequestIDBytes
// of them.
func sanitizeRequestID(v string) string {
	clean := true
	for i := 0; i < len(v); i++ {
		if !requestIDByte(v[i]) {
			clean = false
			break
		}
	}
	if clean {
		return v[:min(len(v), MaxRequestIDBytes)]
	}
	b := make([]byte, 0, min(len(v), MaxRequestIDBytes))
	for i := 0; i < len(v) && len(b) < MaxRequestIDBytes; i++ {
		if requestIDByte(v[i]) {
			b = append(b, v[i])
		}
	}
	return string(b)
}

// requestIDByte reports whether c may appear in a request id.
func requestIDByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', ':', '/', '+', '=', '@':
		return true
	}
	return false
}
