package deployk8s_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storebolt"
)

// Embedding the Kubernetes deployer: one Deployer per kubeconfig context,
// behind a deployroute.Router that sends each deployment to the cluster
// its listener names (deployments without a listener go to the default
// deployer, here the simulated one); each Deployer reconciles at start and
// every minute. (Not run by go test: it needs clusters and runs until
// interrupted.)
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	st, err := storebolt.Open("deployplane.db", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	cp := controlplane.New(st, nil)

	raw, err := clientcmd.LoadFromFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		log.Fatal(err)
	}
	clusters := map[string]controlplane.Deployer{}
	for name := range raw.Contexts {
		cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
		if err != nil {
			log.Fatal(err)
		}
		cli, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			log.Fatal(err)
		}
		d, err := deployk8s.New(&deployk8s.Options{Client: cli, Cluster: name, State: cp})
		if err != nil {
			log.Fatal(err)
		}
		defer d.Close()
		if err := d.Start(ctx); err != nil { // re-apply or remove what an earlier run left
			log.Print(err)
		}
		clusters[name] = d // a listener {"compute_type": "k8s", "compute_id": name} runs here
	}
	r := deployroute.New(&deployroute.Options{Default: deploysim.New(nil), Clusters: clusters, Listeners: cp})
	if err := cp.Run(ctx, r); err != nil {
		log.Fatal(err)
	}
}
