package httphandler

import (
	"errors"
	"net/http"

	"github.com/deployplane/deployplane/controlplane"
)

// Every endpoint decodes, calls one ControlPlane method, and returns the
// success status and body; errors go to errorReply.

// decodeRequest reads and decodes the body into v, merging its problems
// with those of the path (pathErr), so that a 422 lists both.
func (h *handler) decodeRequest(c *call, v any, optional bool, pathErr error) error {
	body, err := readBody(c.w, c.r, h.maxBody)
	if err != nil {
		return err
	}
	return joinProblems(pathErr, decodeBody(body, v, optional))
}

// joinProblems merges validation errors into one; any other error wins.
func joinProblems(errs ...error) error {
	var ps []controlplane.Problem
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ve *controlplane.ValidationError
		if !errors.As(err, &ve) {
			return err
		}
		ps = append(ps, ve.Problems...)
	}
	if ps == nil {
		return nil
	}
	return validationError(ps...)
}

func (h *handler) createDeployment(c *call) (int, any, error) {
	var req controlplane.CreateDeploymentRequest
	if err := h.decodeRequest(c, &req, false, nil); err != nil {
		return 0, nil, err
	}
	d, err := h.cp.CreateDeployment(c.r.Context(), c.tenant, &req)
	return http.StatusCreated, d, err
}

func (h *handler) listDeployments(c *call) (int, any, error) {
	q, err := parseListDeployments(c.r.URL.RawQuery, h.cp.Limits())
	if err != nil {
		return 0, nil, err
	}
	p, err := h.cp.ListDeployments(c.r.Context(), c.tenant, q)
	return http.StatusOK, p, err
}

func (h *handler) getDeployment(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	// The stored wire JSON, not decoded and encoded again: the bytes
	// writeJSON would send for GetDeployment's result, newline included.
	b, err := h.cp.GetDeploymentJSON(c.r.Context(), c.tenant, ids[0])
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rawJSON(append(b, '\n')), nil
}

func (h *handler) updateDeployment(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id")
	var req controlplane.UpdateDeploymentRequest
	if err := h.decodeRequest(c, &req, false, pathErr); err != nil {
		return 0, nil, err
	}
	d, err := h.cp.UpdateDeployment(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusOK, d, err
}

func (h *handler) deleteDeployment(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.DeleteDeployment(c.r.Context(), c.tenant, ids[0])
}

func (h *handler) listRevisions(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id")
	q, qErr := parseListRevisions(c.r.URL.RawQuery, h.cp.Limits())
	if pathErr != nil && qErr == nil {
		qErr = q.ValidateWith(h.cp.Limits()) // list the query's problems with the path's
	}
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	p, err := h.cp.ListRevisions(c.r.Context(), c.tenant, ids[0], q)
	return http.StatusOK, p, err
}

func (h *handler) createRevision(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id")
	var req controlplane.UpdateDeploymentRequest
	if err := h.decodeRequest(c, &req, true, pathErr); err != nil {
		return 0, nil, err
	}
	rev, err := h.cp.CreateRevision(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusCreated, rev, err
}

func (h *handler) getRevision(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id", "revision_id")
	if err != nil {
		return 0, nil, err
	}
	rev, err := h.cp.GetRevision(c.r.Context(), c.tenant, ids[0], ids[1])
	return http.StatusOK, rev, err
}

func (h *handler) redeploy(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id", "revision_id")
	if err != nil {
		return 0, nil, err
	}
	d, err := h.cp.RedeployRevision(c.r.Context(), c.tenant, ids[0], ids[1])
	return http.StatusOK, d, err
}

func (h *handler) createListener(c *call) (int, any, error) {
	var req controlplane.CreateListenerRequest
	if err := h.decodeRequest(c, &req, false, nil); err != nil {
		return 0, nil, err
	}
	l, err := h.cp.CreateListener(c.r.Context(), c.tenant, &req)
	return http.StatusCreated, l, err
}

func (h *handler) listListeners(c *call) (int, any, error) {
	q, err := parseListListeners(c.r.URL.RawQuery, h.cp.Limits())
	if err != nil {
		return 0, nil, err
	}
	p, err := h.cp.ListListeners(c.r.Context(), c.tenant, q)
	return http.StatusOK, p, err
}

func (h *handler) getListener(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "listener_id")
	if err != nil {
		return 0, nil, err
	}
	l, err := h.cp.GetListener(c.r.Context(), c.tenant, ids[0])
	return http.StatusOK, l, err
}

func (h *handler) updateListener(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "listener_id")
	var req controlplane.UpdateListenerRequest
	if err := h.decodeRequest(c, &req, false, pathErr); err != nil {
		return 0, nil, err
	}
	l, err := h.cp.UpdateListener(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusOK, l, err
}

func (h *handler) deleteListener(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "listener_id")
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.DeleteListener(c.r.Context(), c.tenant, ids[0])
}

func (h *handler) openAPI(*call) (int, any, error) {
	return http.StatusOK, rawJSON(h.openapi), nil
}
