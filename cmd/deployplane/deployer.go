package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/imagebuild"
)

// deployerFlags are the flags that choose and configure the deployer.
type deployerFlags struct {
	kind           string // sim, docker or k8s
	dockerHost     string
	dockerNetwork  string
	buildNetwork   string // Docker network of build steps
	dockerProxy    string // listen address of the url proxy
	dockerProxyURL string // base URL clients reach it at
	dockerInstance string
	postgresImage  string
	redisImage     string
	postgresData   string // where the database image keeps its data
	dataDir        string // host directory of the deployments' data ('' = Docker volumes)
	dbTimeout      time.Duration
	pullTimeout    time.Duration
	sharedPostgres string // admin DSN of a shared PostgreSQL: deploydb instead of containers
	sharedRedis    string // URL of a shared Redis
	healthPath     string
	healthTimeout  time.Duration
	// idleTimeout is -docker-idle-timeout: how long a dev_zero or
	// dev_free_zero deployment goes without a request before its
	// containers stop (0: never).
	idleTimeout time.Duration
	// secretRefs is -docker-secret-ref, repeated: where the Docker
	// deployers read secret references' values (deploydocker.Options.SecretRefs).
	secretRefs     secretRefFlag
	buildBaseImage string
	build          buildLimits
	kubeconfig     string // Kubernetes clusters for k8s listeners ('' = home's ~/.kube/config)
	k8sInstance    string // the label value of the server's Kubernetes objects
	home           string // $HOME
	// k8sInCluster: in a pod without a kubeconfig, drive the pod's own
	// cluster.
	k8sInCluster bool
	// k8sDefaultCluster is the cluster of deployments without a listener
	// with -deployer k8s ("": the kubeconfig's current context).
	k8sDefaultCluster string
	// k8sNamespaces is -k8s-namespaces as given; namespaces is what
	// check makes of it (nil: every namespace).
	k8sNamespaces string
	namespaces    []string
	// The Kubernetes deployments' exposure outside their cluster: the
	// -k8s-* flags, and the deployk8s.Expose that check makes of them
	// (nil: none).
	k8sExpose         string // none, ingress or httproute
	k8sIngressClass   string
	k8sGateway        string // [NAMESPACE/]NAME
	k8sGatewaySection string
	k8sHostTemplate   string
	k8sPathTemplate   string
	k8sTLSIssuer      string // ClusterIssuer/NAME or Issuer/NAME
	k8sHTTPS          bool
	k8sAnnotations    keyValues
	expose            *deployk8s.Expose
	// dockerEndpoints are the Docker engines docker listeners name
	// (-docker-endpoint NAME=ADDRESS, repeated).
	dockerEndpoints dockerEndpoints
}

// buildLimits are the -build-* flags that bound a build: its time, and
// what its source (a clone or a tarball) may hold.
type buildLimits struct {
	cloneTimeout time.Duration
	timeout      time.Duration
	maxRepoBytes int64 // the pack a clone downloads
	maxBytes     int64 // the files checked out or unpacked
	maxFiles     int
	maxDepth     int
	maxPathBytes int
}

func (b *buildLimits) register(fs *flag.FlagSet) {
	fs.DurationVar(&b.cloneTimeout, "build-clone-timeout", imagebuild.DefaultCloneTimeout, "how long a build's clone may take")
	fs.DurationVar(&b.timeout, "build-timeout", imagebuild.DefaultBuildTimeout, "how long a build's image build may take")
	fs.Int64Var(&b.maxRepoBytes, "build-max-repo-bytes", imagebuild.DefaultMaxRepoBytes, "the most bytes a build's clone downloads (its pack)")
	fs.Int64Var(&b.maxBytes, "build-max-bytes", imagebuild.DefaultMaxCheckoutBytes, "the most bytes of files a build's source (clone or tarball) holds")
	fs.IntVar(&b.maxFiles, "build-max-files", imagebuild.DefaultMaxFiles, "the most files, directories and links a build's source holds")
	fs.IntVar(&b.maxDepth, "build-max-depth", imagebuild.DefaultMaxDepth, "the most levels of a path of a build's source")
	fs.IntVar(&b.maxPathBytes, "build-max-path-bytes", imagebuild.DefaultMaxPathBytes, "the most bytes of a path, or of a link's target, of a build's source")
}

// check says what is wrong with the -build-* limits, or "".
func (b *buildLimits) check() string {
	for _, f := range []struct {
		name string
		ok   bool
	}{{"-build-clone-timeout", b.cloneTimeout > 0}, {"-build-timeout", b.timeout > 0}, {"-build-max-repo-bytes", b.maxRepoBytes > 0},
		{"-build-max-bytes", b.maxBytes > 0}, {"-build-max-files", b.maxFiles > 0}, {"-build-max-depth", b.maxDepth > 0},
		{"-build-max-path-bytes", b.maxPathBytes > 0}} {
		if !f.ok {
			return f.name + " must be positive"
		}
	}
	return ""
}

// builderOptions are the imagebuild.Options of the -build-* flags, with
// env's egress policy, tarballs and GitHub App.
func (f *deployerFlags) builderOptions(env *deployerEnv) *imagebuild.Options {
	b := f.build
	o := &imagebuild.Options{BaseImage: f.buildBaseImage, Egress: env.egress, Tarballs: env.tarballs, NetworkMode: f.buildNetwork,
		CloneTimeout: b.cloneTimeout, BuildTimeout: b.timeout, MaxRepoBytes: b.maxRepoBytes, MaxCheckoutBytes: b.maxBytes,
		MaxFiles: b.maxFiles, MaxDepth: b.maxDepth, MaxPathBytes: b.maxPathBytes}
	if app, ok := env.githubApp.(installationTokens); ok && env.cp != nil {
		o.InstallationToken = app.InstallationToken
		o.InstallationID = imagebuild.InstallationIDs(env.cp)
	}
	return o
}

// dockerEndpoint is one -docker-endpoint: the Docker engine that
// deployments with a listener of compute_type docker and compute_id name
// run on.
type dockerEndpoint struct{ name, host string }

// dockerEndpoints is the repeated -docker-endpoint flag (a flag.Value).
type dockerEndpoints []dockerEndpoint

func (e *dockerEndpoints) String() string {
	if e == nil {
		return ""
	}
	var parts []string
	for _, ep := range *e {
		parts = append(parts, ep.name+"="+ep.host)
	}
	return strings.Join(parts, ",")
}

// Set adds NAME=ADDRESS; a name may be given once.
func (e *dockerEndpoints) Set(v string) error {
	name, host, ok := strings.Cut(v, "=")
	name, host = strings.TrimSpace(name), strings.TrimSpace(host)
	if !ok || name == "" || host == "" {
		return fmt.Errorf("want NAME=ADDRESS (e.g. east=tcp://10.0.0.5:2376), not %q", v)
	}
	for _, ep := range *e {
		if ep.name == name {
			return fmt.Errorf("endpoint %q is given twice", name)
		}
	}
	*e = append(*e, dockerEndpoint{name: name, host: host})
	return nil
}

// keyValues is a repeated KEY=VALUE flag (a flag.Value).
type keyValues map[string]string

func (kv *keyValues) String() string {
	if kv == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(*kv)) {
		parts = append(parts, k+"="+(*kv)[k])
	}
	return strings.Join(parts, ",")
}

// Set adds KEY=VALUE; a key may be given once.
func (kv *keyValues) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, not %q", v)
	}
	if _, dup := (*kv)[k]; dup {
		return fmt.Errorf("%q is given twice", k)
	}
	if *kv == nil {
		*kv = keyValues{}
	}
	(*kv)[k] = val
	return nil
}

// instance is the label value of an endpoint's containers: each endpoint's
// Deployer reconciles and tears down only its own, also when two
// endpoints name one daemon.
func (ep dockerEndpoint) instance(base string) string { return base + "-" + ep.name }

func (f *deployerFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.kind, "deployer", "sim", "sim (simulated), docker or k8s")
	fs.StringVar(&f.k8sDefaultCluster, "k8s-default-cluster", "", "with -deployer k8s, the cluster (kubeconfig context) of deployments without a listener (default: the kubeconfig's current context; in a pod without one, in-cluster)")
	f.registerEngines(fs, getenv)
	fs.StringVar(&f.dockerInstance, "docker-instance", deploydocker.DefaultInstance, "label value that marks this server's containers")
	fs.StringVar(&f.k8sInstance, "k8s-instance", deployk8s.DefaultInstance, "label value that marks this server's Kubernetes objects")
	fs.BoolVar(&f.k8sInCluster, "k8s-in-cluster", true, "in a pod without a kubeconfig, drive the pod's own cluster as in-cluster")
	fs.Var(&f.dockerEndpoints, "docker-endpoint", "NAME=ADDRESS: a Docker engine that deployments with a docker listener whose compute_id is NAME run on (repeatable; the other -docker-* flags apply to it)")
}

// registerEngines registers the flags that say how the engines are
// reached and run deployments (the Docker daemon and its settings, the
// kubeconfig), which the server and the agent share.
func (f *deployerFlags) registerEngines(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.dockerHost, "docker-host", getenv("DOCKER_HOST"), "Docker daemon address (default $DOCKER_HOST, else unix:///var/run/docker.sock)")
	fs.StringVar(&f.dockerNetwork, "docker-network", deploydocker.DefaultNetwork, "Docker network of the containers: bridge, host or a network's name")
	fs.StringVar(&f.buildNetwork, "build-network", imagebuild.DefaultNetworkMode, "Docker network of build steps: bridge, none, host or a network's name")
	fs.StringVar(&f.dockerProxy, "docker-proxy-addr", "127.0.0.1:8125", "where deployments' urls are served")
	fs.StringVar(&f.dockerProxyURL, "docker-proxy-url", "", "base URL clients reach -docker-proxy-addr at")
	fs.StringVar(&f.postgresImage, "docker-postgres-image", "postgres:16-alpine", "image of each deployment's database ('' for none)")
	fs.StringVar(&f.redisImage, "docker-redis-image", "redis:7-alpine", "image of each deployment's Redis ('' for none)")
	fs.StringVar(&f.postgresData, "docker-postgres-data-path", deploydocker.DefaultPostgresDataPath, "where the database image keeps its data (its PGDATA)")
	fs.StringVar(&f.dataDir, "docker-data-dir", "", "host directory of the deployments' database and Redis data (default: a Docker volume each)")
	fs.DurationVar(&f.dbTimeout, "docker-database-timeout", deploydocker.DefaultDatabaseTimeout, "how long a revision waits for its deployment's database and Redis")
	fs.DurationVar(&f.pullTimeout, "docker-pull-retry-timeout", deploydocker.DefaultPullRetryTimeout, "how long a pull that fails with a transient error (registry or daemon unreachable or busy) is retried")
	fs.StringVar(&f.sharedPostgres, "shared-postgres-dsn", getenv("DEPLOYPLANE_SHARED_POSTGRES_DSN"), "a shared PostgreSQL (postgres://admin:password@host:5432/db) where each deployment gets a database and role, instead of its own container (default $DEPLOYPLANE_SHARED_POSTGRES_DSN)")
	fs.StringVar(&f.sharedRedis, "shared-redis-url", getenv("DEPLOYPLANE_SHARED_REDIS_URL"), "a shared Redis (redis://:password@host:6379) where each deployment gets an ACL user limited to its key prefix; needs -shared-postgres-dsn (default $DEPLOYPLANE_SHARED_REDIS_URL)")
	fs.StringVar(&f.healthPath, "docker-health-path", deploydocker.DefaultHealthPath, "path of the containers' health check")
	fs.DurationVar(&f.healthTimeout, "docker-health-timeout", deploydocker.DefaultHealthTimeout, "how long a new container has to pass its health check")
	f.secretRefs = secretRefFlag{}
	fs.Var(f.secretRefs, "docker-secret-ref", "secret_name/secret_key=file:PATH or =env:NAME, repeated: the value the Docker deployer gives a deployment's secret reference to that secret and key (a reference it has no value for is refused)")
	fs.DurationVar(&f.idleTimeout, "docker-idle-timeout", deploydocker.DefaultIdleTimeout, "how long a dev_zero or dev_free_zero deployment goes without a request before its containers stop until the next one (0: never)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig files (several separated by ':' merge as kubectl merges them) whose contexts are the clusters k8s listeners name (default $KUBECONFIG, else ~/.kube/config; in a pod without either, its own cluster as in-cluster)")
	f.home = getenv("HOME")
	fs.StringVar(&f.k8sNamespaces, "k8s-namespaces", "", "comma-separated namespaces the Kubernetes deployers work in, and nowhere else (default: every namespace)")
	fs.StringVar(&f.k8sExpose, "k8s-expose", "none", "none, ingress or httproute: how each Kubernetes deployment is reached from outside its cluster (its url is then that address)")
	fs.StringVar(&f.k8sIngressClass, "k8s-ingress-class", "", "the Ingresses' class (default: the cluster's default class)")
	fs.StringVar(&f.k8sGateway, "k8s-gateway", "", "[NAMESPACE/]NAME: the Gateway the HTTPRoutes attach to")
	fs.StringVar(&f.k8sGatewaySection, "k8s-gateway-section", "", "the Gateway listener (sectionName) the HTTPRoutes attach to (default: all)")
	fs.StringVar(&f.k8sHostTemplate, "k8s-host-template", "", "the host of each deployment, from {name}, {id}, {namespace} and {tenant}, e.g. {name}.agents.example.com")
	fs.StringVar(&f.k8sPathTemplate, "k8s-path-template", "", "a path prefix of each deployment, e.g. /{id} (default: the whole host)")
	fs.StringVar(&f.k8sTLSIssuer, "k8s-tls-issuer", "", "ClusterIssuer/NAME or Issuer/NAME: cert-manager issues each Ingress's certificate (the url is https)")
	fs.BoolVar(&f.k8sHTTPS, "k8s-https", false, "the external url is https: TLS ends at the Gateway or the ingress controller")
	fs.Var(&f.k8sAnnotations, "k8s-expose-annotation", "KEY=VALUE: an annotation of every Ingress or HTTPRoute (repeatable)")
	fs.StringVar(&f.buildBaseImage, "build-base-image", "", "base image of the Dockerfiles generated for github revisions (default: the project's base_image, else langchain/langgraph-api, as the langgraph CLI)")
	f.build.register(fs)
}

// check says what is wrong with the deployer flags, or "".
func (f *deployerFlags) check() string {
	switch f.kind {
	case "sim", "docker", "k8s":
	default:
		return fmt.Sprintf("-deployer must be sim, docker or k8s, not %q", f.kind)
	}
	if f.k8sDefaultCluster != "" && f.kind != "k8s" {
		return "-k8s-default-cluster needs -deployer k8s"
	}
	if f.usesDocker() {
		if msg := f.checkNetworks(); msg != "" {
			return msg
		}
	}
	if f.healthTimeout <= 0 {
		return "-docker-health-timeout must be positive"
	}
	if f.idleTimeout < 0 {
		return "-docker-idle-timeout must not be negative (0 never stops idle deployments)"
	}
	if f.pullTimeout <= 0 {
		return "-docker-pull-retry-timeout must be positive"
	}
	if f.dbTimeout <= 0 {
		return "-docker-database-timeout must be positive"
	}
	if f.sharedRedis != "" && f.sharedPostgres == "" {
		return "-shared-redis-url needs -shared-postgres-dsn (which records the Redis users' passwords)"
	}
	if f.dataDir != "" && !filepath.IsAbs(f.dataDir) {
		return "-docker-data-dir must be an absolute path"
	}
	if f.k8sInstance != "" && !labelValue.MatchString(f.k8sInstance) {
		return fmt.Sprintf("-k8s-instance %q is no label value (up to 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)", f.k8sInstance)
	}
	if msg := f.checkNamespaces(); msg != "" {
		return msg
	}
	if msg := f.build.check(); msg != "" {
		return msg
	}
	return f.checkExpose()
}

// checkNamespaces makes f.namespaces of -k8s-namespaces, or says what is
// wrong with it.
func (f *deployerFlags) checkNamespaces() string {
	f.namespaces = nil
	if strings.TrimSpace(f.k8sNamespaces) == "" {
		return ""
	}
	var ns []string
	for n := range strings.SplitSeq(f.k8sNamespaces, ",") {
		n = strings.TrimSpace(n)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return fmt.Sprintf("-k8s-namespaces: %q is no namespace name: %s", n, strings.Join(errs, "; "))
		}
		if !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	f.namespaces = ns
	return ""
}

// checkExpose makes f.expose of the -k8s-* flags, or says what is wrong
// with them.
func (f *deployerFlags) checkExpose() string {
	f.expose = nil
	e := &deployk8s.Expose{IngressClassName: f.k8sIngressClass, HostTemplate: f.k8sHostTemplate, PathTemplate: f.k8sPathTemplate,
		HTTPS: f.k8sHTTPS, Annotations: f.k8sAnnotations}
	switch f.k8sExpose {
	case "none", "":
		if f.k8sIngressClass != "" || f.k8sGateway != "" || f.k8sGatewaySection != "" || f.k8sHostTemplate != "" ||
			f.k8sPathTemplate != "" || f.k8sTLSIssuer != "" || f.k8sHTTPS || len(f.k8sAnnotations) > 0 {
			return "the -k8s-* flags of an exposure need -k8s-expose ingress or -k8s-expose httproute"
		}
		return ""
	case "ingress":
		e.Kind = deployk8s.ExposeIngress
	case "httproute":
		e.Kind = deployk8s.ExposeHTTPRoute
	default:
		return fmt.Sprintf("-k8s-expose must be none, ingress or httproute, not %q", f.k8sExpose)
	}
	if f.k8sGateway != "" {
		ns, name, ok := strings.Cut(f.k8sGateway, "/")
		if !ok {
			ns, name = "", ns
		}
		e.Gateway = deployk8s.GatewayRef{Namespace: ns, Name: name, SectionName: f.k8sGatewaySection}
	} else if f.k8sGatewaySection != "" {
		return "-k8s-gateway-section needs -k8s-gateway"
	}
	if f.k8sTLSIssuer != "" {
		kind, name, ok := strings.Cut(f.k8sTLSIssuer, "/")
		if !ok {
			return fmt.Sprintf("-k8s-tls-issuer must be ClusterIssuer/NAME or Issuer/NAME, not %q", f.k8sTLSIssuer)
		}
		e.TLSIssuer = &deployk8s.Issuer{Kind: kind, Name: name}
	}
	if err := e.Validate(); err != nil {
		return "-k8s-expose " + f.k8sExpose + ": " + strings.TrimPrefix(err.Error(), deployk8s.ErrExpose.Error()+": ")
	}
	f.expose = e
	return ""
}

// checkNetworks says what is wrong with -docker-network and
// -build-network, or "": a network the proxy could not reach, or one on
// which the deployments' containers could not reach their databases.
func (f *deployerFlags) checkNetworks() string {
	n := f.dockerNetwork
	switch {
	case n == "":
		return "-docker-network must not be empty"
	case f.buildNetwork == "":
		return "-build-network must not be empty"
	case n == "none" || strings.HasPrefix(n, "container:"):
		return fmt.Sprintf("-docker-network %s: the deployments' proxy could not reach the containers; use bridge, host or a network's name", n)
	case (n == "bridge" || n == "default") && f.sharedPostgres == "" && (f.postgresImage != "" || f.redisImage != ""):
		return fmt.Sprintf("-docker-network %s: on Docker's default bridge containers cannot find their database and Redis "+
			"(-docker-postgres-image, -docker-redis-image) by name; create a network (docker network create deployplane) and pass "+
			"-docker-network deployplane, or pass -docker-network host (containers then reach the host's loopback), "+
			"-shared-postgres-dsn, or -docker-postgres-image '' -docker-redis-image ''", n)
	}
	if n != "host" {
		for _, s := range []struct{ flag, url string }{{"-shared-postgres-dsn", f.sharedPostgres}, {"-shared-redis-url", f.sharedRedis}} {
			if h := loopbackHost(s.url); h != "" {
				return fmt.Sprintf("%s names %s, a loopback address, which containers on -docker-network %s cannot reach "+
					"(their loopback is their own): name an address they can reach, or pass -docker-network host", s.flag, h, n)
			}
		}
	}
	return ""
}

// loopbackHost is the host of URL raw when it is a loopback address or
// localhost, else "".
func loopbackHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); (ip != nil && ip.IsLoopback()) || strings.EqualFold(h, "localhost") {
		return h
	}
	return ""
}

// usesDocker says whether a Docker engine runs deployments: -deployer
// docker or a -docker-endpoint.
func (f *deployerFlags) usesDocker() bool { return f.kind == "docker" || len(f.dockerEndpoints) > 0 }

// listenProxy listens where -deployer docker and the -docker-endpoint
// engines serve the deployments' urls, before the control plane is made:
// the custom_url of github deployments is then <proxy URL>/<id>, where the
// proxy serves them. Without Docker it returns nil and "".
func listenProxy(f *deployerFlags) (net.Listener, string, error) {
	if !f.usesDocker() {
		return nil, "", nil
	}
	ln, err := net.Listen("tcp", f.dockerProxy)
	if err != nil {
		return nil, "", fmt.Errorf("-docker-proxy-addr: %w", err)
	}
	proxyURL := f.dockerProxyURL
	if proxyURL == "" {
		proxyURL = defaultPublicURL(ln.Addr())
	}
	return ln, strings.TrimRight(proxyURL, "/"), nil
}

// deployerEnv is what the deployer is wired to besides its flags.
type deployerEnv struct {
	// state is what the deployers read of the stored state: the
	// ControlPlane in the server, the agent routes in an agent.
	state interface {
		deploydocker.State
		deployk8s.State
		// ReportDeploymentStatus is the Docker deployers'
		// StatusReporter: the deployments they scale to zero.
		ReportDeploymentStatus(ctx context.Context, tenant, deploymentID string, s controlplane.DeploymentStatus) error
		// The Docker deployers' watch of a revision after it became
		// active tells it here when it fails (automatic rollback).
		controlplane.UnhealthyReporter
	}
	// cp is the server's ControlPlane (nil in an agent): builds find the
	// GitHub App installation of a github deployment through it.
	cp        *controlplane.ControlPlane
	log       *slog.Logger
	egress    *egress.Policy         // the server's policy for outbound calls: clones go through it
	githubApp controlplane.GitHubApp // nil: repositories are cloned without credentials
	proxy     net.Listener           // listenProxy's, for docker and the -docker-endpoint engines
	proxyURL  string
	// credentials are the pull credentials of images of the built-in
	// registry (registry.go); nil: every pull is anonymous.
	credentials registryCredentials
	tarballs    imagebuild.Tarballs // the uploads of internal_source revisions
	// pulls are the same credentials for the Kubernetes clusters' image
	// pull secrets; nil: none.
	pulls pullTokenFunc
}

// The Builder removes a deleted deployment's images at its Teardown.
var _ deploydocker.ImageRemover = (*imagebuild.Builder)(nil)

// installationTokens is what of githubapp.App the builder uses.
type installationTokens interface {
	InstallationToken(ctx context.Context, installationID int64) (string, error)
}

// dockerDeployers are the deploydocker.Deployers of a server: the default
// one (-deployer docker) and one per -docker-endpoint.
type dockerDeployers struct {
	def       *deploydocker.Deployer            // nil unless -deployer docker
	endpoints map[string]*deploydocker.Deployer // by -docker-endpoint name
	desc      []any
	stop      func()
}

// startDockerDeployers builds the Docker deployers the flags ask for
// (none: a zero dockerDeployers with a no-op stop). Each checks its
// daemon, reconciles the containers an earlier run left (only its own:
// each endpoint's containers carry their own -docker-instance label) and
// builds github revisions with imagebuild on its daemon (through
// env.egress, with the GitHub App's installation tokens). One proxy, on
// env.proxy, serves every deployment's url, whichever engine runs it.
// stop closes what it started. It takes env.proxy over: closed on failure
// and by stop.
func startDockerDeployers(ctx context.Context, f *deployerFlags, env *deployerEnv) (*dockerDeployers, error) {
	out := &dockerDeployers{endpoints: map[string]*deploydocker.Deployer{}, stop: func() {}}
	if !f.usesDocker() {
		return out, nil
	}
	ln, log := env.proxy, env.log
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*dockerDeployers, error) {
		ln.Close()
		closeAll()
		return nil, err
	}
	// Each deployment's database and Redis: on the shared servers when
	// given (one for every engine), else containers of its own.
	var shared *deploydb.Shared
	if f.sharedPostgres != "" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var err error
		shared, err = deploydb.New(sctx, &deploydb.Options{PostgresDSN: f.sharedPostgres, RedisURL: f.sharedRedis})
		cancel()
		if err != nil {
			return fail(fmt.Errorf("-shared-postgres-dsn, -shared-redis-url: %w", err))
		}
		closers = append(closers, func() { shared.Close() })
	}
	var all []*deploydocker.Deployer
	if f.kind == "docker" {
		d, closeD, err := startDockerDeployer(ctx, f, f.dockerHost, f.dockerInstance, shared, env)
		if err != nil {
			return fail(fmt.Errorf("-docker-host: %w", err))
		}
		closers = append(closers, closeD)
		out.def = d
		all = append(all, d)
		out.desc = append(out.desc, "deployer", "docker", "docker_host", f.dockerHost)
	}
	var names []string
	for _, ep := range f.dockerEndpoints {
		d, closeD, err := startDockerDeployer(ctx, f, ep.host, ep.instance(f.dockerInstance), shared, env)
		if err != nil {
			return fail(fmt.Errorf("-docker-endpoint %s: %w", ep.name, err))
		}
		closers = append(closers, closeD)
		out.endpoints[ep.name] = d
		all = append(all, d)
		names = append(names, ep.name)
	}
	srv := &http.Server{Handler: deploydocker.Proxies(all...), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the deployments' proxy stopped", "err", err)
		}
	}()
	out.stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-served
		closeAll()
	}
	out.desc = append(out.desc, "docker_endpoints", names, "docker_network", f.dockerNetwork, "build_network", f.buildNetwork, "proxy_url", env.proxyURL,
		"build_base_image", f.buildBaseImage, "shared_databases", shared != nil)
	return out, nil
}

// startDockerDeployer makes the deploydocker.Deployer of one daemon (host,
// "" for $DOCKER_HOST or the standard socket) whose containers carry the
// label instance, pings the daemon and reconciles; closeD closes the
// Deployer and its client.
func startDockerDeployer(ctx context.Context, f *deployerFlags, host, instance string, shared *deploydb.Shared,
	env *deployerEnv) (d *deploydocker.Deployer, closeD func(), err error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, nil, err
	}
	builder, err := imagebuild.New(cli, f.builderOptions(env))
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	do := &deploydocker.Options{Client: cli, Network: f.dockerNetwork, ProxyURL: env.proxyURL,
		Instance: instance, State: env.state, Logger: env.log, HealthPath: f.healthPath, HealthTimeout: f.healthTimeout,
		DatabaseTimeout: f.dbTimeout, PullRetryTimeout: f.pullTimeout, Builder: builder, Credentials: env.credentials,
		IdleTimeout: f.idleTimeout, StatusReporter: env.state.ReportDeploymentStatus, SecretRefs: f.secretRefs}
	if env.cp != nil {
		// The requests its proxy serves keep previews from expiring
		// (an agent's deployments are never previews: github
		// deployments run on the server).
		do.ActivityRecorder = env.cp.RecordActivity
	}
	if f.idleTimeout == 0 {
		do.IdleTimeout = -1 // never; deploydocker's 0 is its default
	}
	if shared != nil {
		do.Databases = shared
	} else {
		do.Services = &deploydocker.Services{PostgresImage: f.postgresImage, RedisImage: f.redisImage,
			PostgresDataPath: f.postgresData, DataDir: f.dataDir}
	}
	dd, err := deploydocker.New(do)
	if err != nil {
		cli.Close()
		return nil, nil, err
	}
	closeD = func() {
		dd.Close()
		cli.Close()
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := dd.Ping(pctx); err != nil {
		closeD()
		return nil, nil, err
	}
	if err := dd.Reconcile(pctx); err != nil {
		closeD()
		return nil, nil, err
	}
	return dd, closeD, nil
}

// secretRefFlag is -docker-secret-ref: secret_name/secret_key=SOURCE,
// repeated (deploydocker.Options.SecretRefs checks SOURCE).
type secretRefFlag map[string]string

func (f secretRefFlag) String() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(f)) {
		out = append(out, k+"="+f[k])
	}
	return strings.Join(out, ",")
}

func (f secretRefFlag) Set(v string) error {
	k, src, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q is not secret_name/secret_key=file:PATH or =env:NAME", v)
	}
	f[k] = src
	return nil
}

// secretReferenceProblem is the control plane's check of a secret
// reference (controlplane.Options.SecretReferenceProblem): the Docker
// deployer's map for the deployments -deployer docker runs (those without
// a listener); a deployment on a listener is checked by its deployer when
// it deploys.
func (f *deployerFlags) secretReferenceProblem(d *controlplane.Deployment, ref controlplane.SecretReference) string {
	if f.kind != "docker" || d.SourceConfig.ListenerID != nil {
		return ""
	}
	return deploydocker.SecretRefProblem(f.secretRefs, ref)
}
