package deployk8s_test

import (
	"context"
	"fmt"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMinScaleZero: min_scale 0 rolls out one replica (DEPLOYED needs
// one available) with no HorizontalPodAutoscaler or PodDisruptionBudget
// of the Deployer's; the replicas are then an external scaler's: scaled
// to zero by hand, as KEDA would, Reconcile leaves them there, and a new
// revision rolls out one replica again.
func TestMinScaleZero(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	ctx := context.Background()
	d := f.deployed(t, fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 0, "max_scale": 3}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("zero"), l.ID))
	api := "dp-" + d.ID + "-api"
	replicas := func() int32 {
		t.Helper()
		dp, err := cli.AppsV1().Deployments(ns).Get(ctx, api, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return deref(dp.Spec.Replicas)
	}
	if n := replicas(); n != 1 {
		t.Errorf("min_scale 0 rolled out %d replicas, want 1", n)
	}
	for _, name := range []string{api, "dp-" + d.ID + "-queue"} {
		if _, err := cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{}); !k8serrors.IsNotFound(err) {
			t.Errorf("HorizontalPodAutoscaler %s with min_scale 0: %v, want none (the external scaler makes its own)", name, err)
		}
	}
	if p := pdb(t, cli, ns, d.ID); p != nil {
		t.Errorf("a PodDisruptionBudget with min_scale 0: %+v", p.Spec)
	}

	// The external scaler scales the API server to zero.
	if _, err := cli.AppsV1().Deployments(ns).UpdateScale(ctx, api, &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: api, Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 0}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.unchangedByReconcile(t, nil)
	if n := replicas(); n != 0 {
		t.Errorf("Reconcile changed the replicas an external scaler set to 0: %d", n)
	}

	// A new revision rolls out on one replica.
	f.patched(t, d.ID, `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	if n := replicas(); n != 1 {
		t.Errorf("a revision of a deployment scaled to zero rolled out %d replicas, want 1", n)
	}
}
