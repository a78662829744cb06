package httphandler

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"time"
)

// Metrics records every request the handler serves and serves GET
// /metrics. Package prommetrics implements it with Prometheus; the handler
// itself does not depend on Prometheus.
type Metrics interface {
	// ObserveRequest is called once per request, after its answer was
	// written, with the pattern of the route that served it
	// ("/v2/deployments/{deployment_id}", so that ids do not multiply the
	// series; "" for a request no route matched: an unknown path, a 405,
	// a URL or headers too large), its method as the client sent it, its
	// status and its duration. It is called on the request's goroutine, so
	// it must be quick and safe for concurrent use; bounding the methods
	// it keeps apart is its business.
	ObserveRequest(route, method string, status int, took time.Duration)
	// ServeHTTP answers GET /metrics, once the handler has checked the
	// metrics key (Options.MetricsKey) if there is one.
	http.Handler
}

// detailMetricsKey is the 401 of /metrics without the metrics key.
const detailMetricsKey = "GET /metrics needs the metrics key: send it as Authorization: Bearer <key>."

// metricsBody is an answer written by the Metrics' own handler.
type metricsBody struct{}

// serveMetrics answers GET /metrics through Options.Metrics, after checking the
// metrics key, compared by SHA-256 digest in constant time.
func (h *handler) serveMetrics(c *call) (int, any, error) {
	if h.metricsKey != nil {
		got := sha256.Sum256([]byte(credentials(c.r).BearerToken))
		if subtle.ConstantTimeCompare(got[:], h.metricsKey[:]) != 1 {
			c.w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			return 0, nil, &statusError{status: http.StatusUnauthorized, detail: detailMetricsKey}
		}
	}
	return http.StatusOK, metricsBody{}, nil
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
