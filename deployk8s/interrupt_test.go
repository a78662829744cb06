package deployk8s_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
)

// TestInterruptMidRollout: a revision interrupted while it rolls out (its
// objects applied, its new pods held back by a ResourceQuota) is stopped,
// and the cluster gets the active revision's pod template back, as after
// a failure; the revision stays INTERRUPTED and the active one serves on.
func TestInterruptMidRollout(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	ctx := context.Background()
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker", "source_config": {"listener_id": %q},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("interrupt"), l.ID))
	first := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, first); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	// No new pod may start: the next revision's rollout cannot finish.
	pods, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "hold"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse(strconv.Itoa(len(pods.Items)))}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = f.patch(d.ID, `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	second := *d.LatestRevisionID
	api := "dp-" + d.ID + "-api"
	template := func() string {
		a, err := cli.AppsV1().Deployments(ns).Get(ctx, api, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return a.Spec.Template.Labels[deployk8s.LabelRevision]
	}
	eventually(t, "the second revision is applied", func() bool { return template() == second })
	if r, err := f.cp.GetRevision(ctx, f.tenant, d.ID, second); err != nil || r.Status != controlplane.RevisionDeploying {
		t.Fatalf("second revision before the interrupt: %+v, %v; want DEPLOYING", r, err)
	}
	if _, err := f.cp.InterruptRevision(ctx, f.tenant, d.ID, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the API server's template is the active revision's again", func() bool { return template() == first })
	if r, _ := f.cp.GetRevision(ctx, f.tenant, d.ID, second); r.Status != controlplane.RevisionInterrupted {
		t.Errorf("interrupted revision %s", r.Status)
	}
	got, _ := f.cp.GetDeployment(ctx, f.tenant, d.ID)
	if deref(got.ActiveRevisionID) != first || got.Status != controlplane.StatusReady {
		t.Errorf("deployment %s, active %v; want READY with the first revision", got.Status, deref(got.ActiveRevisionID))
	}
}
