package agent

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// InProcess returns an http.RoundTripper that serves each request with h,
// the control plane's handler, in the calling goroutine: for an agent that
// runs in the control plane's own process (the server's simulated agents,
// tests), which still speaks the protocol, only without a socket. The
// request's context is the handler's; the answer is kept whole in memory
// (the agent routes answer small JSON documents), so it is no transport
// for streams.
func InProcess(h http.Handler) http.RoundTripper { return inProcess{h: h} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	r.Host = req.URL.Host
	r.RemoteAddr = "127.0.0.1:0"
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if r.Body == nil {
		r.Body = http.NoBody
	}
	w := &answer{header: http.Header{}}
	t.h.ServeHTTP(w, r)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.header.Set("Content-Length", strconv.Itoa(w.body.Len()))
	return &http.Response{Status: strconv.Itoa(w.code) + " " + http.StatusText(w.code), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.header, ContentLength: int64(w.body.Len()),
		Body: io.NopCloser(&w.body), Request: req}, nil
}

// answer is the http.ResponseWriter of an in-process request.
type answer struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *answer) Header() http.Header { return w.header }

func (w *answer) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *answer) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
