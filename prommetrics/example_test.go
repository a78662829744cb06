package prommetrics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/prommetrics"
	"github.com/deployplane/deployplane/storemem"
)

// Example wires Metrics into a ControlPlane and the HTTP API, and scrapes
// GET /metrics.
func Example() {
	m := prommetrics.New(&prommetrics.Options{NoRuntimeMetrics: true})
	cp := controlplane.New(storemem.New(), &controlplane.Options{Observer: m})
	if err := m.WatchPendingWork(cp); err != nil {
		panic(err)
	}
	// cluster_up{cluster}: one series per cluster of the deployer Run
	// drives (deployroute.Router's), none here.
	if err := m.WatchClusters(cp); err != nil {
		panic(err)
	}
	api := httphandler.New(cp, &httphandler.Options{Metrics: m, MetricsKey: "s3cret"})
	srv := httptest.NewServer(api)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	m.RevisionTransition(controlplane.Transition{From: controlplane.RevisionCreating, To: controlplane.RevisionQueued, Step: time.Second})

	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "deployplane_http_requests_total") || strings.HasPrefix(line, "deployplane_revision") {
			fmt.Print(line)
		}
	}
	// Output:
	// deployplane_http_requests_total{method="GET",route="/healthz",status="200"} 1
	// deployplane_revision_transitions_total{from="CREATING",to="QUEUED"} 1
	// deployplane_revisions_in_progress 0
	// deployplane_revisions_waiting 0
}
