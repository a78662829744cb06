// Package prommetrics exports a deployplane server's metrics in the
// Prometheus format, through github.com/prometheus/client_golang, in a
// registry of its own (never the global one).
//
// One *Metrics is wired into every part that observes something; none of
// those parts imports Prometheus:
//
//	m := prommetrics.New(nil)
//	st, _ := storebolt.Open(path, &storebolt.Options{OnCommit: m.ObserveCommit}) // or storepg.Options.OnCommit
//	cp := controlplane.New(st, &controlplane.Options{Observer: m})
//	_ = m.WatchPendingWork(cp)
//	api := httphandler.New(cp, &httphandler.Options{Metrics: m, MetricsKey: key}) // serves GET /metrics
//
// # Metrics
//
// With the default namespace "deployplane":
//
//	deployplane_http_requests_total{route,method,status}            counter
//	deployplane_http_request_duration_seconds{route,method}         histogram
//	deployplane_revision_transitions_total{from,to}                 counter
//	deployplane_deployer_step_duration_seconds{status}              histogram
//	deployplane_deployer_call_duration_seconds{op,result}           histogram
//	deployplane_lease_takeovers_total                               counter
//	deployplane_revisions_waiting, deployplane_revisions_in_progress,
//	deployplane_deletions_waiting, deployplane_deletions_in_progress gauge
//	deployplane_store_commit_duration_seconds{result}               histogram
//	deployplane_store_commit_batch_size                             histogram
//	deployplane_cluster_up{cluster}                                 gauge
//
// and the Go runtime's and the process's (go_*, process_*) unless
// Options.NoRuntimeMetrics.
//
// route is the pattern of the route that served the request
// ("/v2/deployments/{deployment_id}"), never a path with ids in it, or
// "unmatched" (unknown paths, 405s, URLs or headers too large); method is
// one of the standard methods or "OTHER"; status is the HTTP status. So
// the series are bounded whatever clients send: about 40 routes, a few
// methods and statuses.
//
// A transition is a revision status change the reconcile loop recorded;
// the step duration is how long the Deployer worked in the status it left.
// Deployer calls are each Deploy and Teardown, with result ok or error. A
// takeover is work claimed after another worker's lease expired. The four
// gauges count pending work at each scrape, from the store
// (controlplane.ControlPlane.PendingWork), so every replica over one
// database reports the same numbers. Store commits are storebolt's group
// commits or storepg's COMMITs; the batch size is how many Updates one
// commit holds.
//
// cluster_up (WatchClusters) is 1 for each Kubernetes cluster of the
// deployer that answers and 0 for one that does not, asked at each scrape;
// a cluster that does not answer does not make GET /readyz fail.
//
// Design notes: docs/design-notes.md, "prommetrics".
package prommetrics
