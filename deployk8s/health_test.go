package deployk8s_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
)

// A revision whose container fails after the rollout (its pod's status
// says it terminated with an error) is rolled back automatically when the
// deployment asks for it: the Deployment runs the earlier image again,
// and the failed revision says why.
func TestAutoRollback(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, func(o *deployk8s.Options) { o.WatchInterval = 100 * time.Millisecond })
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "auto_rollback": true},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("autorollback"), l.ID))
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	d = f.patch(d.ID, `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	second := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, second); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	// Its container crashes once it serves.
	ctx := context.Background()
	pods, err := cli.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: deployk8s.LabelRevision + "=" + second})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the second revision's pods: %v, %v", pods, err)
	}
	p := pods.Items[0]
	if len(p.Status.ContainerStatuses) == 0 {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image}}
	}
	p.Status.ContainerStatuses[0].RestartCount++
	p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 2, Reason: "Error", Message: "panic: lost the database"}}
	if _, err := cli.CoreV1().Pods(ns).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var back string
	eventually(t, "a rollback revision is made", func() bool {
		got, err := f.cp.GetDeployment(ctx, f.tenant, d.ID)
		if err == nil && *got.LatestRevisionID != second {
			back = *got.LatestRevisionID
		}
		return back != ""
	})
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, back); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("the rollback's revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	got, err := f.cp.GetDeployment(ctx, f.tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if deref(got.ActiveRevisionID) != back || deref(got.ImageVersion) != "example.com/agent:v1" {
		t.Fatalf("active %s on %s, want the rollback %s on v1", deref(got.ActiveRevisionID), deref(got.ImageVersion), back)
	}
	failed, err := f.cp.GetRevision(ctx, f.tenant, d.ID, second)
	if err != nil {
		t.Fatal(err)
	}
	if msg := deref(failed.StatusMessage); !strings.Contains(msg, "Rolled back automatically") || !strings.Contains(msg, "lost the database") {
		t.Fatalf("the failed revision's status_message: %q", msg)
	}
}
