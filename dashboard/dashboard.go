package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// DefaultSessionTTL is how long a session lasts by default.
const DefaultSessionTTL = 8 * time.Hour

// DefaultEventHeartbeat is how long a live stream of the dashboard stays
// silent at most by default.
const DefaultEventHeartbeat = 15 * time.Second

// maxFormBytes limits a form's body.
const maxFormBytes = 1 << 20

// streamWriteTimeout bounds each write of a live stream.
const streamWriteTimeout = 30 * time.Second

// The cookies: the session's, and the sign-in form's CSRF token (before
// there is a session).
const (
	sessionCookie = "dp_session"
	signinCookie  = "dp_signin"
)

// ErrInvalidKey is what an Authenticator returns (or wraps) for an API key
// it does not accept: the sign-in page says the key is not valid. Any other
// error is a 500.
var ErrInvalidKey = errors.New("dashboard: invalid API key")

// An Authenticator checks the API key a person signs in with, as the API
// checks the X-Api-Key header. It returns the principal's name (for the
// log and the page; never a secret) and the tenants the key may use, or an
// error matching ErrInvalidKey. httphandler adapts its own Authenticator
// to this interface.
type Authenticator interface {
	SignIn(ctx context.Context, apiKey string) (principal string, tenants []string, err error)
}

// A KeyChecker is an Authenticator that can also check a key from its
// SHA-256 digest alone, as it checks the key itself at sign-in: it returns
// the tenants the key may use, or an error matching ErrInvalidKey when it
// no longer accepts it. httphandler's adapter is one when the API's
// Authenticator is a httphandler.DigestAuthenticator (its KeyTable is).
//
// With a KeyChecker a session keeps the digest of the key it was opened
// with, and ends at its next request once the key is no longer accepted or
// opens other tenants: a key removed from the server (and the server
// restarted with its new key table) signs its sessions out. With another
// Authenticator a session lasts until it expires or its user signs out.
type KeyChecker interface {
	Authenticator
	CheckKey(ctx context.Context, digest [sha256.Size]byte) (tenants []string, err error)
}

// Options configure New. Sessions is required; every other zero field
// means the default.
type Options struct {
	// Authenticator checks the keys people sign in with. Default nil:
	// no key is accepted (httphandler sets its own when it mounts the
	// dashboard).
	Authenticator Authenticator
	// Sessions is where sessions are kept (required: New panics without
	// it); records go to the collection "dashboard_sessions". Give the
	// store the control plane uses (storebolt, storepg), so that a session
	// opened on one replica is known to every replica sharing the store
	// and survives a restart. With a store of one process (storemem), a
	// request reaching another replica behind a load balancer without
	// sticky sessions is sent back to the sign-in page, and a restart
	// signs everyone out.
	Sessions store.Store
	// SessionTTL is how long a session lasts after sign-in (it is not
	// extended by use). Default DefaultSessionTTL.
	SessionTTL time.Duration
	// BasePath is the prefix the dashboard's /ui/ is reached under, when
	// the program mounts it below one (no trailing slash). Default "".
	BasePath string
	// SecureCookies marks the cookies Secure on every answer. Default:
	// only on requests that came over TLS or carry X-Forwarded-Proto:
	// https (a TLS-terminating proxy).
	SecureCookies bool
	// Logger receives the causes of 500s. Default: discard.
	Logger *slog.Logger
	// Now is the clock of sessions. Default time.Now.
	Now func() time.Time
	// EventHeartbeat is how long a live stream stays silent at most.
	// Default DefaultEventHeartbeat.
	EventHeartbeat time.Duration
	// Sources are the sources the create form offers. Default
	// DefaultSources().
	Sources []controlplane.Source
}

// DefaultSources returns the sources the create form offers by default:
// external_docker and internal_docker.
func DefaultSources() []controlplane.Source {
	return []controlplane.Source{controlplane.SourceExternalDocker, controlplane.SourceInternalDocker}
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Handler is the dashboard, an http.Handler serving /ui/ and below.
type Handler struct {
	cp        *controlplane.ControlPlane
	auth      Authenticator
	sess      *sessions
	base      string // BasePath + "/ui"
	secure    bool
	log       *slog.Logger
	heartbeat time.Duration
	sources   []controlplane.Source
	pages     map[string]*template.Template
	static    http.Handler
	mux       *http.ServeMux

	closing context.Context
	close   context.CancelFunc
}

// New returns the dashboard over cp, keeping its sessions in
// opts.Sessions. It panics when opts or opts.Sessions is nil: which store
// holds the sessions is the program's choice (cmd/deployplane gives the
// control plane's). The handler is safe for concurrent use.
func New(cp *controlplane.ControlPlane, opts *Options) *Handler {
	if opts == nil || opts.Sessions == nil {
		panic("dashboard: New needs Options.Sessions, the store that keeps sessions")
	}
	o := *opts
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.EventHeartbeat <= 0 {
		o.EventHeartbeat = DefaultEventHeartbeat
	}
	if len(o.Sources) == 0 {
		o.Sources = DefaultSources()
	}
	if o.Authenticator == nil {
		o.Authenticator = denyAll{}
	}
	h := &Handler{
		cp:        cp,
		auth:      o.Authenticator,
		sess:      &sessions{st: o.Sessions, ttl: o.SessionTTL, now: o.Now},
		base:      strings.TrimSuffix(o.BasePath, "/") + "/ui",
		secure:    o.SecureCookies,
		log:       o.Logger,
		heartbeat: o.EventHeartbeat,
		sources:   o.Sources,
		pages:     parsePages(),
		mux:       http.NewServeMux(),
	}
	h.closing, h.close = context.WithCancel(context.Background())
	sub, _ := fs.Sub(staticFS, "static")
	h.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	h.routes()
	return h
}

// Close ends every open live stream. The Handler keeps serving pages.
func (h *Handler) Close() error {
	h.close()
	return nil
}

// denyAll accepts no key.
type denyAll struct{}

func (denyAll) SignIn(context.Context, string) (string, []string, error) {
	return "", nil, ErrInvalidKey
}

// routes registers every page, action and stream.
func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, h.base+"/deployments", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.static.ServeHTTP(w, r)
	})
	m.HandleFunc("GET /ui/signin", h.signinPage)
	m.HandleFunc("POST /ui/signin", h.signin)
	m.Handle("POST /ui/signout", h.action(h.signout, false))
	m.Handle("GET /ui/workspace", h.page(h.workspacePage, false))
	m.Handle("POST /ui/workspace", h.action(h.chooseWorkspace, false))

	m.Handle("GET /ui/deployments", h.page(h.deploymentsPage, true))
	m.Handle("GET /ui/deployments/new", h.page(h.newDeploymentPage, true))
	m.Handle("POST /ui/deployments/new", h.action(h.createDeployment, true))
	m.Handle("GET /ui/deployments/{id}", h.page(h.deploymentPage, true))
	m.Handle("POST /ui/deployments/{id}/image", h.action(h.changeImage, true))
	m.Handle("POST /ui/deployments/{id}/secrets", h.action(h.changeSecrets, true))
	m.Handle("POST /ui/deployments/{id}/resources", h.action(h.changeResources, true))
	m.Handle("POST /ui/deployments/{id}/display-name", h.action(h.changeDisplayName, true))
	m.Handle("POST /ui/deployments/{id}/delete", h.action(h.deleteDeployment, true))
	m.Handle("GET /ui/deployments/{id}/revisions/{rid}", h.page(h.revisionPage, true))
	m.Handle("POST /ui/deployments/{id}/revisions/{rid}/redeploy", h.action(h.redeploy, true))
	m.Handle("GET /ui/deployments/{id}/revisions/{rid}/rollback", h.page(h.rollbackPage, true))
	m.Handle("POST /ui/deployments/{id}/revisions/{rid}/rollback", h.action(h.rollback, true))
	m.Handle("POST /ui/deployments/{id}/pin", h.action(h.pin, true))
	m.Handle("POST /ui/deployments/{id}/unpin", h.action(h.unpin, true))
	m.Handle("GET /ui/listeners", h.page(h.listenersPage, true))

	m.HandleFunc("GET /ui/stream/events", h.eventStream)
	m.HandleFunc("GET /ui/stream/logs/{id}/{rid}", h.logStream)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.renderError(w, r, nil, http.StatusNotFound, "There is no such page.")
	})
}

// ServeHTTP serves the dashboard's pages below /ui/ (paths as the
// dashboard sees them, without BasePath).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, h.base+"/", http.StatusSeeOther)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// isSecure reports whether r's cookies get the Secure attribute.
func (h *Handler) isSecure(r *http.Request) bool {
	return h.secure || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// setCookie sets a cookie of the dashboard: HttpOnly, SameSite=Strict,
// limited to /ui/, Secure behind https.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	c := &http.Cookie{Name: name, Value: value, Path: h.base + "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: h.isSecure(r)}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
		c.MaxAge = int(expires.Sub(h.sess.now()).Seconds())
		if c.MaxAge <= 0 {
			c.MaxAge = 1
		}
	}
	http.SetCookie(w, c)
}

// current returns r's session, or errNoSession. With a KeyChecker it
// also checks that the session's key still opens the session's tenants,
// and otherwise ends the session (a session without a key digest, opened
// before digests were kept, ends too).
func (h *Handler) current(r *http.Request) (*session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, errNoSession
	}
	sess, err := h.sess.get(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	kc, ok := h.auth.(KeyChecker)
	if !ok {
		return sess, nil
	}
	digest, ok := sess.keyDigest()
	if ok {
		tenants, err := kc.CheckKey(r.Context(), digest)
		switch {
		case errors.Is(err, ErrInvalidKey):
			ok = false
		case err != nil:
			return nil, err
		default:
			ok = slices.Equal(tenants, sess.Tenants)
		}
	}
	if !ok {
		if err := h.sess.remove(r.Context(), sess); err != nil {
			return nil, err
		}
		return nil, errNoSession
	}
	return sess, nil
}

// request is one page or action being served.
type request struct {
	w    http.ResponseWriter
	r    *http.Request
	sess *session
}

// tenant is the request's tenant.
func (q *request) tenant() string { return q.sess.Tenant }

// page wraps a GET page that needs a session (and a chosen tenant when
// needTenant).
func (h *Handler) page(fn func(*request) error, needTenant bool) http.Handler {
	return h.guard(fn, needTenant, false)
}

// action wraps a POST that needs a session and the form's CSRF token.
func (h *Handler) action(fn func(*request) error, needTenant bool) http.Handler {
	return h.guard(fn, needTenant, true)
}

func (h *Handler) guard(fn func(*request) error, needTenant, post bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		sess, err := h.current(r)
		if errors.Is(err, errNoSession) {
			if post {
				// A form posted without a session (expired, or forged):
				// nothing is done.
				h.renderError(w, r, nil, http.StatusForbidden, "Your session has ended. Sign in again; nothing was changed.")
				return
			}
			h.toSignin(w, r)
			return
		}
		if err != nil {
			h.fail(w, r, nil, err)
			return
		}
		if post {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				h.renderError(w, r, sess, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !tokenEqual(r.PostForm.Get("csrf"), sess.CSRF) || !sameOrigin(r) {
				h.renderError(w, r, sess, http.StatusForbidden, "This form did not come from this dashboard (its CSRF token is missing or wrong); nothing was changed.")
				return
			}
		}
		if needTenant && sess.Tenant == "" {
			http.Redirect(w, r, h.base+"/workspace", http.StatusSeeOther)
			return
		}
		if err := fn(&request{w: w, r: r, sess: sess}); err != nil {
			h.fail(w, r, sess, err)
		}
	})
}

// sameOrigin reports whether r's Origin header, when it has one, is r's
// own host (a browser sends it with every POST).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

// toSignin redirects to the sign-in page, which comes back to r's page.
func (h *Handler) toSignin(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, h.base+"/signin?next="+url.QueryEscape(h.localPath(r)), http.StatusSeeOther)
}

// localPath is r's path and query as the browser asked for them.
func (h *Handler) localPath(r *http.Request) string {
	p := strings.TrimSuffix(h.base, "/ui") + r.URL.Path
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	return p
}

// safeNext is next when it is a clean path of this dashboard (no dot
// segments, encoded or not, no doubled slashes), else the deployments page:
// no open redirect, and no way out of the dashboard to another route of
// the server.
func (h *Handler) safeNext(next string) string {
	u, err := url.Parse(next)
	if err == nil && u.Scheme == "" && u.Host == "" && u.User == nil && u.Opaque == "" && u.Fragment == "" &&
		!strings.ContainsAny(next, "\\\r\n") && cleanPath(u.Path) &&
		strings.HasPrefix(u.Path, h.base+"/") && !strings.HasPrefix(next, "//") &&
		!strings.HasPrefix(u.Path, h.base+"/signin") && !strings.HasPrefix(u.Path, h.base+"/stream/") {
		return next
	}
	return h.base + "/deployments"
}

// cleanPath reports whether p is its own path.Clean (a trailing slash
// allowed): no "." or ".." segments and no empty ones.
func cleanPath(p string) bool {
	c := path.Clean(p)
	return p == c || p == c+"/"
}

// fail answers err: a missing resource is a 404 page, a refused change a
// 400 page, anything else a 500 page whose cause goes to the log.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	var de *apierr.DetailError
	switch {
	case errors.Is(err, apierr.ErrNotFound):
		h.renderError(w, r, sess, http.StatusNotFound, err.Error())
	case errors.As(err, &de):
		h.renderError(w, r, sess, http.StatusBadRequest, de.Detail)
	case errors.Is(err, apierr.ErrInvalidState), errors.Is(err, apierr.ErrConflict):
		h.renderError(w, r, sess, http.StatusBadRequest, err.Error())
	default:
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			h.renderError(w, r, sess, http.StatusRequestEntityTooLarge, "The form is too large.")
			return
		}
		h.log.Error("dashboard: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		h.renderError(w, r, sess, http.StatusInternalServerError, "Something went wrong on the server; the cause is in its log.")
	}
}
