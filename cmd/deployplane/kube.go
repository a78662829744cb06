package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
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
// kubeconfig at path (-kubeconfig, default $KUBECONFIG), or for the
// cluster the server runs in (in a pod, without a kubeconfig), and starts
// their reconciliation. No kubeconfig and no pod: no clusters.
func kubeClusters(ctx context.Context, path string, cp *controlplane.ControlPlane, pulls pullTokenFunc, log *slog.Logger) (map[string]*deployk8s.Deployer, error) {
	configs := map[string]*rest.Config{}
	if path != "" {
		raw, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return nil, fmt.Errorf("-kubeconfig: %w", err)
		}
		for _, name := range slices.Sorted(maps.Keys(raw.Contexts)) {
			cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("-kubeconfig: context %s: %w", name, err)
			}
			configs[name] = cfg
		}
	}
	if len(configs) == 0 && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		configs[inClusterName] = cfg
	}
	out := map[string]*deployk8s.Deployer{}
	for name, cfg := range configs {
		cli, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		o := &deployk8s.Options{Client: cli, Cluster: name, State: cp, Logger: log}
		if pulls != nil {
			// Images of the server's registry pull through a Secret.
			o.PullSecrets = &deployk8s.PullSecrets{Credentials: pulls}
		}
		d, err := deployk8s.New(o)
		if err != nil {
			return nil, err
		}
		if err := d.Start(ctx); err != nil {
			// The cluster may come back: its Deployer reconciles again
			// later and /readyz says it is not reachable meanwhile.
			log.Warn("reconciling a Kubernetes cluster", "cluster", name, "err", err)
		}
		out[name] = d
	}
	return out, nil
}

// routed puts the default deployer, the clusters and the Docker endpoints
// behind one deployroute.Router: a deployment with a k8s listener runs on
// the cluster its compute_id names, one with a docker listener on the
// -docker-endpoint of that name, the others on def. A listener naming
// neither ends its revisions DEPLOY_FAILED saying so (wire contract
// section 10: a deployment with a listener runs where it points, or not).
func routed(def controlplane.Deployer, clusters map[string]*deployk8s.Deployer, docker map[string]*deploydocker.Deployer,
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
	env *deployerEnv) (d controlplane.Deployer, desc []any, stop func(), err error) {
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
	clusters, err := kubeClusters(ctx, f.kubeconfig, env.cp, env.pulls, env.log)
	if err != nil {
		dockers.stop()
		return nil, nil, nil, err
	}
	names := slices.Sorted(maps.Keys(clusters))
	return routed(def, clusters, dockers.endpoints, env.cp), append(desc, "k8s_clusters", names), func() {
		for _, c := range clusters {
			c.Close()
		}
		dockers.stop()
	}, nil
}
