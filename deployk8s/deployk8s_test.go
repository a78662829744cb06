package deployk8s_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
)

// fullSpec sets every field of the seed's ResourceSpec that a deployer
// uses, leaving the limits and queue sizes to their defaults.
const fullSpec = `{
	"min_scale": 2, "max_scale": 3, "cpu": 0.5, "memory_mb": 256,
	"queue_min_scale": 1, "queue_max_scale": 1, "queue_cpu": 0.25,
	"redis_memory_mb": 64,
	"labels": {"team": "k8s21"}, "annotations": {"example.com/owner": "k8s21"},
	"service_account_name": "runner",
	"image_pull_secrets": [{"name": "regcred"}],
	"volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}}],
	"volume_mounts": [{"name": "cache", "mountPath": "/cache", "readOnly": true}],
	"init_containers": [{"name": "migrate", "image": "example.com/migrate:1", "command": ["migrate", "up"],
		"env": [{"name": "MODE", "value": "up"}], "volumeMounts": [{"name": "cache", "mountPath": "/m"}]}],
	"sidecars": [{"name": "proxy", "image": "example.com/proxy:1", "args": ["--port", "9000"],
		"resources": {"limits": {"cpu": "200m"}, "requests": {"cpu": "100m"}}}],
	"db_cpu": 0.5, "db_memory_mb": 512, "db_storage_gi": 2, "db_max_connections": 50,
	"orchestrator_cpu": 1, "orchestrator_cpu_limit": 2, "orchestrator_memory_mb": 1, "orchestrator_memory_limit_mb": 2,
	"orchestrator_min_scale": 1, "orchestrator_max_scale": 1, "executor_cpu": 1, "executor_cpu_limit": 2,
	"executor_memory_mb": 1, "executor_memory_limit_mb": 2
}`

// stored is what the cluster stored for one deployment.
type stored struct {
	api, queue, redis *appsv1.Deployment
	db                *appsv1.StatefulSet
	svc               *corev1.Service
	hpas              []autoscalingv2.HorizontalPodAutoscaler
	owner             *corev1.ConfigMap
}

func load(t *testing.T, cli kubernetes.Interface, ns, dep string) *stored {
	t.Helper()
	ctx := context.Background()
	get := func(name string) *appsv1.Deployment {
		d, err := cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	s := &stored{api: get("dp-" + dep + "-api"), queue: get("dp-" + dep + "-queue"), redis: get("dp-" + dep + "-redis")}
	var err error
	if s.db, err = cli.AppsV1().StatefulSets(ns).Get(ctx, "dp-"+dep+"-db", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.svc, err = cli.CoreV1().Services(ns).Get(ctx, "dp-"+dep, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if s.owner, err = cli.CoreV1().ConfigMaps(ns).Get(ctx, "dp-"+dep, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := cli.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.hpas = h.Items
	return s
}

func container(p *corev1.PodSpec, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{p.Containers, p.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

func q(s string) string { v := resource.MustParse(s); return v.String() }

func qty(l corev1.ResourceList, k corev1.ResourceName) string {
	v, ok := l[k]
	if !ok {
		return "<none>"
	}
	return v.String()
}

// TestCreateDeployed: a deployment with every field of the ResourceSpec
// set ends DEPLOYED and READY with its Service's address as url, and each
// field is found, with its default applied, in the objects the cluster
// stored.
func TestCreateDeployed(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "listener_config": {"k8s_namespace": %q}, "resource_spec": %s},
		"source_revision_config": {"image_uri": "example.com/agent:v1"},
		"secrets": [{"name": "OPENAI_API_KEY", "value": "sk-k8s21-secret-value"}],
		"secret_references": [{"name": "DB_PASSWORD", "secret_name": "db-creds", "secret_key": "password"}]}`, uniq("full"), l.ID, ns, fullSpec))
	rev := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	got, err := f.cp.GetDeployment(context.Background(), f.tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantURL := fmt.Sprintf("http://dp-%s.%s.svc.cluster.local:8000", d.ID, ns)
	if got.Status != controlplane.StatusReady || deref(got.URL) != wantURL || deref(got.ImageVersion) != "example.com/agent:v1" {
		t.Errorf("deployment status %s url %q image %q, want READY %q example.com/agent:v1", got.Status, deref(got.URL), deref(got.ImageVersion), wantURL)
	}
	// The autoscaler raises the API server to min_scale.
	eventually(t, "the autoscaler scales the API server to min_scale", func() bool {
		a, err := cli.AppsV1().Deployments(ns).Get(context.Background(), "dp-"+d.ID+"-api", metav1.GetOptions{})
		return err == nil && a.Spec.Replicas != nil && *a.Spec.Replicas == 2 && a.Status.AvailableReplicas == 2
	})
	s := load(t, cli, ns, d.ID)
	api, queue := &s.api.Spec.Template.Spec, &s.queue.Spec.Template.Spec
	main, qmain := container(api, "api"), container(queue, "queue")
	if main == nil || qmain == nil {
		t.Fatalf("no api or queue container: %+v %+v", api.Containers, queue.Containers)
	}
	hpa := func(name string) string {
		for _, h := range s.hpas {
			if h.Name == name {
				return fmt.Sprintf("%d..%d", deref(h.Spec.MinReplicas), h.Spec.MaxReplicas)
			}
		}
		return "<none>"
	}
	dbc := container(&s.db.Spec.Template.Spec, "postgres")
	redisc := container(&s.redis.Spec.Template.Spec, "redis")
	claim := s.db.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests
	sidecar, initc := container(api, "proxy"), container(api, "migrate")
	envNames := func(c *corev1.Container) string {
		var n []string
		for _, e := range c.Env {
			n = append(n, e.Name)
		}
		return strings.Join(n, ",")
	}
	// field -> (got, want): every field of ResourceSpec has a row.
	table := map[string][2]string{
		"min_scale":       {hpa("dp-" + d.ID + "-api"), "2..3"},
		"max_scale":       {hpa("dp-" + d.ID + "-api"), "2..3"},
		"cpu":             {qty(main.Resources.Requests, corev1.ResourceCPU), q("500m")},
		"cpu_limit":       {qty(main.Resources.Limits, corev1.ResourceCPU), q("1")}, // 2x cpu
		"memory_mb":       {qty(main.Resources.Requests, corev1.ResourceMemory), q("256Mi")},
		"memory_limit_mb": {qty(main.Resources.Limits, corev1.ResourceMemory), q("512Mi")}, // 2x
		// queue_min_scale = queue_max_scale: no autoscaler, the replicas.
		"queue_min_scale":       {fmt.Sprint(deref(s.queue.Spec.Replicas), " ", hpa("dp-"+d.ID+"-queue")), "1 <none>"},
		"queue_max_scale":       {fmt.Sprint(deref(s.queue.Spec.Replicas), " ", hpa("dp-"+d.ID+"-queue")), "1 <none>"},
		"queue_cpu":             {qty(qmain.Resources.Requests, corev1.ResourceCPU), q("250m")},
		"queue_cpu_limit":       {qty(qmain.Resources.Limits, corev1.ResourceCPU), q("500m")},       // 2x queue_cpu
		"queue_memory_mb":       {qty(qmain.Resources.Requests, corev1.ResourceMemory), q("256Mi")}, // = memory_mb
		"queue_memory_limit_mb": {qty(qmain.Resources.Limits, corev1.ResourceMemory), q("512Mi")},
		"redis_memory_mb":       {qty(redisc.Resources.Limits, corev1.ResourceMemory) + " " + strings.Join(redisc.Args, " "), q("64Mi") + " --maxmemory 64mb"},
		"labels": {s.api.Spec.Template.Labels["team"] + s.db.Labels["team"] + s.svc.Labels["team"] + s.owner.Labels["team"],
			"k8s21k8s21k8s21k8s21"},
		"annotations":          {s.api.Spec.Template.Annotations["example.com/owner"] + s.redis.Annotations["example.com/owner"], "k8s21k8s21"},
		"service_account_name": {api.ServiceAccountName + queue.ServiceAccountName, "runnerrunner"},
		"image_pull_secrets":   {fmt.Sprint(api.ImagePullSecrets), "[{regcred}]"},
		"volumes":              {fmt.Sprint(api.Volumes[0].Name, " ", api.Volumes[0].EmptyDir.SizeLimit.String()), "cache 1Gi"},
		"volume_mounts":        {fmt.Sprint(main.VolumeMounts[0].MountPath, " ", main.VolumeMounts[0].ReadOnly), "/cache true"},
		"init_containers": {fmt.Sprint(initc.Image, " ", initc.Command, " ", envNames(initc), " ", initc.VolumeMounts[0].MountPath, " ", initc.RestartPolicy == nil),
			"example.com/migrate:1 [migrate up] MODE /m true"},
		// A native sidecar: an init container that keeps running.
		"sidecars": {fmt.Sprint(sidecar.Image, " ", sidecar.Args, " ", deref(sidecar.RestartPolicy), " ", qty(sidecar.Resources.Limits, corev1.ResourceCPU)),
			"example.com/proxy:1 [--port 9000] Always 200m"},
		"db_cpu":             {qty(dbc.Resources.Requests, corev1.ResourceCPU), q("500m")},
		"db_cpu_limit":       {qty(dbc.Resources.Limits, corev1.ResourceCPU), q("1")},
		"db_memory_mb":       {qty(dbc.Resources.Requests, corev1.ResourceMemory), q("512Mi")},
		"db_memory_limit_mb": {qty(dbc.Resources.Limits, corev1.ResourceMemory), q("1Gi")},
		"db_storage_gi":      {qty(claim, corev1.ResourceStorage), q("2Gi")},
		"db_max_connections": {strings.Join(dbc.Args, " "), "-c max_connections=50"},
	}
	// The orchestrator_* and executor_* fields are marked "do not use" by
	// the seed: accepted and stored, they size nothing.
	for _, f := range []string{"orchestrator_cpu", "orchestrator_cpu_limit", "orchestrator_memory_mb", "orchestrator_memory_limit_mb",
		"orchestrator_min_scale", "orchestrator_max_scale", "executor_cpu", "executor_cpu_limit", "executor_memory_mb", "executor_memory_limit_mb"} {
		table[f] = [2]string{"unused", "unused"}
	}
	rt := reflect.TypeFor[controlplane.ResourceSpec]()
	for i := range rt.NumField() {
		name := strings.Split(rt.Field(i).Tag.Get("json"), ",")[0]
		row, ok := table[name]
		if !ok {
			t.Errorf("resource_spec.%s has no row in the table", name)
			continue
		}
		if row[0] != row[1] {
			t.Errorf("resource_spec.%s: the cluster has %q, want %q", name, row[0], row[1])
		}
	}
	// The API server: readiness on GET /ok:8000, no gap in rollouts,
	// secrets from the revision's Secret, DATABASE_URI and REDIS_URI.
	rp := main.ReadinessProbe
	if rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/ok" || rp.HTTPGet.Port.IntValue() != 8000 {
		t.Errorf("readiness probe %+v, want GET /ok on 8000", rp)
	}
	if ru := s.api.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("rolling update %+v, want maxUnavailable 0", ru)
	}
	if len(main.EnvFrom) != 1 || main.EnvFrom[0].SecretRef == nil || main.EnvFrom[0].SecretRef.Name != "dp-"+d.ID+"-"+rev.ID {
		t.Errorf("envFrom %+v, want the revision's Secret", main.EnvFrom)
	}
	// A secret reference is a variable read from the Secret it names.
	for _, c := range []*corev1.Container{main, qmain} {
		if e := envNames(c); e != "PORT,DATABASE_URI,REDIS_URI,DB_PASSWORD" {
			t.Errorf("container %s env %s, want PORT,DATABASE_URI,REDIS_URI,DB_PASSWORD", c.Name, e)
		}
		if ref := c.Env[len(c.Env)-1].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "db-creds" || ref.SecretKeyRef.Key != "password" {
			t.Errorf("container %s: DB_PASSWORD comes from %+v, want Secret db-creds key password", c.Name, ref)
		}
	}
	for _, m := range []metav1.Object{s.api, s.queue, s.redis, s.db, s.svc} {
		lb := m.GetLabels()
		if lb[deployk8s.LabelTenant] != f.tenant || lb[deployk8s.LabelDeployment] != d.ID ||
			len(m.GetOwnerReferences()) != 1 || m.GetOwnerReferences()[0].UID != s.owner.UID {
			t.Errorf("%s: labels %v owners %v, want the tenant, deployment and the owner ConfigMap", m.GetName(), lb, m.GetOwnerReferences())
		}
	}
	if s.api.Labels[deployk8s.LabelRevision] != rev.ID || s.api.Spec.Template.Labels[deployk8s.LabelRevision] != rev.ID {
		t.Errorf("API server revision labels %v", s.api.Labels)
	}
	if s.db.Spec.PersistentVolumeClaimRetentionPolicy == nil ||
		s.db.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		t.Errorf("the database's claims do not go with it: %+v", s.db.Spec.PersistentVolumeClaimRetentionPolicy)
	}
	logs := strings.Join(deployLog(t, f.cp, f.tenant, d.ID, rev.ID), "\n")
	for _, want := range []string{"applying the revision's objects", "database ready: true, redis ready: true", "active at " + wantURL, "event Pod/"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the deploy log has no %q:\n%s", want, logs)
		}
	}
	noSecretOutsideSecrets(t, f, cli, ns, d.ID, "sk-k8s21-secret-value")
}

// noSecretOutsideSecrets greps every object of the namespace but its
// Secrets, and the deploy logs, for a secret value.
func noSecretOutsideSecrets(t *testing.T, f *fixture, cli kubernetes.Interface, ns, dep, value string) {
	t.Helper()
	ctx := context.Background()
	var all []any
	add := func(l any, err error) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	lo := metav1.ListOptions{}
	add(cli.CoreV1().ConfigMaps(ns).List(ctx, lo))
	add(cli.CoreV1().Pods(ns).List(ctx, lo))
	add(cli.CoreV1().Services(ns).List(ctx, lo))
	add(cli.CoreV1().Events(ns).List(ctx, lo))
	add(cli.CoreV1().PersistentVolumeClaims(ns).List(ctx, lo))
	add(cli.AppsV1().Deployments(ns).List(ctx, lo))
	add(cli.AppsV1().ReplicaSets(ns).List(ctx, lo))
	add(cli.AppsV1().StatefulSets(ns).List(ctx, lo))
	add(cli.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, lo))
	secrets, err := cli.CoreV1().Secrets(ns).List(ctx, lo)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		s.Data, s.StringData = nil, nil // the one place values belong
		all = append(all, s)
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), value) {
		t.Errorf("a secret value is stored outside Secrets' data")
	}
	found := false
	for _, s := range secrets.Items {
		found = found || s.Labels[deployk8s.LabelDeployment] == dep
	}
	if !found {
		t.Errorf("no Secret of the deployment: the check would prove nothing")
	}
	revs, err := f.cp.ListRevisions(ctx, f.tenant, dep, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs.Resources {
		if logs := strings.Join(deployLog(t, f.cp, f.tenant, dep, r.ID), "\n"); strings.Contains(logs, value) {
			t.Errorf("a secret value is in the deploy log of revision %s", r.ID)
		}
	}
}

// replicaSets are the API server's ReplicaSets of a deployment by
// revision.
func replicaSets(t testing.TB, cli kubernetes.Interface, ns, dep string) map[string]appsv1.ReplicaSet {
	t.Helper()
	sel := labels.SelectorFromSet(labels.Set{deployk8s.LabelDeployment: dep, deployk8s.LabelComponent: "api"})
	l, err := cli.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]appsv1.ReplicaSet{}
	for _, rs := range l.Items {
		out[rs.Spec.Template.Labels[deployk8s.LabelRevision]] = rs
	}
	return out
}

// TestPatchRollsOutWithoutGap: a PATCH of the image rolls out a new
// ReplicaSet; the API server's available replicas never drop below
// min_scale meanwhile, and the old ReplicaSet is at zero at the end.
func TestPatchRollsOutWithoutGap(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 2}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("patch"), l.ID))
	first := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, first); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	// Watch the rollout: every change of the API server's Deployment.
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cli.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=dp-" + d.ID + "-api"})
	if err != nil {
		t.Fatal(err)
	}
	lowest := make(chan int32, 1)
	go func() {
		low := int32(1 << 30)
		for ev := range w.ResultChan() {
			if dp, ok := ev.Object.(*appsv1.Deployment); ok {
				low = min(low, dp.Status.AvailableReplicas)
			}
		}
		lowest <- low
	}()
	d = f.patch(d.ID, `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	second := *d.LatestRevisionID
	r := waitTerminal(t, f.cp, f.tenant, d.ID, second)
	cancel()
	w.Stop()
	if r.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	if low := <-lowest; low < 2 {
		t.Errorf("the API server had %d available replicas during the rollout, want at least min_scale 2", low)
	}
	rss := replicaSets(t, cli, ns, d.ID)
	old, cur := rss[first], rss[second]
	if deref(old.Spec.Replicas) != 0 || old.Status.Replicas != 0 {
		t.Errorf("old ReplicaSet %s: %d replicas (%d running), want 0", old.Name, deref(old.Spec.Replicas), old.Status.Replicas)
	}
	if cur.Status.ReadyReplicas != 2 || cur.Spec.Template.Spec.Containers[0].Image != "example.com/agent:v2" {
		t.Errorf("new ReplicaSet %s: %d ready, image %s", cur.Name, cur.Status.ReadyReplicas, cur.Spec.Template.Spec.Containers[0].Image)
	}
	got, _ := f.cp.GetDeployment(context.Background(), f.tenant, d.ID)
	if deref(got.ActiveRevisionID) != second || deref(got.ImageVersion) != "example.com/agent:v2" {
		t.Errorf("active %s image %s", deref(got.ActiveRevisionID), deref(got.ImageVersion))
	}
	// The first revision's Secret went with its pods.
	if _, err := cli.CoreV1().Secrets(ns).Get(context.Background(), "dp-"+d.ID+"-"+first, metav1.GetOptions{}); !k8serrors.IsNotFound(err) {
		t.Errorf("the old revision's Secret: %v, want not found", err)
	}
}

// TestFailures: containers that fail (kwok's failure stage, chosen by a
// pod label), an object the API server rejects, and a namespace that does
// not exist end DEPLOY_FAILED with the cluster's reason; a failed
// revision after an active one leaves the active one's pods serving.
func TestFailures(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA)
	cases := []struct {
		name, spec, namespace string
		want                  []string
	}{
		{"containers fail", `{"labels": {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}}`, ns,
			[]string{"Container api of pod dp-", "failed", "exit code 1"}},
		{"invalid volume", `{"volumes": [{"name": "two", "emptyDir": {}, "configMap": {"name": "x"}}]}`, ns,
			[]string{"The cluster refused", "may not specify more than 1 volume type"}},
		{"missing namespace", `{}`, "k8s21-no-such-namespace",
			[]string{"The cluster refused", `namespaces "k8s21-no-such-namespace" not found`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
				"source_config": {"listener_id": %q, "listener_config": {"k8s_namespace": %q}, "resource_spec": %s},
				"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("fail"), l.ID, c.namespace, c.spec))
			r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
			if r.Status != controlplane.RevisionDeployFailed {
				t.Fatalf("revision %s, want DEPLOY_FAILED", r.Status)
			}
			for _, w := range c.want {
				if !strings.Contains(deref(r.StatusMessage), w) {
					t.Errorf("status_message %q has no %q", deref(r.StatusMessage), w)
				}
			}
			logs := deployLog(t, f.cp, f.tenant, d.ID, r.ID)
			if len(logs) == 0 || logs[len(logs)-1] != deref(r.StatusMessage) {
				t.Errorf("the deploy log does not end with the failure:\n%s", strings.Join(logs, "\n"))
			}
		})
	}

	t.Run("after an active revision", func(t *testing.T) {
		d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
			"source_config": {"listener_id": %q, "listener_config": {"k8s_namespace": %q}},
			"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("rollback"), l.ID, ns))
		first := *d.LatestRevisionID
		if r := waitTerminal(t, f.cp, f.tenant, d.ID, first); r.Status != controlplane.RevisionDeployed {
			t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
		}
		d = f.patch(d.ID, `{"source_config": {"resource_spec": {"labels": {"pod-container-running-failed.stage.kwok.x-k8s.io": "true"}}}}`)
		// It fails for its containers, not for the change of labels.
		if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployFailed ||
			!strings.Contains(deref(r.StatusMessage), "exit code 1") {
			t.Fatalf("second revision %s: %s, want DEPLOY_FAILED for its containers' exit code 1", r.Status, deref(r.StatusMessage))
		}
		eventually(t, "the API server runs the active revision again", func() bool {
			a, err := cli.AppsV1().Deployments(ns).Get(context.Background(), "dp-"+d.ID+"-api", metav1.GetOptions{})
			return err == nil && a.Spec.Template.Labels[deployk8s.LabelRevision] == first && a.Status.AvailableReplicas == 1 &&
				a.Status.UpdatedReplicas == 1 && a.Status.Replicas == 1
		})
		got, _ := f.cp.GetDeployment(context.Background(), f.tenant, d.ID)
		if deref(got.ActiveRevisionID) != first {
			t.Errorf("active revision %s, want %s", deref(got.ActiveRevisionID), first)
		}
	})
}

// TestTwoClusters: two listeners on two clusters each get only their own
// deployments, in their namespaces.
func TestTwoClusters(t *testing.T) {
	f := newFixture(t, nil, []string{contextA, contextB}, nil)
	nsA, nsB := namespace(t, f.clis[contextA]), namespace(t, f.clis[contextB])
	la, lb := f.listener(contextA, nsA), f.listener(contextB, nsB)
	mk := func(l *controlplane.Listener) *controlplane.Deployment {
		d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker", "source_config": {"listener_id": %q},
			"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("two"), l.ID))
		if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
			t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
		}
		return d
	}
	da, db := mk(la), mk(lb)
	owned := func(cli kubernetes.Interface) []string {
		sel := labels.SelectorFromSet(labels.Set{deployk8s.LabelInstance: f.instance, deployk8s.LabelComponent: "owner"})
		l, err := cli.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range l.Items {
			out = append(out, c.Namespace+"/"+c.Labels[deployk8s.LabelDeployment])
		}
		return out
	}
	if got := owned(f.clis[contextA]); !slices.Equal(got, []string{nsA + "/" + da.ID}) {
		t.Errorf("cluster a holds %v, want only %s", got, nsA+"/"+da.ID)
	}
	if got := owned(f.clis[contextB]); !slices.Equal(got, []string{nsB + "/" + db.ID}) {
		t.Errorf("cluster b holds %v, want only %s", got, nsB+"/"+db.ID)
	}
}

// TestDeleteLeavesNothing: DELETE removes every object of the deployment,
// its database's claim included, and the records only after that.
func TestDeleteLeavesNothing(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"max_scale": 3}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"},
		"secrets": [{"name": "K", "value": "v"}]}`, uniq("del"), l.ID))
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: deployk8s.LabelDeployment + "=" + d.ID}
	claims := func() int {
		l, err := cli.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	eventually(t, "the database's claim exists", func() bool { return claims() == 1 })
	if err := f.cp.DeleteDeployment(ctx, f.tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deployment's records are gone", func() bool {
		_, err := f.cp.GetDeployment(ctx, f.tenant, d.ID)
		return errors.Is(err, apierr.ErrNotFound)
	})
	// The records went only once the cluster confirmed: nothing is left.
	left := map[string]int{}
	count := func(kind string, l any, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if n := reflect.ValueOf(l).Elem().FieldByName("Items").Len(); n > 0 {
			left[kind] = n
		}
	}
	l1, e1 := cli.CoreV1().ConfigMaps(ns).List(ctx, sel)
	count("ConfigMaps", l1, e1)
	l2, e2 := cli.CoreV1().Secrets(ns).List(ctx, sel)
	count("Secrets", l2, e2)
	l3, e3 := cli.CoreV1().Services(ns).List(ctx, sel)
	count("Services", l3, e3)
	l4, e4 := cli.CoreV1().Pods(ns).List(ctx, sel)
	count("Pods", l4, e4)
	l5, e5 := cli.AppsV1().Deployments(ns).List(ctx, sel)
	count("Deployments", l5, e5)
	l6, e6 := cli.AppsV1().ReplicaSets(ns).List(ctx, sel)
	count("ReplicaSets", l6, e6)
	l7, e7 := cli.AppsV1().StatefulSets(ns).List(ctx, sel)
	count("StatefulSets", l7, e7)
	l8, e8 := cli.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, sel)
	count("HorizontalPodAutoscalers", l8, e8)
	l9, e9 := cli.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	count("PersistentVolumeClaims", l9, e9)
	if len(left) > 0 {
		t.Errorf("left after DELETE: %v", left)
	}
}
