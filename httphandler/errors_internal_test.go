package httphandler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/oauthflow"
)

// TestErrorClassServesJSONAndHTML: the JSON answers and the HTML pages
// take their statuses from one table; only a validation error differs (a
// 400 on a page a browser lands on).
func TestErrorClassServesJSONAndHTML(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("wrapped: %w", err) }
	tests := []struct {
		err        error
		json, html int
	}{
		{apierr.Validation(apierr.Problem{Loc: []any{"query", "code"}, Msg: "Field required", Type: apierr.TypeMissing}), 422, 400},
		{&statusError{status: http.StatusUnprocessableEntity, detail: "x"}, 422, 422},
		{&apierr.NotFoundError{Kind: apierr.KindOAuthProvider, ID: "p"}, 404, 404},
		{apierr.Conflictf("taken"), 409, 409},
		{apierr.InvalidStatef("busy"), 400, 400},
		{wrap(controlplane.ErrUnknownInstallState), 400, 400},
		{wrap(oauthflow.ErrUnknownState), 400, 400},
		{&oauthflow.AuthorizationError{Code: "access_denied"}, 400, 400},
		{wrap(controlplane.ErrInstallationForbidden), 403, 403},
		{wrap(controlplane.ErrGitHubUnavailable), 502, 502},
		{wrap(oauthflow.ErrExchangeFailed), 502, 502},
		{wrap(controlplane.ErrGitHubAppNotConfigured), 503, 503},
		{wrap(context.Canceled), 503, 503},
		{errors.New("disk on fire"), 500, 500},
		{wrap(apierr.ErrInvalidTenant), 500, 500},
	}
	for _, tt := range tests {
		status, _, internal := errorReply(tt.err)
		page, pageInternal := htmlStatus(tt.err)
		if status != tt.json || page != tt.html {
			t.Errorf("%v: JSON %d, page %d; want %d, %d", tt.err, status, page, tt.json, tt.html)
		}
		if internal != (tt.json == 500) || pageInternal != internal {
			t.Errorf("%v: internal %v (JSON), %v (page); want %v", tt.err, internal, pageInternal, tt.json == 500)
		}
	}
}
