package httphandler

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
)

// obj is a JSON object of the OpenAPI document.
type obj = map[string]any

// openAPIDocument describes routes as an OpenAPI 3.1 document. Schemas are
// derived from the controlplane types by reflection, so they follow the
// code; paths and methods come from the route table, so the document lists
// exactly what the mux serves.
func openAPIDocument(routes []route) []byte {
	g := &schemaGen{schemas: obj{}}
	g.schemas["HTTPError"] = obj{"type": "object", "required": []string{"detail"},
		"properties": obj{"detail": obj{"type": "string"}}}
	g.schemas["HTTPValidationError"] = obj{"type": "object", "required": []string{"detail"},
		"properties": obj{"detail": obj{"type": "array", "items": g.schema(reflect.TypeFor[apierr.Problem]())}}}

	paths := obj{}
	for _, rt := range routes {
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
		},
		"paths": paths,
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

func (g *schemaGen) operation(rt route) obj {
	op := obj{
		"operationId": strings.ToLower(rt.method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_").Replace(rt.path),
		"summary":     rt.summary,
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
		params = append(params, obj{"name": q.name, "in": "query", "required": false,
			"description": q.description, "schema": obj{"type": q.typ}})
	}
	for _, hd := range rt.headers {
		params = append(params, obj{"name": hd.name, "in": "header", "required": true,
			"description": hd.description, "schema": obj{"type": hd.typ}})
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.body != nil {
		op["requestBody"] = obj{"required": !rt.bodyOptional,
			"content": obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.body))}}}
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
		success["content"] = obj{"application/json": obj{"schema": g.schema(reflect.TypeOf(rt.resp))}}
	}
	responses := obj{strconv.Itoa(rt.status): success}
	errResp := func(status int) obj {
		name := "HTTPError"
		if status == http.StatusUnprocessableEntity {
			name = "HTTPValidationError"
		}
		if rt.html {
			return obj{"description": http.StatusText(status), "content": obj{"text/html": obj{"schema": obj{"type": "string"}}}}
		}
		return obj{"description": http.StatusText(status),
			"content": obj{"application/json": obj{"schema": obj{"$ref": "#/components/schemas/" + name}}}}
	}
	for _, status := range rt.errors {
		responses[strconv.Itoa(status)] = errResp(status)
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

// schemaGen derives JSON Schemas from Go types, registering named structs
// under components/schemas.
type schemaGen struct {
	schemas obj
}

// namePathParams are the path parameters that are names, not UUIDs.
var namePathParams = map[string]bool{"provider_id": true, "auth_id": true}

// schemaNames names the schemas of types whose Go names would not do.
var schemaNames = map[reflect.Type]string{
	reflect.TypeFor[oauthflow.Provider]():      "OAuthProvider",
	reflect.TypeFor[oauthflow.NewProvider]():   "OAuthProviderCreate",
	reflect.TypeFor[oauthflow.ProviderPatch](): "OAuthProviderPatch",
	reflect.TypeFor[oauthflow.AuthRequest]():   "AuthenticateRequest",
	reflect.TypeFor[authResponse]():            "AuthenticateResponse",
	reflect.TypeFor[waitResponse]():            "AuthWaitResponse",
	reflect.TypeFor[messageBody]():             "Message",
	reflect.TypeFor[pushPayload]():             "GitHubPushEvent",
	reflect.TypeFor[pushInstallation]():        "GitHubInstallation",
	reflect.TypeFor[pushRepository]():          "GitHubRepository",
	reflect.TypeFor[webhookResponse]():         "GitHubWebhookResponse",
	reflect.TypeFor[controlplane.LogQuery]():   "LogsRequest",
}

var enums = map[reflect.Type][]string{
	reflect.TypeFor[authStatus]():                    {oauthflow.StatusCompleted, oauthflow.StatusPending},
	reflect.TypeFor[waitStatus]():                    {oauthflow.StatusCompleted, oauthflow.StatusPending, oauthflow.StatusTimeout, oauthflow.StatusNotFound},
	reflect.TypeFor[controlplane.Source]():           {string(controlplane.SourceGitHub), string(controlplane.SourceExternalDocker)},
	reflect.TypeFor[controlplane.DeploymentType]():   {"dev_free", "dev", "prod"},
	reflect.TypeFor[controlplane.DeploymentStatus](): {"AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN"},
	reflect.TypeFor[controlplane.RevisionStatus](): {"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY",
		"DEPLOYING", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "DEPLOYED", "SKIPPED", "INTERRUPTED", "UNKNOWN"},
	reflect.TypeFor[controlplane.LogLevel](): {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"},
}

func (g *schemaGen) schema(t reflect.Type) obj {
	if t.Kind() == reflect.Pointer {
		inner := g.schema(t.Elem())
		if typ, ok := inner["type"].(string); ok && inner["$ref"] == nil {
			inner["type"] = []string{typ, "null"}
			return inner
		}
		return obj{"anyOf": []obj{inner, {"type": "null"}}}
	}
	if t == reflect.TypeFor[time.Time]() {
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
		return obj{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		return obj{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return obj{} // free-form
	case reflect.Struct:
		name := t.Name()
		if n, ok := schemaNames[t]; ok {
			name = n
		}
		if name == "" {
			return g.structSchema(t)
		}
		if t == reflect.TypeFor[apierr.Problem]() {
			name = "ValidationError"
			g.schemas[name] = obj{"type": "object", "required": []string{"loc", "msg", "type"}, "properties": obj{
				"loc":  obj{"type": "array", "items": obj{"anyOf": []obj{{"type": "string"}, {"type": "integer"}}}},
				"msg":  obj{"type": "string"},
				"type": obj{"type": "string"},
			}}
		}
		if _, ok := g.schemas[name]; !ok {
			g.schemas[name] = obj{} // placeholder against recursion
			g.schemas[name] = g.structSchema(t)
		}
		return obj{"$ref": "#/components/schemas/" + name}
	}
	return obj{}
}

func (g *schemaGen) structSchema(t reflect.Type) obj {
	props := obj{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
	}
	return obj{"type": "object", "properties": props}
}
