package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storebolt"
)

// benchDeployments is the tenant's size in BenchmarkDeploymentsPage.
const benchDeployments = 100_000

var (
	benchOnce sync.Once
	benchEnv  *env
	benchCook string
)

// BenchmarkDeploymentsPage measures the server time of the dashboard's
// deployments page (25 deployments, newest first, rendered as HTML) in a
// tenant of 100,000 deployments in storebolt, against GET /v2/deployments?limit=25, the
// same page as JSON, both through the handler's ServeHTTP (no network).
// The candidate's x-baseline is JSON's time over the page's.
func BenchmarkDeploymentsPage(b *testing.B) {
	benchOnce.Do(func() {
		st, err := storebolt.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		e := newEnv(b, &envOptions{paused: true, store: st})
		ctx := context.Background()
		// 64 writers, so that storebolt commits them in groups.
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < benchDeployments; i += 64 {
					if _, err := e.cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{
						Name: new(fmt.Sprintf("agent-%06d", i)), Source: new(controlplane.SourceExternalDocker),
						SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("docker.io/acme/agent:1")},
					}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		br := e.browser(b)
		br.mustSignIn(keyA, "")
		u, _ := url.Parse(e.srv.URL + "/ui/")
		for _, c := range br.c.Jar.Cookies(u) {
			if c.Name == "dp_session" {
				benchCook = c.Name + "=" + c.Value
			}
		}
		benchEnv = e
	})
	serve := func(b *testing.B, req *http.Request, want string) {
		for b.Loop() {
			w := httptest.NewRecorder()
			benchEnv.api.ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
				b.Fatalf("status %d", w.Code)
			}
		}
	}
	// The newest deployment is one of the last 64 created.
	newest := fmt.Sprintf("agent-%04d", (benchDeployments-1)/100)
	benchcmp.CompareNamed(b, "json", func(b *testing.B) {
		req := httptest.NewRequest(http.MethodGet, "/v2/deployments?limit=25", nil)
		req.Header.Set("X-Api-Key", keyA)
		serve(b, req, newest)
	}, "page", func(b *testing.B) {
		req := httptest.NewRequest(http.MethodGet, "/ui/deployments", nil)
		req.Header.Set("Cookie", benchCook)
		serve(b, req, newest)
	})
}
