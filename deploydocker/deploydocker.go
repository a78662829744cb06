package deploydocker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of Options.
const (
	DefaultNetwork         = "bridge"
	DefaultServerPort      = 8000
	DefaultHealthPath      = "/ok"
	DefaultPortEnv         = "PORT"
	DefaultInstance        = "deployplane"
	DefaultHealthTimeout   = 3 * time.Minute
	DefaultHealthInterval  = 250 * time.Millisecond
	DefaultDrainTimeout    = 30 * time.Second
	DefaultStopTimeout     = 10 * time.Second
	DefaultDatabaseTimeout = 3 * time.Minute
	DefaultFirstPort       = 20000
	DefaultLastPort        = 29999
)

// DefaultPullRetryTimeout is the default of Options.PullRetryTimeout.
const DefaultPullRetryTimeout = 3 * time.Minute

// Label keys set on every container the Deployer creates. A container
// belongs to this Deployer when its LabelInstance is Options.Instance.
const (
	LabelInstance   = "io.deployplane.instance"
	LabelTenant     = "io.deployplane.tenant"
	LabelDeployment = "io.deployplane.deployment"
	LabelRevision   = "io.deployplane.revision"
	// LabelRevisionCreated is the revision's created_at in Unix
	// microseconds: which of two revisions is older, without the store.
	LabelRevisionCreated = "io.deployplane.revision-created"
	LabelReplica         = "io.deployplane.replica"
	// LabelPort is the port the container's server listens on (host
	// network) or answers on (other networks).
	LabelPort = "io.deployplane.port"
)

// Builder builds the image of a revision that has no image yet (github,
// internal_source). It is called in BUILDING, may be called again for the
// same revision after a restart, and returns the image reference the
// Docker daemon can run (local or pullable) and the commit it built.
// log receives the build's output, one line at a time; the lines become
// the revision's build log. A failed build's error text becomes the
// revision's status_message as it is, so it should say what failed
// (imagebuild's say "clone failed: ..." or "build failed: ...").
// *imagebuild.Builder implements it.
type Builder interface {
	Build(ctx context.Context, w *controlplane.Work, log func(line string)) (image, commitSHA string, err error)
}

// ImageRemover is implemented by a Builder that can remove the images it
// built for a deployment (*imagebuild.Builder does): Teardown calls it
// once the deployment's containers are gone.
type ImageRemover interface {
	RemoveImages(ctx context.Context, tenant, deploymentID string) error
}

// State is what the Deployer reads of the control plane's stored state,
// and where a running container's output goes once its revision is
// DEPLOYED: *controlplane.ControlPlane implements it. It is used to tell a
// revision superseded by a newer active one, by Reconcile, and to write
// the deploy log of a revision outside its Deploy (AppendLogs, ListLogs).
type State interface {
	GetDeployment(ctx context.Context, tenant, id string) (*controlplane.Deployment, error)
	GetRevision(ctx context.Context, tenant, deploymentID, revisionID string) (*controlplane.Revision, error)
	AppendLogs(ctx context.Context, tenant, deploymentID, revisionID string, lines ...controlplane.LogLine) error
	// ListLogs tells where the deploy log of a revision whose containers
	// are adopted ends, so that their output is followed from there.
	ListLogs(ctx context.Context, tenant, deploymentID, revisionID string, q *controlplane.LogQuery) (*controlplane.LogPage, error)
}

// Credentials are registry credentials for a pull.
type Credentials struct {
	Username string
	Password string
	// IdentityToken, when set, is used instead of Username and Password.
	IdentityToken string
}

// Options configure a Deployer. The zero value (or nil) means defaults.
type Options struct {
	// Client is the Docker Engine API client. Nil: one is made for Host
	// (client.New with API version negotiation); Close closes it.
	Client *client.Client
	// Host is the Docker daemon's address when Client is nil:
	// unix:///path/docker.sock or tcp://host:port. "" means DOCKER_HOST,
	// else the standard socket (unix:///var/run/docker.sock).
	Host string
	// Network is the Docker network containers join: DefaultNetwork,
	// Docker's default "bridge" (containers reach neither what listens
	// on the daemon host's loopback nor each other's loopback; no DNS by
	// container name, so not with Services), the name of a network of
	// the daemon's, or "host" (the daemon host's own network, its
	// loopback services included: this control plane's API, metrics and
	// registry; for daemons without a bridge network). On any network but
	// host the control plane reaches containers at their address on it.
	// "none" and "container:..." are refused: the proxy could not reach
	// the containers. See the package documentation.
	Network string
	// ProxyURL is the base URL where the handler of Proxy is served, as
	// clients reach it (e.g. http://127.0.0.1:8001). A deployment's url
	// is ProxyURL + "/" + its id. Required for Deploy.
	ProxyURL string
	// ServerPort is the port the server listens on inside a container on
	// a network other than host (DefaultServerPort, 8000).
	ServerPort int
	// SecretRefs maps the secret references a revision may name
	// (controlplane.SecretReference), by "secret_name/secret_key"
	// (SecretRefKey), to where the value is read when a container starts:
	// "file:PATH" (the file's content) or "env:NAME" (a variable of the
	// deployer's own environment). A reference it maps nothing to fails
	// the revision; SecretReferenceProblem tells a control plane so
	// before.
	SecretRefs map[string]string
	// PortEnv names the environment variable that tells a container which
	// port to listen on (DefaultPortEnv, "PORT"; the LangGraph API server
	// reads it).
	PortEnv string
	// FirstPort and LastPort bound the host ports given to containers on
	// the host network (default 20000..29999, below Linux's ephemeral
	// range).
	FirstPort, LastPort int
	// HealthPath is the path of the health check (DefaultHealthPath).
	HealthPath string
	// HealthTimeout is how long a new container has to answer its health
	// check with 200 (DefaultHealthTimeout); then the revision is
	// DEPLOY_FAILED. An answer that will not change (a 4xx, the container
	// exited) fails it at once (see the package documentation).
	HealthTimeout time.Duration
	// HealthInterval is the longest time between health checks
	// (DefaultHealthInterval): after a failed check the next comes in
	// 5 ms, or an eighth of the time waited so far, up to HealthInterval
	// (deploydb.Wait), so a server that starts listening a moment after
	// its container starts is found at once.
	HealthInterval time.Duration
	// WatchInterval is the time between the health checks of a revision
	// watched after it became active (Work.HealthWatchSeconds, for
	// automatic rollback): DefaultWatchInterval.
	WatchInterval time.Duration
	// WatchFailures is how many of those checks in a row must fail for
	// the revision to be reported unhealthy to Options.State, when it is
	// a controlplane.UnhealthyReporter (*controlplane.ControlPlane is):
	// DefaultWatchFailures.
	WatchFailures int
	// DrainTimeout bounds the wait for requests in flight to old containers
	// before they are stopped (DefaultDrainTimeout).
	DrainTimeout time.Duration
	// StopTimeout is the grace period of a stopped container before it is
	// killed (DefaultStopTimeout).
	StopTimeout time.Duration
	// Instance labels every container so that several control planes (or
	// tests) can share one daemon; Reconcile and Teardown touch only their
	// instance's containers (DefaultInstance).
	Instance string
	// PullRetryTimeout bounds the retries of a pull that fails with a
	// transient error (the daemon or the registry busy or unreachable, a
	// network error): no attempt starts later than this after the first
	// (DefaultPullRetryTimeout); an attempt under way is not cut. A final
	// error (the image does not exist, the credentials are refused, ...)
	// is not retried. See the package documentation.
	PullRetryTimeout time.Duration
	// Credentials returns the registry credentials for a pull of image, or
	// nil for an anonymous pull.
	Credentials func(ctx context.Context, w *controlplane.Work, image string) (*Credentials, error)
	// Services, when set, gives every deployment its own database and
	// Redis as containers (see Services); nil starts none.
	Services *Services
	// Databases, when set, gives every deployment its database and Redis
	// instead of Services, e.g. a *deploydb.Shared on servers the operator
	// shares (see Databases). Setting both is an error.
	Databases Databases
	// DatabaseTimeout is how long a revision waits for its deployment's
	// database and Redis to answer (DefaultDatabaseTimeout); then it is
	// DEPLOY_FAILED. An image that cannot be pulled, or a container that
	// exits, fails it at once.
	DatabaseTimeout time.Duration
	// Builder builds github (and internal_source) revisions. Nil: such a
	// revision ends BUILD_FAILED saying no builder is configured.
	Builder Builder
	// State is the control plane (see State). Needed by Reconcile; without
	// it an older revision still deploying is not noticed superseded
	// until its report is refused, and a container's output after its
	// revision is DEPLOYED goes through the Deploy's Reporter.
	State State
	// Logger receives the Deployer's steps (also written to the
	// revisions' deploy logs), the builds' output at Debug, and its own
	// warnings. Nil: slog.Default().
	Logger *slog.Logger
	// HTTPClient makes the health checks. Nil: a client with a short
	// per-request timeout.
	HTTPClient *http.Client

	// IdleTimeout is how long a deployment that scales to zero
	// (ScalesToZero: deployment_type dev_zero or dev_free_zero) may go
	// without a request through the proxy, none in flight, before its
	// containers are stopped (DefaultIdleTimeout, 15 minutes). Negative:
	// never (a deployment found stopped still starts on a request). See
	// the package documentation.
	IdleTimeout time.Duration
	// IdleCheckInterval is how often idle deployments are looked for
	// (DefaultIdleCheckInterval, or a quarter of IdleTimeout when that is
	// shorter, at least a second).
	IdleCheckInterval time.Duration
	// WakeTimeout bounds how long a request to a stopped deployment is
	// held while its containers start (DefaultWakeTimeout); then it is
	// answered 503 with Retry-After, and the start goes on for the next
	// request. The start itself is bounded by HealthTimeout.
	WakeTimeout time.Duration
	// StatusReporter sets the status of a deployment whose containers
	// were stopped (UNUSED) or started again (READY); cmd/deployplane
	// wires ControlPlane.ReportDeploymentStatus, or an agent's
	// Client.ReportDeploymentStatus. Nil: the status is not reported (a
	// stopped deployment stays READY).
	StatusReporter StatusReporter
	// Clock returns the time idleness is measured by: when each request
	// to the proxy began and ended. Nil: time.Now.
	Clock func() time.Time
	// ActivityRecorder is told that the proxy served a request of a
	// deployment, at most once a minute per deployment, in the
	// background; cmd/deployplane wires ControlPlane.RecordActivity, by
	// which idle previews expire. Its errors are logged. Nil: nobody is
	// told.
	ActivityRecorder ActivityRecorder
}

// ActivityRecorder records that a deployment served a request at a time
// (ControlPlane.RecordActivity is one).
type ActivityRecorder func(ctx context.Context, tenant, deploymentID string, at time.Time) error

// Deployer runs revisions as Docker containers. It is safe for concurrent
// use. Build one with New, serve Proxy, call Reconcile once before the
// control plane's Run, and Close it at the end.
type Deployer struct {
	o         Options
	cli       *client.Client
	ownClient bool
	log       *slog.Logger
	hc        *http.Client
	proxy     *proxy
	ports     *ports
	dbs       Databases // Options.Databases, or the containers of Options.Services; nil: none

	// bg is the life of the Deployer (cancelled by Close): the followers
	// of containers' logs run under it.
	bg        context.Context
	stopBG    context.CancelFunc
	followers sync.WaitGroup
	// background are the idle loop and the starts of sleeping
	// deployments (goBackground).
	background sync.WaitGroup

	mu        sync.Mutex
	locks     map[string]*sync.Mutex // per tenant/deployment
	removed   map[string]bool        // deployments torn down in this process
	following map[string]bool        // containers whose logs are followed
	closed    bool
}

// New builds a Deployer. It does not contact the daemon (the first call
// does, negotiating the API version); Ping checks it.
func New(o *Options) (*Deployer, error) {
	var opt Options
	if o != nil {
		opt = *o
	}
	switch {
	case opt.Network == "" || opt.Network == "default": // "default" is Docker's name for its bridge
		opt.Network = DefaultNetwork
	case opt.Network == "none" || strings.HasPrefix(opt.Network, "container:"):
		return nil, fmt.Errorf("deploydocker: Options.Network %q: the proxy could not reach the containers; use \"bridge\", a network of the daemon's or \"host\"", opt.Network)
	}
	if err := checkSecretRefs(opt.SecretRefs); err != nil {
		return nil, err
	}
	if opt.ServerPort == 0 {
		opt.ServerPort = DefaultServerPort
	}
	if opt.PortEnv == "" {
		opt.PortEnv = DefaultPortEnv
	}
	if opt.FirstPort == 0 && opt.LastPort == 0 {
		opt.FirstPort, opt.LastPort = DefaultFirstPort, DefaultLastPort
	}
	if opt.FirstPort <= 0 || opt.LastPort < opt.FirstPort || opt.LastPort > 65535 {
		return nil, fmt.Errorf("deploydocker: bad port range %d..%d", opt.FirstPort, opt.LastPort)
	}
	if opt.HealthPath == "" {
		opt.HealthPath = DefaultHealthPath
	}
	if !strings.HasPrefix(opt.HealthPath, "/") {
		opt.HealthPath = "/" + opt.HealthPath
	}
	if opt.HealthTimeout <= 0 {
		opt.HealthTimeout = DefaultHealthTimeout
	}
	if opt.WatchInterval <= 0 {
		opt.WatchInterval = DefaultWatchInterval
	}
	if opt.WatchFailures <= 0 {
		opt.WatchFailures = DefaultWatchFailures
	}
	if opt.HealthInterval <= 0 {
		opt.HealthInterval = DefaultHealthInterval
	}
	if opt.DrainTimeout <= 0 {
		opt.DrainTimeout = DefaultDrainTimeout
	}
	if opt.StopTimeout <= 0 {
		opt.StopTimeout = DefaultStopTimeout
	}
	if opt.Instance == "" {
		opt.Instance = DefaultInstance
	}
	if opt.DatabaseTimeout <= 0 {
		opt.DatabaseTimeout = DefaultDatabaseTimeout
	}
	if opt.PullRetryTimeout <= 0 {
		opt.PullRetryTimeout = DefaultPullRetryTimeout
	}
	if opt.Services != nil && opt.Databases != nil {
		return nil, errors.New("deploydocker: Options.Services and Options.Databases are alternatives: set one")
	}
	if s := opt.Services; s != nil && (s.PostgresImage != "" || s.RedisImage != "") && opt.Network == "bridge" {
		return nil, errors.New("deploydocker: Options.Services on Docker's default bridge network: containers there cannot find " +
			"their database and Redis by name; set Options.Network to a network of your own (docker network create NAME) " +
			"or to \"host\", or give Options.Databases instead")
	}
	if opt.Services != nil && opt.Services.DataDir != "" && !filepath.IsAbs(opt.Services.DataDir) {
		return nil, fmt.Errorf("deploydocker: Services.DataDir %q is not an absolute path", opt.Services.DataDir)
	}
	if opt.IdleTimeout == 0 {
		opt.IdleTimeout = DefaultIdleTimeout
	}
	if opt.IdleCheckInterval <= 0 {
		opt.IdleCheckInterval = min(DefaultIdleCheckInterval, max(opt.IdleTimeout/4, time.Second))
	}
	if opt.WakeTimeout <= 0 {
		opt.WakeTimeout = DefaultWakeTimeout
	}
	if opt.Clock == nil {
		opt.Clock = time.Now
	}
	opt.ProxyURL = strings.TrimRight(opt.ProxyURL, "/")
	d := &Deployer{o: opt, cli: opt.Client, log: opt.Logger, hc: opt.HTTPClient,
		locks: map[string]*sync.Mutex{}, removed: map[string]bool{}, following: map[string]bool{}}
	d.bg, d.stopBG = context.WithCancel(context.Background())
	if d.log == nil {
		d.log = slog.Default()
	}
	if d.hc == nil {
		d.hc = &http.Client{Timeout: 5 * time.Second}
	}
	if d.cli == nil {
		opts := []client.Opt{client.FromEnv}
		if opt.Host != "" {
			opts = append(opts, client.WithHost(opt.Host))
		}
		cli, err := client.New(opts...)
		if err != nil {
			return nil, fmt.Errorf("deploydocker: docker client: %w", err)
		}
		d.cli, d.ownClient = cli, true
	}
	d.proxy = newProxy(opt.ProxyURL)
	d.proxy.now, d.proxy.hold, d.proxy.start, d.proxy.spawn = opt.Clock, opt.WakeTimeout, d.wake, d.goBackground
	if rec := opt.ActivityRecorder; rec != nil {
		d.proxy.activity = func(tenant, dep string, at time.Time) {
			if err := rec(d.bg, tenant, dep, at); err != nil && d.bg.Err() == nil {
				d.log.Warn("deploydocker: recording a deployment's activity failed", "deployment", dep, "err", err)
			}
		}
	}
	d.dbs = opt.Databases
	if s := opt.Services; s != nil && (s.PostgresImage != "" || s.RedisImage != "") {
		d.dbs = &containerDatabases{d: d, s: s.withDefaults()}
	}
	// Start at a random place in the range: two control planes (or test
	// processes) sharing a daemon then rarely reach for the same port in
	// the moment before either's container exists.
	d.ports = &ports{first: opt.FirstPort, last: opt.LastPort, next: opt.FirstPort + rand.IntN(opt.LastPort-opt.FirstPort+1)}
	if opt.IdleTimeout > 0 {
		d.goBackground(d.idleLoop)
	}
	return d, nil
}

// Ping checks that the daemon answers.
func (d *Deployer) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("deploydocker: docker daemon: %w", err)
	}
	return nil
}

// Ready reports whether the Docker daemon answers a ping: the Deployer
// implements controlplane.ReadinessChecker, so that GET /readyz says when
// the daemon is unreachable.
func (d *Deployer) Ready(ctx context.Context) error { return d.Ping(ctx) }

// Close stops following containers' logs (writing the lines read so far)
// and looking for idle deployments, ends the starts of sleeping ones
// (their held requests are answered 502), and closes the Docker client if
// New made it. Containers keep running.
func (d *Deployer) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.stopBG()
	d.followers.Wait()
	d.background.Wait()
	if d.ownClient {
		return d.cli.Close()
	}
	return nil
}

// Proxy is the handler that serves every deployment's url: a request for
// /{deployment_id}/rest is forwarded, as /rest, to one of the healthy
// containers of the deployment's active revision, in turn; for a
// deployment scaled to zero, once they started again. Mount it at the
// root of the listener that Options.ProxyURL names.
func (d *Deployer) Proxy() http.Handler { return d.proxy }

// URL is where a deployment answers: Options.ProxyURL/{deployment id}.
func (d *Deployer) URL(deploymentID string) string {
	return d.o.ProxyURL + "/" + deploymentID
}

func depKey(tenant, dep string) string { return tenant + "/" + dep }

// lock returns the mutex of one deployment: the switch of its active
// revision, container creation and teardown are serialized per
// deployment in this process.
func (d *Deployer) lock(tenant, dep string) *sync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := depKey(tenant, dep)
	m := d.locks[k]
	if m == nil {
		m = &sync.Mutex{}
		d.locks[k] = m
	}
	return m
}

// errStop: a report was refused (the revision was superseded or the
// deployment is being deleted) or the lease was lost: stop quietly.
var errStop = errors.New("deploydocker: stop")

// report sends a step; a refusal becomes errStop.
func report(ctx context.Context, r controlplane.Reporter, s controlplane.Step) error {
	return stopOnRefusal(r.Report(ctx, s))
}

// stopOnRefusal wraps a refusal of a report in errStop; other errors and
// nil pass unchanged.
func stopOnRefusal(err error) error {
	if err != nil && controlplane.IsRefusal(err) {
		return fmt.Errorf("%w: %w", errStop, err)
	}
	return err
}
