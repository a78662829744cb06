package deployk8s_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
)

// TestNamespaces: a Deployer given Options.Namespaces deploys there, fails
// a revision whose namespace is another saying so (without touching it),
// and reconciles only there: the leftovers of a deleted deployment of its
// instance are removed in its namespace and left alone in another.
func TestNamespaces(t *testing.T) {
	cli := client(t, contextA)
	in, out := namespace(t, cli), namespace(t, cli)
	f := newFixture(t, nil, []string{contextA}, func(o *deployk8s.Options) { o.Namespaces = []string{in} })
	l := f.listener(contextA, in, out) // deployments run in its first unless they say otherwise
	ctx := context.Background()

	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker", "source_config": {"listener_id": %q},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("inside"), l.ID))
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("the revision in %s: %s %s", in, r.Status, deref(r.StatusMessage))
	}
	d = f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "listener_config": {"k8s_namespace": %q}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("outside"), l.ID, out))
	r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	if msg := deref(r.StatusMessage); r.Status != controlplane.RevisionDeployFailed ||
		!strings.Contains(msg, "works in namespaces "+in+" only, not in "+out) {
		t.Errorf("the revision in %s: %s %q, want DEPLOY_FAILED saying the deployer works in %s only", out, r.Status, msg, in)
	}
	if cms, err := cli.CoreV1().ConfigMaps(out).List(ctx, metav1.ListOptions{LabelSelector: deployk8s.LabelInstance + "=" + f.instance}); err != nil {
		t.Fatal(err)
	} else if len(cms.Items) > 0 {
		t.Errorf("the refused revision made objects in %s: %v", out, cms.Items)
	}

	ghost := func(ns, id string) {
		t.Helper()
		if _, err := cli.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dp-" + id,
			Labels: map[string]string{deployk8s.LabelInstance: f.instance, deployk8s.LabelDeployment: id,
				deployk8s.LabelComponent: "owner", deployk8s.LabelTenant: f.tenant},
			Annotations: map[string]string{deployk8s.AnnotationTenant: f.tenant}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gin, gout := "0190a2b4-0000-7000-8000-0000000000f1", "0190a2b4-0000-7000-8000-0000000000f2"
	ghost(in, gin)
	ghost(out, gout)
	if err := f.clusters[contextA].Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Reconcile deletes the leftovers in its namespace", func() bool {
		_, err := cli.CoreV1().ConfigMaps(in).Get(ctx, "dp-"+gin, metav1.GetOptions{})
		return k8serrors.IsNotFound(err)
	})
	if _, err := cli.CoreV1().ConfigMaps(out).Get(ctx, "dp-"+gout, metav1.GetOptions{}); err != nil {
		t.Errorf("Reconcile touched a namespace it does not work in: %v", err)
	}
}

// TestNamespacesChecked: New refuses namespaces that cannot be, and an
// empty list (nil means every namespace).
func TestNamespacesChecked(t *testing.T) {
	for _, ns := range [][]string{{}, {"Upper"}, {"ok", "a_b"}} {
		if _, err := deployk8s.New(&deployk8s.Options{Client: fake.NewClientset(), Namespaces: ns}); err == nil {
			t.Errorf("Namespaces %q accepted", ns)
		}
	}
	if _, err := deployk8s.New(&deployk8s.Options{Client: fake.NewClientset(), Namespaces: []string{"b", "a", "b"}}); err != nil {
		t.Errorf("Namespaces [b a b]: %v", err)
	}
}
