package httphandler

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/webhooks"
	"github.com/deployplane/deployplane/wiretime"
)

// obj is a JSON object of the OpenAPI document.
type obj = map[string]any

// openAPIDocument describes routes as an OpenAPI 3.1 document. Schemas are
// derived from the controlplane types by reflection, so they follow the
// code; paths and methods come from the route table, so the document lists
// exactly what the mux serves. basePath is the prefix the handler is
// mounted under (Options.BasePath): the document's one server.
//
// Conventions, checked by the tests: a response schema lists every
// member an answer always carries in required (every one but the omitted
// zero values), nullable members say so (a nullable enum has null in its
// enum); a type read in requests has a schema of its own, named with the
// suffix Input, that requires only what a request must give; operation
// ids follow FastAPI's, as the hosted service's document has them
// (<function>_<path, with / { } as _>_<method>); 409 answers carry
// x-should-retry: false.
func openAPIDocument(routes []route, basePath string) []byte {
	g := &schemaGen{schemas: obj{}}
	g.schemas["HTTPError"] = obj{"type": "object", "required": []string{"detail"},
		"properties": obj{"detail": obj{"type": "string"}}}
	g.schemas["HTTPValidationError"] = obj{"type": "object", "required": []string{"detail"},
		"properties": obj{"detail": obj{"type": "array", "items": g.schema(reflect.TypeFor[apierr.Problem](), false)}}}

	paths := obj{}
	for _, rt := range routes {
		if rt.hidden {
			continue
		}
		item, _ := paths[rt.path].(obj)
		if item == nil {
			item = obj{}
			paths[rt.path] = item
		}
		item[strings.ToLower(rt.method)] = g.operation(rt)
	}
	doc := obj{
		"openapi": "3.1.0",
		"info": obj{
			"title":       "deployplane",
			"version":     "0.1.0",
			"description": "Deployment control plane for agent servers. Errors are {\"detail\": \"...\"}, and 422 lists every problem with its loc, msg and type.",
			"license":     obj{"name": "Apache-2.0", "identifier": "Apache-2.0"},
		},
		"servers": servers(basePath),
		"paths":   paths,
		"components": obj{
			"schemas": g.schemas,
			"securitySchemes": obj{
				"ApiKey":   obj{"type": "apiKey", "in": "header", "name": "X-Api-Key"},
				"Bearer":   obj{"type": "http", "scheme": "bearer"},
				"TenantId": obj{"type": "apiKey", "in": "header", "name": "X-Tenant-Id", "description": "The workspace (tenant) UUID; needed when the credentials may use several."},
			},
		},
		"security": []obj{{"ApiKey": []string{}, "TenantId": []string{}}, {"ApiKey": []string{}},
			{"Bearer": []string{}, "TenantId": []string{}}, {"Bearer": []string{}}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("httphandler: OpenAPI document: " + err.Error()) // a bug in this file
	}
	return b
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// operationID is FastAPI's operation id of rt: the snake_case name of the
// function that serves it (or rt.op), the path with every character that
// is not a letter, digit or _ replaced by _, and the method.
func operationID(rt route) string {
	name := rt.op
	if name == "" {
		full := runtime.FuncForPC(reflect.ValueOf(rt.serve).Pointer()).Name() // pkg.(*handler).createDeployment
		name = full[strings.LastIndex(full, ".")+1:]
		name = strings.TrimSuffix(name, "-fm")
		var b strings.Builder
		for i, r := range name {
			if unicode.IsUpper(r) {
				if i > 0 {
					b.WriteByte('_')
				}
				r = unicode.ToLower(r)
			}
			b.WriteRune(r)
		}
		name = b.String()
	}
	path := strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, rt.path)
	return name + path + "_" + strings.ToLower(rt.method)
}

func (g *schemaGen) operation(rt route) obj {
	op := obj{
		"operationId": operationID(rt),
		"summary":     rt.summary,
		"tags":        []string{rt.tag()},
	}
	if rt.description != "" {
		op["description"] = rt.description
	}
	var params []obj
	uuidPath, lookup := false, false // a param must be a UUID; an unknown one is a 404
	for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
		schema := obj{"type": "string"}
		if !namePathParams[m[1]] {
			schema["format"] = "uuid"
			uuidPath = true
		}
		if m[1] != "auth_id" { // an unknown flow is 200 {"status": "not_found"}
			lookup = true
		}
		params = append(params, obj{"name": m[1], "in": "path", "required": true, "schema": schema})
	}
	for _, q := range rt.query {
		params = append(params, q.openAPI("query"))
	}
	for _, hd := range rt.headers {
		hd.required = true
		params = append(params, hd.openAPI("header"))
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.body != nil {
		content := obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.body), true)}}
		if rt.mergePatch {
			content["application/merge-patch+json"] = obj{"schema": g.schema(reflect.TypeOf(rt.body), true)}
		}
		op["requestBody"] = obj{"required": !rt.bodyOptional, "content": content}
	}
	if rt.form != nil {
		op["requestBody"] = obj{"required": true,
			"content": obj{"application/x-www-form-urlencoded": obj{"schema": g.schema(reflect.TypeOf(rt.form), true)}}}
	}
	success := obj{"description": http.StatusText(rt.status)}
	switch {
	case rt.html:
		success["content"] = obj{"text/html": obj{"schema": obj{"type": "string"}}}
	case rt.text:
		success["content"] = obj{"text/plain": obj{"schema": obj{"type": "string"}}}
	case rt.stream:
		success["content"] = obj{"text/event-stream": obj{"schema": obj{"type": "string"}}}
	case rt.resp != nil:
		success["content"] = obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.resp), false)}}
	}
	responses := obj{strconv.Itoa(rt.status): success}
	if rt.noContent {
		responses["204"] = obj{"description": "No Content: nothing came within the wait"}
	}
	if rt.partial != 0 {
		partial := obj{"description": http.StatusText(rt.partial) + ": some failed; each result says how"}
		partial["content"] = success["content"]
		responses[strconv.Itoa(rt.partial)] = partial
	}
	errResp := func(status int) obj {
		name := "HTTPError"
		if status == http.StatusUnprocessableEntity {
			name = "HTTPValidationError"
		}
		r := obj{"description": http.StatusText(status),
			"content": obj{"application/json": obj{"schema": obj{"$ref": "#/components/schemas/" + name}}}}
		if rt.html {
			r["content"] = obj{"text/html": obj{"schema": obj{"type": "string"}}}
		}
		if status == http.StatusConflict {
			r["headers"] = obj{"x-should-retry": obj{
				"description": "Always false: the request conflicts with the current state, and repeating it as it is cannot succeed.",
				"schema":      obj{"type": "string", "enum": []string{"false"}}}}
		}
		return r
	}
	for _, status := range rt.errors {
		r := errResp(status)
		if rt.errBody != nil {
			r["content"] = obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.errBody), false)}}
		}
		responses[strconv.Itoa(status)] = r
	}
	if loadLimited(rt) {
		// Refused load and the rate limit (shed.go, ratelimit.go): JSON
		// whatever the route answers otherwise.
		retry := obj{"description": "Seconds to wait before retrying.", "schema": obj{"type": "integer"}}
		if responses["503"] == nil { // a route's own 503 says more
			responses["503"] = obj{"description": "The server is busy; retry after Retry-After seconds.",
				"headers": obj{"Retry-After": retry},
				"content": obj{"application/json": obj{"schema": obj{"$ref": "#/components/schemas/HTTPError"}}}}
		}
		responses["429"] = obj{"description": "Rate limit exceeded; retry after Retry-After seconds.",
			"headers": obj{"Retry-After": retry,
				"RateLimit-Limit":     obj{"description": "Requests allowed at once (the burst).", "schema": obj{"type": "integer"}},
				"RateLimit-Remaining": obj{"description": "Requests left now.", "schema": obj{"type": "integer"}},
				"RateLimit-Reset":     obj{"description": "Seconds until the allowance is full again.", "schema": obj{"type": "integer"}}},
			"content": obj{"application/json": obj{"schema": obj{"$ref": "#/components/schemas/HTTPError"}}}}
	}
	if rt.public {
		op["security"] = []obj{}
	} else {
		responses["401"] = errResp(http.StatusUnauthorized)
		responses["403"] = errResp(http.StatusForbidden)
		if lookup {
			responses["404"] = errResp(http.StatusNotFound)
		}
		if uuidPath || rt.body != nil || rt.query != nil {
			responses["422"] = errResp(http.StatusUnprocessableEntity)
		}
		if rt.body != nil {
			responses["413"] = errResp(http.StatusRequestEntityTooLarge)
		}
		switch {
		case rt.method == http.MethodPost && rt.status == http.StatusCreated:
			responses["409"] = errResp(http.StatusConflict)
		case rt.method == http.MethodPatch || strings.HasSuffix(rt.path, "/redeploy") || strings.HasPrefix(rt.path, "/v2/listeners/"):
			responses["400"] = errResp(http.StatusBadRequest)
		}
	}
	op["responses"] = responses
	return op
}

// loadLimited reports whether rt may be refused for load (503) or the rate
// limit (429): every route but those the load pools let through (poolOf).
func loadLimited(rt route) bool {
	return (&load{}).poolOf(rt, &http.Request{Method: rt.method, URL: &url.URL{}}) != nil
}

// schemaGen derives JSON Schemas from Go types, registering named structs
// under components/schemas: once as a response schema and, for a type read
// in requests, once more as a request schema (Input).
type schemaGen struct {
	schemas obj
}

// namePathParams are the path parameters that are names, not UUIDs.
var namePathParams = map[string]bool{"provider_id": true, "auth_id": true}

// schemaNames names the schemas of types whose Go names would not do; the
// list pages are named as the hosted service's document names them.
var schemaNames = map[reflect.Type]string{
	reflect.TypeFor[controlplane.DeploymentPage]():        "DeploymentsList",
	reflect.TypeFor[controlplane.RevisionPage]():          "RevisionsList",
	reflect.TypeFor[controlplane.DeploymentLogPage]():     "DeploymentLogsList",
	reflect.TypeFor[freeCountBody]():                      "FreeDeploymentCount",
	reflect.TypeFor[controlplane.ListenerPage]():          "ListenersList",
	reflect.TypeFor[controlplane.CreateListenerRequest](): "ListenerCreateRequest",
	reflect.TypeFor[controlplane.UpdateListenerRequest](): "ListenerPatchRequest",
	reflect.TypeFor[controlplane.ComputeConfig]():         "ListenerComputeConfig",
	reflect.TypeFor[oauthflow.Provider]():                 "OAuthProvider",
	reflect.TypeFor[oauthflow.NewProvider]():              "OAuthProviderCreate",
	reflect.TypeFor[oauthflow.ProviderPatch]():            "OAuthProviderPatch",
	reflect.TypeFor[oauthflow.AuthRequest]():              "AuthenticateRequest",
	reflect.TypeFor[authResponse]():                       "AuthenticateResponse",
	reflect.TypeFor[waitResponse]():                       "AuthWaitResponse",
	reflect.TypeFor[messageBody]():                        "Message",
	reflect.TypeFor[webhookEvent]():                       "GitHubWebhookEvent",
	reflect.TypeFor[pullRequest]():                        "GitHubPullRequest",
	reflect.TypeFor[pullRequestEnd]():                     "GitHubPullRequestEnd",
	reflect.TypeFor[pullRequestLabel]():                   "GitHubLabel",
	reflect.TypeFor[pushInstallation]():                   "GitHubInstallation",
	reflect.TypeFor[pushRepository]():                     "GitHubRepository",
	reflect.TypeFor[webhookResponse]():                    "GitHubWebhookResponse",
	reflect.TypeFor[controlplane.LogQuery]():              "LogsRequest",
	reflect.TypeFor[installResponse]():                    "GitHubInstallURL",
	reflect.TypeFor[healthBody]():                         "Health",
	reflect.TypeFor[uploadURLResponse]():                  "UploadURL",
	reflect.TypeFor[pushTokenResponse]():                  "PushToken",
	reflect.TypeFor[registryTokenAnswer]():                "RegistryToken",
	reflect.TypeFor[registryErrors]():                     "RegistryErrors",
	reflect.TypeFor[registryError]():                      "RegistryError",
	reflect.TypeFor[registryTokenRequest]():               "RegistryTokenRequest",
	reflect.TypeFor[oauthTokenError]():                    "OAuthTokenError",
	reflect.TypeFor[jwkSet]():                             "JWKS",
	reflect.TypeFor[controlplane.ListenerTokenPage]():     "ListenerTokensList",
	reflect.TypeFor[controlplane.AgentDeploymentPage]():   "AgentDeploymentsList",
	reflect.TypeFor[agentClaimRequest]():                  "AgentClaimRequest",
	reflect.TypeFor[agentHeartbeatRequest]():              "AgentHeartbeatRequest",
	reflect.TypeFor[agentLeaseRequest]():                  "AgentLeaseRequest",
	reflect.TypeFor[agentReportRequest]():                 "AgentReportRequest",
	reflect.TypeFor[agentFailRequest]():                   "AgentFailRequest",
	reflect.TypeFor[agentLogsRequest]():                   "AgentLogsRequest",
	reflect.TypeFor[agentReleaseRequest]():                "AgentReleaseRequest",
	reflect.TypeFor[agentLinesRequest]():                  "AgentLinesRequest",
	reflect.TypeFor[agentStatusRequest]():                 "AgentStatusRequest",
	reflect.TypeFor[bulkDelete]():                         "DeleteDeploymentsResponse",
	reflect.TypeFor[bulkDeleteResult]():                   "DeleteDeploymentResult",
	// The tenants' webhooks (tenantwebhooks.go).
	reflect.TypeFor[webhooks.CreateWebhookRequest](): "WebhookCreateRequest",
	reflect.TypeFor[webhooks.UpdateWebhookRequest](): "WebhookPatchRequest",
	reflect.TypeFor[webhooks.CreatedWebhook]():       "WebhookCreated",
	reflect.TypeFor[webhooks.WebhookPage]():          "WebhooksList",
	reflect.TypeFor[webhooks.Delivery]():             "WebhookDelivery",
	reflect.TypeFor[webhooks.Attempt]():              "WebhookDeliveryAttempt",
	reflect.TypeFor[webhooks.DeliveryPage]():         "WebhookDeliveriesList",
}

// requestOnly are the types read only in requests: their schema keeps its
// name (no Input suffix).
var requestOnly = map[reflect.Type]bool{
	reflect.TypeFor[controlplane.CreateDeploymentRequest](): true, reflect.TypeFor[controlplane.UpdateDeploymentRequest](): true,
	reflect.TypeFor[controlplane.SecretInput](): true, reflect.TypeFor[controlplane.CreateListenerRequest](): true,
	reflect.TypeFor[controlplane.UpdateListenerRequest](): true, reflect.TypeFor[controlplane.CreateIntegrationRequest](): true,
	reflect.TypeFor[oauthflow.NewProvider](): true, reflect.TypeFor[oauthflow.ProviderPatch](): true,
	reflect.TypeFor[oauthflow.AuthRequest](): true, reflect.TypeFor[controlplane.LogQuery](): true,
	reflect.TypeFor[webhookEvent](): true, reflect.TypeFor[pushInstallation](): true, reflect.TypeFor[pushRepository](): true,
	reflect.TypeFor[pullRequest](): true, reflect.TypeFor[pullRequestEnd](): true, reflect.TypeFor[pullRequestLabel](): true,
	reflect.TypeFor[registryTokenRequest](): true,
	// The agent routes' bodies (agent.go).
	reflect.TypeFor[agentClaimRequest]():     true,
	reflect.TypeFor[agentHeartbeatRequest](): true,
	reflect.TypeFor[agentLeaseRequest]():     true,
	reflect.TypeFor[agentReportRequest]():    true,
	reflect.TypeFor[agentFailRequest]():      true,
	reflect.TypeFor[agentLogsRequest]():      true,
	reflect.TypeFor[agentReleaseRequest]():   true,
	reflect.TypeFor[agentLinesRequest]():     true,
	reflect.TypeFor[agentStatusRequest]():    true,
	// The tenants' webhooks.
	reflect.TypeFor[webhooks.CreateWebhookRequest](): true,
	reflect.TypeFor[webhooks.UpdateWebhookRequest](): true,
}

// neverNull are the list and map members of answers that are never null
// (the ControlPlane answers [] for an empty one), as "Type.member"; every
// other list or map member of an answer may be null.
var neverNull = map[string]bool{
	"Deployment.secrets": true, "Revision.status_history": true, "ComputeConfig.k8s_namespaces": true,
	"DeploymentPage.resources": true, "RevisionPage.resources": true, "ListenerPage.resources": true,
	"LogPage.logs": true, "DeploymentLogPage.items": true, "HTTPValidationError.detail": true,
	"registryErrors.errors": true, "jwkSet.keys": true,
	"ListenerTokenPage.resources": true, "AgentDeploymentPage.deployment_ids": true,
	"bulkDelete.results": true,
	"Webhook.events":     true, "CreatedWebhook.events": true, "WebhookPage.resources": true,
	"Delivery.attempt_log": true, "DeliveryPage.resources": true,
}

// uuidMembers are the string members that hold UUIDs, as "Type.member".
var uuidMembers = map[string]bool{
	"Deployment.id": true, "Deployment.tenant_id": true, "Deployment.latest_revision_id": true, "Deployment.active_revision_id": true,
	"Revision.id": true, "Listener.id": true, "Integration.id": true,
	"SourceConfig.integration_id": true, "SourceConfig.listener_id": true,
	"CreateDeploymentRequest.tag_value_ids": true, "Provider.id": true, "Provider.organization_id": true,
	"ListenerToken.id": true, "NewListenerToken.id": true, "AgentDeploymentPage.deployment_ids": true, "Work.tenant": true,
	"Webhook.id": true, "CreatedWebhook.id": true,
}

// checkedAs are the request types the ControlPlane checks as a Deployment:
// a member without a validate tag of its own is checked by the tag of the
// Deployment member of its name (deploymentTag).
var checkedAs = map[reflect.Type]bool{
	reflect.TypeFor[controlplane.CreateDeploymentRequest](): true, reflect.TypeFor[controlplane.UpdateDeploymentRequest](): true,
}

// deploymentTag is the validate tag of the Deployment member named name.
func deploymentTag(name string) string {
	t := reflect.TypeFor[controlplane.Deployment]()
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n == name {
			return t.Field(i).Tag.Get("validate")
		}
	}
	return ""
}

// requiredIn are the request members a request must give that no validate
// tag says so of, as "Type.member" (the ControlPlane answers 422 missing
// without them).
var requiredIn = map[string]bool{
	"CreateDeploymentRequest.name": true, "CreateDeploymentRequest.source": true,
	"CreateListenerRequest.compute_type": true, "CreateListenerRequest.compute_id": true,
	"CreateIntegrationRequest.installation_id": true, "CreateIntegrationRequest.name": true,
	// oauthflow's validateProvider (on create) and validateAuthRequest.
	"NewProvider.provider_id": true, "NewProvider.name": true, "NewProvider.client_id": true,
	"NewProvider.auth_url": true, "NewProvider.token_url": true,
	"AuthRequest.user_id": true, "AuthRequest.provider": true, "AuthRequest.scopes": true,
	// webhooks.Service.ValidateCreate.
	"CreateWebhookRequest.url": true, "CreateWebhookRequest.events": true,
	// The agent routes' bodies (agent.go's problems) and their log lines.
	"agentLeaseRequest.lease": true, "agentReportRequest.lease": true, "agentReportRequest.step": true,
	"agentFailRequest.lease": true, "agentLogsRequest.lease": true, "agentLogsRequest.lines": true,
	"agentReleaseRequest.lease": true, "agentLinesRequest.lines": true, "LogLine.type": true,
	"agentStatusRequest.status": true,
}

// timeTypes encode as RFC 3339 strings.
var timeTypes = map[reflect.Type]bool{reflect.TypeFor[time.Time](): true, reflect.TypeFor[wiretime.Time](): true}

var enums = map[reflect.Type][]string{
	reflect.TypeFor[authStatus]():                    {oauthflow.StatusCompleted, oauthflow.StatusPending},
	reflect.TypeFor[waitStatus]():                    {oauthflow.StatusCompleted, oauthflow.StatusPending, oauthflow.StatusTimeout, oauthflow.StatusNotFound},
	reflect.TypeFor[controlplane.Source]():           enumNames(controlplane.Sources()),
	reflect.TypeFor[controlplane.DeploymentType]():   enumNames(controlplane.DeploymentTypes()),
	reflect.TypeFor[controlplane.DeploymentStatus](): enumNames(controlplane.DeploymentStatuses()),
	reflect.TypeFor[controlplane.RevisionStatus]():   enumNames(controlplane.RevisionStatuses()),
	reflect.TypeFor[controlplane.LogLevel]():         enumNames(controlplane.LogLevels()),
	reflect.TypeFor[controlplane.ListenerStatus]():   enumNames(controlplane.ListenerStatuses()),
	reflect.TypeFor[controlplane.AgentWorkKind]():    {string(controlplane.AgentDeploy), string(controlplane.AgentTeardown)},
	reflect.TypeFor[controlplane.LogType]():          {string(controlplane.LogBuild), string(controlplane.LogDeploy)},
}

// enumNames are the values of an enum of package controlplane, as the
// strings of its schema.
func enumNames[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}

// nullable is s made to admit null too.
func nullable(s obj) obj {
	if typ, ok := s["type"].(string); ok && s["$ref"] == nil {
		s["type"] = []string{typ, "null"}
		if e, ok := s["enum"].([]string); ok {
			vals := make([]any, 0, len(e)+1)
			for _, v := range e {
				vals = append(vals, v)
			}
			s["enum"] = append(vals, nil)
		}
		return s
	}
	return obj{"anyOf": []obj{s, {"type": "null"}}}
}

// schema is the schema of t, in answers or (in) in requests.
func (g *schemaGen) schema(t reflect.Type, in bool) obj {
	if t.Kind() == reflect.Pointer {
		return nullable(g.schema(t.Elem(), in))
	}
	if timeTypes[t] {
		return obj{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.String:
		s := obj{"type": "string"}
		if e, ok := enums[t]; ok {
			s["enum"] = e
		}
		return s
	case reflect.Bool:
		return obj{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return obj{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return obj{"type": "number"}
	case reflect.Slice, reflect.Array:
		return obj{"type": "array", "items": g.schema(t.Elem(), in)}
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.schema(t.Elem(), in)}
	case reflect.Interface:
		return obj{} // free-form
	case reflect.Struct:
		name := t.Name()
		if n, ok := schemaNames[t]; ok {
			name = n
		}
		if name == "" {
			return g.structSchema(t, in)
		}
		if t == reflect.TypeFor[apierr.Problem]() {
			name = "ValidationError"
			g.schemas[name] = obj{"type": "object", "required": []string{"loc", "msg", "type"}, "properties": obj{
				"loc":  obj{"type": "array", "items": obj{"anyOf": []obj{{"type": "string"}, {"type": "integer"}}}},
				"msg":  obj{"type": "string"},
				"type": obj{"type": "string"},
			}}
		}
		if in && !requestOnly[t] {
			name += "Input"
		}
		if _, ok := g.schemas[name]; !ok {
			g.schemas[name] = obj{} // placeholder against recursion
			g.schemas[name] = g.structSchema(t, in)
		}
		return obj{"$ref": "#/components/schemas/" + name}
	}
	return obj{}
}

// structSchema is the object schema of t. In answers, every member but
// those omitted when zero is required, and a list or map member may be
// null unless neverNull says otherwise. In requests, a member is required
// when its validate tag says so.
func (g *schemaGen) structSchema(t reflect.Type, in bool) obj {
	props := obj{}
	required := []string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		key := t.Name() + "." + name
		tag := f.Tag.Get("validate")
		if checkedAs[t] && tag == "" {
			tag = deploymentTag(name)
		}
		req := in && (strings.HasPrefix(tag, "required") || requiredIn[key])
		ft := f.Type
		if req && ft.Kind() == reflect.Pointer {
			ft = ft.Elem() // required: null is refused like absence
		}
		s := g.schema(ft, in)
		if strings.Contains(tag, "dispname") {
			s["minLength"], s["maxLength"] = 1, controlplane.MaxDisplayNameChars
		}
		if strings.Contains(tag, "httpurl") { // an absolute http(s) URL (custom_url)
			s["format"], s["pattern"] = "uri", "^https?://"
		}
		if key == "UpdateDeploymentRequest.tracked_packages" || key == "Revision.tracked_packages" { // wire contract section 10
			s["maxItems"] = controlplane.MaxTrackedPackages
			s["items"] = obj{"type": "string", "minLength": 1, "maxLength": controlplane.MaxTrackedPackageChars}
		}
		if key == "bulkDeleteResult.detail" { // a sentence, or a 422's problems
			s = obj{"anyOf": []obj{{"type": "string"}, {"type": "array", "items": g.schema(reflect.TypeFor[apierr.Problem](), false)}}}
		}
		if uuidMembers[key] {
			if s["type"] == "array" {
				s["items"] = obj{"type": "string", "format": "uuid"}
			} else {
				s["format"] = "uuid"
			}
		}
		omitted := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if k := f.Type.Kind(); !in && !omitted && (k == reflect.Slice || k == reflect.Map) && !neverNull[key] {
			s = nullable(s)
		}
		if req {
			required = append(required, name)
		} else if !in && !omitted {
			required = append(required, name)
		}
		props[name] = s
	}
	out := obj{"type": "object", "properties": props}
	if len(required) > 0 || !in {
		out["required"] = required
	}
	return out
}

// servers is the document's servers for a handler mounted under basePath:
// where it is mounted, and the same under APIHostPrefix, which it serves
// too (unless it is mounted there already).
func servers(basePath string) []obj {
	if basePath == "" {
		basePath = "/"
	}
	ss := []obj{{"url": basePath, "description": "This server (the path the API is mounted under)"}}
	if !strings.HasSuffix(basePath, APIHostPrefix) {
		ss = append(ss, obj{"url": strings.TrimSuffix(basePath, "/") + APIHostPrefix,
			"description": "The same routes under the prefix self-hosted clients derive from LANGSMITH_ENDPOINT"})
	}
	return ss
}
