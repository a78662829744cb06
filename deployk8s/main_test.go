package deployk8s_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// The tests run against real Kubernetes control planes (etcd,
// kube-apiserver, controller manager, scheduler, kwok's fake nodes):
// DEPLOYPLANE_TEST_KUBECONFIG is a kubeconfig with the contexts kube-a
// and kube-b (.ci/kube.sh starts both). Without it every test skips.
const (
	contextA = "kube-a"
	contextB = "kube-b"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // the kill -9 test's control plane; never returns
		return
	}
	os.Exit(m.Run())
}

// client returns the typed client of a context of the test kubeconfig,
// or skips the test.
func client(t testing.TB, context string) kubernetes.Interface {
	t.Helper()
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	cli, err := clientFor(path, context)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func clientFor(path, context string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

func uniq(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func quiet() *slog.Logger {
	if testing.Verbose() {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// namespace makes a namespace for one test, with a service account named
// "runner", and deletes it at the end.
func namespace(t testing.TB, cli kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	ns := uniq("k8s21")
	if _, err := cli.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	if _, err := cli.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// fixture is a control plane whose revisions run on the test clusters
// through the router, each deployment on its listener's cluster.
type fixture struct {
	t        testing.TB
	tenant   string
	instance string
	cp       *controlplane.ControlPlane
	clusters map[string]*deployk8s.Deployer
	clis     map[string]kubernetes.Interface
}

func cpOptions(log *slog.Logger) *controlplane.Options {
	return &controlplane.Options{PollInterval: 100 * time.Millisecond, LeaseDuration: 3 * time.Second, Logger: log}
}

// deployerOptions are the Deployers' options in the tests: quick polls.
func deployerOptions(cli kubernetes.Interface, name, instance string, st deployk8s.State, log *slog.Logger) *deployk8s.Options {
	return &deployk8s.Options{Client: cli, Cluster: name, Instance: instance, State: st, Logger: log,
		PollInterval: 200 * time.Millisecond, ProgressDeadline: 10 * time.Minute}
}

// newFixture starts a control plane over st (a new in-memory store when
// nil) with a Deployer per test cluster; tweak adjusts their options.
func newFixture(t testing.TB, st store.Store, contexts []string, tweak func(*deployk8s.Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, tenant: uniq("tenant"), instance: uniq("inst"), clusters: map[string]*deployk8s.Deployer{},
		clis: map[string]kubernetes.Interface{}}
	if st == nil {
		st = storemem.New()
	}
	f.cp = controlplane.New(st, cpOptions(quiet()))
	route := &deployroute.Options{Clusters: map[string]controlplane.Deployer{}, Listeners: f.cp}
	for _, c := range contexts {
		cli := client(t, c)
		o := deployerOptions(cli, c, f.instance, f.cp, quiet())
		if tweak != nil {
			tweak(o)
		}
		d, err := deployk8s.New(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		f.clusters[c], f.clis[c] = d, cli
		route.Clusters[c] = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.cp.Run(ctx, deployroute.New(route)) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// listener registers a k8s listener on a cluster with its namespaces.
func (f *fixture) listener(cluster string, namespaces ...string) *controlplane.Listener {
	f.t.Helper()
	l, err := f.cp.CreateListener(context.Background(), f.tenant, &controlplane.CreateListenerRequest{
		ComputeType: new(controlplane.ComputeTypeK8s), ComputeID: &cluster,
		ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: namespaces}})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}

// create creates an external_docker deployment from a JSON body.
func (f *fixture) create(body string) *controlplane.Deployment {
	f.t.Helper()
	var req controlplane.CreateDeploymentRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		f.t.Fatal(err)
	}
	d, err := f.cp.CreateDeployment(context.Background(), f.tenant, &req)
	if err != nil {
		f.t.Fatalf("create: %v", err)
	}
	return d
}

// patch PATCHes a deployment with a JSON body.
func (f *fixture) patch(id, body string) *controlplane.Deployment {
	f.t.Helper()
	var req controlplane.UpdateDeploymentRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		f.t.Fatal(err)
	}
	d, err := f.cp.UpdateDeployment(context.Background(), f.tenant, id, &req)
	if err != nil {
		f.t.Fatalf("patch: %v", err)
	}
	return d
}

// waitTerminal waits (generously: it fails only on a real hang) for the
// revision to end.
func waitTerminal(t testing.TB, cp *controlplane.ControlPlane, tenant, dep, rev string) *controlplane.Revision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for {
		r, err := cp.WaitRevision(ctx, tenant, dep, rev, &controlplane.WaitRevisionQuery{Wait: "terminal", Timeout: new(30)})
		if err != nil {
			t.Fatalf("waiting for revision %s: %v", rev, err)
		}
		if controlplane.IsTerminal(r.Status) {
			return r
		}
	}
}

// eventually waits (generously) for cond.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// deployLog is the revision's deploy log, one message a line.
func deployLog(t testing.TB, cp *controlplane.ControlPlane, tenant, dep, rev string) []string {
	t.Helper()
	p, err := cp.ListLogs(context.Background(), tenant, dep, rev, &controlplane.LogQuery{Type: controlplane.LogDeploy, Limit: new(1000)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range p.Logs {
		out = append(out, e.Message)
	}
	return out
}
