package httphandler

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/internal/uuidtext"
)

// The dashboard (package dashboard) is served under /ui/ when
// Options.Dashboard is set: public routes of the handler (the dashboard
// checks its own sessions), so that the request log, the metrics, the
// in-flight cap and the rate limit by address apply to its pages; its
// live streams (/ui/stream/...) take the long-poll cap. None is in GET
// /openapi.json.

// newDashboard builds the dashboard of Options.Dashboard: the handler's
// own Authenticator checks the keys people sign in with, unless the
// options name another.
func newDashboard(cp *controlplane.ControlPlane, o *Options, auth Authenticator) *dashboard.Handler {
	d := *o.Dashboard
	if d.Authenticator == nil {
		if da, ok := auth.(DigestAuthenticator); ok {
			d.Authenticator = keyCheckAuth{da}
		} else {
			d.Authenticator = signInAuth{auth}
		}
	}
	if d.BasePath == "" {
		d.BasePath = o.BasePath
	}
	if d.Logger == nil {
		d.Logger = o.Logger
	}
	return dashboard.New(cp, &d)
}

// signInAuth is an Authenticator used for the dashboard's sign-in: the
// key as an X-Api-Key.
type signInAuth struct{ a Authenticator }

func (s signInAuth) SignIn(ctx context.Context, key string) (string, []string, error) {
	return signedIn(s.a.Authenticate(ctx, Credentials{APIKey: key}))
}

// keyCheckAuth is signInAuth over a DigestAuthenticator: a
// dashboard.KeyChecker, so that sessions end with their key.
type keyCheckAuth struct{ d DigestAuthenticator }

func (k keyCheckAuth) SignIn(ctx context.Context, key string) (string, []string, error) {
	return signInAuth{k.d}.SignIn(ctx, key)
}

func (k keyCheckAuth) CheckKey(ctx context.Context, digest [sha256.Size]byte) ([]string, error) {
	_, tenants, err := signedIn(k.d.AuthenticateDigest(ctx, digest))
	return tenants, err
}

// signedIn turns what an Authenticator answers into the dashboard's
// terms: the principal's name and its canonical tenants, or
// dashboard.ErrInvalidKey.
func signedIn(p *Principal, err error) (string, []string, error) {
	if errors.Is(err, ErrUnauthenticated) {
		return "", nil, dashboard.ErrInvalidKey
	}
	if err != nil {
		return "", nil, err
	}
	if p == nil {
		return "", nil, dashboard.ErrInvalidKey
	}
	tenants := make([]string, 0, len(p.Tenants))
	for _, t := range p.Tenants {
		if c, ok := CanonicalTenant(t); ok {
			tenants = append(tenants, c)
		}
	}
	return p.ID, tenants, nil
}

// dashboardRoutes are the dashboard's routes, hidden from the document.
func dashboardRoutes() []route {
	const summary = "The web dashboard (HTML for people; not part of the API)"
	return []route{
		{method: http.MethodGet, path: "/ui", public: true, serve: (*handler).serveDashboard, hidden: true, summary: summary, status: http.StatusSeeOther, html: true},
		{method: http.MethodGet, path: "/ui/{page...}", public: true, serve: (*handler).serveDashboard, hidden: true, summary: summary, status: http.StatusOK, html: true},
		{method: http.MethodPost, path: "/ui/{page...}", public: true, serve: (*handler).serveDashboard, hidden: true, summary: summary, status: http.StatusSeeOther, html: true},
		{method: http.MethodGet, path: "/ui/stream/{stream...}", public: true, serve: (*handler).serveDashboard, hidden: true, summary: summary, status: http.StatusOK, stream: true},
		// The Go CLI's "View status" link names a deployment's page as the
		// hosted service's UI does.
		{method: http.MethodGet, path: "/o/{tenant_id}/host/deployments/{deployment_id}", public: true, serve: (*handler).viewStatus,
			hidden: true, summary: "A deployment's page under the hosted service's name: a redirect to its dashboard page", status: http.StatusFound, html: true},
	}
}

// viewStatus redirects the hosted service's page of a deployment to the
// dashboard's (whose session decides the workspace, as every page's does).
func (h *handler) viewStatus(c *call) (int, any, error) {
	id, ok := uuidtext.Canonical(c.r.PathValue("deployment_id"))
	if !ok {
		return 0, nil, &statusError{status: http.StatusNotFound, detail: "Not Found"}
	}
	return http.StatusFound, servedBy{http.RedirectHandler(h.basePath+"/ui/deployments/"+id, http.StatusFound)}, nil
}

// serveDashboard hands a request to the dashboard.
func (h *handler) serveDashboard(c *call) (int, any, error) {
	return http.StatusOK, servedBy{h.ui}, nil
}
