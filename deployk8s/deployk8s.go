package deployk8s

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of Options.
const (
	DefaultInstance         = "deployplane"
	DefaultFieldManager     = "deployplane"
	DefaultNamespace        = "default"
	DefaultServerPort       = 8000
	DefaultPortEnv          = "PORT"
	DefaultReadyPath        = "/ok"
	DefaultPostgresImage    = "postgres:16"
	DefaultRedisImage       = "redis:7"
	DefaultProgressDeadline = 10 * time.Minute
	DefaultPollInterval     = time.Second
	DefaultMinReady         = 5 * time.Second
	DefaultReconcileEvery   = time.Minute
)

// State is what the Deployer reads of the control plane's stored state:
// *controlplane.ControlPlane implements it. Reconcile and Teardown use it
// to tell which objects should exist; Deploy to tell a revision
// superseded by a newer one.
type State interface {
	GetDeployment(ctx context.Context, tenant, id string) (*controlplane.Deployment, error)
	GetRevision(ctx context.Context, tenant, deploymentID, revisionID string) (*controlplane.Revision, error)
}

// Options configure a Deployer. Client is required; zero fields mean
// defaults.
type Options struct {
	// Client is the cluster's typed client (kubernetes.NewForConfig).
	Client kubernetes.Interface
	// Cluster names the cluster in logs and messages (the kubeconfig
	// context).
	Cluster string
	// Namespace is where deployments without a listener run
	// (DefaultNamespace). A deployment with a listener runs in
	// controlplane.K8sNamespace of it.
	Namespace string
	// Namespaces, when set, are the only namespaces the Deployer works
	// in: it lists, watches and changes objects there and nowhere else
	// (a Role in each is then grant enough, see the package
	// documentation), and a revision whose namespace is another ends
	// DEPLOY_FAILED saying so. Nil: every namespace (cluster-wide lists,
	// which need a ClusterRole).
	Namespaces []string
	// Instance labels every object (LabelInstance) so that several
	// control planes can share a cluster; Reconcile touches only its
	// instance's objects (DefaultInstance).
	Instance string
	// FieldManager is the server-side apply field manager
	// (DefaultFieldManager).
	FieldManager string
	// ServerPort is the port the API server listens on in its container,
	// the Service's port and the readiness probe's (DefaultServerPort).
	ServerPort int32
	// PortEnv names the variable that tells the container its port
	// (DefaultPortEnv).
	PortEnv string
	// ReadyPath is the readiness probe's path (DefaultReadyPath).
	ReadyPath string
	// PostgresImage and RedisImage run the deployment's database and Redis.
	PostgresImage, RedisImage string
	// NoServices starts no database and no Redis (and gives no
	// DATABASE_URI and REDIS_URI).
	NoServices bool
	// ProgressDeadline is the Deployments' progressDeadlineSeconds: a
	// rollout that makes no progress for that long ends DEPLOY_FAILED
	// (DefaultProgressDeadline).
	ProgressDeadline time.Duration
	// MinReady is the Deployments' minReadySeconds: a pod counts as
	// available once ready for that long, so a container that fails
	// soon after it starts fails its revision instead of passing
	// (DefaultMinReady; negative: 0).
	MinReady time.Duration
	// PollInterval is the time between two looks at a rollout while the
	// Deployer's caches cannot be trusted (a rollout otherwise looks when
	// they change), and between two looks at a Teardown's objects
	// (DefaultPollInterval).
	PollInterval time.Duration
	// ReconcileEvery is the period of Start's reconciliation
	// (DefaultReconcileEvery).
	ReconcileEvery time.Duration
	// State is the control plane. Needed by Reconcile and Start. When it
	// is a controlplane.UnhealthyReporter (*controlplane.ControlPlane and
	// the agent's client are), the revisions a Work asks to watch after
	// they become active (Work.HealthWatchSeconds, automatic rollback) are
	// reported to it when their pods fail (health.go).
	State State
	// WatchInterval is the time between two looks at a revision watched
	// after it became active (DefaultWatchInterval); WatchFailures is how
	// many looks in a row must find it failing for it to be reported
	// (DefaultWatchFailures).
	WatchInterval time.Duration
	WatchFailures int
	// PullSecrets gives the pods of revisions whose image is in the
	// server's own registry an image pull secret (pullsecret.go). Default
	// nil: none.
	PullSecrets *PullSecrets
	// Expose makes each deployment reachable from outside the cluster
	// through an Ingress or an HTTPRoute, its url the external address
	// (expose.go). Default nil: none, the url is the Service's address
	// in the cluster (URL).
	Expose *Expose
	// Logger receives the steps (also written to the deploy logs) and
	// warnings. Nil: slog.Default().
	Logger *slog.Logger
}

// Deployer runs revisions on one Kubernetes cluster. It is safe for
// concurrent use.
type Deployer struct {
	o   Options
	cli kubernetes.Interface
	log *slog.Logger
	ev  *events
	// cache is the informers rollouts and reconciliations read (watch.go).
	cache *caches
	// expose is Options.Expose, validated; nil without.
	expose *exposure

	// bg is the life of the Deployer (cancelled by Close): the watches
	// of revisions after they became active run under it (health.go).
	bg      context.Context
	stopBG  context.CancelFunc
	watches sync.WaitGroup

	mu     sync.Mutex
	locks  map[string]*sync.Mutex // per tenant/deployment
	health int                    // healthUnknown, healthUp or healthDown (noteHealth)
}

// New builds a Deployer. It does not contact the cluster; Ready does. An
// Options.Expose that Expose.Validate refuses is an error wrapping
// ErrExpose.
func New(o *Options) (*Deployer, error) {
	var opt Options
	if o != nil {
		opt = *o
	}
	if opt.Client == nil {
		return nil, errors.New("deployk8s: Options.Client is required")
	}
	if opt.Namespaces != nil {
		ns := slices.Clone(opt.Namespaces)
		slices.Sort(ns)
		opt.Namespaces = slices.Compact(ns)
		for _, n := range opt.Namespaces {
			if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
				return nil, fmt.Errorf("deployk8s: Options.Namespaces: %q is no namespace name: %s", n, strings.Join(errs, "; "))
			}
		}
		if len(opt.Namespaces) == 0 {
			return nil, errors.New("deployk8s: Options.Namespaces is empty: nil means every namespace")
		}
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&opt.Namespace, DefaultNamespace)
	def(&opt.Instance, DefaultInstance)
	def(&opt.FieldManager, DefaultFieldManager)
	def(&opt.PortEnv, DefaultPortEnv)
	def(&opt.ReadyPath, DefaultReadyPath)
	def(&opt.PostgresImage, DefaultPostgresImage)
	def(&opt.RedisImage, DefaultRedisImage)
	if opt.ServerPort == 0 {
		opt.ServerPort = DefaultServerPort
	}
	if opt.ProgressDeadline <= 0 {
		opt.ProgressDeadline = DefaultProgressDeadline
	}
	if opt.MinReady == 0 {
		opt.MinReady = DefaultMinReady
	} else if opt.MinReady < 0 {
		opt.MinReady = 0
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = DefaultPollInterval
	}
	if opt.ReconcileEvery <= 0 {
		opt.ReconcileEvery = DefaultReconcileEvery
	}
	if opt.WatchInterval <= 0 {
		opt.WatchInterval = DefaultWatchInterval
	}
	if opt.WatchFailures <= 0 {
		opt.WatchFailures = DefaultWatchFailures
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	d := &Deployer{o: opt, cli: opt.Client, log: opt.Logger, locks: map[string]*sync.Mutex{}}
	d.bg, d.stopBG = context.WithCancel(context.Background())
	if opt.Expose != nil {
		x, err := compileExpose(opt.Expose)
		if err != nil {
			return nil, err
		}
		d.expose = x
	}
	d.ev = newEvents(d)
	d.cache = newCaches(d)
	return d, nil
}

// Ready asks the cluster's API server whether it is ready: the Deployer
// is a controlplane.ReadinessChecker. The log says when the answer
// changes: at Warn with the cause when the cluster stops answering, at
// Info when it answers again.
func (d *Deployer) Ready(ctx context.Context) error {
	_, err := d.cli.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		err = fmt.Errorf("deployk8s: cluster %s: %w", d.o.Cluster, err)
	}
	if ctx.Err() == nil { // not the caller giving up
		d.noteHealth(err)
	}
	return err
}

// noteHealth logs a change of the cluster's state.
func (d *Deployer) noteHealth(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil && (d.health == healthUnknown || d.health == healthUp):
		d.health = healthDown
		d.log.Warn("deployk8s: the cluster does not answer", "cluster", d.o.Cluster, "err", err)
	case err == nil && d.health == healthDown:
		d.health = healthUp
		d.log.Info("deployk8s: the cluster answers again", "cluster", d.o.Cluster)
	case err == nil:
		d.health = healthUp
	}
}

// The states noteHealth follows.
const (
	healthUnknown = iota
	healthUp
	healthDown
)

// Close stops the Deployer's watches: its caches of the cluster's objects
// (Deploy and Start's reconciliations then read the API server directly)
// and of its Events.
func (d *Deployer) Close() error {
	d.mu.Lock() // watchHealth adds a watch under mu while bg lives
	d.stopBG()
	d.mu.Unlock()
	d.watches.Wait()
	d.cache.close()
	d.ev.close()
	return nil
}

// Namespace is where a deployment runs on this cluster: the namespace its
// listener gives (controlplane.K8sNamespace), or Options.Namespace without
// a listener.
func (d *Deployer) Namespace(dep *controlplane.Deployment, l *controlplane.Listener) string {
	if l == nil && dep.SourceConfig.ListenerID == nil {
		return d.o.Namespace
	}
	return controlplane.K8sNamespace(dep, l)
}

// scopes are the namespaces the Deployer lists in: Options.Namespaces, or
// every namespace at once (metav1.NamespaceAll).
func (d *Deployer) scopes() []string {
	if d.o.Namespaces == nil {
		return []string{metav1.NamespaceAll}
	}
	return d.o.Namespaces
}

// manages: the Deployer works in namespace ns (Options.Namespaces).
func (d *Deployer) manages(ns string) bool {
	return d.o.Namespaces == nil || slices.Contains(d.o.Namespaces, ns)
}

// URL is the cluster address of a deployment's Service.
func (d *Deployer) URL(namespace, deploymentID string) string {
	return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", serviceName(deploymentID), namespace, d.o.ServerPort)
}

// lock serializes applies and teardown of one deployment in this process.
func (d *Deployer) lock(tenant, dep string) *sync.Mutex {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := tenant + "/" + dep
	m := d.locks[k]
	if m == nil {
		m = &sync.Mutex{}
		d.locks[k] = m
	}
	return m
}

// errStop: a report was refused (superseded, deleted) or the lease lost.
var errStop = errors.New("deployk8s: stop")

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
