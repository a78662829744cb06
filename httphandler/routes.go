package httphandler

import (
	"maps"
	"net/http"
	"strings"

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

	summary     string
	description string // longer than the summary, when it helps
	// op is the function part of the operation id: the hosted service's
	// name for the operation where it has one. Default: serve's name in
	// snake_case.
	op           string
	body         any  // a value of the request body's type; nil: no body
	form         any  // a value of the type of a form body (application/x-www-form-urlencoded); nil: none
	bodyOptional bool // the body may be omitted (it then means {})
	// mergePatch: the body may also come as a JSON merge patch (RFC
	// 7396, Content-Type application/merge-patch+json).
	mergePatch bool
	status     int  // the success status
	resp       any  // a value of the response body's type; nil: no body
	html       bool // the answer is an HTML page (for a browser), not JSON
	text       bool // the answer is plain text (the Prometheus format), not JSON
	stream     bool // the answer is a text/event-stream
	query      []param
	headers    []param // request headers the route reads (all required)
	errors     []int   // error statuses beyond those the document derives
	errBody    any     // the body of the errors statuses, when not {"detail"}
	hidden     bool    // served but not in the document (the docs page and its assets)
	upload     bool    // the body streams to the endpoint (an upload PUT), instead of being read first
	agent      bool    // an agent route: a listener token of the path's listener is accepted (agent.go)
	noContent  bool    // the route may also answer 204 without a body (a long poll that found nothing)
	partial    int     // another success status, answering resp too (207: some of a bulk request failed)
}

// param documents a query parameter or a request header: its schema
// (limits, default and enum included) and whether it is required.
type param struct {
	name, description string
	schema            obj
	required          bool
}

// The constructors of params.
func qStr(name, description string) param {
	return param{name: name, description: description, schema: obj{"type": "string"}}
}

func qBool(name, description string) param {
	return param{name: name, description: description, schema: obj{"type": "boolean"}}
}

// qInt is an integer parameter of lo..hi, def when absent.
func qInt(name, description string, lo, hi, def int) param {
	return param{name: name, description: description, schema: obj{"type": "integer", "minimum": lo, "maximum": hi, "default": def}}
}

// qEnum is a string parameter taking one of values.
func qEnum(name, description string, values ...string) param {
	return param{name: name, description: description, schema: obj{"type": "string", "enum": values}}
}

// qFormat is a string parameter of a format (date-time, ...).
func qFormat(name, description, format string) param {
	return param{name: name, description: description, schema: obj{"type": "string", "format": format}}
}

// must is p, required.
func (p param) must() param { p.required = true; return p }

// with is p with its default.
func (p param) with(def any) param {
	s := maps.Clone(p.schema)
	s["default"] = def
	p.schema = s
	return p
}

// openAPI is p as an OpenAPI parameter in in ("query" or "header").
func (p param) openAPI(in string) obj {
	return obj{"name": p.name, "in": in, "required": p.required, "description": p.description, "schema": maps.Clone(p.schema)}
}

// tag groups rt in the document: by the resource its path names.
func (rt route) tag() string {
	switch parts := strings.Split(rt.path, "/"); {
	case parts[1] == "registry":
		return "registry"
	case rt.agent:
		return "agents"
	case len(parts) > 2 && (parts[1] == "v1" || parts[1] == "v2"):
		if parts[2] == "projects" || parts[2] == "deployment-logs" || strings.HasSuffix(rt.path, "/logs") {
			return "logs"
		}
		if len(parts) > 4 && parts[2] == "deployments" && parts[4] == "revisions" {
			return "revisions"
		}
		return parts[2]
	default:
		return "operations"
	}
}

// routes lists every route the handler serves. The mux, the 405 Allow
// headers and the OpenAPI document are all built from this one list. The
// OAuth helpers are in it only when the handler has an oauthflow.Service,
// and POST /v1/integrations/github only when unverified integrations are
// allowed.
func (h *handler) routes() []route {
	page := []param{
		qInt("limit", "Page size.", 1, cp.MaxPageLimit, cp.DefaultPageLimit),
		{name: "offset", description: "Matching resources to skip; pass back the response offset for the next page.",
			schema: obj{"type": "integer", "minimum": 0, "default": 0}},
	}
	eventQuery := []param{qStr("logs", "Comma-separated log types (build, deploy) whose log lines to include as log events.")}
	routes := []route{
		// Deployments.
		{method: http.MethodPost, path: "/v2/deployments", serve: (*handler).createDeployment,
			summary: "Create a deployment and its first revision", body: cp.CreateDeploymentRequest{},
			status: http.StatusCreated, resp: cp.Deployment{}},
		{method: http.MethodGet, path: "/v2/deployments", serve: (*handler).listDeployments,
			summary: "List deployments, newest first", status: http.StatusOK, resp: cp.DeploymentPage{},
			query: append(page[:2:2],
				qStr("name_contains", "Case-insensitive substring of the name."),
				qEnum("status", "Deployment status.", enumNames(cp.DeploymentStatuses())...),
				qBool("remote_reconciled", "true: external_docker deployments (reconciled by a listener); false: the others."),
				qStr("tag_value_ids", "Comma-separated tag value UUIDs; a deployment matches if it carries any."),
				qStr("image_version", "Exact image version."),
				qEnum("deployment_type", "The deployment type.", enumNames(cp.DeploymentTypes())...),
				qStr("deployment_ids", "Comma-separated deployment UUIDs."),
				qStr("name", "Exact name (case-sensitive)."),
				qStr("agent_id", "Deployments linked to this agent (agent.agent_id)."),
				qEnum("agent_environment", "Deployments linked to an agent in this environment (agent.environment).", enumNames(cp.AgentEnvironments())...))},
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}", serve: (*handler).getDeployment,
			summary: "Get a deployment", status: http.StatusOK, resp: cp.Deployment{}},
		{method: http.MethodPatch, path: "/v2/deployments/{deployment_id}", serve: (*handler).updateDeployment, op: "patch_deployment",
			summary: "Update a deployment; revision fields create a new revision", body: cp.UpdateDeploymentRequest{},
			description: "With Content-Type application/json, null and absent mean \"no change\", resource_spec replaces the " +
				"stored one whole, and secrets [] is no change. With Content-Type application/merge-patch+json (RFC 7396), " +
				"null removes a field (display_name, source_config.custom_url, resource_spec, install_command, build_command, " +
				"secrets, secret_references, agent; secrets [] removes every secret), and resource_spec merges into the stored " +
				"one member by member, a null member removing it.",
			mergePatch: true, status: http.StatusOK, resp: cp.Deployment{}},
		{method: http.MethodDelete, path: "/v2/deployments/{deployment_id}", serve: (*handler).deleteDeployment,
			summary: "Delete a deployment (asynchronous: it is AWAITING_DELETE until torn down)",
			description: "A deployment none of whose revisions ever reached an engine (none was ever BUILDING, DEPLOYING, DEPLOYED " +
				"or UNKNOWN) is removed at once: GET answers 404 and its name is free. Any other is AWAITING_DELETE until " +
				"its teardown has removed what its engine runs; a teardown that fails is retried with backoff, and the " +
				"deployment's status_message says why it waits. force=true, for a deployment AWAITING_DELETE only (400 " +
				"otherwise), removes its records at once without its engine: what the engine made for it may remain.",
			status: http.StatusNoContent, errors: []int{http.StatusBadRequest},
			query: []param{
				qBool("force", "true: remove the records of a deployment AWAITING_DELETE now, without its teardown.").with(false),
				qBool("delete_tracing_project", "false: keep the deployment's tracing project when its records are removed.").with(true)}},

		{method: http.MethodDelete, path: "/v2/deployments", serve: (*handler).deleteDeployments,
			summary: "Delete several deployments: 200 when every one was deleted, 207 with each one's result otherwise",
			description: "Each id is deleted as DELETE /v2/deployments/{deployment_id} deletes it, with the same force and " +
				"delete_tracing_project for every one, on its own: one that fails leaves the others deleted. The answer has " +
				"one result per distinct id, in the order given: status 204 when it was deleted, else the status and the " +
				"detail its own DELETE would answer (404 for an unknown id or another workspace's, 400 for force on one " +
				"not being deleted, 422 for an id that is no UUID, at [\"query\", \"deployment_ids\", index]). No ids, or " +
				"more than 100, is a 422 for the request, and nothing is deleted.",
			status: http.StatusOK, partial: http.StatusMultiStatus, resp: bulkDelete{},
			query: []param{
				qStr("deployment_ids", "Comma-separated deployment UUIDs, 1 to 100.").must(),
				qBool("force", "true: remove the records of each deployment AWAITING_DELETE now, without its teardown.").with(false),
				qBool("delete_tracing_project", "false: keep each deployment's tracing project when its records are removed.").with(true)}},

		// Revisions.
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/revisions", serve: (*handler).listRevisions,
			summary: "List a deployment's revisions, newest first", status: http.StatusOK, resp: cp.RevisionPage{},
			query: append(page[:2:2],
				qStr("status", "Comma-separated revision statuses."),
				qBool("remote_reconciled", "Revisions of external_docker deployments (true) or of the others (false)."))},
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/revisions", serve: (*handler).createRevision,
			summary: "Create a revision (the body is applied like PATCH's)", body: cp.UpdateDeploymentRequest{}, bodyOptional: true,
			status: http.StatusCreated, resp: cp.Revision{}},
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}", serve: (*handler).getRevision,
			summary: "Get a revision; with wait=terminal, once its status is terminal or after timeout seconds",
			status:  http.StatusOK, resp: cp.Revision{},
			query: []param{qEnum("wait", "terminal: answer once the revision's status is terminal (or at the timeout).", "terminal"),
				qInt("timeout", "With wait: seconds to wait at most.", 0, 60, 30)},
			errors: []int{http.StatusServiceUnavailable}},
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/rollback", serve: (*handler).rollback, op: "rollback_deployment",
			summary: "Go back to an earlier DEPLOYED revision without a rebuild", body: cp.RollbackRequest{}, bodyOptional: true,
			description: "Without revision_id, the newest DEPLOYED revision older than the active one; else the one named. A new " +
				"revision copies its snapshot and the image it ran, skips the build (it starts AWAITING_DEPLOY when the source " +
				"builds) and is rolled out as any revision is, with no gap. 400 while the deployment is being deleted, without an " +
				"active revision, for a revision not DEPLOYED or already active, or one whose image is not known.",
			status: http.StatusOK, resp: cp.Deployment{}, errors: []int{http.StatusBadRequest}},
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy", serve: (*handler).redeploy, op: "redeploy_revision",
			summary: "Redeploy a revision: a new revision copying its snapshot", status: http.StatusOK, resp: cp.Deployment{}},
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}/interrupt", serve: (*handler).interruptRevision,
			op: "interrupt_deployment_revision", summary: "Interrupt a revision that is not yet terminal: it becomes INTERRUPTED",
			description: "A revision waiting (CREATING, QUEUED, AWAITING_BUILD, AWAITING_DEPLOY) is interrupted without ever " +
				"running further; one being built or deployed (BUILDING, DEPLOYING, UNKNOWN) is stopped: its build is " +
				"cancelled, or its rollout stopped and what it made removed, as for a failed revision. The deployment's " +
				"active revision serves on. A revision already terminal (DEPLOYED, SKIPPED, INTERRUPTED, *_FAILED) is a 400.",
			status: http.StatusOK, resp: cp.Revision{}, errors: []int{http.StatusBadRequest}},
		pushTokenRoute(), // pushtoken.go

		// Logs (logs.go).
		{method: http.MethodGet, path: "/v2/deployments/{deployment_id}/revisions/{revision_id}/logs", serve: (*handler).revisionLogs, op: "list_revision_logs",
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
		{method: http.MethodGet, path: "/v2/deployment-logs", serve: (*handler).deploymentLogs, op: "list_deployment_log_entries",
			summary: "Read the build or deploy logs of a deployment's revisions (or of one), a page at a time from a cursor",
			description: "Every revision's log in turn, oldest revision first (the reverse with sort_order=desc), each line as the " +
				"revision log routes answer it. next_cursor is a place in the logs, bound to the tenant and to deployment_id, " +
				"revision_id and log_type: pass it back with the same query for the next page; null at the end of the logs. " +
				"A page may hold fewer lines than page_size (none, even) before the end when a filter matches few of the lines " +
				"it read.",
			status: http.StatusOK, resp: cp.DeploymentLogPage{}, query: deploymentLogParams, errors: []int{http.StatusNotFound}},
		// The free tier (freecount.go).
		{method: http.MethodGet, path: "/v2/deployments/free-count", serve: (*handler).freeDeploymentCount, op: "get_free_deployment_count",
			summary: "Count the tenant's deployments of the free types (dev_free, dev_free_zero)",
			status:  http.StatusOK, resp: freeCountBody{}},
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
		{method: http.MethodPatch, path: "/v2/listeners/{listener_id}", serve: (*handler).updateListener, op: "patch_listener",
			summary: "Update a listener", body: cp.UpdateListenerRequest{}, status: http.StatusOK, resp: cp.Listener{}},
		{method: http.MethodDelete, path: "/v2/listeners/{listener_id}", serve: (*handler).deleteListener,
			summary: "Delete a listener no deployment names; with force=true, with its deployments",
			description: "Without force, a listener that deployments (of any status, until removed) name is refused (400). " +
				"With force=true each of its deployments is deleted as DELETE /v2/deployments/{deployment_id} does: those that " +
				"never ran are removed at once, the others are torn down where the listener points. The listener goes with " +
				"the last of them (at once when none needs a teardown); meanwhile it answers as before and no new deployment " +
				"may name it.",
			status: http.StatusNoContent,
			query:  []param{qBool("force", "true: delete the listener's deployments with it.").with(false)}},
	}
	// Listener tokens and the agent routes (agent.go).
	routes = append(routes, listenerTokenRoutes(page)...)
	routes = append(routes, agentRoutes()...)
	routes = append(routes, []route{
		// GitHub integrations (github.go).
		{method: http.MethodGet, path: "/v1/integrations/github", serve: (*handler).listIntegrations,
			summary: "List the tenant's GitHub App installations, oldest first", status: http.StatusOK, resp: []cp.Integration{}},
		{method: http.MethodGet, path: "/v1/integrations/github/install", serve: (*handler).startGitHubInstall, op: "start_github_install",
			summary: "The GitHub App's installation URL, with a state bound to the tenant (single use, valid 15 minutes); " +
				"GitHub sends the user back to /v1/integrations/github/setup",
			status: http.StatusOK, resp: installResponse{}, errors: []int{http.StatusServiceUnavailable}},
		{method: http.MethodGet, path: "/v1/integrations/github/setup", public: true, serve: (*handler).githubSetup, op: "github_setup",
			summary: "GitHub's setup redirect (a browser lands here; the state is the proof, no API key): records the installation " +
				"for the state's tenant once GitHub confirms that the user can access it, and shows an HTML page",
			status: http.StatusOK, html: true,
			query: []param{{name: "installation_id", description: "The installation.", schema: obj{"type": "integer"}},
				qEnum("setup_action", "install, update, or request (awaiting an owner's approval: nothing is recorded).", "install", "update", "request"),
				qStr("code", "The OAuth code of the user who installed the App."), qStr("state", "The state of the install URL.")},
			errors: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusConflict, http.StatusBadGateway,
				http.StatusServiceUnavailable}},
		{method: http.MethodPost, path: webhookPath, public: true, serve: (*handler).githubWebhook, op: "github_webhook",
			summary: "GitHub App webhook (no API key; X-Hub-Signature-256 is the proof): a push to a branch creates a revision " +
				"of every build_on_push deployment tracking it; a pull_request creates, moves or deletes the previews of the " +
				"deployments with source_config.preview it targets; ping and other events are acknowledged and change nothing",
			body: webhookEvent{}, status: http.StatusAccepted, resp: webhookResponse{},
			headers: []param{
				qStr(headerSignature, `"sha256=" and the hex HMAC-SHA256 of the raw body with the webhook secret.`),
				qStr(headerEvent, "The event: push creates revisions, pull_request previews; ping and the others change nothing.")},
			errors: []int{http.StatusUnauthorized, http.StatusRequestTimeout, http.StatusRequestEntityTooLarge,
				http.StatusUnprocessableEntity, http.StatusServiceUnavailable}},

		// The API description.
		{method: http.MethodGet, path: "/openapi.json", public: true, serve: (*handler).openAPI, op: "openapi",
			summary: "This OpenAPI 3.1 document", status: http.StatusOK, resp: map[string]any{}},
	}...)
	// The interactive page over the document (docs.go), public; not in the
	// document itself, as in the hosted service's.
	routes = append(routes,
		route{method: http.MethodGet, path: "/docs", public: true, serve: (*handler).serveDocs, hidden: true,
			summary: "An interactive page over /openapi.json (Swagger UI)", status: http.StatusOK, html: true},
		route{method: http.MethodGet, path: "/docs/{asset...}", public: true, serve: (*handler).serveDocs, hidden: true,
			summary: "The docs page's scripts, styles and icons", status: http.StatusOK})
	if h.ui != nil {
		routes = append(routes, dashboardRoutes()...)
	}
	// Operations (health.go, metrics.go).
	routes = append(routes,
		route{method: http.MethodGet, path: "/healthz", public: true, serve: (*handler).healthz,
			summary: "Liveness: 200 as long as the process serves", status: http.StatusOK, resp: healthBody{}},
		route{method: http.MethodGet, path: "/readyz", public: true, serve: (*handler).readyz,
			summary: "Readiness: 200 when the store answers, the reconcile loop runs and the deployer reaches its engine; " +
				"503 saying which is not ready",
			status: http.StatusOK, resp: healthBody{}, errors: []int{http.StatusServiceUnavailable}, errBody: notReadyBody{}})
	if h.metrics != nil {
		rt := route{method: http.MethodGet, path: "/metrics", public: true, serve: (*handler).serveMetrics, op: "metrics",
			summary: "Metrics in the Prometheus text format", status: http.StatusOK, text: true}
		if h.metricsKey != nil {
			rt.summary += " (needs the metrics key: Authorization: Bearer <key>)"
			rt.errors = []int{http.StatusUnauthorized}
		}
		routes = append(routes, rt)
	}
	routes = append(routes, h.webhookRoutes(page)...) // tenantwebhooks.go
	routes = append(routes, h.uploadRoutes()...)      // uploads.go
	routes = append(routes, h.realmRoutes()...)       // pushtoken.go
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
		route{method: http.MethodPost, path: "/v2/auth/providers", serve: (*handler).createProvider, op: "create_oauth_provider",
			summary: "Add an OAuth provider (client_secret is write-only)", body: oauthflow.NewProvider{},
			status: http.StatusOK, resp: oauthflow.Provider{}, errors: []int{http.StatusConflict}},
		route{method: http.MethodGet, path: "/v2/auth/providers", serve: (*handler).listProviders, op: "list_oauth_providers",
			summary: "List the tenant's OAuth providers, by provider_id", status: http.StatusOK, resp: []oauthflow.Provider{}},
		route{method: http.MethodGet, path: "/v2/auth/providers/{provider_id}", serve: (*handler).getProvider, op: "get_oauth_provider",
			summary: "Get an OAuth provider", status: http.StatusOK, resp: oauthflow.Provider{}},
		route{method: http.MethodPatch, path: "/v2/auth/providers/{provider_id}", serve: (*handler).updateProvider, op: "update_oauth_provider",
			summary: "Update an OAuth provider (provider_id is immutable; an empty client_secret removes it)",
			body:    oauthflow.ProviderPatch{}, status: http.StatusOK, resp: oauthflow.Provider{}},
		route{method: http.MethodDelete, path: "/v2/auth/providers/{provider_id}", serve: (*handler).deleteProvider, op: "delete_oauth_provider",
			summary: "Delete an OAuth provider and every token obtained through it", status: http.StatusOK, resp: messageBody{}},
		route{method: http.MethodPost, path: "/v2/auth/authenticate", serve: (*handler).authenticateOAuth, op: "authenticate",
			summary: "Get a stored token (completed) or start an authorization flow (pending, with the URL to send the user to)",
			body:    oauthflow.AuthRequest{}, status: http.StatusOK, resp: authResponse{}, errors: []int{http.StatusNotFound}},
		route{method: http.MethodGet, path: "/v2/auth/wait/{auth_id}", serve: (*handler).waitOAuth, op: "wait_for_auth_completion",
			summary: "Long-poll an authorization flow until it completes or the timeout passes",
			status:  http.StatusOK, resp: waitResponse{},
			query: []param{qInt("timeout", "Seconds to wait; 0 answers at once, possibly pending.", 0, 300, 30)}},
		route{method: http.MethodGet, path: "/v2/auth/callback/{provider_id}", public: true, serve: (*handler).oauthCallback, op: "oauth_callback_get",
			summary: "The providers' redirect target (a browser lands here; the state is the proof, no API key): finishes the flow and shows an HTML page",
			status:  http.StatusOK, html: true,
			query: []param{qStr("code", "The authorization code."), qStr("state", "The flow's state."),
				qStr("error", "RFC 6749 error code, when the provider refused."), qStr("error_description", "The provider's explanation.")},
			errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusBadGateway}},
	)
}
