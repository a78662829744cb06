package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/deploysim"
)

// inClusterName is the compute_id of the cluster the server runs in, when
// it runs in a pod without a kubeconfig.
const inClusterName = "in-cluster"

// kubeClusters makes a deployk8s.Deployer for every context of the
// kubeconfig (f.kubeconfig: -kubeconfig, default $KUBECONFIG: one file, or
// several separated by ':' and merged by kubectl's rules; none: f.home's
// ~/.kube/config when it exists), or for the cluster the server runs in
// (in a pod, without a kubeconfig, unless -k8s-in-cluster=false), each
// labelling its objects -k8s-instance and working in -k8s-namespaces,
// and starts their reconciliation. A
// file that cannot be read or parsed, and a context that cannot be used (a
// certificate that cannot be read, a cluster or user it names that no file
// has), are logged and leave the others working: such a context's
// deployments fail saying so and /readyz reports it. No kubeconfig and no
// pod: no clusters.
func kubeClusters(ctx context.Context, f *deployerFlags, state deployk8s.State, pulls pullTokenFunc,
	log *slog.Logger) (clusters map[string]controlplane.Deployer, current string, stop func(), err error) {
	files, home := f.kubeconfig, f.home
	configs := map[string]*rest.Config{}
	clusters = map[string]controlplane.Deployer{}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(files)}
	if files == "" && home != "" {
		rules.Precedence = []string{filepath.Join(home, ".kube", "config")}
	}
	var found []string
	for _, f := range rules.Precedence {
		if _, err := os.Stat(f); err == nil {
			found = append(found, f)
		} else if files != "" {
			log.Warn("a kubeconfig file cannot be read", "file", f, "err", err)
		}
	}
	if files != "" && len(found) == 0 {
		return nil, "", nil, fmt.Errorf("-kubeconfig: none of %q can be read", files)
	}
	if len(found) > 0 {
		raw, err := rules.Load()
		if raw == nil {
			return nil, "", nil, fmt.Errorf("-kubeconfig: %w", err)
		}
		if err != nil {
			// Files that do not parse are left out; the others are merged.
			log.Warn("a kubeconfig file cannot be used; the others are", "err", err)
		}
		current = raw.CurrentContext
		for _, name := range slices.Sorted(maps.Keys(raw.Contexts)) {
			cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
			if err != nil {
				log.Warn("a Kubernetes context cannot be used: its deployments fail until it is fixed", "cluster", name, "err", err)
				clusters[name] = &brokenCluster{name: name, err: err}
				continue
			}
			configs[name] = cfg
		}
	}
	if len(clusters) == 0 && len(configs) == 0 && f.k8sInCluster && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		configs[inClusterName] = cfg
		current = inClusterName
	}
	var started []*deployk8s.Deployer
	stop = func() {
		for _, d := range started {
			d.Close()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		cli, err := newKubeClient(configs[name])
		if err != nil {
			log.Warn("a Kubernetes context cannot be used: its deployments fail until it is fixed", "cluster", name, "err", err)
			clusters[name] = &brokenCluster{name: name, err: err}
			continue
		}
		d, err := newKubeDeployer(cli, name, f.k8sInstance, state, pulls, f, log)
		if err != nil {
			stop()
			return nil, "", nil, err
		}
		started = append(started, d)
		clusters[name] = d
	}
	// The first reconciliations, all at once: a cluster that does not
	// answer delays the start by kubeStartWait at most, and its Deployer
	// reconciles again later (/readyz says meanwhile that it does not
	// answer).
	var wg sync.WaitGroup
	for name, c := range clusters {
		if d, ok := c.(*deployk8s.Deployer); ok {
			wg.Go(func() {
				if err := d.Start(ctx); err != nil {
					log.Warn("reconciling a Kubernetes cluster", "cluster", name, "err", err)
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(kubeStartWait):
	}
	return clusters, current, stop, nil
}

// The client-side rate limit of a Deployer's client of a cluster's API
// server. client-go's default (5 requests a second, bursts of 10) makes
// the checks of 16 rollouts at once wait seconds each, and the rollouts
// take several times as long as the cluster needs.
const (
	kubeQPS   = 50
	kubeBurst = 100
)

// newKubeClient is the client of a cluster of cfg, with kubeQPS and
// kubeBurst.
func newKubeClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
	return kubernetes.NewForConfig(cfg)
}

// newKubeDeployer is the deployk8s.Deployer of one cluster, the server's
// or an agent's: its objects labelled instance ("" for
// deployk8s.DefaultInstance), the stored state read from state, the
// images of the server's registry pulled through a Secret of pulls (nil:
// none), working in the namespaces of f (-k8s-namespaces; nil: every
// one), the deployments exposed outside the cluster as f says (the
// -k8s-* flags).
func newKubeDeployer(cli kubernetes.Interface, name, instance string, state deployk8s.State, pulls pullTokenFunc,
	f *deployerFlags, log *slog.Logger) (*deployk8s.Deployer, error) {
	o := &deployk8s.Options{Client: cli, Cluster: name, Instance: instance, State: state, Logger: log, Expose: f.expose,
		Namespaces: f.namespaces}
	if len(f.namespaces) > 0 {
		o.Namespace = f.namespaces[0] // deployments without a listener
	}
	if pulls != nil {
		o.PullSecrets = &deployk8s.PullSecrets{Credentials: pulls}
	}
	return deployk8s.New(o)
}

// kubeStartWait bounds the wait for the clusters' first reconciliation at
// start-up.
const kubeStartWait = 30 * time.Second

// brokenCluster stands for a kubeconfig context that cannot be used: its
// deployments' revisions fail saying so (the cause, which may name files,
// goes to the log), their deletion waits until it is fixed, and /readyz
// reports it.
type brokenCluster struct {
	name string
	err  error
}

func (b *brokenCluster) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	msg := fmt.Sprintf("The Kubernetes cluster %q (a context of this server's kubeconfig) cannot be used: the server's log says why. "+
		"No revision can run on it until that is fixed.", b.name)
	if controlplane.HappyPath(w.Revision.Source) == nil {
		return errors.New(msg)
	}
	reached, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{})
	if err != nil {
		return err
	}
	if err := r.Log(ctx, controlplane.LogLine{Type: controlplane.LogDeploy, Level: controlplane.LevelError, Message: msg, Time: time.Now()}); err != nil {
		return err
	}
	return r.Report(ctx, controlplane.Step{Status: controlplane.FailureOf(reached), Message: msg})
}

func (b *brokenCluster) Teardown(context.Context, string, *controlplane.Deployment) error {
	return b.Ready(context.Background())
}

// Ready is never: the context cannot be used.
func (b *brokenCluster) Ready(context.Context) error {
	return fmt.Errorf("cluster %s cannot be used: %w", b.name, b.err)
}

// routed puts the default deployer, the clusters and the Docker endpoints
// behind one deployroute.Router: a deployment with a k8s listener runs on
// the cluster its compute_id names, one with a docker listener on the
// -docker-endpoint of that name, the others on def. A listener naming
// neither ends its revisions DEPLOY_FAILED saying so (wire contract
// section 10: a deployment with a listener runs where it points, or not).
func routed(def controlplane.Deployer, clusters map[string]controlplane.Deployer, docker map[string]*deploydocker.Deployer,
	cp *controlplane.ControlPlane) *deployroute.Router {
	o := &deployroute.Options{Default: def, Clusters: map[string]controlplane.Deployer{}, Docker: map[string]controlplane.Deployer{},
		Listeners: cp}
	for name, d := range clusters {
		o.Clusters[name] = d
	}
	for name, d := range docker {
		o.Docker[name] = d
	}
	return deployroute.New(o)
}

// startDeployer builds the deployers the flags choose: the default one
// (-deployer: simulated, or Docker), one per -docker-endpoint, one per
// Kubernetes cluster (-kubeconfig, or a pod's own cluster), and routes
// each deployment to its listener's (package deployroute).
func startDeployer(ctx context.Context, f *deployerFlags, simStep time.Duration, simFailAt controlplane.RevisionStatus,
	env *deployerEnv) (d *deployroute.Router, desc []any, stop func(), err error) {
	dockers, err := startDockerDeployers(ctx, f, env)
	if err != nil {
		return nil, nil, nil, err
	}
	var def controlplane.Deployer
	if dockers.def != nil {
		def = dockers.def
	} else {
		def = deploysim.New(&deploysim.Options{Step: simStep, FailAt: simFailAt})
		desc = []any{"deployer", "simulated", "sim_step", simStep}
	}
	desc = append(desc, dockers.desc...)
	clusters, current, stopClusters, err := kubeClusters(ctx, f, env.state, env.pulls, env.log)
	if err != nil {
		dockers.stop()
		return nil, nil, nil, err
	}
	names := slices.Sorted(maps.Keys(clusters))
	if f.kind == "k8s" {
		name := cmp.Or(f.k8sDefaultCluster, current)
		k, ok := clusters[name].(*deployk8s.Deployer)
		if !ok {
			stopClusters()
			dockers.stop()
			switch {
			case name == "":
				return nil, nil, nil, fmt.Errorf("-deployer k8s: the kubeconfig has no current context and no -k8s-default-cluster was given (contexts: %v)", names)
			case clusters[name] != nil:
				return nil, nil, nil, fmt.Errorf("-deployer k8s: the cluster %q cannot be used (the log above says why)", name)
			}
			return nil, nil, nil, fmt.Errorf("-deployer k8s: no cluster %q in the kubeconfig (contexts: %v)", name, names)
		}
		def = k
		desc = append([]any{"deployer", "k8s", "default_cluster", name}, dockers.desc...)
	}
	return routed(def, clusters, dockers.endpoints, env.cp), append(desc, "k8s_clusters", names), func() {
		stopClusters()
		dockers.stop()
	}, nil
}
