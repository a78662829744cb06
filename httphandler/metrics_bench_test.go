package httphandler_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/prommetrics"
	"github.com/deployplane/deployplane/storemem"
)

// BenchmarkGetDeploymentMetrics: what Options.Metrics (package
// prommetrics) adds to GET /v2/deployments/{id} from 64 concurrent
// keep-alive connections, both servers with the request log on (JSON into
// io.Discard, as in BenchmarkGetDeploymentParallel), in alternating rounds
// (benchcmp.Interleave): baseline without metrics, candidate with them.
// Goal: 0.95x, metrics cost at most 5% of a GET.
func BenchmarkGetDeploymentMetrics(b *testing.B) {
	for _, sb := range benchStores() {
		b.Run(sb.name, func(b *testing.B) {
			cp, d := benchDeployment(b, sb)
			path := "/v2/deployments/" + d.ID
			newAPI := func(m httphandler.Metrics) string {
				h := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b), Metrics: m,
					Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
				b.Cleanup(func() { _ = h.Close() })
				srv, _ := benchServer(b, h)
				return srv.URL
			}
			getOff := getter(b, newAPI(nil)+path)
			getOn := getter(b, newAPI(prommetrics.New(nil))+path)
			getOff(getClients) // open the connections
			getOn(getClients)
			benchcmp.Interleave(b, getOff, getOn)
		})
	}
}

// BenchmarkGetDeploymentMetricsInProcess: the same without a network, where
// the handler's own cost is all there is to compare: ServeHTTP on a
// recorder without metrics (baseline) and with them (candidate), no log.
func BenchmarkGetDeploymentMetricsInProcess(b *testing.B) {
	cp := controlplane.New(storemem.New(), nil)
	d, err := cp.CreateDeployment(context.Background(), tenantA, &controlplane.CreateDeploymentRequest{
		Name: new("agent"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example/agent:1")},
	})
	if err != nil {
		b.Fatal(err)
	}
	off := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b)})
	on := httphandler.New(cp, &httphandler.Options{Authenticator: keyTable(b), Metrics: prommetrics.New(nil)})
	req := httptest.NewRequest("GET", "/v2/deployments/"+d.ID, nil)
	req.Header.Set("X-Api-Key", keyA)
	serve := func(h *httphandler.Handler) func(n int) {
		return func(n int) {
			for range n {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		}
	}
	benchcmp.Interleave(b, serve(off), serve(on))
}
