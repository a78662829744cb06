package httphandler

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/webhooks"
)

// DefaultMaxBodyBytes is the default limit of a request body (1 MiB).
const DefaultMaxBodyBytes = 1 << 20

// DefaultWebhookMaxBodyBytes is the default limit of a GitHub webhook
// delivery's body: 25 MiB, the most GitHub sends. A push of many commits
// easily outgrows the API's 1 MiB, and a delivery refused with 413 is a
// build that silently never happens.
const DefaultWebhookMaxBodyBytes = 25 << 20

// DefaultMaxURLBytes is the default limit of a request's target, its path
// and query as sent (16 KiB).
const DefaultMaxURLBytes = 16 << 10

// DefaultMaxHeaderBytes is the default limit of a request's header fields
// (64 KiB).
const DefaultMaxHeaderBytes = 64 << 10

// Options configure New. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Authenticator checks the credentials of every route but the public
	// ones (GET /openapi.json, the OAuth callback, the GitHub webhook and
	// setup redirect, GET /healthz, /readyz and /metrics).
	// Default nil: no credentials are accepted, so every other route
	// answers 401. NewKeyTable builds the built-in one.
	Authenticator Authenticator
	// MaxBodyBytes limits request bodies; a larger one is a 413. Default
	// DefaultMaxBodyBytes. The public routes have their own limit,
	// LoadLimits.PublicMaxBodyBytes, and the GitHub webhook its own,
	// WebhookMaxBodyBytes.
	MaxBodyBytes int64
	// MaxURLBytes limits the request target (path and query, as sent); a
	// longer one is a 414 with a JSON detail. Default DefaultMaxURLBytes.
	MaxURLBytes int
	// MaxHeaderBytes limits the request's header fields: the sum, over
	// every field value, of the name, the value and 4 bytes (": " and the
	// line end), plus the Host. Beyond it the answer is a 431 with a JSON
	// detail. Default DefaultMaxHeaderBytes. net/http itself refuses a
	// request line and headers beyond http.Server.MaxHeaderBytes (1 MB by
	// default) with a plain-text 431 before any handler runs: set that
	// above MaxURLBytes + MaxHeaderBytes so that clients get this
	// handler's JSON answer.
	MaxHeaderBytes int
	// WebhookMaxBodyBytes limits the body of a GitHub webhook delivery; a
	// larger one is a 413. Default DefaultWebhookMaxBodyBytes.
	WebhookMaxBodyBytes int64
	// Logger receives one Info record per request ("request": method, path
	// without the query, status, duration, request_id, tenant) and, at
	// Error, the cause of every 500. Credentials, bodies and queries are
	// never logged. Default: discard everything.
	//
	// The request records reach Logger's handler asynchronously, in the
	// order the requests ended, from one goroutine of the handler's own
	// that runs while records wait; call the Handler's Close after
	// http.Server.Shutdown so that the last ones are written before the
	// program exits. Error records are written synchronously, before the
	// request's own record. With a Logger of NewLogHandler's handler, the
	// request records are formatted by the handler's own encoder (slog's
	// lines, several times cheaper) and written in batches.
	Logger *slog.Logger
	// LogBuffer is the number of request records that may wait for
	// Logger's handler. When that many wait, a request ending waits for
	// room: no record is ever dropped, and a handler slower than the
	// requests slows them down as a synchronous log would. Default
	// DefaultLogBuffer.
	LogBuffer int
	// OAuth serves the OAuth helpers, /v2/auth/* (wire contract section
	// 8). Its PublicURL must be where browsers reach this handler, so that
	// the providers' redirects land on GET /v2/auth/callback/{provider_id}.
	// Default nil: the /v2/auth routes are not served, not listed in
	// GET /openapi.json, and every request under /v2/auth/ answers 404
	// with a detail saying that the OAuth helpers are not enabled.
	OAuth *oauthflow.Service
	// Webhooks serves the tenants' outbound webhooks, /v2/webhooks
	// (package webhooks; the server runs its dispatcher beside the
	// control plane's Run). Default nil: those routes are not served, not
	// listed in GET /openapi.json, and every request under /v2/webhooks
	// answers 404 with a detail saying that webhooks are not enabled.
	Webhooks *webhooks.Service
	// GitHubWebhookSecret is the secret of the GitHub App's webhook: POST
	// /v1/integrations/github/webhook accepts a delivery only when its
	// X-Hub-Signature-256 header is the HMAC-SHA256 of the raw body with
	// this secret (401 otherwise). Default empty: the webhook answers 503
	// to every delivery, signed or not, and never creates a revision.
	GitHubWebhookSecret []byte
	// AllowUnverifiedIntegrations serves POST /v1/integrations/github,
	// which registers a GitHub installation id for the caller's tenant
	// without asking GitHub: every API key holder of any tenant can then
	// claim any installation id no tenant holds yet, and receive its
	// pushes. Only for servers whose every key holder is trusted (one
	// team). Default false: the route answers 404 and is not in
	// GET /openapi.json; installations are claimed through the verified
	// GitHub App flow (GET /v1/integrations/github/install).
	AllowUnverifiedIntegrations bool
	// Load bounds the requests served at once, the long polls held open,
	// the uploads received, each client's share of those, how long the
	// public routes' bodies may take, and each client's request rate (503,
	// 408 and 429 beyond; see shed.go, body.go and ratelimit.go). Default
	// nil: the caps and shares of LoadLimits, no rate limit.
	Load *LoadLimits
	// Metrics is told of every request (route pattern, method, status,
	// duration) and serves GET /metrics; package prommetrics implements
	// it. Default nil: nothing is recorded, and /metrics answers 404 and
	// is not in GET /openapi.json.
	Metrics Metrics
	// MetricsKey, when not empty, is the key GET /metrics requires, as
	// Authorization: Bearer <key> (compared in constant time; 401
	// otherwise). API keys do not open it, nor does it open anything
	// else. Default empty: /metrics is public, like /healthz.
	MetricsKey string
	// EventHeartbeat is how long an event stream stays silent at most: a
	// comment line is sent after that long without events, so that
	// proxies and clients keep idle streams open. Default
	// DefaultEventHeartbeat.
	EventHeartbeat time.Duration
	// Uploads serves POST /v2/deployments/{deployment_id}/upload-url and
	// the PUTs of the URLs it issues (uploads.go; wire contract section
	// 10). Default nil: neither is served (404) nor documented.
	Uploads Uploads
	// BasePath is the path prefix the handler is mounted under, when the
	// embedding program serves it below one with http.StripPrefix (for
	// example "/api-host", no trailing slash). GET /openapi.json names it
	// as its server, so that clients generated from the document call
	// paths under the prefix, and GET /docs loads the document from
	// there. Default "": the handler serves at the root.
	BasePath string
	// Registry names the registry_url of a deployment and issues its push
	// tokens for POST /v2/deployments/{id}/push-token (package registry).
	// Default nil: that route answers 400, this server runs no registry.
	Registry Registry
	// RegistryRealm is the token endpoint of an external registry
	// (package registry's *TokenServer): served, without an API key, at
	// RealmPath (GET and POST) and RealmJWKSPath. Default nil: neither is
	// served nor documented.
	RegistryRealm http.Handler
	// Dashboard serves the web dashboard (package dashboard) under /ui/,
	// with these options; its sign-in checks keys with Authenticator
	// unless they name another, and its links are under BasePath; its
	// Sessions store is required (New panics without it). Default nil:
	// /ui/ is not served.
	Dashboard *dashboard.Options
}

// handler is the http.Handler New returns.
type handler struct {
	basePath string             // Options.BasePath
	docs     http.Handler       // GET /docs (docs.go)
	ui       *dashboard.Handler // /ui/ (dashboard.go); nil: not served
	cp       *controlplane.ControlPlane
	oauth    *oauthflow.Service // nil: /v2/auth/* is not served
	webhooks *webhooks.Service  // nil: /v2/webhooks is not served
	uploads  Uploads            // nil: no upload routes
	auth     Authenticator
	maxBody  int64 // request bodies
	// maxURL and maxHeader limit the request target and header fields.
	maxURL, maxHeader int
	// uriTooLong and headerTooLarge answer requests beyond them.
	uriTooLong, headerTooLarge http.Handler
	// webhookMaxBody limits GitHub webhook deliveries.
	webhookMaxBody int64
	log            *slog.Logger
	reqlog         *requestLog // the request records, written asynchronously
	mux            *http.ServeMux
	getRoute       *route         // GET /v2/deployments/{deployment_id}, routed by ServeHTTP itself; nil: by the mux
	paths          *http.ServeMux // path patterns without methods, to tell 405 from 404
	unclean        http.Handler   // the 404 of paths that are not clean
	allow          map[string]string
	openapi        []byte

	webhookSecret   []byte // empty: the GitHub webhook is disabled
	allowUnverified bool   // serve POST /v1/integrations/github
	load            *load  // admission control: concurrency caps, rate limit

	metrics    Metrics      // nil: no metrics
	registry   Registry     // nil: push-token answers 400
	realm      http.Handler // nil: no registry realm (pushtoken.go)
	metricsKey *[32]byte    // SHA-256 of Options.MetricsKey; nil: /metrics is public
	ready      readiness    // GET /readyz's checks (health.go)
	// closing ends at Close: event streams end and waits answer (events.go).
	closing      context.Context
	closeStreams context.CancelFunc
	heartbeat    time.Duration // of event streams

	bufs     sync.Pool // *bytes.Buffer for encoding answers
	lines    sync.Pool // *[]byte of jsonLine answers
	idPrefix string
	seq      atomic.Uint64
}

// Handler is the HTTP API New returns. It is an http.Handler; Close writes
// the request records still waiting at shutdown.
type Handler struct {
	h *handler
}

// ServeHTTP serves one request of the API.
func (x *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { x.h.ServeHTTP(w, r) }

// Close ends every open event stream (cleanly, as at the end of a
// response) and makes every waiting ?wait=terminal answer the revision as
// it is, then waits until every request record of the requests that have
// ended has been handed to Options.Logger's handler, and returns nil.
// http.Server.Shutdown waits for streams that never end by themselves, so
// call Close as shutdown begins (before Shutdown, or from
// http.Server.RegisterOnShutdown), and again after Shutdown has returned,
// for the records of the requests that ended meanwhile. The handler holds
// no goroutine while no record waits, so one never closed leaks nothing;
// it only may lose the last records when the program exits. The Handler
// keeps serving other requests after Close; event streams asked for then
// answer 503.
func (x *Handler) Close() error {
	x.h.closeStreams()
	if x.h.ui != nil {
		_ = x.h.ui.Close()
	}
	x.h.reqlog.flush()
	return nil
}

// New returns the HTTP API of cp (wire contract sections 1 to 5, the GitHub
// webhook of section 7, and the OAuth helpers of section 8) as an
// http.Handler, to mount on any mux (under a prefix with http.StripPrefix);
// call its Close after the server's shutdown (the request log).
// The handler records what clients ask for; revisions move only while
// cp.Run drives them with a Deployer, which the embedding program starts. A nil opts means defaults. The handler is safe for
// concurrent use.
func New(cp *controlplane.ControlPlane, opts *Options) *Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	h := &handler{
		cp:       cp,
		oauth:    o.OAuth,
		webhooks: o.Webhooks,
		uploads:  o.Uploads,
		auth:     o.Authenticator,
		maxBody:  o.MaxBodyBytes,

		maxURL:    o.MaxURLBytes,
		maxHeader: o.MaxHeaderBytes,

		webhookMaxBody: o.WebhookMaxBodyBytes,
		log:            o.Logger,
		mux:            http.NewServeMux(),
		paths:          http.NewServeMux(),
		allow:          map[string]string{},

		webhookSecret:   bytes.Clone(o.GitHubWebhookSecret),
		allowUnverified: o.AllowUnverifiedIntegrations,
		load:            newLoad(o.Load),
		metrics:         o.Metrics,
		heartbeat:       o.EventHeartbeat,
		registry:        o.Registry,
		realm:           o.RegistryRealm,
	}
	if o.MetricsKey != "" {
		d := sha256.Sum256([]byte(o.MetricsKey))
		h.metricsKey = &d
	}
	h.closing, h.closeStreams = context.WithCancel(context.Background())
	if h.heartbeat <= 0 {
		h.heartbeat = DefaultEventHeartbeat
	}
	if h.auth == nil {
		h.auth = denyAll{}
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.maxURL <= 0 {
		h.maxURL = DefaultMaxURLBytes
	}
	if h.maxHeader <= 0 {
		h.maxHeader = DefaultMaxHeaderBytes
	}
	if h.webhookMaxBody <= 0 {
		h.webhookMaxBody = DefaultWebhookMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.reqlog = newRequestLog(h.log.Handler(), o.LogBuffer)
	var b [6]byte
	_, _ = rand.Read(b[:])
	h.idPrefix = hex.EncodeToString(b[:])

	h.basePath = strings.TrimSuffix(o.BasePath, "/")
	h.docs = docsPage(h.basePath)
	if o.Dashboard != nil {
		h.ui = newDashboard(cp, &o, h.auth)
	}
	routes := h.routes()
	methods := map[string][]string{}
	for _, rt := range routes {
		h.mux.Handle(rt.method+" "+rt.path, h.serve(rt))
		if methods[rt.path] == nil {
			h.paths.Handle(rt.path, http.NotFoundHandler())
		}
		methods[rt.path] = append(methods[rt.path], rt.method)
		if rt.method == http.MethodGet {
			methods[rt.path] = append(methods[rt.path], http.MethodHead)
		}
	}
	unrouted := h.serve(route{public: true, serve: (*handler).unrouted})
	for p, ms := range methods {
		slices.Sort(ms)
		h.allow[p] = strings.Join(ms, ", ")
		// A literal path beside a wildcard one (/v2/deployments/free-count
		// beside /v2/deployments/{deployment_id}) answers 405 for the
		// methods it does not serve, not the wildcard route's answer.
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if strings.Contains(p, "{") || slices.Contains(ms, m) {
				continue
			}
			if _, pattern := h.mux.Handler(&http.Request{Method: m, URL: &url.URL{Path: p}}); pattern != "" {
				h.mux.Handle(m+" "+p, unrouted)
			}
		}
	}
	h.mux.Handle("/", unrouted)
	h.routeGetDeployment(routes)
	h.unclean = h.serve(route{public: true, serve: func(*handler, *call) (int, any, error) {
		return 0, nil, &statusError{status: http.StatusNotFound, detail: "Not Found"}
	}})
	h.uriTooLong = h.serve(route{public: true, serve: func(h *handler, _ *call) (int, any, error) {
		return 0, nil, &statusError{status: http.StatusRequestURITooLong,
			detail: fmt.Sprintf("The request URL is longer than the limit of %d bytes.", h.maxURL)}
	}})
	h.headerTooLarge = h.serve(route{public: true, serve: func(h *handler, _ *call) (int, any, error) {
		return 0, nil, &statusError{status: http.StatusRequestHeaderFieldsTooLarge,
			detail: fmt.Sprintf("The request header fields are larger than the limit of %d bytes.", h.maxHeader)}
	}})
	h.openapi = openAPIDocument(routes, h.basePath)
	return &Handler{h}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The server's own limits, answered in the contract's JSON shape
	// before any other work.
	if urlBytes(r) > h.maxURL {
		h.uriTooLong.ServeHTTP(w, r)
		return
	}
	if headerBytes(r, h.maxHeader) > h.maxHeader {
		h.headerTooLarge.ServeHTTP(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, APIHostPrefix+"/"); ok {
		// The same routes under the prefix self-hosted clients derive
		// (wire contract section 11): the same handler, auth and limits.
		r = withPath(r, "/"+rest)
	}
	if p := r.URL.Path; p == "" || p[0] != '/' || !isClean(p) && (h.ui == nil || p != "/ui/") {
		// The mux would redirect to the cleaned path; no route of this API
		// has a trailing slash, a "..", or an empty segment.
		h.unclean.ServeHTTP(w, r)
		return
	}
	if h.getRoute != nil && r.Method == http.MethodGet && r.URL.RawPath == "" {
		// The most frequent request, routed without the mux's search:
		// the route the mux would pick (New checked), with the path
		// value the mux would give it.
		if id, ok := strings.CutPrefix(r.URL.Path, getDeploymentPrefix); ok && len(id) == 36 && strings.IndexByte(id, '/') < 0 {
			h.serveRoute(h.getRoute, w, r, id)
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// getDeploymentPrefix is the path of GET /v2/deployments/{deployment_id}
// up to its path value, a UUID's 36 characters.
const getDeploymentPrefix = "/v2/deployments/"

// getDeploymentRoute is the pattern ServeHTTP routes itself.
const getDeploymentRoute = "GET " + getDeploymentPrefix + "{deployment_id}"

// routeGetDeployment sets h.getRoute to the route of getDeploymentRoute
// among routes when the mux routes every GET of a 36-byte path value
// under getDeploymentPrefix to it (no other route has such a path), as
// ServeHTTP assumes.
func (h *handler) routeGetDeployment(routes []route) {
	probe := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: getDeploymentPrefix + strings.Repeat("0", 36)}}
	if _, pattern := h.mux.Handler(probe); pattern != getDeploymentRoute {
		return
	}
	for i := range routes {
		if routes[i].method+" "+routes[i].path == getDeploymentRoute {
			h.getRoute = &routes[i]
		}
	}
}

// isClean reports whether path.Clean(p) == p, for p that starts with a
// slash: whether no segment but the first is empty (no "//", no
// trailing slash but the root's) and none is "." or "..". It does not
// build the cleaned path, as path.Clean does to compare.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	for i := 0; i < len(p); {
		j := strings.IndexByte(p[i+1:], '/') // p[i] is a slash
		if j < 0 {
			j = len(p) - i - 1
		}
		if seg := p[i+1 : i+1+j]; seg == "" || seg == "." || seg == ".." {
			return false
		}
		i += 1 + j
	}
	return true
}

// APIHostPrefix is the path prefix under which the handler serves every
// route a second time: the Go langsmith CLI and the Terraform provider
// derive a self-hosted control plane as <origin>/api-host from
// LANGSMITH_ENDPOINT (wire contract section 11). GET /openapi.json lists
// both as servers.
const APIHostPrefix = "/api-host"

// withPath is r with the URL path p (and no raw path, which p replaces).
func withPath(r *http.Request, p string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = p, ""
	r2.URL = &u
	return r2
}

// urlBytes is the length of r's target as sent (as rebuilt when r did not
// come from a server).
func urlBytes(r *http.Request) int {
	if r.RequestURI != "" {
		return len(r.RequestURI)
	}
	return len(r.URL.RequestURI())
}

// headerBytes measures r's header fields as Options.MaxHeaderBytes says,
// stopping once beyond limit.
func headerBytes(r *http.Request, limit int) int {
	n := len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
		if n > limit {
			break
		}
	}
	return n
}

// denyAll is the Authenticator of a handler configured without one.
type denyAll struct{}

func (denyAll) Authenticate(context.Context, Credentials) (*Principal, error) {
	return nil, ErrUnauthenticated
}

// call is one request on its way through an endpoint.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	tenant string
	body   []byte // the request body, read before the endpoint runs (receive)
	held   ticket // the places the request holds (admit)
	hdr    replyHeaders
	// deploymentID is the path value of a GET of a deployment that
	// ServeHTTP routed itself ("" when the mux routed the request).
	deploymentID string
}

// replyHeaders sets headers of an answer, each value in a slot of an
// array of the request's own rather than in a slice of its own: a
// request's few headers cost no allocation each. A header's slice is
// capped at its one value, so that adding to it (Header.Add) copies it
// rather than overwrite the next slot.
type replyHeaders struct {
	h http.Header
	v [replySlots]string
	n int
}

// replySlots is the number of headers an answer sets without
// allocating: X-Request-Id, the three RateLimit-* and Retry-After,
// Content-Type and Content-Length.
const replySlots = 7

// set sets the header key, which must be in canonical form
// (http.CanonicalHeaderKey), to the one value v, as Header.Set does.
func (rh *replyHeaders) set(key, v string) {
	if rh.n == len(rh.v) {
		rh.h[key] = []string{v}
		return
	}
	rh.v[rh.n] = v
	rh.h[key] = rh.v[rh.n : rh.n+1 : rh.n+1]
	rh.n++
}

// rawJSON is a response body already encoded.
type rawJSON []byte

// jsonLine is a response body already encoded but for the newline that
// ends every JSON answer (writeJSON's), which is written after it, in a
// buffer of handler.lines that serve gives back once it is written.
type jsonLine struct{ p *[]byte }

// lineBuffer returns an empty buffer of h.lines, for a jsonLine.
func (h *handler) lineBuffer() *[]byte {
	if p, _ := h.lines.Get().(*[]byte); p != nil {
		*p = (*p)[:0]
		return p
	}
	return new([]byte)
}

// release gives p back to h.lines, unless it grew large.
func (h *handler) release(p *[]byte) {
	if cap(*p) <= 64<<10 {
		h.lines.Put(p)
	}
}

var newline = []byte{'\n'}

// serve adapts an endpoint to net/http: request id, authentication, the
// one error-to-answer mapping, and the request log.
func (h *handler) serve(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serveRoute(&rt, w, r, "") })
}

// serveRoute serves r by rt. deploymentID is the path value of a GET of a
// deployment that ServeHTTP routed itself, "" when the mux routed r.
func (h *handler) serveRoute(rt *route, w http.ResponseWriter, r *http.Request, deploymentID string) {
	start := time.Now()
	id := h.requestID(r)
	c := &call{w: w, r: r, deploymentID: deploymentID}
	c.hdr.h = w.Header()
	c.hdr.set("X-Request-Id", id)
	status := 0
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("httphandler: panic", "request_id", id, "method", r.Method, "path", logPath(r),
				"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if status == 0 {
				status = http.StatusInternalServerError
				h.writeJSON(w, status, errorBody{detailInternal})
			}
		}
		// The monotonic clock alone: the wall clock is read once, at
		// the start.
		took := time.Since(start)
		if h.metrics != nil {
			h.metrics.ObserveRequest(rt.path, r.Method, status, took)
		}
		if ctx := r.Context(); h.log.Enabled(ctx, slog.LevelInfo) {
			// Formatted and written by the request log's goroutine
			// (requestlog.go).
			h.reqlog.add(ctx, &requestRecord{time: start.Add(took), duration: took, status: status,
				method: r.Method, path: logPath(r), id: id, tenant: c.tenant})
		}
	}()

	var code int
	var body any
	var err error
	var held *ticket
	c.tenant, held, err = h.admit(c, *rt, start) // caps, credentials, rate limit, shares
	defer held.leave()
	if err == nil {
		err = h.receive(c, *rt, held, id) // the body, read without a place (body.go)
	}
	if err == nil {
		code, body, err = rt.serve(h, c)
	}
	if err != nil {
		var internal bool
		code, body, internal = errorReply(err)
		if internal {
			h.log.Error("httphandler: internal error", "request_id", id, "method", r.Method,
				"path", logPath(r), "err", err)
		}
		var se *statusError
		if errors.As(err, &se) && se.allow != "" {
			w.Header().Set("Allow", se.allow)
		}
	}
	status = code
	switch b := body.(type) {
	case nil:
		w.WriteHeader(code)
	case rawJSON:
		c.hdr.set("Content-Type", "application/json")
		c.hdr.set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(code)
		_, _ = w.Write(b)
	case jsonLine:
		c.hdr.set("Content-Type", "application/json")
		c.hdr.set("Content-Length", strconv.Itoa(len(*b.p)+1))
		w.WriteHeader(code)
		_, _ = w.Write(*b.p)
		_, _ = w.Write(newline)
		h.release(b.p)
	case htmlPage:
		writeHTML(w, code, b)
	case metricsBody:
		sw := &statusWriter{ResponseWriter: w}
		h.metrics.ServeHTTP(sw, r)
		status = cmp.Or(sw.status, http.StatusOK)
	case servedBy:
		sw := &statusWriter{ResponseWriter: c.w}
		b.ServeHTTP(sw, c.r)
		status = cmp.Or(sw.status, http.StatusOK)
	case streamed: // the endpoint wrote its answer (events.go)
	default:
		h.writeJSON(w, code, b)
	}
}

// logPath is the request path for the log: never the query (OAuth callbacks
// carry codes there), and at most 256 bytes.
func logPath(r *http.Request) string {
	p := r.URL.Path
	if len(p) > 256 {
		p = p[:256] + "..."
	}
	return p
}

// unrouted answers what the mux has no route for: 405 with Allow when the
// path exists for other methods, else 404.
func (h *handler) unrouted(c *call) (int, any, error) {
	if !h.allowUnverified && c.r.Method == http.MethodPost && c.r.URL.Path == "/v1/integrations/github" {
		// Not served: a 404, though the path has a GET.
		return 0, nil, &statusError{status: http.StatusNotFound, detail: detailUnverifiedDisabled}
	}
	if _, pattern := h.paths.Handler(c.r); pattern != "" {
		return 0, nil, &statusError{status: http.StatusMethodNotAllowed, detail: "Method Not Allowed", allow: h.allow[pattern]}
	}
	if h.oauth == nil && strings.HasPrefix(c.r.URL.Path, "/v2/auth/") {
		return 0, nil, &statusError{status: http.StatusNotFound, detail: detailOAuthDisabled}
	}
	if h.webhooks == nil && (c.r.URL.Path == "/v2/webhooks" || strings.HasPrefix(c.r.URL.Path, "/v2/webhooks/")) {
		return 0, nil, &statusError{status: http.StatusNotFound, detail: detailWebhooksDisabled}
	}
	return 0, nil, &statusError{status: http.StatusNotFound, detail: "Not Found"}
}
