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
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/deployroute"
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

// routed puts the default deployer and the clusters behind one
// deployroute.Router: deployments with a k8s listener run on the cluster
// its compute_id names, the others on def.
func routed(def controlplane.Deployer, clusters map[string]*deployk8s.Deployer, cp *controlplane.ControlPlane) controlplane.Deployer {
	if len(clusters) == 0 {
		return def
	}
	o := &deployroute.Options{Default: def, Clusters: map[string]controlplane.Deployer{}, Listeners: cp}
	for name, d := range clusters {
		o.Clusters[name] = d
	}
	return deployroute.New(o)
}

// startDeployer builds the deployer the flags choose (startDefaultDeployer)
// and, when the server is configured with Kubernetes clusters (-kubeconfig,
// or a pod's own cluster), routes deployments with a k8s listener to them
// (package deployroute).
func startDeployer(ctx context.Context, f *deployerFlags, simStep time.Duration, simFailAt controlplane.RevisionStatus,
	env *deployerEnv) (d controlplane.Deployer, desc []any, stop func(), err error) {
	d, desc, stopDefault, err := startDefaultDeployer(ctx, f, simStep, simFailAt, env)
	if err != nil {
		return nil, nil, nil, err
	}
	clusters, err := kubeClusters(ctx, f.kubeconfig, env.cp, env.pulls, env.log)
	if err != nil {
		stopDefault()
		return nil, nil, nil, err
	}
	names := slices.Sorted(maps.Keys(clusters))
	return routed(d, clusters, env.cp), append(desc, "k8s_clusters", names), func() {
		for _, c := range clusters {
			c.Close()
		}
		stopDefault()
	}, nil
}
