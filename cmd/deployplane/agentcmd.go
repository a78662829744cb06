package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/agent"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/egress"
)

const agentUsage = `deployplane agent: the agent of a listener (package agent). It runs beside
the listener's compute (in its Kubernetes cluster, on its Docker host), dials
out to the control plane, claims the listener's work and drives it with the
same deployers the server runs; the control plane never dials it and never
holds the cluster's credentials. A server serves a listener with agents when
its compute_type and compute_id name no cluster or engine the server was
given: the revisions of its deployments wait QUEUED until an agent claims
them.

Usage:

    DEPLOYPLANE_AGENT_TOKEN=dpl_lt_... deployplane agent -control-plane URL -listener-id ID
        [-kubeconfig FILE[:FILE...]] [-context NAME]   (Kubernetes)
        [-k8s-namespaces NS[,NS...]]
        [-k8s-expose ingress|httproute -k8s-host-template T ...]
        [-docker-host ADDR]                           (Docker)
        [-deployer k8s|docker|sim] [-sim-step 500ms] [-sim-fail-at STATUS]
        [-instance NAME] [-tenant-id UUID] [-concurrency 4] [-reconcile-every 1m]
        [-log-format text|json]
        [-docker-network NAME] [-build-network NAME] [-docker-proxy-addr HOST:PORT]
        [-docker-proxy-url URL] [-docker-postgres-image IMAGE] [-docker-redis-image IMAGE]
        [-docker-postgres-data-path PATH] [-docker-data-dir DIR]
        [-docker-database-timeout 3m] [-docker-pull-retry-timeout 3m]
        [-shared-postgres-dsn DSN [-shared-redis-url URL]]
        [-docker-health-path /ok] [-docker-health-timeout 3m] [-docker-idle-timeout 15m]
        [-docker-secret-ref NAME/KEY=SRC ...]
        [-build-base-image IMAGE]
        [-build-clone-timeout 5m] [-build-timeout 30m] [-build-max-repo-bytes N]
        [-build-max-bytes N] [-build-max-files N] [-build-max-depth 64]
        [-build-max-path-bytes 4096]

Flags:

    -control-plane URL
                      the control plane's base URL, e.g.
                      https://deploy.example.com (required); the agent only
                      ever dials out to it, through $HTTPS_PROXY if set
    -listener-id ID   the listener whose work this agent does (required)
    -deployer k8s|docker|sim
                      the engine the listener's deployments run on. Default:
                      k8s with -kubeconfig or -context, or in a pod
                      ($KUBERNETES_SERVICE_HOST set) without either; docker
                      with -docker-host. sim walks the statuses without
                      running anything (-sim-step, -sim-fail-at as the
                      server's)
    -kubeconfig FILE[:FILE...], -context NAME
                      the cluster: a context of the kubeconfig (default its
                      current context; files default to $KUBECONFIG, else
                      ~/.kube/config). In a pod without either, the pod's own
                      cluster, through its service account. The agent lists
                      and changes the objects it made in every namespace, so
                      its account needs a ClusterRole for them (Deployments,
                      StatefulSets, Services, Secrets, ConfigMaps,
                      PersistentVolumeClaims, HorizontalPodAutoscalers,
                      PodDisruptionBudgets, Ingresses or HTTPRoutes; Pods,
                      ReplicaSets and Events to read), unless
                      -k8s-namespaces says where it works; the Helm chart
                      (deploy/helm/deployplane) grants exactly what it uses
    -k8s-namespaces NS[,NS...]
                      the namespaces the agent deploys to: it lists, watches
                      and changes objects there and nowhere else, so a Role
                      in each is grant enough; a revision whose namespace is
                      another fails saying so (default: every namespace)
    -k8s-expose ingress|httproute, -k8s-host-template T, ...
                      the deployments reached from outside the cluster
                      through an Ingress or an HTTPRoute, their url that
                      address: the server's -k8s-* flags (see deployplane
                      -h), which should be the same for every agent of the
                      listener
    -docker-host ADDR the Docker daemon, unix:///path.sock or tcp://host:port
                      (default $DOCKER_HOST, else unix:///var/run/docker.sock);
                      the -docker-* and -build-* flags are the server's (see
                      deployplane -h), the deployments' urls served by the
                      agent's own proxy at -docker-proxy-addr. Run one agent
                      of a listener on a host: a deployment answers only at
                      the proxy of the agent that deployed it (see
                      docs/docker.md)
    -instance NAME    the label value that marks what this agent creates
                      (Kubernetes objects, containers), so that it reconciles
                      and removes only its own (default
                      deployplane-<listener id>; a server or another agent
                      sharing the cluster or daemon must use another)
    -tenant-id UUID   with an API key of several tenants, the listener's
    -concurrency N    units of work driven at once (default 4)
    -reconcile-every D
                      how often the agent compares the cluster with the
                      stored state (Kubernetes; default 1m): what a deleted
                      deployment left is removed, objects changed by hand
                      are applied again. Of the control plane it asks the
                      list of the listener's deployments (a request per
                      1,000), and again only for those that changed
    -log-format F     text (default) or json, on standard error

Environment:

    DEPLOYPLANE_AGENT_TOKEN
                      a listener token of the listener (create one with
                      POST /v2/listeners/{listener_id}/tokens; it is shown
                      once); accepted only by that listener's agent routes.
                      Credentials come from the environment only, never from
                      flags (command lines are visible to other users)
    DEPLOYPLANE_API_KEY
                      instead of a token, an API key of the listener's tenant

The agent heartbeats every 10 s (the listener is CONNECTED while it does),
claims work with a 30 s long poll, renews each claim's lease while it drives
it, and reports each step: an agent with nothing to do sends about nine
requests a minute, however many deployments its listener has. It tries
again with backoff while the control plane cannot be reached or answers
5xx or 429, and catches up once it answers. SIGINT and SIGTERM give back the work it holds, for another agent
of the listener or its restart to take at once; the work of an agent that
died is taken over when its lease expires (30 s). A token that is revoked
or wrong (401, 403) stops the agent with an error saying so (exit 1).
`

// agentConfig is what the agent's flags and environment say.
type agentConfig struct {
	controlPlane string
	listenerID   string
	tenantID     string
	token        string
	apiKey       string
	engine       string // k8s, docker or sim
	kubeContext  string
	inPod        bool // $KUBERNETES_SERVICE_HOST is set
	instance     string
	concurrency  int
	reconcile    time.Duration // how often a cluster is reconciled
	logFormat    string
	simStep      time.Duration
	simFailAt    string
	deployer     deployerFlags // the engines' settings, shared with the server
}

// labelValue is a Kubernetes label value (and a Docker label's, which
// takes more).
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

func parseAgentFlags(args []string, getenv func(string) string, stderr io.Writer) (*agentConfig, error) {
	c := &agentConfig{token: getenv("DEPLOYPLANE_AGENT_TOKEN"), apiKey: getenv("DEPLOYPLANE_API_KEY"),
		inPod: getenv("KUBERNETES_SERVICE_HOST") != ""}
	fs := flag.NewFlagSet("deployplane agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, agentUsage) }
	fs.StringVar(&c.controlPlane, "control-plane", "", "the control plane's base URL")
	fs.StringVar(&c.listenerID, "listener-id", "", "the listener whose work this agent does")
	fs.StringVar(&c.tenantID, "tenant-id", "", "the listener's tenant, with an API key of several")
	fs.StringVar(&c.engine, "deployer", "", "k8s, docker or sim (default: from -kubeconfig, -context, -docker-host, or a pod)")
	fs.StringVar(&c.kubeContext, "context", "", "the kubeconfig context (default its current context)")
	fs.StringVar(&c.instance, "instance", "", "label value that marks what this agent creates (default deployplane-<listener id>)")
	fs.IntVar(&c.concurrency, "concurrency", agent.DefaultConcurrency, "units of work driven at once")
	fs.DurationVar(&c.reconcile, "reconcile-every", deployk8s.DefaultReconcileEvery, "how often the cluster is compared with the stored state")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&c.simStep, "sim-step", deploysim.DefaultStep, "simulated deployer delay per status")
	fs.StringVar(&c.simFailAt, "sim-fail-at", "", "revision status at which the simulated deployer fails")
	c.deployer.registerEngines(fs, getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if msg := c.check(fs.Args(), set); msg != "" {
		fmt.Fprintln(stderr, "deployplane agent: "+msg)
		return nil, errUsage
	}
	return c, nil
}

// check says what is wrong with the agent's configuration, or "", and
// settles the engine and the instance.
func (c *agentConfig) check(rest []string, set map[string]bool) string {
	switch {
	case len(rest) > 0:
		return fmt.Sprintf("unexpected arguments %q", rest)
	case c.controlPlane == "":
		return "-control-plane URL is required: the control plane's base URL"
	case c.listenerID == "":
		return "-listener-id is required: the listener whose work this agent does"
	case c.token == "" && c.apiKey == "":
		return "set DEPLOYPLANE_AGENT_TOKEN to a listener token (POST /v2/listeners/{listener_id}/tokens), or DEPLOYPLANE_API_KEY"
	case c.token != "" && c.apiKey != "":
		return "set DEPLOYPLANE_AGENT_TOKEN or DEPLOYPLANE_API_KEY, not both"
	case c.tenantID != "" && c.apiKey == "":
		return "-tenant-id goes with DEPLOYPLANE_API_KEY (a listener token names its tenant)"
	case c.concurrency < 1:
		return "-concurrency must be positive"
	case c.reconcile <= 0:
		return "-reconcile-every must be positive"
	case c.logFormat != "text" && c.logFormat != "json":
		return fmt.Sprintf("-log-format must be text or json, not %q", c.logFormat)
	}
	kube, docker := set["kubeconfig"] || set["context"], set["docker-host"]
	switch c.engine {
	case "":
		switch {
		case kube && docker:
			return "give -kubeconfig or -context (Kubernetes) or -docker-host (Docker), not both"
		case kube || (!docker && c.inPod):
			c.engine = "k8s"
		case docker:
			c.engine = "docker"
		default:
			return "say where the listener's deployments run: -kubeconfig FILE [-context NAME] for Kubernetes, " +
				"-docker-host ADDR for Docker, or -deployer sim for a simulation"
		}
	case "k8s", "docker", "sim":
	default:
		return fmt.Sprintf("-deployer must be k8s, docker or sim, not %q", c.engine)
	}
	if c.instance == "" {
		c.instance = "deployplane-" + c.listenerID
	}
	if !labelValue.MatchString(c.instance) {
		return fmt.Sprintf("-instance %q is no label value (up to 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)", c.instance)
	}
	// The Docker settings are checked as the server checks them.
	c.deployer.kind = "sim"
	if c.engine == "docker" {
		c.deployer.kind = "docker"
	}
	c.deployer.dockerInstance = c.instance
	if msg := c.deployer.check(); msg != "" {
		return msg
	}
	return checkSimFlags(c.simStep, c.simFailAt)
}

// buildVersion is the module version the binary was built from, "devel"
// when it was not built from a tagged module.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

// runAgent is `deployplane agent`: it runs until ctx ends (nil) or the
// control plane refuses the agent.
func runAgent(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	c, err := parseAgentFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	var h slog.Handler = slog.NewTextHandler(stderr, nil)
	if c.logFormat == "json" {
		h = slog.NewJSONHandler(stderr, nil)
	}
	log := slog.New(h)
	o := &agent.Options{ControlPlane: c.controlPlane, ListenerID: c.listenerID, Token: c.token, APIKey: c.apiKey, TenantID: c.tenantID,
		Version: "deployplane-agent " + buildVersion(), Logger: log, Concurrency: c.concurrency}
	client, err := agent.NewClient(o)
	if err != nil {
		return err
	}
	d, desc, stop, err := startAgentDeployer(ctx, c, client, log)
	if err != nil {
		return err
	}
	defer stop()
	o.Client, o.Deployer = client, d
	a, err := agent.New(o)
	if err != nil {
		return err
	}
	log.Info("agent starting", append([]any{"control_plane", c.controlPlane, "listener", c.listenerID, "instance", c.instance}, desc...)...)
	return a.Run(ctx)
}

// startAgentDeployer builds the Deployer of the agent's engine over the
// agent routes (client is its State), as the server builds its own
// (kube.go, deployer.go); stop closes it.
func startAgentDeployer(ctx context.Context, c *agentConfig, client *agent.Client, log *slog.Logger) (d controlplane.Deployer, desc []any, stop func(), err error) {
	switch c.engine {
	case "sim":
		return newSim(c.simStep, c.simFailAt), []any{"deployer", "simulated", "sim_step", c.simStep}, func() {}, nil
	case "k8s":
		cfg, name, err := agentKubeConfig(c.deployer.kubeconfig, c.kubeContext, c.deployer.home, c.inPod)
		if err != nil {
			return nil, nil, nil, err
		}
		cli, err := newKubeClient(cfg)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		kd, err := newKubeDeployer(cli, name, c.instance, client, nil, &c.deployer, log)
		if err != nil {
			return nil, nil, nil, err
		}
		// Reconcile now and then every -reconcile-every, in the
		// background, each time under a list of the listener's
		// deployments read then (agent.Client.Reconciling), so that only
		// those that changed are asked for, and over the deployer's
		// caches of the cluster once they have synced, so that only the
		// kinds they do not hold are asked for. A control plane or
		// cluster that does not answer is tried again the next time.
		go func() {
			t := time.NewTicker(c.reconcile)
			defer t.Stop()
			for {
				if err := kd.ReconcileCached(client.Reconciling(ctx)); err != nil && ctx.Err() == nil {
					log.Warn("reconciling the cluster", "cluster", name, "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
		return kd, []any{"deployer", "k8s", "cluster", name}, func() { kd.Close() }, nil
	}
	// Docker: the server's construction, with the agent routes as State
	// and the strict egress policy for clones.
	policy, err := egress.New(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, proxyURL, err := listenProxy(&c.deployer)
	if err != nil {
		return nil, nil, nil, err
	}
	dockers, err := startDockerDeployers(ctx, &c.deployer, &deployerEnv{state: client, log: log, egress: policy, proxy: ln, proxyURL: proxyURL})
	if err != nil {
		return nil, nil, nil, err
	}
	return dockers.def, dockers.desc, dockers.stop, nil
}

// agentKubeConfig is the agent's cluster: the context (current when "")
// of the kubeconfig files (default home's ~/.kube/config), or, with
// neither given in a pod, the pod's own cluster. name is the context's.
func agentKubeConfig(files, context, home string, inPod bool) (cfg *rest.Config, name string, err error) {
	if files == "" && context == "" && inPod {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster configuration: %w", err)
		}
		return cfg, inClusterName, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(files)}
	if files == "" && home != "" {
		rules.Precedence = []string{filepath.Join(home, ".kube", "config")}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("-kubeconfig: %w", err)
	}
	name = context
	if name == "" {
		name = raw.CurrentContext
	}
	if name == "" {
		return nil, "", errors.New("-kubeconfig: no current context; name one with -context")
	}
	if cfg, err = cc.ClientConfig(); err != nil {
		return nil, "", fmt.Errorf("-kubeconfig, context %s: %w", name, err)
	}
	return cfg, name, nil
}
