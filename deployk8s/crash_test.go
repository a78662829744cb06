package deployk8s_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/storebolt"
)

// childEnv, when set, makes the test binary the kill -9 test's control
// plane (runChild); the others say where its store is and which instance
// it is.
const (
	childEnv      = "DEPLOYK8S_TEST_CHILD"
	childDB       = "DEPLOYK8S_TEST_CHILD_DB"
	childInstance = "DEPLOYK8S_TEST_CHILD_INSTANCE"
)

// runChild runs a control plane with the Kubernetes deployer over the
// store the parent prepared, until it is killed.
func runChild() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, "child:", err); os.Exit(2) }
	st, err := storebolt.Open(os.Getenv(childDB), nil)
	if err != nil {
		fail(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cp := controlplane.New(st, cpOptions(log))
	cli, err := clientFor(os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG"), contextA)
	if err != nil {
		fail(err)
	}
	d, err := deployk8s.New(deployerOptions(cli, contextA, os.Getenv(childInstance), cp, log))
	if err != nil {
		fail(err)
	}
	if err := d.Reconcile(context.Background()); err != nil {
		fail(err)
	}
	r := deployroute.New(&deployroute.Options{Clusters: map[string]controlplane.Deployer{contextA: d}, Listeners: cp})
	fail(cp.Run(context.Background(), r)) // returns only if the store fails
}

// TestKill9MidRollout: a control plane killed with SIGKILL while a
// revision rolls out (its objects applied, its pods held back by a
// ResourceQuota) is restarted: Reconcile deletes the objects of a
// deployment the store does not have, and the resumed revision completes
// with one ReplicaSet and min_scale pods: no duplicate, no orphan.
func TestKill9MidRollout(t *testing.T) {
	cli := client(t, contextA)
	ctx := context.Background()
	ns := namespace(t, cli)
	// No pod may start until the quota goes.
	if _, err := cli.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "hold"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "db.bolt")
	st, err := storebolt.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, tenant: uniq("tenant"), instance: uniq("crash"), cp: controlplane.New(st, cpOptions(quiet()))}
	l := f.listener(contextA, ns)
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 2}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("crash"), l.ID))
	rev := *d.LatestRevisionID
	st.Close()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", childDB+"="+db, childInstance+"="+f.instance)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	}()
	api := "dp-" + d.ID + "-api"
	eventually(t, "the first life applies the revision", func() bool {
		a, err := cli.AppsV1().Deployments(ns).Get(ctx, api, metav1.GetOptions{})
		return err == nil && a.Spec.Template.Labels[deployk8s.LabelRevision] == rev
	})
	if err := child.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	child.Wait()
	killed = true

	// While no control plane runs: an owner of a deployment the store
	// does not have appears (a deleted deployment's leftovers).
	ghost := "0190a2b4-0000-7000-8000-0000000000ff"
	if _, err := cli.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dp-" + ghost,
		Labels: map[string]string{deployk8s.LabelInstance: f.instance, deployk8s.LabelDeployment: ghost,
			deployk8s.LabelComponent: "owner", deployk8s.LabelTenant: f.tenant},
		Annotations: map[string]string{deployk8s.AnnotationTenant: f.tenant}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.CoreV1().ResourceQuotas(ns).Delete(ctx, "hold", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The second life: same store, same instance.
	st2, err := storebolt.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	cp := controlplane.New(st2, cpOptions(quiet()))
	dep, err := deployk8s.New(deployerOptions(cli, contextA, f.instance, cp, quiet()))
	if err != nil {
		t.Fatal(err)
	}
	defer dep.Close()
	if err := dep.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Reconcile deletes the ghost deployment's owner", func() bool {
		_, err := cli.CoreV1().ConfigMaps(ns).Get(ctx, "dp-"+ghost, metav1.GetOptions{})
		return err != nil
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r := deployroute.New(&deployroute.Options{Clusters: map[string]controlplane.Deployer{contextA: dep}, Listeners: cp})
	go func() { defer close(done); cp.Run(rctx, r) }()
	defer func() { cancel(); <-done }()

	got := waitTerminal(t, cp, f.tenant, d.ID, rev)
	if got.Status != controlplane.RevisionDeployed {
		t.Fatalf("after the restart: %s %s", got.Status, deref(got.StatusMessage))
	}
	rss := replicaSets(t, cli, ns, d.ID)
	if len(rss) != 1 || rss[rev].Status.ReadyReplicas != 2 {
		t.Errorf("ReplicaSets after the restart: %d, want one with 2 ready", len(rss))
	}
	sel := labels.SelectorFromSet(labels.Set{deployk8s.LabelDeployment: d.ID, deployk8s.LabelComponent: "api"})
	pods, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Errorf("%d API server pods, want min_scale 2", len(pods.Items))
	}
	owners, err := cli.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: deployk8s.LabelComponent + "=owner"})
	if err != nil {
		t.Fatal(err)
	}
	if len(owners.Items) != 1 || owners.Items[0].Name != "dp-"+d.ID {
		t.Errorf("%d owners in the namespace, want only the deployment's", len(owners.Items))
	}
}
