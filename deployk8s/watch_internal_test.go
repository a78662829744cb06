package deployk8s

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

// TestIdleRequests: a Deployer whose caches have synced waits for its
// rollouts without reading Pods, StatefulSets or Deployments from the API
// server (but for the reads of its applies, three Deployments and a
// StatefulSet a revision), and once its deployments are DEPLOYED its
// reconciliations ask the API server for nothing but the HTTPRoutes, the
// one kind it does not watch: no read of a watched kind, no write.
func TestIdleRequests(t *testing.T) {
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: "kube-a"}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	reqs := &requestCounter{}
	cfg.Wrap(reqs.wrap)
	cli, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := make([]byte, 4)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	ns := "idle-" + suffix
	if _, err := cli.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 100 * time.Millisecond, Logger: quietLogger()})
	d, err := New(&Options{Client: cli, Cluster: "kube-a", Instance: "idle-" + suffix, Namespace: ns, State: cp,
		Logger: quietLogger(), ReconcileEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, "the caches have synced", func() bool { return d.cache.reader(ns) != nil })
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(ctx, d) }()
	defer func() { cancel(); <-done }()

	reqs.reset()
	const n = 2
	src := controlplane.SourceExternalDocker
	var ids []string
	for i := range n {
		name := fmt.Sprintf("idle-%d-%s", i, suffix)
		dep, err := cp.CreateDeployment(ctx, scaleTenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
			SourceConfig:         &controlplane.SourceConfig{ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(2))}},
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("example.com/agent:v1")}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, dep.ID)
	}
	for _, id := range ids {
		dep, err := cp.GetDeployment(ctx, scaleTenant, id)
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := cp.WaitRevision(ctx, scaleTenant, id, *dep.LatestRevisionID, &controlplane.WaitRevisionQuery{Wait: "terminal", Timeout: new(30)})
			if err != nil {
				t.Fatal(err)
			}
			if controlplane.IsTerminal(r.Status) {
				if r.Status != controlplane.RevisionDeployed {
					t.Fatalf("%s: %s %s", id, r.Status, *r.StatusMessage)
				}
				break
			}
		}
	}
	rollout := reqs.reset()
	t.Logf("requests of %d rollouts: %s", n, rollout)
	for kind, want := range map[string]int{"list pods": 0, "list deployments": 0, "list statefulsets": 0,
		"get deployments": 3 * n, "get statefulsets": n} {
		if got := rollout[kind]; got != want {
			t.Errorf("%d rollouts made %d requests %q, want %d", n, got, kind, want)
		}
	}

	const passes = 3
	for range passes {
		if err := d.ReconcileCached(ctx); err != nil {
			t.Fatal(err)
		}
	}
	idle := reqs.reset()
	t.Logf("requests of %d reconciliations, nothing changed: %s", passes, idle)
	for kind, got := range idle {
		if kind != "list httproutes" && !strings.HasPrefix(kind, "watch ") { // a watch renewed meanwhile
			t.Errorf("idle reconciliations made %d requests %q", got, kind)
		}
	}
	if got := idle["list httproutes"]; got > passes {
		t.Errorf("%d reconciliations listed the HTTPRoutes %d times, want once each at most", passes, got)
	}
}

// until waits (generously: it fails only on a hang) for cond.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting until %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
