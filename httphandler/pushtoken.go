package httphandler

import (
	"context"
	"net/http"

	"github.com/deployplane/deployplane/apierr"
)

// Registry is the registry POST .../push-token answers for (wire contract
// section 10): the built-in one (package registry's *Registry) or an
// external one (*registry.External), with the registry tokens kept in the
// control plane's store (*registry.TokenStore).
type Registry interface {
	// URL names the registry_url of a deployment: host:port/<the
	// deployment's repository prefix>.
	URL(deploymentID string) string
	// PushToken issues a push-and-pull token for the tenant's deployment,
	// valid an hour. Errors: *apierr.NotFoundError; apierr.ErrInvalidState
	// (with the contract's sentence) for a deployment of another source
	// than internal_docker, or one being deleted.
	PushToken(ctx context.Context, tenant, deploymentID string) (string, error)
}

// pushTokenResponse is the answer of POST .../push-token.
type pushTokenResponse struct {
	// Token is the password for HTTP basic auth at the registry (any user
	// name), valid one hour, for push and pull on registry_url only.
	Token string `json:"token"`
	// RegistryURL is host:port/<the deployment's repository prefix>.
	RegistryURL string `json:"registry_url"`
}

// errNoRegistry: the server runs no registry to push to.
var errNoRegistry = apierr.InvalidStatef("push token is not available: this server runs no registry")

// pushTokenRoute is POST /v2/deployments/{deployment_id}/push-token.
func pushTokenRoute() route {
	return route{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/push-token", serve: (*handler).pushToken,
		op:      "create_push_token",
		summary: "A registry token for langgraph deploy: push and pull on the deployment's repository of the built-in registry, for an hour (internal_docker deployments only)",
		status:  http.StatusOK, resp: pushTokenResponse{}, errors: []int{http.StatusBadRequest}}
}

func (h *handler) pushToken(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	if h.registry == nil {
		// The deployment is looked up first, so an unknown one is a 404.
		if _, err := h.cp.GetDeployment(c.r.Context(), c.tenant, ids[0]); err != nil {
			return 0, nil, err
		}
		return 0, nil, errNoRegistry
	}
	tok, err := h.registry.PushToken(c.r.Context(), c.tenant, ids[0])
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, pushTokenResponse{Token: tok, RegistryURL: h.registry.URL(ids[0])}, nil
}

// The paths of Options.RegistryRealm (package registry's TokenPath and
// JWKSPath): below /registry/, where no API route is.
const (
	RealmPath     = "/registry/token"
	RealmJWKSPath = "/registry/jwks.json"
)

// registryTokenAnswer documents the realm's answer (the Docker Registry v2
// token authentication specification): token and access_token are the
// same JWT, for Authorization: Bearer at the registry; expires_in in
// seconds; issued_at in RFC 3339; scope what it grants.
type registryTokenAnswer struct {
	Token       string `json:"token"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
	IssuedAt    string `json:"issued_at"`
	Scope       string `json:"scope"`
}

// registryErrors documents the realm's errors to GET: the registry API's
// error list (code UNAUTHORIZED for missing or bad credentials, with
// WWW-Authenticate: Basic; DENIED for another service).
type registryErrors struct {
	Errors []registryError `json:"errors"`
}

type registryError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// registryTokenRequest documents the form of POST RealmPath (the OAuth2
// password grant of the token specification).
type registryTokenRequest struct {
	GrantType  string `json:"grant_type" validate:"required"` // password
	Username   string `json:"username"`
	Password   string `json:"password" validate:"required"` // the push or pull token
	Service    string `json:"service"`
	Scope      string `json:"scope"` // space-separated
	ClientID   string `json:"client_id"`
	AccessType string `json:"access_type"`
}

// oauthTokenError documents the realm's errors to POST (RFC 6749 section
// 5.2): invalid_grant for a bad token, invalid_request,
// unsupported_grant_type.
type oauthTokenError struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// jwkSet documents GET RealmJWKSPath: RFC 7517's JSON Web Key Set.
type jwkSet struct {
	Keys []map[string]any `json:"keys"`
}

// realmRoutes are the routes of Options.RegistryRealm (none without it).
func (h *handler) realmRoutes() []route {
	if h.realm == nil {
		return nil
	}
	scope := param{name: "scope", description: "What the client needs: repository:<name>:<action>[,<action>] (repeatable). " +
		"The token grants only what lies in the deployment's repository prefix, with the actions the token allows; the rest is left out.",
		schema: obj{"type": "array", "items": obj{"type": "string"}}}
	return []route{
		{method: http.MethodGet, path: RealmPath, public: true, serve: (*handler).serveRealm, op: "registry_token",
			summary: "The token endpoint (realm) of an external registry: HTTP basic auth with a push or pull token as the password " +
				"(any user name) answers a short-lived JWT for the registry, scoped to the deployment's repository prefix",
			description: "Docker Registry v2 token authentication. The registry (for example CNCF Distribution with auth: token) " +
				"names this URL as its realm and trusts the key of GET " + RealmJWKSPath + ". 401 with WWW-Authenticate: Basic " +
				"for missing or bad credentials (unknown, expired, or of a deleted deployment); 400 for another service.",
			query:  []param{qStr("service", "The registry's service name (its auth.token.service); default the server's."), scope, qStr("account", "The user name; ignored.")},
			status: http.StatusOK, resp: registryTokenAnswer{}, errors: []int{http.StatusBadRequest, http.StatusUnauthorized}, errBody: registryErrors{}},
		{method: http.MethodPost, path: RealmPath, public: true, serve: (*handler).serveRealm, op: "registry_oauth_token",
			summary: "The realm's OAuth2 password grant (containerd asks this first): the push or pull token as password; answers as GET does",
			form:    registryTokenRequest{}, status: http.StatusOK, resp: registryTokenAnswer{}, errors: []int{http.StatusBadRequest}, errBody: oauthTokenError{}},
		{method: http.MethodGet, path: RealmJWKSPath, public: true, serve: (*handler).serveRealm, op: "registry_jwks",
			summary: "The JSON Web Key Set of the key that signs the realm's tokens (the registry's auth.token.jwks file)",
			status:  http.StatusOK, resp: jwkSet{}},
	}
}

func (h *handler) serveRealm(c *call) (int, any, error) {
	return http.StatusOK, servedBy{h.realm}, nil
}
