package httphandler

import (
	"net/http"

	cp "github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
)

// route is one endpoint: its method and path pattern (Go 1.22 ServeMux
// syntax), whether it needs credentials, the function that serves it, and
// what GET /openapi.json says about it.
type route struct {
	method string
	path   string
	public bool // no credentials (the caller cannot hold an API key)
	serve  func(*handler, *call) (status int, body any, err error)

	summary      string
	body         any  // a value of the request body's type; nil: no body
	bodyOptional bool // the body may be omitted (it then means {})
	status       int  // the success status
	resp         any  // a value of the response body's type; nil: no body
	html         bool // the answer is an HTML page (for a browser), not JSON
	text         bool // the answer is plain text (the Prometheus format), not JSON
	stream       bool // the answer is a text/event-stream
	query        []param
	headers      []param // request headers the route reads (all required)
	errors       []int   // error statuses beyond those the document derives
}

// param documents a query parameter or a request header.
type param struct {
	name, typ, description string
}

// routes lists every route the handler serves. The mux, the 405 Allow
// headers and the OpenAPI document are all built from this one list. The
// OAuth helpers are in it only when the handler has an oauthflow.Service,
// and POST /v1/integrations/github only when unverified integrations are
// allowed.
func (h *handler) routes() []route {
	page := []param{
		{"limit", "integer", "Page size, 1 to 100 (default 20)."},
		{"offset", "integer", "Matching resources to skip, at least 0; pass back the response offset for the next page."},
	}
	eventQuery := []param{{"logs", "string", "Comma-separated log types (build, deploy) whose log lines to include as log events."}}
	routes := []route{
		// Deployments.
		{method: http.MethodPost, path: "/v2/deployments", serve: (*handler).createDeployment,
			summary: "Create a deployment and its first revision", body: cp.CreateDeploymentRequest{},
			status: http.StatusCreated, resp: cp.Deployment{}},
		{method: http.MethodGet, path: "/v2/deployments", serve: (*handler).listDeployments,
			summary: "List deployments, newest first", status: http.StatusOK, resp: cp.DeploymentPage{},
			query: append(page[:2:2],
				param{"name_contains", "string", "Case-insensitive substring of the name."},
				param{"status", "string", "Deployment status."},
				param{"remote_reconciled", "boolean", "true: external_docker deployments (reconciled by a listener); false: the others."},
				param{"tag_value_ids", "string", "Comma-separated tag value UUIDs; a deployment matches if it carries any."},
				param{"image_version", "string", "Exact image version."},
				param{"deployment_type", "string", "dev_free, dev or prod."},
				param{"deployment_ids", "string", "Comma-separated deployment UUIDs."})},
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}", serve: (*handler).getDeployment,
			summary: "Get a deployment", status: http.StatusOK, resp: cp.Deployment{}},
		{method: http.MethodPatch, path: "/v2/deployments/{deployment_id}", serve: (*handler).updateDeployment,
			summary: "Update a deployment; revision fields create a new revision", body: cp.UpdateDeploymentRequest{},
			status: http.StatusOK, resp: cp.Deployment{}},
		{method: http.MethodDelete, path: "/v2/deployments/{deployment_id}", serve: (*handler).deleteDeployment,
			summary: "Delete a deployment (asynchronous: it is AWAITING_DELETE until torn down)", status: http.StatusNoContent},

		// Revisions.
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/revisions", serve: (*handler).listRevisions,
			summary: "List a deployment's revisions, newest first", status: http.StatusOK, resp: cp.RevisionPage{},
			query: append(page[:2:2],
				param{"status", "string", "Comma-separated revision statuses."},
				param{"remote_reconciled", "boolean", "Revisions of external_docker deployments (true) or of the others (false)."})},
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/revisions", serve: (*handler).createRevision,
			summary: "Create a revision (the body is applied like PATCH's)", body: cp.UpdateDeploymentRequest{}, bodyOptional: true,
			status: http.StatusCreated, resp: cp.Revision{}},
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}", serve: (*handler).getRevision,
			summary: "Get a revision; with wait=terminal, once its status is terminal or after timeout seconds",
			status:  http.StatusOK, resp: cp.Revision{},
			query: []param{{"wait", "string", "terminal: answer once the revision's status is terminal (or at the timeout)."},
				{"timeout", "integer", "With wait: seconds to wait at most, 0 to 60 (default 30)."}},
			errors: []int{http.StatusServiceUnavailable}},
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy", serve: (*handler).redeploy,
			summary: "Redeploy a revision: a new revision copying its snapshot", status: http.StatusOK, resp: cp.Deployment{}},

		// Logs (logs.go).
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}/logs", serve: (*handler).revisionLogs,
			summary: "Read a revision's build or deploy log, a page at a time", status: http.StatusOK, resp: cp.LogPage{},
			query: logQueryParams},
		{method: http.MethodPost, path: "/v1/projects/{project_id}/revisions/{revision_id}/build_logs", serve: (*handler).projectBuildLogs,
			summary: "Read a revision's build log (langgraph-cli; the project id is the deployment id)",
			body:    cp.LogQuery{}, bodyOptional: true, status: http.StatusOK, resp: cp.LogPage{}},
		{method: http.MethodPost, path: "/v1/projects/{project_id}/revisions/{revision_id}/deploy_logs", serve: (*handler).projectRevisionDeployLogs,
			summary: "Read a revision's deploy log (langgraph-cli; the project id is the deployment id)",
			body:    cp.LogQuery{}, bodyOptional: true, status: http.StatusOK, resp: cp.LogPage{}},
		{method: http.MethodPost, path: "/v1/projects/{project_id}/deploy_logs", serve: (*handler).projectDeployLogs,
			summary: "Read the deploy log of the deployment's latest revision (langgraph-cli; the project id is the deployment id)",
			body:    cp.LogQuery{}, bodyOptional: true, status: http.StatusOK, resp: cp.LogPage{}},
		// Event streams (events.go).
		{method: http.MethodGet, path: "/v2/events", serve: (*handler).tenantEvents,
			summary: "The tenant's events as Server-Sent Events (text/event-stream): deployment, revision, log; resumes after Last-Event-ID",
			status:  http.StatusOK, stream: true, query: eventQuery, errors: []int{http.StatusServiceUnavailable}},
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/events", serve: (*handler).deploymentEvents,
			summary: "A deployment's events as Server-Sent Events (text/event-stream); ends after its deleted event",
			status:  http.StatusOK, stream: true, query: eventQuery, errors: []int{http.StatusServiceUnavailable}},

		// Listeners.
		{method: http.MethodPost, path: "/v2/listeners", serve: (*handler).createListener,
			summary: "Register a listener", body: cp.CreateListenerRequest{}, status: http.StatusCreated, resp: cp.Listener{}},
		{method: http.MethodGet, path: "/v2/listeners", serve: (*handler).listListeners,
			summary: "List listeners, newest first", status: http.StatusOK, resp: cp.ListenerPage{}, query: page},
		{method: http.MethodGet, path: "/v2/listeners/{listener_id}", serve: (*handler).getListener,
			summary: "Get a listener", status: http.StatusOK, resp: cp.Listener{}},
		{method: http.MethodPatch, path: "/v2/listeners/{listener_id}", serve: (*handler).updateListener,
			summary: "Update a listener", body: cp.UpdateListenerRequest{}, status: http.StatusOK, resp: cp.Listener{}},
		{method: http.MethodDelete, path: "/v2/listeners/{listener_id}", serve: (*handler).deleteListener,
			summary: "Delete a listener no deployment names", status: http.StatusNoContent},

		// GitHub integrations (github.go).
		{method: http.MethodGet, path: "/v1/integrations/github", serve: (*handler).listIntegrations,
			summary: "List the tenant's GitHub App installations, oldest first", status: http.StatusOK, resp: []cp.Integration{}},
		{method: http.MethodGet, path: "/v1/integrations/github/install", serve: (*handler).startGitHubInstall,
			summary: "The GitHub App's installation URL, with a state bound to the tenant (single use, valid 15 minutes); " +
				"GitHub sends the user back to /v1/integrations/github/setup",
			status: http.StatusOK, resp: installResponse{}, errors: []int{http.StatusServiceUnavailable}},
		{method: http.MethodGet, path: "/v1/integrations/github/setup", public: true, serve: (*handler).githubSetup,
			summary: "GitHub's setup redirect (a browser lands here; the state is the proof, no API key): records the installation " +
				"for the state's tenant once GitHub confirms that the user can access it, and shows an HTML page",
			status: http.StatusOK, html: true,
			query: []param{{"installation_id", "integer", "The installation."},
				{"setup_action", "string", "install, update, or request (awaiting an owner's approval: nothing is recorded)."},
				{"code", "string", "The OAuth code of the user who installed the App."}, {"state", "string", "The state of the install URL."}},
			errors: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusConflict, http.StatusBadGateway,
				http.StatusServiceUnavailable}},
		{method: http.MethodPost, path: "/v1/integrations/github/webhook", public: true, serve: (*handler).githubWebhook,
			summary: "GitHub App webhook (no API key; X-Hub-Signature-256 is the proof): a push to a branch creates a revision " +
				"of every build_on_push deployment tracking it; ping and other events are acknowledged and change nothing",
			body: pushPayload{}, status: http.StatusAccepted, resp: webhookResponse{},
			headers: []param{
				{headerSignature, "string", `"sha256=" and the hex HMAC-SHA256 of the raw body with the webhook secret.`},
				{headerEvent, "string", "The event: push creates revisions; ping and the others change nothing."}},
			errors: []int{http.StatusUnauthorized, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity,
				http.StatusServiceUnavailable}},

		// The API description.
		{method: http.MethodGet, path: "/openapi.json", public: true, serve: (*handler).openAPI,
			summary: "This OpenAPI 3.1 document", status: http.StatusOK, resp: map[string]any{}},
	}
	// Operations (health.go, metrics.go).
	routes = append(routes,
		route{method: http.MethodGet, path: "/healthz", public: true, serve: (*handler).healthz,
			summary: "Liveness: 200 as long as the process serves", status: http.StatusOK, resp: healthBody{}},
		route{method: http.MethodGet, path: "/readyz", public: true, serve: (*handler).readyz,
			summary: "Readiness: 200 when the store answers, the reconcile loop runs and the deployer reaches its engine; " +
				"503 saying which is not ready",
			status: http.StatusOK, resp: healthBody{}, errors: []int{http.StatusServiceUnavailable}})
	if h.metrics != nil {
		rt := route{method: http.MethodGet, path: "/metrics", public: true, serve: (*handler).serveMetrics,
			summary: "Metrics in the Prometheus text format", status: http.StatusOK, text: true}
		if h.metricsKey != nil {
			rt.summary += " (needs the metrics key: Authorization: Bearer <key>)"
			rt.errors = []int{http.StatusUnauthorized}
		}
		routes = append(routes, rt)
	}
	if h.allowUnverified {
		routes = append(routes, route{method: http.MethodPost, path: "/v1/integrations/github", serve: (*handler).createIntegration,
			summary: "Register a GitHub App installation without GitHub's confirmation (served because the server allows unverified integrations)",
			body:    cp.CreateIntegrationRequest{}, status: http.StatusCreated, resp: cp.Integration{}, errors: []int{http.StatusConflict}})
	}
	if h.oauth == nil {
		return routes
	}
	return append(routes,
		// OAuth helpers (wire contract section 8).
		route{method: http.MethodPost, path: "/v2/auth/providers", serve: (*handler).createProvider,
			summary: "Add an OAuth provider (client_secret is write-only)", body: oauthflow.NewProvider{},
			status: http.StatusOK, resp: oauthflow.Provider{}, errors: []int{http.StatusConflict}},
		route{method: http.MethodGet, path: "/v2/auth/providers", serve: (*handler).listProviders,
			summary: "List the tenant's OAuth providers, by provider_id", status: http.StatusOK, resp: []oauthflow.Provider{}},
		route{method: http.MethodGet, path: "/v2/auth/providers/{provider_id}", serve: (*handler).getProvider,
			summary: "Get an OAuth provider", status: http.StatusOK, resp: oauthflow.Provider{}},
		route{method: http.MethodPatch, path: "/v2/auth/providers/{provider_id}", serve: (*handler).updateProvider,
			summary: "Update an OAuth provider (provider_id is immutable; an empty client_secret removes it)",
			body:    oauthflow.ProviderPatch{}, status: http.StatusOK, resp: oauthflow.Provider{}},
		route{method: http.MethodDelete, path: "/v2/auth/providers/{provider_id}", serve: (*handler).deleteProvider,
			summary: "Delete an OAuth provider and every token obtained through it", status: http.StatusOK, resp: messageBody{}},
		route{method: http.MethodPost, path: "/v2/auth/authenticate", serve: (*handler).authenticateOAuth,
			summary: "Get a stored token (completed) or start an authorization flow (pending, with the URL to send the user to)",
			body:    oauthflow.AuthRequest{}, status: http.StatusOK, resp: authResponse{}, errors: []int{http.StatusNotFound}},
		route{method: http.MethodGet, path: "/v2/auth/wait/{auth_id}", serve: (*handler).waitOAuth,
			summary: "Long-poll an authorization flow until it completes or the timeout passes",
			status:  http.StatusOK, resp: waitResponse{},
			query: []param{{"timeout", "integer", "Seconds to wait, 0 to 300 (default 30); 0 answers at once, possibly pending."}}},
		route{method: http.MethodGet, path: "/v2/auth/callback/{provider_id}", public: true, serve: (*handler).oauthCallback,
			summary: "The providers' redirect target (a browser lands here; the state is the proof, no API key): finishes the flow and shows an HTML page",
			status:  http.StatusOK, html: true,
			query: []param{{"code", "string", "The authorization code."}, {"state", "string", "The flow's state."},
				{"error", "string", "RFC 6749 error code, when the provider refused."}, {"error_description", "string", "The provider's explanation."}},
			errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusBadGateway}},
	)
}
