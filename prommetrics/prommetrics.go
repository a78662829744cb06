package prommetrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/deployplane/deployplane/controlplane"
)

// DefaultNamespace prefixes every metric name when Options.Namespace is
// empty.
const DefaultNamespace = "deployplane"

// pendingWorkTimeout bounds the read of the pending work at each scrape.
const pendingWorkTimeout = 5 * time.Second

// Options configure New. A nil *Options, and every zero field, means the
// default.
type Options struct {
	// Namespace prefixes every metric name ("deployplane_http_requests_total").
	// Default DefaultNamespace.
	Namespace string
	// NoRuntimeMetrics leaves out the Go runtime's and the process's
	// metrics (go_*, process_*), which are registered by default.
	NoRuntimeMetrics bool
	// Logger receives the errors of a scrape (a collector that failed, such
	// as the pending work when the store does not answer), at Warn; the
	// scrape still answers every other metric. Default: discard.
	Logger *slog.Logger
}

// Metrics is the Prometheus face of a deployplane server. It implements
// httphandler.Metrics (ObserveRequest, and ServeHTTP for GET /metrics) and
// controlplane.Observer (RevisionTransition, LeaseTakenOver,
// DeployerCall); ObserveCommit is the OnCommit of storebolt.Options and
// storepg.Options; WatchPendingWork adds the gauges of a ControlPlane's
// pending work. Every metric lives in the Metrics' own registry (never
// Prometheus's global one), so several Metrics, in one process or one
// test binary, never collide. It is safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	ns      string

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	transitions     *prometheus.CounterVec
	stepDuration    *prometheus.HistogramVec
	deployerCalls   *prometheus.HistogramVec
	takeovers       prometheus.Counter
	commitDuration  *prometheus.HistogramVec
	commitBatch     prometheus.Histogram

	// statuses holds the label of every HTTP status 100 to 599, so that
	// observing a request allocates no string.
	statuses [600]string
}

// New returns Metrics with every metric registered in a new registry.
func New(opts *Options) *Metrics {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ns := o.Namespace
	m := &Metrics{reg: prometheus.NewRegistry(), ns: ns}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "http", Name: "requests_total",
		Help: "HTTP requests answered, by route pattern (\"unmatched\" for none), method and status."},
		[]string{"route", "method", "status"})
	m.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "http",
		Name: "request_duration_seconds", Help: "Time from a request's arrival in the handler to its answer written, by route pattern and method.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
		[]string{"route", "method"})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: "revision",
		Name: "transitions_total", Help: "Revision status changes the reconcile loop recorded, by status left and status reached."},
		[]string{"from", "to"})
	m.stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "deployer",
		Name: "step_duration_seconds", Help: "Time a Deployer worked in a revision status before reporting the next one, by the status left.",
		Buckets: []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}},
		[]string{"status"})
	m.deployerCalls = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "deployer",
		Name: "call_duration_seconds", Help: "Duration of Deployer calls, by op (deploy, teardown) and result (ok, error).",
		Buckets: []float64{.01, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}},
		[]string{"op", "result"})
	m.takeovers = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: "lease", Name: "takeovers_total",
		Help: "Units of work claimed after the lease of another claim expired (a worker that stopped renewing it)."})
	m.commitDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: "store",
		Name: "commit_duration_seconds", Help: "Latency of store commits (write and fsync, or PostgreSQL's COMMIT), by result (ok, error).",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}},
		[]string{"result"})
	m.commitBatch = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: "store",
		Name: "commit_batch_size", Help: "Updates committed together in one store commit (storebolt's group commit, storepg's combined Updates).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}})
	m.reg.MustRegister(m.requests, m.requestDuration, m.transitions, m.stepDuration, m.deployerCalls, m.takeovers,
		m.commitDuration, m.commitBatch)
	if !o.NoRuntimeMetrics {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for i := 100; i < len(m.statuses); i++ {
		m.statuses[i] = strconv.Itoa(i)
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{o.Logger},
		ErrorHandling: promhttp.ContinueOnError,
	})
	return m
}

// Registry is the Metrics' own registry, for a program that adds metrics
// of its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ServeHTTP answers a scrape in the format the client asks for (the text
// format by default), gzipped when it accepts gzip.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// ObserveRequest counts a request by route pattern, method and status, and
// records its duration by route pattern and method. Methods other than the
// standard ones are counted as "OTHER", and the empty route as
// "unmatched", so that clients cannot multiply the series.
func (m *Metrics) ObserveRequest(route, method string, status int, took time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	method = methodLabel(method)
	st := "other"
	if status >= 100 && status < len(m.statuses) {
		st = m.statuses[status]
	}
	m.requests.WithLabelValues(route, method, st).Inc()
	m.requestDuration.WithLabelValues(route, method).Observe(took.Seconds())
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "OTHER"
}

// RevisionTransition counts a revision's status change and records how
// long the Deployer worked in the status it left.
func (m *Metrics) RevisionTransition(t controlplane.Transition) {
	m.transitions.WithLabelValues(string(t.From), string(t.To)).Inc()
	m.stepDuration.WithLabelValues(string(t.From)).Observe(t.Step.Seconds())
}

// LeaseTakenOver counts a takeover.
func (m *Metrics) LeaseTakenOver() { m.takeovers.Inc() }

// DeployerCall records a Deployer call's duration by op and result.
func (m *Metrics) DeployerCall(op string, took time.Duration, err error) {
	m.deployerCalls.WithLabelValues(op, result(err)).Observe(took.Seconds())
}

// ObserveCommit records a store commit: its latency by result, and, for a
// successful one, how many Updates it committed. It is the OnCommit of
// storebolt.Options and storepg.Options.
func (m *Metrics) ObserveCommit(updates int, took time.Duration, err error) {
	m.commitDuration.WithLabelValues(result(err)).Observe(took.Seconds())
	if err == nil {
		m.commitBatch.Observe(float64(updates))
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// WatchPendingWork registers the gauges of cp's pending work, read from
// the store at each scrape (controlplane.ControlPlane.PendingWork, bounded
// by a 5 s timeout): revisions_waiting, revisions_in_progress,
// deletions_waiting and deletions_in_progress. Over a store shared by
// replicas every replica reports the same counts. Call it once; a second
// call for the same Metrics returns an error.
func (m *Metrics) WatchPendingWork(cp *controlplane.ControlPlane) error {
	c := &pendingCollector{cp: cp}
	for i, name := range []string{"revisions_waiting", "revisions_in_progress", "deletions_waiting", "deletions_in_progress"} {
		c.descs[i] = prometheus.NewDesc(prometheus.BuildFQName(m.ns, "", name), pendingHelp[i], nil, nil)
	}
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("prommetrics: WatchPendingWork: %w", err)
	}
	return nil
}

var pendingHelp = [4]string{
	"Revisions not yet terminal that no worker holds (new, given back, or whose lease expired).",
	"Revisions not yet terminal that a worker holds, or that a Deployer asked to look at again later.",
	"Deployments AWAITING_DELETE whose teardown no worker holds.",
	"Deployments AWAITING_DELETE whose teardown a worker holds.",
}

// pendingCollector reads a ControlPlane's pending work at each scrape.
type pendingCollector struct {
	cp    *controlplane.ControlPlane
	descs [4]*prometheus.Desc
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), pendingWorkTimeout)
	defer cancel()
	pw, err := c.cp.PendingWork(ctx)
	if err != nil {
		for _, d := range c.descs {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for i, v := range []int{pw.RevisionsWaiting, pw.RevisionsInProgress, pw.DeletionsWaiting, pw.DeletionsInProgress} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, float64(v))
	}
}

// WatchClusters registers the gauge cluster_up{cluster}: 1 for each
// Kubernetes cluster of cp's deployer that answers, 0 for one that does
// not, asked at each scrape (controlplane.ControlPlane.ClusterHealth,
// bounded by a 5 s timeout). No cluster, no series. Call it once; a second
// call for the same Metrics returns an error.
func (m *Metrics) WatchClusters(cp *controlplane.ControlPlane) error {
	c := &clusterCollector{cp: cp, desc: prometheus.NewDesc(prometheus.BuildFQName(m.ns, "", "cluster_up"),
		"Whether a Kubernetes cluster the deployer drives answers (1) or not (0), by cluster (kubeconfig context).",
		[]string{"cluster"}, nil)}
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("prommetrics: WatchClusters: %w", err)
	}
	return nil
}

// clusterCollector asks a ControlPlane's clusters at each scrape.
type clusterCollector struct {
	cp   *controlplane.ControlPlane
	desc *prometheus.Desc
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), pendingWorkTimeout)
	defer cancel()
	for name, err := range c.cp.ClusterHealth(ctx) {
		up := 1.0
		if err != nil {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, up, name)
	}
}

// slogPrinter is promhttp's error log over slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("prommetrics: scrape", "err", fmt.Sprint(v...)) }
