package httphandler

import "net/http"

// freeCountBody is the answer of GET /v2/deployments/free-count.
type freeCountBody struct {
	// Count is how many deployments of the tenant are of a free type
	// (dev_free, dev_free_zero), those being deleted included.
	Count int `json:"count"`
}

func (h *handler) freeDeploymentCount(c *call) (int, any, error) {
	n, err := h.cp.CountFreeDeployments(c.r.Context(), c.tenant)
	return http.StatusOK, freeCountBody{Count: n}, err
}
