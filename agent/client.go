package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// ErrRefused is matched (errors.Is) by the error of a call the control
// plane refused the agent's credentials for (401 or 403): the listener
// token was revoked (DELETE /v2/listeners/{id}/tokens/{token_id}), is
// another listener's, or is wrong; or the API key is. Run stops with it.
var ErrRefused = errors.New("agent: the control plane refused the agent's credentials")

// Client speaks the agent routes of a control plane
// (/v2/listeners/{listener_id}/agent/...) for one listener. It is the
// deployers' State over those routes (deployk8s.State, deploydocker.State):
// a Deployer run by an agent reads the deployments and revisions of the
// agent's listener, and writes the logs of their revisions, through it. It
// is safe for concurrent use.
//
// The tenant of each call is the one the credentials name (a listener
// token's, or Options.TenantID with an API key); the tenant parameters of
// the State methods are not sent. A deployment that is not on the
// listener is not found (*apierr.NotFoundError), as one that is gone. A
// 404 that names neither the deployment nor the revision asked for (a
// path the control plane does not serve, as behind a wrong
// -control-plane URL or a proxy's own page; the listener gone) is no
// not found: a deployer that took it for a deleted deployment would
// remove what runs.
//
// It keeps the deployments and the terminal revisions it was answered;
// under a context of Reconciling it answers from them while the list of
// the listener's deployments read then says a deployment's record is
// unchanged, so that a reconciliation of an unchanged cluster costs that
// list.
type Client struct {
	base     string // the control plane's base URL, without a trailing slash
	listener string
	prefix   string // base + /v2/listeners/{id}/agent/
	hc       *http.Client
	token    string
	apiKey   string
	tenant   string
	timeout  time.Duration
	backoff  backoffPolicy
	log      *slog.Logger
	// refused is called with the error of a 401 or 403 answer (the Agent
	// stops its Run).
	refused func(error)
	// cache keeps the State's answers (cache.go).
	cache stateCache
}

// NewClient returns a Client for the connection fields of o:
// ControlPlane, ListenerID, Token or APIKey (and TenantID), HTTPClient,
// RequestTimeout, the backoff knobs and Logger; the others are the
// Agent's. Errors: a field missing or malformed.
func NewClient(o *Options) (*Client, error) {
	if o == nil {
		return nil, errors.New("agent: Options are required")
	}
	u, err := url.Parse(o.ControlPlane)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("agent: Options.ControlPlane must be the control plane's base URL (https://host[:port][/path]), not %q", o.ControlPlane)
	}
	switch {
	case o.ListenerID == "":
		return nil, errors.New("agent: Options.ListenerID is required")
	case o.Token == "" && o.APIKey == "":
		return nil, errors.New("agent: Options.Token (a listener token) or Options.APIKey is required")
	case o.Token != "" && o.APIKey != "":
		return nil, errors.New("agent: give Options.Token or Options.APIKey, not both")
	case o.TenantID != "" && o.APIKey == "":
		return nil, errors.New("agent: Options.TenantID goes with Options.APIKey (a listener token names its tenant)")
	}
	base := strings.TrimRight(u.String(), "/")
	c := &Client{base: base, listener: o.ListenerID, prefix: base + "/v2/listeners/" + url.PathEscape(o.ListenerID) + "/agent/",
		hc: o.HTTPClient, token: o.Token, apiKey: o.APIKey, tenant: o.TenantID,
		timeout: o.RequestTimeout, backoff: newBackoffPolicy(o), log: o.Logger}
	if c.hc == nil {
		c.hc = DefaultHTTPClient()
	}
	if c.timeout <= 0 {
		c.timeout = DefaultRequestTimeout
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// DefaultHTTPClient is the HTTP client of an agent whose Options give
// none: the proxy from the environment (HTTPS_PROXY, NO_PROXY), 10 s to
// connect and for the TLS handshake, idle connections kept 90 s. It sets
// no overall timeout, since a claim is a long poll: each call has its own
// (Options.RequestTimeout, and the claim's wait beyond it).
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   16,
		ForceAttemptHTTP2:     true,
	}}
}

// statusError is an answer of the control plane that is no success and
// that no error of the domain's vocabulary stands for: a 5xx, a 429, a
// 4xx the protocol does not name. retryAfter is its Retry-After.
type statusError struct {
	status     int
	detail     string
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("the control plane answered %d %s", e.status, http.StatusText(e.status))
	}
	return fmt.Sprintf("the control plane answered %d: %s", e.status, e.detail)
}

// transient reports whether err is worth trying again later: the control
// plane could not be reached, or answered 5xx or 429.
func transient(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.status >= 500 || se.status == http.StatusTooManyRequests
	}
	var ne *netError
	return errors.As(err, &ne)
}

// netError is a failure to reach the control plane (a dial, a connection
// cut, a call that timed out).
type netError struct{ err error }

func (e *netError) Error() string { return "the control plane could not be reached: " + e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

// retryAfterOf is the Retry-After of err's answer, 0 when none.
func retryAfterOf(err error) time.Duration {
	var se *statusError
	if errors.As(err, &se) {
		return se.retryAfter
	}
	return 0
}

// call sends one request: method to path (under the agent routes), with
// body as JSON when not nil, and decodes a 200 answer into out when not
// nil. timeout bounds it (0: the Client's). A 204 leaves out alone and
// returns nil; see errorOf for the errors.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any, timeout time.Duration) (status int, err error) {
	if timeout <= 0 {
		timeout = c.timeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := c.prefix + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(rctx, method, u, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else {
		req.Header.Set("X-Api-Key", c.apiKey)
		if c.tenant != "" {
			req.Header.Set("X-Tenant-Id", c.tenant)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		return 0, &netError{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		return 0, &netError{err: err}
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return resp.StatusCode, nil
	case resp.StatusCode == http.StatusOK:
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return resp.StatusCode, fmt.Errorf("agent: the control plane's answer to %s %s is not what the protocol says: %w", method, path, err)
			}
		}
		return resp.StatusCode, nil
	}
	err = c.errorOf(resp, b)
	if errors.Is(err, ErrRefused) && c.refused != nil {
		c.refused(err)
	}
	return resp.StatusCode, err
}

// maxAnswerBytes bounds an answer read (a claim's Work with its secrets
// is the largest).
const maxAnswerBytes = 64 << 20

// errorOf maps an answer that is no success to the domain's vocabulary, as
// the deployers match it: 400 an *apierr.DetailError matching
// apierr.ErrInvalidState (IsRefusal), 404 an *apierr.NotFoundError, 409 an
// *apierr.DetailError matching controlplane.ErrLeaseLost (IsRefusal), 422
// an *apierr.ValidationError, 401 and 403 an error matching ErrRefused;
// the others a *statusError (transient for 5xx and 429).
func (c *Client) errorOf(resp *http.Response, b []byte) error {
	var body struct {
		Detail json.RawMessage `json:"detail"`
	}
	_ = json.Unmarshal(b, &body)
	var detail string
	if json.Unmarshal(body.Detail, &detail) != nil {
		detail = ""
	}
	switch resp.StatusCode {
	case http.StatusBadRequest:
		if detail == "" {
			detail = "The control plane refused the request (400)."
		}
		return &apierr.DetailError{Kind: apierr.ErrInvalidState, Detail: detail}
	case http.StatusNotFound:
		return notFound(detail)
	case http.StatusConflict:
		if detail == "" {
			detail = "The lease is lost: another agent holds the work now."
		}
		return &apierr.DetailError{Kind: controlplane.ErrLeaseLost, Detail: detail}
	case http.StatusUnprocessableEntity:
		var ps []apierr.Problem
		if json.Unmarshal(body.Detail, &ps) == nil && len(ps) > 0 {
			return &apierr.ValidationError{Problems: ps}
		}
		return &apierr.ValidationError{Problems: []apierr.Problem{{Loc: []any{"body"}, Msg: detail, Type: apierr.TypeValueError}}}
	case http.StatusUnauthorized, http.StatusForbidden:
		return &refusedError{status: resp.StatusCode, detail: detail, token: c.token != ""}
	}
	se := &statusError{status: resp.StatusCode, detail: detail}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		se.retryAfter = time.Duration(s) * time.Second
	}
	return se
}

// notFound is the *apierr.NotFoundError a 404's detail names ("Deployment
// ID x not found."); its kind is unknown when the detail is not of that
// form.
func notFound(detail string) error {
	for _, kind := range []string{apierr.KindDeployment, apierr.KindRevision, apierr.KindListener} {
		if id, ok := strings.CutPrefix(detail, kind+" ID "); ok {
			if id, ok := strings.CutSuffix(id, " not found."); ok {
				return &apierr.NotFoundError{Kind: kind, ID: id}
			}
		}
	}
	return &apierr.DetailError{Kind: apierr.ErrNotFound, Detail: detail}
}

// refusedError is a 401 or 403: the credentials are refused.
type refusedError struct {
	status int
	detail string
	token  bool // a listener token, else an API key
}

func (e *refusedError) Error() string {
	what := "API key"
	if e.token {
		what = "listener token"
	}
	why := "it was revoked, or it is wrong"
	if e.status == http.StatusForbidden {
		why = "it is not one of this listener (or its tenant's), or it was revoked"
	}
	s := fmt.Sprintf("the control plane refused the agent's %s (%d): %s", what, e.status, why)
	if e.detail != "" {
		s += " (" + strings.TrimSuffix(e.detail, ".") + ")"
	}
	return s
}

func (e *refusedError) Unwrap() error { return ErrRefused }

// The State of the deployers, over the agent routes.

// GetDeployment returns a deployment of the agent's listener, secrets
// included. Errors: *apierr.NotFoundError of the deployment (gone, or not
// on the listener), an error matching ErrRefused, or a failure to reach
// the control plane (tried a few times first) or another answer.
func (c *Client) GetDeployment(ctx context.Context, _ string, id string) (*controlplane.Deployment, error) {
	if d := c.cache.keptDeployment(id, vouched(ctx, id)); d != nil {
		return d, nil
	}
	digest := c.cache.digest(id)
	var d controlplane.Deployment
	err := c.state(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, http.MethodGet, "deployments/"+url.PathEscape(id), nil, nil, &d, 0)
		return named(err, apierr.KindDeployment)
	})
	if err != nil {
		if isNotFound(err) {
			c.cache.forget(id)
		}
		return nil, err
	}
	c.cache.keepDeployment(&d, digest)
	return &d, nil
}

// GetRevision returns a revision of a deployment of the agent's listener.
// Errors: as GetDeployment, the *apierr.NotFoundError of the deployment or
// of the revision.
func (c *Client) GetRevision(ctx context.Context, _ string, deploymentID, revisionID string) (*controlplane.Revision, error) {
	if r := c.cache.keptRevision(deploymentID, revisionID, vouched(ctx, deploymentID)); r != nil {
		return r, nil
	}
	digest := c.cache.digest(deploymentID)
	var r controlplane.Revision
	err := c.state(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, http.MethodGet, "deployments/"+url.PathEscape(deploymentID)+"/revisions/"+url.PathEscape(revisionID), nil, nil, &r, 0)
		return named(err, apierr.KindDeployment, apierr.KindRevision)
	})
	if err != nil {
		if isNotFound(err) {
			c.cache.forget(deploymentID)
		}
		return nil, err
	}
	c.cache.keepRevision(deploymentID, &r, digest)
	return &r, nil
}

// AppendLogs writes lines to the logs of a revision of a deployment of the
// agent's listener, outside any lease (a container's output after
// DEPLOYED). Errors: as GetDeployment, and *apierr.ValidationError for a
// line of unknown type or level.
func (c *Client) AppendLogs(ctx context.Context, _ string, deploymentID, revisionID string, lines ...controlplane.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	return c.state(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, http.MethodPost, "deployments/"+url.PathEscape(deploymentID)+"/revisions/"+url.PathEscape(revisionID)+"/logs",
			nil, logsBody{Lines: lines}, nil, 0)
		return named(err, apierr.KindDeployment, apierr.KindRevision)
	})
}

// ReportDeploymentStatus sets the status of a deployment of the agent's
// listener outside any lease, as ControlPlane.ReportDeploymentStatus does
// in the server: UNUSED once the deployer scaled it to zero, READY once it
// serves again (deploydocker.Options.StatusReporter). Errors: as
// GetDeployment, and one matching apierr.ErrInvalidState for a status a
// deployer may not set, READY before a revision is active, or a
// deployment being deleted.
func (c *Client) ReportDeploymentStatus(ctx context.Context, _ string, deploymentID string, s controlplane.DeploymentStatus) error {
	return c.state(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, http.MethodPost, "deployments/"+url.PathEscape(deploymentID)+"/status", nil, statusBody{Status: s}, nil, 0)
		return named(err, apierr.KindDeployment)
	})
}

// ReportUnhealthy tells the control plane that a revision of the agent's
// listener failed its health checks after it became active, as
// ControlPlane.ReportUnhealthy does in the server (the Docker deployer's
// watch, for automatic rollback: it makes Client a
// controlplane.UnhealthyReporter). Errors: as GetDeployment, and one
// matching apierr.ErrInvalidState when nothing is to be done.
func (c *Client) ReportUnhealthy(ctx context.Context, _ string, deploymentID, revisionID, reason string) error {
	return c.state(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, http.MethodPost, "deployments/"+url.PathEscape(deploymentID)+"/revisions/"+url.PathEscape(revisionID)+"/unhealthy",
			nil, struct {
				Reason string `json:"reason"`
			}{reason}, nil, 0)
		return named(err, apierr.KindDeployment, apierr.KindRevision)
	})
}

// ListLogs reads a page of a revision's log, as GET
// /v2/deployments/{id}/revisions/{id}/logs does. Errors: as GetDeployment,
// and *apierr.ValidationError for a malformed query.
func (c *Client) ListLogs(ctx context.Context, _ string, deploymentID, revisionID string, q *controlplane.LogQuery) (*controlplane.LogPage, error) {
	v := url.Values{}
	if q != nil {
		for k, s := range map[string]string{"type": string(q.Type), "order": q.Order, "offset": q.Offset, "level": q.Level,
			"query": q.Query, "start_time": q.StartTime, "end_time": q.EndTime} {
			if s != "" {
				v.Set(k, s)
			}
		}
		if q.Limit != nil {
			v.Set("limit", strconv.Itoa(*q.Limit))
		}
	}
	var p controlplane.LogPage
	err := c.state(ctx, func(ctx context.Context) error {
		_, err := c.call(ctx, http.MethodGet, "deployments/"+url.PathEscape(deploymentID)+"/revisions/"+url.PathEscape(revisionID)+"/logs",
			v, nil, &p, 0)
		return named(err, apierr.KindDeployment, apierr.KindRevision)
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// named keeps err, the error of a State call about kinds, a not found
// only when it names one of them (a *apierr.NotFoundError of that kind);
// another 404 becomes a *statusError, which no errors.Is matches with
// apierr.ErrNotFound (see Client).
func named(err error, kinds ...string) error {
	var nf *apierr.NotFoundError
	if !isNotFound(err) || (errors.As(err, &nf) && slices.Contains(kinds, nf.Kind)) {
		return err
	}
	return &statusError{status: http.StatusNotFound, detail: err.Error()}
}

// stateTries is how often a State call is tried when the control plane
// cannot be reached, with backoff in between: a deployer that gets the
// error tries again on its own later (its next reconcile).
const stateTries = 4

// state runs f, trying again after transient failures, stateTries times
// at most.
func (c *Client) state(ctx context.Context, f func(context.Context) error) error {
	b := c.backoff.start()
	for i := 1; ; i++ {
		err := f(ctx)
		if err == nil || !transient(err) || i == stateTries {
			return err
		}
		if !sleep(ctx, b.next(retryAfterOf(err))) {
			return errors.Join(context.Cause(ctx), err)
		}
	}
}

// The protocol's bodies.

type claimBody struct {
	WaitSeconds int    `json:"wait_seconds"`
	Version     string `json:"version"`
}

type versionBody struct {
	Version string `json:"version"`
}

type leaseBody struct {
	Lease string `json:"lease"`
}

type reportBody struct {
	Lease string            `json:"lease"`
	Step  controlplane.Step `json:"step"`
}

type failBody struct {
	Lease   string `json:"lease"`
	Message string `json:"message"`
}

type leaseLogsBody struct {
	Lease string                 `json:"lease"`
	Lines []controlplane.LogLine `json:"lines"`
}

type logsBody struct {
	Lines []controlplane.LogLine `json:"lines"`
}

type statusBody struct {
	Status controlplane.DeploymentStatus `json:"status"`
}

type releaseBody struct {
	Lease string `json:"lease"`
	Retry bool   `json:"retry"`
}

// claim asks for a unit of work, waiting up to wait for one: nil when none
// came.
func (c *Client) claim(ctx context.Context, wait time.Duration, version string) (*controlplane.AgentWork, error) {
	var w controlplane.AgentWork
	status, err := c.call(ctx, http.MethodPost, "claim", nil, claimBody{WaitSeconds: int(wait / time.Second), Version: version}, &w, wait+c.timeout)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	if w.Lease == "" || (w.Kind == controlplane.AgentDeploy && w.Work == nil) || (w.Kind == controlplane.AgentTeardown && w.Deployment == nil) {
		return nil, fmt.Errorf("agent: the control plane's claim answer is not what the protocol says (kind %q)", w.Kind)
	}
	return &w, nil
}

func (c *Client) heartbeat(ctx context.Context, version string) error {
	_, err := c.call(ctx, http.MethodPost, "heartbeat", nil, versionBody{Version: version}, nil, 0)
	return err
}

func (c *Client) renew(ctx context.Context, lease string) error {
	_, err := c.call(ctx, http.MethodPost, "renew", nil, leaseBody{Lease: lease}, nil, 0)
	return err
}

func (c *Client) report(ctx context.Context, lease string, s controlplane.Step) error {
	_, err := c.call(ctx, http.MethodPost, "report", nil, reportBody{Lease: lease, Step: s}, nil, 0)
	return err
}

func (c *Client) logs(ctx context.Context, lease string, lines []controlplane.LogLine) error {
	_, err := c.call(ctx, http.MethodPost, "logs", nil, leaseLogsBody{Lease: lease, Lines: lines}, nil, 0)
	return err
}

func (c *Client) fail(ctx context.Context, lease, message string) error {
	_, err := c.call(ctx, http.MethodPost, "fail", nil, failBody{Lease: lease, Message: message}, nil, 0)
	return err
}

func (c *Client) release(ctx context.Context, lease string, retry bool) error {
	_, err := c.call(ctx, http.MethodPost, "release", nil, releaseBody{Lease: lease, Retry: retry}, nil, 0)
	return err
}

func (c *Client) teardownDone(ctx context.Context, lease string) error {
	_, err := c.call(ctx, http.MethodPost, "teardown-done", nil, leaseBody{Lease: lease}, nil, 0)
	return err
}

func (c *Client) teardownFailed(ctx context.Context, lease, message string) error {
	_, err := c.call(ctx, http.MethodPost, "teardown-failed", nil, failBody{Lease: lease, Message: message}, nil, 0)
	return err
}

// listenerID is the listener of the Client's routes.
func (c *Client) listenerID() string { return c.listener }
