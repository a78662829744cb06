package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/imagebuild"
)

// deployerFlags are the flags that choose and configure the deployer.
type deployerFlags struct {
	kind           string // sim or docker
	dockerHost     string
	dockerNetwork  string
	dockerProxy    string // listen address of the url proxy
	dockerProxyURL string // base URL clients reach it at
	dockerInstance string
	postgresImage  string
	redisImage     string
	postgresData   string // where the database image keeps its data
	dataDir        string // host directory of the deployments' data ('' = Docker volumes)
	dbTimeout      time.Duration
	sharedPostgres string // admin DSN of a shared PostgreSQL: deploydb instead of containers
	sharedRedis    string // URL of a shared Redis
	healthPath     string
	healthTimeout  time.Duration
	buildBaseImage string
	kubeconfig     string // Kubernetes clusters for k8s listeners
}

func (f *deployerFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&f.kind, "deployer", "sim", "sim (simulated) or docker")
	fs.StringVar(&f.dockerHost, "docker-host", getenv("DOCKER_HOST"), "Docker daemon address (default $DOCKER_HOST, else unix:///var/run/docker.sock)")
	fs.StringVar(&f.dockerNetwork, "docker-network", deploydocker.DefaultNetwork, "Docker network of the containers")
	fs.StringVar(&f.dockerProxy, "docker-proxy-addr", "127.0.0.1:8125", "where deployments' urls are served")
	fs.StringVar(&f.dockerProxyURL, "docker-proxy-url", "", "base URL clients reach -docker-proxy-addr at")
	fs.StringVar(&f.dockerInstance, "docker-instance", deploydocker.DefaultInstance, "label value that marks this server's containers")
	fs.StringVar(&f.postgresImage, "docker-postgres-image", "postgres:16-alpine", "image of each deployment's database ('' for none)")
	fs.StringVar(&f.redisImage, "docker-redis-image", "redis:7-alpine", "image of each deployment's Redis ('' for none)")
	fs.StringVar(&f.postgresData, "docker-postgres-data-path", deploydocker.DefaultPostgresDataPath, "where the database image keeps its data (its PGDATA)")
	fs.StringVar(&f.dataDir, "docker-data-dir", "", "host directory of the deployments' database and Redis data (default: a Docker volume each)")
	fs.DurationVar(&f.dbTimeout, "docker-database-timeout", deploydocker.DefaultDatabaseTimeout, "how long a revision waits for its deployment's database and Redis")
	fs.StringVar(&f.sharedPostgres, "shared-postgres-dsn", getenv("DEPLOYPLANE_SHARED_POSTGRES_DSN"), "a shared PostgreSQL (postgres://admin:password@host:5432/db) where each deployment gets a database and role, instead of its own container (default $DEPLOYPLANE_SHARED_POSTGRES_DSN)")
	fs.StringVar(&f.sharedRedis, "shared-redis-url", getenv("DEPLOYPLANE_SHARED_REDIS_URL"), "a shared Redis (redis://:password@host:6379) where each deployment gets a database number; needs -shared-postgres-dsn (default $DEPLOYPLANE_SHARED_REDIS_URL)")
	fs.StringVar(&f.healthPath, "docker-health-path", deploydocker.DefaultHealthPath, "path of the containers' health check")
	fs.DurationVar(&f.healthTimeout, "docker-health-timeout", deploydocker.DefaultHealthTimeout, "how long a new container has to pass its health check")
	fs.StringVar(&f.kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig whose contexts are the clusters k8s listeners name (default $KUBECONFIG; in a pod, its own cluster as in-cluster)")
	fs.StringVar(&f.buildBaseImage, "build-base-image", "", "base image of the Dockerfiles generated for github revisions (default: the project's base_image, else langchain/langgraph-api, as the langgraph CLI)")
}

// check says what is wrong with the deployer flags, or "".
func (f *deployerFlags) check() string {
	switch f.kind {
	case "sim", "docker":
	default:
		return fmt.Sprintf("-deployer must be sim or docker, not %q", f.kind)
	}
	if f.kind == "docker" && f.dockerNetwork == "" {
		return "-docker-network must not be empty"
	}
	if f.healthTimeout <= 0 {
		return "-docker-health-timeout must be positive"
	}
	if f.dbTimeout <= 0 {
		return "-docker-database-timeout must be positive"
	}
	if f.sharedRedis != "" && f.sharedPostgres == "" {
		return "-shared-redis-url needs -shared-postgres-dsn (which records the Redis numbers)"
	}
	if f.dataDir != "" && !filepath.IsAbs(f.dataDir) {
		return "-docker-data-dir must be an absolute path"
	}
	return ""
}

// listenProxy listens where -deployer docker serves the deployments'
// urls, before the control plane is made: the custom_url of github
// deployments is then <proxy URL>/<id>, where the proxy serves them.
// Without -deployer docker it returns nil and "".
func listenProxy(f *deployerFlags) (net.Listener, string, error) {
	if f.kind != "docker" {
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
	cp        *controlplane.ControlPlane
	log       *slog.Logger
	egress    *egress.Policy         // the server's policy for outbound calls: clones go through it
	githubApp controlplane.GitHubApp // nil: repositories are cloned without credentials
	proxy     net.Listener           // listenProxy's, for docker
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

// startDefaultDeployer builds the deployer -deployer chooses. For docker it checks
// the daemon, serves the url proxy on env.proxy, reconciles the containers
// an earlier run left, and builds github revisions with imagebuild (through
// env.egress, with the GitHub App's installation tokens); stop closes what
// it started. It takes env.proxy over: closed on failure and by stop.
func startDefaultDeployer(ctx context.Context, f *deployerFlags, simStep time.Duration, simFailAt controlplane.RevisionStatus,
	env *deployerEnv) (d controlplane.Deployer, desc []any, stop func(), err error) {
	if f.kind != "docker" {
		return deploysim.New(&deploysim.Options{Step: simStep, FailAt: simFailAt}), []any{"deployer", "simulated", "sim_step", simStep}, func() {}, nil
	}
	ln, proxyURL, log := env.proxy, env.proxyURL, env.log
	opts := []client.Opt{client.FromEnv}
	if f.dockerHost != "" {
		opts = append(opts, client.WithHost(f.dockerHost))
	}
	cli, err := client.New(opts...)
	if err != nil {
		ln.Close()
		return nil, nil, nil, fmt.Errorf("-docker-host: %w", err)
	}
	bo := &imagebuild.Options{BaseImage: f.buildBaseImage, Egress: env.egress, Tarballs: env.tarballs}
	if app, ok := env.githubApp.(installationTokens); ok {
		bo.InstallationToken = app.InstallationToken
		bo.InstallationID = imagebuild.InstallationIDs(env.cp)
	}
	builder, err := imagebuild.New(cli, bo)
	if err != nil {
		ln.Close()
		cli.Close()
		return nil, nil, nil, err
	}
	do := &deploydocker.Options{Client: cli, Network: f.dockerNetwork, ProxyURL: proxyURL,
		Instance: f.dockerInstance, State: env.cp, Logger: log, HealthPath: f.healthPath, HealthTimeout: f.healthTimeout,
		DatabaseTimeout: f.dbTimeout, Builder: builder, Credentials: env.credentials}
	// Each deployment's database and Redis: on the shared servers when
	// given, else containers of its own.
	var shared *deploydb.Shared
	if f.sharedPostgres != "" {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		shared, err = deploydb.New(sctx, &deploydb.Options{PostgresDSN: f.sharedPostgres, RedisURL: f.sharedRedis})
		cancel()
		if err != nil {
			ln.Close()
			cli.Close()
			return nil, nil, nil, fmt.Errorf("-shared-postgres-dsn, -shared-redis-url: %w", err)
		}
		do.Databases = shared
	} else {
		do.Services = &deploydocker.Services{PostgresImage: f.postgresImage, RedisImage: f.redisImage,
			PostgresDataPath: f.postgresData, DataDir: f.dataDir}
	}
	closeShared := func() {
		if shared != nil {
			shared.Close()
		}
	}
	dd, err := deploydocker.New(do)
	if err != nil {
		ln.Close()
		cli.Close()
		closeShared()
		return nil, nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := dd.Ping(pctx); err != nil {
		ln.Close()
		dd.Close()
		cli.Close()
		closeShared()
		return nil, nil, nil, fmt.Errorf("-docker-host: %w", err)
	}
	if err := dd.Reconcile(pctx); err != nil {
		ln.Close()
		dd.Close()
		cli.Close()
		closeShared()
		return nil, nil, nil, err
	}
	srv := &http.Server{Handler: dd.Proxy(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the deployments' proxy stopped", "err", err)
		}
	}()
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
		<-served
		dd.Close()
		cli.Close()
		closeShared()
	}
	return dd, []any{"deployer", "docker", "docker_host", f.dockerHost, "docker_network", f.dockerNetwork, "proxy_url", proxyURL,
		"build_base_image", f.buildBaseImage, "shared_databases", shared != nil}, stop, nil
}
