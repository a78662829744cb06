package httphandler

import (
	"context"
	"net/http"
)

// Uploads issues the signed upload URLs of internal_source deployments
// and receives their PUTs (wire contract section 10); package uploads'
// Service implements it, cmd/deployplane wires it in.
type Uploads interface {
	// UploadURL issues an upload for the tenant's deployment and returns
	// its signed URL and its object_path; errors are the control plane's
	// (apierr's: 404, 400 for another source).
	UploadURL(ctx context.Context, tenant, deploymentID string) (uploadURL, objectPath string, err error)
	// ServeHTTP serves the PUT of an upload URL (below UploadPath); the
	// URL's signature is the proof, no API key is asked. It writes its own
	// answers, JSON {"detail": ...} on errors.
	http.Handler
}

// UploadPath is the path below which the PUTs of upload URLs are routed
// to Options.Uploads: UploadPath/{tenant}/{deployment_id}/{upload_id}
// (package uploads' PathPrefix).
const UploadPath = "/v2/uploads"

// uploadURLResponse is the answer of POST /v2/deployments/{id}/upload-url.
type uploadURLResponse struct {
	UploadURL  string `json:"upload_url"`
	ObjectPath string `json:"object_path"`
}

// uploadRoutes are the routes of Options.Uploads (none without it).
func (h *handler) uploadRoutes() []route {
	if h.uploads == nil {
		return nil
	}
	return []route{
		{method: http.MethodPost, path: "/v2/deployments/{deployment_id}/upload-url", serve: (*handler).uploadURL, op: "create_upload_url",
			summary: "A signed URL to PUT the source tarball of an internal_source deployment to (single use, valid 15 minutes, " +
				"at most 200 MiB); name its object_path as source_revision_config.source_tarball_path in a PATCH",
			status: http.StatusOK, resp: uploadURLResponse{}, errors: []int{http.StatusBadRequest}},
		{method: http.MethodPut, path: UploadPath + "/{tenant}/{deployment_id}/{upload_id}", public: true, upload: true, serve: (*handler).receiveUpload,
			op: "upload_source_tarball",
			summary: "Receive a source tarball (the upload_url of POST .../upload-url; no API key: its signature is the proof). " +
				"403: bad or expired signature; 409: used already; 413: larger than 200 MiB or X-Goog-Content-Length-Range",
			status: http.StatusOK, errors: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusConflict,
				http.StatusRequestEntityTooLarge}},
	}
}

func (h *handler) uploadURL(c *call) (int, any, error) {
	ids, err := pathIDs(c.r, "deployment_id")
	if err != nil {
		return 0, nil, err
	}
	u, p, err := h.uploads.UploadURL(c.r.Context(), c.tenant, ids[0])
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, uploadURLResponse{UploadURL: u, ObjectPath: p}, nil
}

func (h *handler) receiveUpload(c *call) (int, any, error) {
	return http.StatusOK, servedBy{h.uploads}, nil
}
