package httphandler

import (
	"net/http"

	"github.com/deployplane/deployplane/apierr"
)

// RegistryURLs names the built-in registry's registry_url of a deployment
// (host:port/<repository prefix>, wire contract section 10); package
// registry's *Registry implements it.
type RegistryURLs interface {
	URL(deploymentID string) string
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
	tok, err := h.cp.IssuePushToken(c.r.Context(), c.tenant, ids[0])
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, pushTokenResponse{Token: tok.Token, RegistryURL: h.registry.URL(ids[0])}, nil
}
