package httphandler

import (
	"encoding/json"
	"errors"
	"maps"
	"mime"
	"net/http"
	"slices"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// Every endpoint decodes, calls one ControlPlane method, and returns the
// success status and body; errors go to errorReply.

// decodeRequest reads and decodes the body into v, merging its problems
// with those of the path (pathErr), so that a 422 lists both.
func (h *handler) decodeRequest(c *call, v any, optional bool, pathErr error) error {
	return h.decodeChecked(c, v, optional, pathErr, nil)
}

// decodeChecked is decodeRequest for a body the domain can check without
// writing: when members had the wrong type, validate checks what did
// decode, and its problems join the type problems, so that a 422 lists
// every problem. Nothing is written then: the caller returns the 422.
// validate's problems at or under a mistyped member are dropped (the
// member is absent to the rules, so "Field required" there would be
// wrong), as are its other errors (404, 400): the answer is the 422.
// Beyond maxProblems type problems the rules do not run.
func (h *handler) decodeChecked(c *call, v any, optional bool, pathErr error, validate func() error) error {
	err := decodeBody(c.body, v, optional) // read first, within MaxBodyBytes (body.go)
	var tp *typeProblems
	if validate != nil && errors.As(err, &tp) && tp.more == 0 {
		var ve *apierr.ValidationError
		if errors.As(validate(), &ve) {
			typed := tp.Problems[:len(tp.Problems):len(tp.Problems)]
			for _, p := range ve.Problems {
				if !under(p.Loc, typed) {
					tp.Problems = append(tp.Problems, p)
				}
			}
		}
	}
	return joinProblems(pathErr, err)
}

// under reports whether loc is the loc of one of ps, or inside one.
func under(loc []any, ps []apierr.Problem) bool {
	for _, p := range ps {
		if len(p.Loc) <= len(loc) && slices.Equal(p.Loc, loc[:len(p.Loc)]) {
			return true
		}
	}
	return false
}

// joinProblems merges validation errors into one; any other error wins.
// The count of problems left out (typeProblems) adds up.
func joinProblems(errs ...error) error {
	var ps []apierr.Problem
	more := 0
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ve *apierr.ValidationError
		if !errors.As(err, &ve) {
			return err
		}
		ps = append(ps, ve.Problems...)
		var tp *typeProblems
		if errors.As(err, &tp) {
			more += tp.more
		}
	}
	if ps == nil && more == 0 {
		return nil
	}
	if more > 0 {
		return &typeProblems{ValidationError: apierr.ValidationError{Problems: ps}, more: more}
	}
	return apierr.Validation(ps...)
}

func (h *handler) createDeployment(c *call) (int, any, error) {
	var req controlplane.CreateDeploymentRequest
	validate := func() error { return h.cp.ValidateCreateDeployment(c.r.Context(), c.tenant, &req) }
	if err := h.decodeChecked(c, &req, false, nil, validate); err != nil {
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
	v := c.deploymentID // routed by ServeHTTP
	if v == "" {
		v = c.r.PathValue("deployment_id")
	}
	id, err := pathID(v, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	// The wire JSON in one call (often an answer the ControlPlane kept
	// for the very record stored): the bytes writeJSON would send for
	// GetDeployment's result, but for the final newline.
	p := h.lineBuffer()
	*p, err = h.cp.AppendDeploymentJSON(c.r.Context(), *p, c.tenant, id)
	if err != nil {
		h.release(p)
		return 0, nil, err
	}
	return http.StatusOK, jsonLine{p}, nil
}

func (h *handler) updateDeployment(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id")
	var req controlplane.UpdateDeploymentRequest
	if isMergePatch(c.r) {
		req.Remove, req.MergeResourceSpec = mergePatchRemovals(c.body), true
	}
	if err := h.decodeChecked(c, &req, false, pathErr, h.validateUpdate(c, ids, &req)); err != nil {
		return 0, nil, err
	}
	d, err := h.cp.UpdateDeployment(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusOK, d, err
}

// isMergePatch reports whether r's body is a JSON merge patch (RFC 7396).
func isMergePatch(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/merge-patch+json"
}

// mergePatchRemovals are the removals a JSON merge patch of a deployment
// asks for (UpdateDeploymentRequest.Remove): the paths of its nulls at the
// top, in source_config and source_revision_config, and at any depth of
// source_config.resource_spec; secrets and secret_references given as []
// remove every item. Nulls elsewhere (inside agent, a secret) are values
// the checks refuse. A body that is no JSON object has none (decoding
// reports it).
func mergePatchRemovals(body []byte) []string {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	var out []string
	var walk func(prefix string, m map[string]any, deep bool)
	walk = func(prefix string, m map[string]any, deep bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			switch v := m[k].(type) {
			case nil:
				out = append(out, prefix+k)
			case []any:
				if prefix == "" && len(v) == 0 && (k == "secrets" || k == "secret_references") {
					out = append(out, k)
				}
			case map[string]any:
				switch {
				case deep, prefix == "source_config." && k == "resource_spec":
					walk(prefix+k+".", v, true)
				case prefix == "" && (k == "source_config" || k == "source_revision_config"):
					walk(k+".", v, false)
				}
			}
		}
	}
	walk("", doc, false)
	return out
}

// validateUpdate checks a PATCH body (or a new revision's) without
// writing; see decodeChecked.
func (h *handler) validateUpdate(c *call, ids []string, req *controlplane.UpdateDeploymentRequest) func() error {
	return func() error {
		if ids == nil {
			return nil // the path is already a 422
		}
		return h.cp.ValidateUpdateDeployment(c.r.Context(), c.tenant, ids[0], req)
	}
}

func (h *handler) deleteDeployment(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id")
	opts, qErr := parseDeleteDeployment(c.r.URL.RawQuery)
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.DeleteDeploymentWith(c.r.Context(), c.tenant, ids[0], opts)
}

// bulkDelete is the answer of DELETE /v2/deployments: one result per
// distinct id, in the order given.
type bulkDelete struct {
	Results []bulkDeleteResult `json:"results"`
}

// bulkDeleteResult is the outcome of one id of a bulk delete: status 204
// when it was deleted, else the status and the detail that DELETE
// /v2/deployments/{deployment_id} would answer for it (a sentence, or a
// 422's list of problems).
type bulkDeleteResult struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Detail any    `json:"detail,omitempty"`
}

// deleteDeployments answers 200 when every id was deleted, 207 when some
// were not.
func (h *handler) deleteDeployments(c *call) (int, any, error) {
	ids, opts, err := parseDeleteDeployments(c.r.URL.RawQuery)
	if err != nil {
		return 0, nil, err
	}
	res, err := h.cp.DeleteDeployments(c.r.Context(), c.tenant, ids, opts)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusOK
	out := bulkDelete{Results: make([]bulkDeleteResult, len(res))}
	for i, r := range res {
		out.Results[i] = bulkDeleteResult{ID: r.ID, Status: http.StatusNoContent}
		if r.Err == nil {
			continue
		}
		code, body, internal := errorReply(r.Err)
		if internal {
			h.logInternal(c, r.Err)
		}
		out.Results[i].Status = code
		switch b := body.(type) {
		case errorBody:
			out.Results[i].Detail = b.Detail
		case problemsBody:
			out.Results[i].Detail = b.Detail
		}
		status = http.StatusMultiStatus
	}
	return status, out, nil
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
	if err := h.decodeChecked(c, &req, true, pathErr, h.validateUpdate(c, ids, &req)); err != nil {
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
	if c.r.URL.Query().Has("wait") {
		return h.waitRevision(c, ids[0], ids[1]) // events.go
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

func (h *handler) rollback(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id")
	var req controlplane.RollbackRequest
	if err := h.decodeRequest(c, &req, true, pathErr); err != nil {
		return 0, nil, err
	}
	d, err := h.cp.Rollback(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusOK, d, err
}

func (h *handler) interruptRevision(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id", "revision_id")
	if err != nil {
		return 0, nil, err
	}
	rev, err := h.cp.InterruptRevision(c.r.Context(), c.tenant, ids[0], ids[1])
	return http.StatusOK, rev, err
}

func (h *handler) createListener(c *call) (int, any, error) {
	var req controlplane.CreateListenerRequest
	validate := func() error { return h.cp.ValidateCreateListener(c.r.Context(), c.tenant, &req) }
	if err := h.decodeChecked(c, &req, false, nil, validate); err != nil {
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
	validate := func() error {
		if pathErr != nil {
			return nil
		}
		return h.cp.ValidateUpdateListener(c.r.Context(), c.tenant, ids[0], &req)
	}
	if err := h.decodeChecked(c, &req, false, pathErr, validate); err != nil {
		return 0, nil, err
	}
	l, err := h.cp.UpdateListener(c.r.Context(), c.tenant, ids[0], &req)
	return http.StatusOK, l, err
}

func (h *handler) deleteListener(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "listener_id")
	opts, qErr := parseDeleteListener(c.r.URL.RawQuery)
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, h.cp.DeleteListenerWith(c.r.Context(), c.tenant, ids[0], opts)
}

func (h *handler) openAPI(*call) (int, any, error) {
	return http.StatusOK, rawJSON(h.openapi), nil
}
