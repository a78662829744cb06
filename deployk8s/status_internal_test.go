package deployk8s

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"pgregory.net/rapid"
)

// podFailure reads the containers' states: what kwok's failure stage
// writes, pull errors, crash loops; running, waiting to start and
// completed init containers are no failure.
func TestPodFailure(t *testing.T) {
	pod := func(init, main []corev1.ContainerStatus, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: main}}
	}
	running := corev1.ContainerStatus{Name: "api", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want string // "" or a part of the message
	}{
		{"running", pod(nil, []corev1.ContainerStatus{running}, corev1.PodRunning), ""},
		{"creating", pod(nil, []corev1.ContainerStatus{{Name: "api", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}, corev1.PodPending), ""},
		{"init completed", pod([]corev1.ContainerStatus{{Name: "migrate", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}}}, []corev1.ContainerStatus{running}, corev1.PodRunning), ""},
		{"kwok failure stage", pod(nil, []corev1.ContainerStatus{{Name: "api", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "containerFailed", Message: "container failed"}}}}, corev1.PodFailed),
			"Container api of pod p failed: containerFailed (exit code 1): container failed"},
		{"restarted after a crash", pod(nil, []corev1.ContainerStatus{{Name: "api", State: running.State,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}, corev1.PodRunning),
			"OOMKilled (exit code 137)"},
		{"image pull", pod(nil, []corev1.ContainerStatus{{Name: "api", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}, corev1.PodPending),
			"cannot run: ImagePullBackOff: Back-off pulling image"},
		{"failed init container", pod([]corev1.ContainerStatus{{Name: "migrate", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}, nil, corev1.PodPending),
			"Container migrate of pod p cannot run: CrashLoopBackOff"},
		{"evicted", pod(nil, nil, corev1.PodFailed), "Pod p failed"},
	} {
		got := podFailure(c.pod)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// rolledOut: every replica updated, ready and available, none old, the
// generation observed, and at least the minimum.
func TestRolledOut(t *testing.T) {
	dep := func(gen, observed int64, replicas, updated, ready, available, all int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &replicas},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, ReadyReplicas: ready,
				AvailableReplicas: available, Replicas: all}}
	}
	for _, c := range []struct {
		d     *appsv1.Deployment
		least int32
		want  bool
	}{
		{dep(2, 2, 2, 2, 2, 2, 2), 2, true},
		{dep(2, 1, 2, 2, 2, 2, 2), 1, false}, // the new template not observed yet
		{dep(2, 2, 2, 2, 2, 2, 3), 1, false}, // an old pod is still there
		{dep(2, 2, 2, 2, 2, 1, 2), 1, false}, // not available yet (minReadySeconds)
		{dep(2, 2, 2, 1, 2, 2, 2), 1, false}, // one pod of the old template
		{dep(2, 2, 1, 1, 1, 1, 1), 3, false}, // fewer than min_scale
	} {
		if got, _ := rolledOut(c.d, c.least); got != c.want {
			t.Errorf("%+v: %t, want %t", c.d.Status, got, c.want)
		}
	}
}

// Every tenant becomes a valid label value, itself when it is one, and
// two tenants never share one.
func TestTenantLabel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.StringMatching(`[A-Za-z0-9._-]{1,64}`).Draw(t, "a")
		b := rapid.StringMatching(`[A-Za-z0-9._-]{1,64}`).Draw(t, "b")
		la, lb := tenantLabel(a), tenantLabel(b)
		if errs := validation.IsValidLabelValue(la); len(errs) > 0 {
			t.Fatalf("tenantLabel(%q) = %q: %v", a, la, errs)
		}
		if len(validation.IsValidLabelValue(a)) == 0 && la != a {
			t.Fatalf("tenantLabel(%q) = %q, want it unchanged", a, la)
		}
		if a != b && la == lb {
			t.Fatalf("%q and %q share the label %q", a, b, la)
		}
	})
}

// deploymentOf finds the deployment in the names of its objects and of
// what controllers make from them.
func TestDeploymentOf(t *testing.T) {
	id := "0190a2b4-0000-7000-8000-0000000000ff"
	for name, want := range map[string]string{
		"dp-" + id: id, "dp-" + id + "-api": id, "dp-" + id + "-api-7d9f8-x2x": id, "data-dp-" + id + "-db-0": id,
		"other": "", "dp-short": "",
	} {
		if got := deploymentOf(name); got != want {
			t.Errorf("deploymentOf(%q) = %q, want %q", name, got, want)
		}
	}
}
