package httphandler

import (
	"bytes"
	"errors"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/oauthflow"
)

// The OAuth helpers (/v2/auth/*, wire contract section 8) over an
// oauthflow.Service. Like the other endpoints they decode, call one
// Service method and encode; the callback answers an HTML page instead of
// JSON because a browser, not a client, lands on it.

// detailOAuthDisabled answers /v2/auth/* when Options.OAuth is nil.
const detailOAuthDisabled = "The OAuth helpers (/v2/auth/*) are not enabled on this server."

// authStatus and waitStatus are the status values of the two answers (named
// types so that the OpenAPI document lists them as enums).
type (
	authStatus string
	waitStatus string
)

// authResponse is the answer of POST /v2/auth/authenticate: every member is
// present, null when it does not apply (the hosted service's shape).
type authResponse struct {
	Status authStatus        `json:"status"`
	URL    *string           `json:"url"`
	AuthID *string           `json:"auth_id"`
	Token  *oauthflow.Secret `json:"token"`
}

// waitResponse is the answer of GET /v2/auth/wait/{auth_id}.
type waitResponse struct {
	Status waitStatus        `json:"status"`
	Token  *oauthflow.Secret `json:"token"`
}

// messageBody is {"message": "..."}.
type messageBody struct {
	Message string `json:"message"`
}

// nonEmpty returns a pointer to v, or nil when v is empty.
func nonEmpty[T ~string](v T) *T {
	if v == "" {
		return nil
	}
	return &v
}

func (h *handler) createProvider(c *call) (int, any, error) {
	var req oauthflow.NewProvider
	if err := h.decodeRequest(c, &req, false, nil); err != nil {
		return 0, nil, err
	}
	p, err := h.oauth.CreateProvider(c.r.Context(), c.tenant, req)
	return http.StatusOK, p, err
}

func (h *handler) listProviders(c *call) (int, any, error) {
	list, err := h.oauth.ListProviders(c.r.Context(), c.tenant)
	if list == nil {
		list = []oauthflow.Provider{}
	}
	return http.StatusOK, list, err
}

func (h *handler) getProvider(c *call) (int, any, error) {
	p, err := h.oauth.GetProvider(c.r.Context(), c.tenant, c.r.PathValue("provider_id"))
	return http.StatusOK, p, err
}

func (h *handler) updateProvider(c *call) (int, any, error) {
	var req oauthflow.ProviderPatch
	if err := h.decodeRequest(c, &req, false, nil); err != nil {
		return 0, nil, err
	}
	p, err := h.oauth.UpdateProvider(c.r.Context(), c.tenant, c.r.PathValue("provider_id"), req)
	return http.StatusOK, p, err
}

func (h *handler) deleteProvider(c *call) (int, any, error) {
	id := c.r.PathValue("provider_id")
	if err := h.oauth.DeleteProvider(c.r.Context(), c.tenant, id); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, messageBody{"OAuth provider " + id + " deleted."}, nil
}

func (h *handler) authenticateOAuth(c *call) (int, any, error) {
	var req oauthflow.AuthRequest
	if err := h.decodeRequest(c, &req, false, nil); err != nil {
		return 0, nil, err
	}
	res, err := h.oauth.Authenticate(c.r.Context(), c.tenant, req)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, authResponse{Status: authStatus(res.Status), URL: nonEmpty(res.URL),
		AuthID: nonEmpty(res.AuthID), Token: nonEmpty(res.Token)}, nil
}

// waitSlack is how long beyond the long poll's own timeout the connection's
// deadlines are pushed, for reading the store and writing the answer.
const waitSlack = 30 * time.Second

func (h *handler) waitOAuth(c *call) (int, any, error) {
	timeout, err := parseWaitQuery(c.r.URL.RawQuery)
	if err != nil {
		return 0, nil, err
	}
	if timeout >= 0 && timeout <= oauthflow.MaxWaitTimeout {
		// The server's WriteTimeout (60 s in cmd/deployplane) may be
		// shorter than the long poll: push this answer's write deadline
		// past it. (The read deadline needs no push: net/http clears it
		// while a handler runs after the request is read.) A ResponseWriter
		// that cannot (a recorder) has no deadline anyway.
		_ = http.NewResponseController(c.w).SetWriteDeadline(time.Now().Add(timeout + waitSlack))
	}
	// Wait returns when the flow completes, at the timeout, or when the
	// request's context ends (the client went away): then errorReply's
	// answer goes nowhere, and the request log says 503.
	res, err := h.oauth.Wait(c.r.Context(), c.tenant, c.r.PathValue("auth_id"), timeout)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, waitResponse{Status: waitStatus(res.Status), Token: nonEmpty(res.Token)}, nil
}

// parseWaitQuery reads the query of GET /v2/auth/wait/{auth_id}: timeout,
// whole seconds, default oauthflow.DefaultWaitTimeout. A value that is not
// an integer is a 422 here; the range (0 to 300 s) is oauthflow.Wait's to
// check, so out-of-range values reach it saturated rather than overflowed.
func parseWaitQuery(raw string) (time.Duration, error) {
	p := newQueryParser(raw)
	n := p.intp("timeout")
	if len(p.ps) > 0 {
		return 0, apierr.Validation(p.ps...)
	}
	if n == nil {
		return oauthflow.DefaultWaitTimeout, nil
	}
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	switch s := int64(*n); {
	case s > maxSeconds:
		return math.MaxInt64, nil
	case s < -maxSeconds:
		return math.MinInt64, nil
	default:
		return time.Duration(s) * time.Second, nil
	}
}

// htmlPage is the answer of the OAuth callback: a page for the browser.
type htmlPage struct {
	Title   string
	Message string
}

// pageTemplate renders htmlPage; html/template escapes its fields, which
// may carry text the provider sent (error and error_description).
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>{{.Title}}</title></head>
<body>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
</body>
</html>
`))

// pageCSP lets the page load and run nothing: it has no scripts, styles,
// images or forms, and may not be framed.
const pageCSP = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// writeHTML writes an htmlPage with headers that keep it from being
// cached, framed, sniffed as something else, or leaking the callback's URL
// (which holds the code and state) in a Referer.
func writeHTML(w http.ResponseWriter, status int, p htmlPage) {
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Error</title><p>Internal Server Error</p>\n")
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	hd.Set("Content-Security-Policy", pageCSP)
	hd.Set("Cache-Control", "no-store")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// The callback's pages.
const (
	titleDone   = "Authorization complete"
	titleFailed = "Authorization failed"
	startAgain  = " Close this window and start again from the application."
)

// oauthCallback is the provider's redirect target. It needs no credentials
// (the browser holds none): the state is the proof. Every outcome is an
// HTML page, per oauthflow's table of Callback errors.
func (h *handler) oauthCallback(c *call) (int, any, error) {
	if c.r.Method == http.MethodHead {
		// HEAD is safe: a link checker probing the URL must not spend the
		// state that the user's browser is about to bring.
		return http.StatusOK, htmlPage{titleDone, "Open this address in a browser to finish the authorization."}, nil
	}
	q := c.r.URL.Query()
	err := h.oauth.Callback(c.r.Context(), oauthflow.CallbackRequest{
		ProviderID:       c.r.PathValue("provider_id"),
		Code:             q.Get("code"),
		State:            q.Get("state"),
		Error:            q.Get("error"),
		ErrorDescription: q.Get("error_description"),
	})
	if err == nil {
		return http.StatusOK, htmlPage{titleDone, "You can close this window and return to the application."}, nil
	}
	status, internal := htmlStatus(err)
	if internal {
		h.logInternal(c, err)
		return status, htmlPage{titleFailed, "Something went wrong on the server." + startAgain}, nil
	}
	return status, htmlPage{titleFailed, callbackFailure(err) + startAgain}, nil
}

// callbackFailure is the sentence of the callback page for an error that
// is not internal.
func callbackFailure(err error) string {
	var ae *oauthflow.AuthorizationError
	switch {
	case errors.Is(err, oauthflow.ErrUnknownState):
		return "This authorization link is invalid, has expired, or was already used."
	case errors.As(err, &ae):
		if ae.Description != "" {
			return "The provider refused the authorization (" + ae.Code + "): " + ae.Description
		}
		return "The provider refused the authorization (" + ae.Code + ")."
	case errors.Is(err, apierr.ErrNotFound):
		return "This OAuth provider is no longer configured."
	case errors.Is(err, oauthflow.ErrTokenEndpointRefused):
		return "This server may not contact the provider's token endpoint (its address is not allowed); tell the server's operator."
	case errors.Is(err, oauthflow.ErrExchangeFailed):
		return "The provider did not accept the authorization code."
	}
	return "Something went wrong on the server."
}
