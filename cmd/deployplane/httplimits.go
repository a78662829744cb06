package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// httpLimits are the limits of one of the server's ports: how long a
// client may take over each part of a request, how large its headers may
// be and how many connections it may hold open. The API's port and the
// built-in registry's share the timeouts and the header size
// (portLimits); each has its own connection cap.
type httpLimits struct {
	readHeaderTimeout time.Duration // the request line and headers
	readTimeout       time.Duration // the whole request (streamed: see minRate)
	writeTimeout      time.Duration // the whole answer (streamed: see minRate)
	idleTimeout       time.Duration // a kept-alive connection between requests
	maxHeaderBytes    int
	maxConns          int // open connections at most; 0: no cap

	// minRate, when positive, makes readTimeout and writeTimeout apply
	// to streams rather than to whole requests (streamed): a body or an
	// answer may take as long as it needs, but is cut once readTimeout
	// (writeTimeout) passes without a byte, or once it falls below
	// minRate bytes per second on average after its first readTimeout
	// (writeTimeout).
	minRate int64
}

// portLimits are the limits every port of the server has, with a cap of
// maxConns open connections (0: no cap).
func portLimits(maxConns int) httpLimits {
	return httpLimits{
		readHeaderTimeout: 10 * time.Second,
		readTimeout:       60 * time.Second,
		writeTimeout:      60 * time.Second,
		idleTimeout:       120 * time.Second,
		maxHeaderBytes:    serverMaxHeaderBytes,
		maxConns:          maxConns,
	}
}

// streamMinRate is the slowest average a body or an answer of a streamed
// port may keep (httpLimits.minRate): a 1 GiB image layer may take up to
// 18 hours.
const streamMinRate = 16 << 10

// server is an http.Server serving h with l's timeouts and header size;
// with l.minRate, h is wrapped by streamed.
func (l httpLimits) server(h http.Handler, log *slog.Logger) *http.Server {
	if l.minRate > 0 {
		h = l.streamed(h)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.readHeaderTimeout,
		ReadTimeout:       l.readTimeout,
		WriteTimeout:      l.writeTimeout,
		IdleTimeout:       l.idleTimeout,
		MaxHeaderBytes:    l.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// listener caps ln's open connections at l.maxConns: Accept waits while
// that many are open, so a flood of connections waits in the kernel's
// accept queue instead of costing the process a descriptor, a goroutine
// and buffers each.
func (l httpLimits) listener(ln net.Listener) net.Listener {
	if l.maxConns == 0 {
		return ln
	}
	return netutil.LimitListener(ln, l.maxConns)
}

// streamed replaces http.Server's ReadTimeout and WriteTimeout, which
// bound a whole request, by deadlines that follow the body and the
// answer as they flow (httpLimits.minRate), for requests that carry image
// layers of hundreds of megabytes.
func (l httpLimits) streamed(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		// None while the handler works before its first write (committing
		// a layer, say).
		_ = rc.SetWriteDeadline(time.Time{})
		// Without a body, net/http has lifted the read deadline already.
		if r.Body != nil && r.Body != http.NoBody {
			b := &pacedBody{ReadCloser: r.Body, rc: rc, pace: pace{start: now, timeout: l.readTimeout, minRate: l.minRate}}
			_ = rc.SetReadDeadline(b.pace.deadline(now, 0))
			r.Body = b
		}
		pw := &pacedWriter{ResponseWriter: w, rc: rc, pace: pace{timeout: l.writeTimeout, minRate: l.minRate}}
		h.ServeHTTP(pw, r)
		// The answer's last bytes are sent after the handler returns.
		pw.before(time.Now(), 0)
	})
}

// pace is the deadline of a stream of bytes: timeout after the last
// progress, and no later than the point where the stream would average
// less than minRate bytes per second after its first timeout.
type pace struct {
	start   time.Time
	timeout time.Duration
	minRate int64
	n       int64 // bytes so far
}

// deadline is the stream's deadline at now, for next more bytes.
func (p *pace) deadline(now time.Time, next int64) time.Time {
	d := now.Add(p.timeout)
	if p.minRate <= 0 {
		return d
	}
	n := p.n + next
	byRate := p.start.Add(p.timeout + time.Duration(n/p.minRate)*time.Second + time.Duration(n%p.minRate)*time.Second/time.Duration(p.minRate))
	if byRate.Before(d) {
		return byRate
	}
	return d
}

// pacedBody is a request body whose read deadline moves with its
// progress (pace).
type pacedBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	pace pace
}

func (b *pacedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.pace.n += int64(n)
	// Not at the body's end, where net/http lifts the read deadline for
	// its background read of the connection: a deadline passing there
	// would cancel the request's context while its handler still works.
	if n > 0 && err == nil {
		_ = b.rc.SetReadDeadline(b.pace.deadline(time.Now(), 0))
	}
	return n, err
}

// pacedWriter is a ResponseWriter whose write deadline is set before each
// write (pace), from the first one on.
type pacedWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	pace    pace
	started bool
}

// writeChunk is the most a pacedWriter writes under one deadline, so that
// a large write is paced as it goes.
const writeChunk = 32 << 10

func (w *pacedWriter) before(now time.Time, next int64) {
	if !w.started {
		w.started = true
		w.pace.start = now
	}
	_ = w.rc.SetWriteDeadline(w.pace.deadline(now, next))
}

func (w *pacedWriter) WriteHeader(code int) {
	w.before(time.Now(), 0)
	w.ResponseWriter.WriteHeader(code)
}

func (w *pacedWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), writeChunk)]
		w.before(time.Now(), int64(len(chunk)))
		n, err := w.ResponseWriter.Write(chunk)
		written += n
		w.pace.n += int64(n)
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Flush sends what is buffered, under the write deadline.
func (w *pacedWriter) Flush() {
	w.before(time.Now(), 0)
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *pacedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
