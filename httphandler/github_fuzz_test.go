package httphandler_test

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// FuzzGitHubSetupQuery sends arbitrary queries to GitHub's setup redirect,
// GET /v1/integrations/github/setup: every answer is an HTML page with one
// of the route's statuses, never a 5xx. The seed corpus runs in every
// `go test`.
func FuzzGitHubSetupQuery(f *testing.F) {
	for _, s := range []string{
		"", "installation_id=7&setup_action=install&code=c&state=s", "installation_id=-1&state=s&code=c",
		"installation_id=99999999999999999999&code=c&state=s", "setup_action=request&state=s", "state=%zz",
		"installation_id=7&installation_id=8&code=c&state=s", "code=" + strings.Repeat("x", 5000) + "&state=s&installation_id=1",
		"state=\x00&code=\xff&installation_id=0x10",
	} {
		f.Add(s)
	}
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: stubApp{}, GitHubInstallStates: githubapp.NewStates(storemem.New(), nil)})
	h := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(f)})
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/v1/integrations/github/setup", nil)
		req.URL.RawQuery = query
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if !slices.Contains([]int{400, 403, 409}, w.Code) || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Fatalf("?%q: %d %s %s", query, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
	})
}
