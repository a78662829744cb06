package httphandler

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
)

// The GitHub integrations (wire contract section 9): GET
// /v1/integrations/github/install answers the GitHub App's installation URL
// with a state bound to the caller's tenant; GitHub sends the user back to
// GET /v1/integrations/github/setup, which takes no API key (the state is
// the proof) and records the installation once GitHub confirms that the
// user can access it. GET /v1/integrations/github lists the tenant's
// integrations. POST /v1/integrations/github registers one without asking
// GitHub, only when Options.AllowUnverifiedIntegrations is set.

// installResponse is the answer of GET /v1/integrations/github/install.
type installResponse struct {
	// URL is the GitHub App's installation page; send the user there.
	URL string `json:"url"`
}

// detailUnverifiedDisabled answers POST /v1/integrations/github when
// Options.AllowUnverifiedIntegrations is false.
const detailUnverifiedDisabled = "Registering a GitHub installation without GitHub's confirmation is not enabled on this server: " +
	"install the GitHub App from the URL that GET /v1/integrations/github/install answers."

// The setup page's titles.
const (
	titleInstalled     = "GitHub App installed"
	titleInstallFailed = "GitHub App installation failed"
	installAgain       = " Close this window and start the installation again from the application."
)

func (h *handler) createIntegration(c *call) (int, any, error) {
	var req controlplane.CreateIntegrationRequest
	if err := h.decodeRequest(c, &req, false, nil); err != nil {
		return 0, nil, err
	}
	in, err := h.cp.CreateIntegration(c.r.Context(), c.tenant, &req)
	return http.StatusCreated, in, err
}

func (h *handler) listIntegrations(c *call) (int, any, error) {
	list, err := h.cp.ListIntegrations(c.r.Context(), c.tenant)
	return http.StatusOK, list, err
}

func (h *handler) startGitHubInstall(c *call) (int, any, error) {
	u, err := h.cp.StartGitHubInstall(c.r.Context(), c.tenant)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, installResponse{URL: u}, nil
}

// githubSetup is GitHub's setup redirect. It needs no credentials (the
// browser holds none): the state is the proof. Every outcome is an HTML
// page.
func (h *handler) githubSetup(c *call) (int, any, error) {
	if c.r.Method == http.MethodHead {
		// HEAD is safe: a link checker must not spend the state.
		return http.StatusOK, htmlPage{titleInstalled, "Open this address in a browser to finish the installation."}, nil
	}
	q := c.r.URL.Query()
	s := &controlplane.GitHubSetup{SetupAction: q.Get("setup_action"), Code: q.Get("code"), State: q.Get("state")}
	if id, err := strconv.ParseInt(q.Get("installation_id"), 10, 64); err == nil {
		s.InstallationID = id
	}
	in, err := h.cp.CompleteGitHubInstall(c.r.Context(), s)
	if err == nil {
		return http.StatusOK, htmlPage{titleInstalled, "The GitHub installation of " + in.Name + " (installation " +
			strconv.FormatInt(in.InstallationID, 10) + ") is integration " + in.ID +
			" of your workspace. You can close this window and return to the application."}, nil
	}
	status, internal := htmlStatus(err)
	if internal {
		h.logInternal(c, err)
		return status, htmlPage{titleInstallFailed, "Something went wrong on the server." + installAgain}, nil
	}
	return status, htmlPage{titleInstallFailed, installFailure(err)}, nil
}

// installFailure is the sentence of the setup page for an error that is
// not internal.
func installFailure(err error) string {
	var ve *apierr.ValidationError
	switch {
	case errors.As(err, &ve):
		msg := "GitHub's redirect is incomplete."
		if len(ve.Problems) > 0 {
			p := ve.Problems[0]
			msg = p.Msg + "."
			if len(p.Loc) == 2 {
				msg = fmt.Sprint(p.Loc[1], ": ", msg)
			}
		}
		return msg + installAgain
	case errors.Is(err, apierr.ErrConflict):
		return "This GitHub installation is already registered by another workspace; an installation belongs to one workspace."
	case errors.Is(err, controlplane.ErrGitHubAppNotConfigured):
		return err.Error()
	case errors.Is(err, controlplane.ErrUnknownInstallState), errors.Is(err, controlplane.ErrInstallationForbidden),
		errors.Is(err, controlplane.ErrGitHubUnavailable):
		return err.Error() + installAgain
	}
	return "Something went wrong on the server." + installAgain
}
