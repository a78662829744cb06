package deployk8s_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployk8s"
)

// TestMinScaleAtDeployed: a revision with max_scale above min_scale is
// DEPLOYED only once min_scale replicas of it are available, and its
// autoscaler starts at min_scale.
func TestMinScaleAtDeployed(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 3, "max_scale": 5}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("min"), l.ID))
	r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	if r.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	ctx := context.Background()
	api, err := cli.AppsV1().Deployments(ns).Get(ctx, "dp-"+d.ID+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if api.Status.AvailableReplicas < 3 || deref(api.Spec.Replicas) < 3 {
		t.Errorf("at DEPLOYED the API server has %d replicas, %d available; want min_scale 3", deref(api.Spec.Replicas), api.Status.AvailableReplicas)
	}
	h, err := cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "dp-"+d.ID+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if deref(h.Spec.MinReplicas) != 3 || h.Spec.MaxReplicas != 5 {
		t.Errorf("autoscaler %d..%d, want 3..5", deref(h.Spec.MinReplicas), h.Spec.MaxReplicas)
	}
}

// pausable is a TCP proxy on loopback in front of an API server that a
// test can take down: while paused nothing listens on its port
// (connections are refused) and the connections it carried are cut.
type pausable struct {
	t      testing.TB
	addr   string
	target string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	closed bool
}

func newPausable(t testing.TB, target string) *pausable {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pausable{t: t, addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		p.pause()
	})
	return p
}

func (p *pausable) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.carry(c)
		}
	}()
}

func (p *pausable) carry(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(up, c); up.Close() })
	wg.Go(func() { io.Copy(c, up); c.Close() })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// pause closes the port and cuts every connection.
func (p *pausable) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// resume listens on the same port again.
func (p *pausable) resume() {
	p.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("listening on %s again: %v", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxied is a client of a test cluster's API server through a pausable
// proxy.
func proxied(t testing.TB, context string) (kubernetes.Interface, *pausable) {
	t.Helper()
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := newPausable(t, u.Host)
	u.Host = p.addr // 127.0.0.1, which the API server's certificate names
	cfg.Host = u.String()
	cfg.QPS, cfg.Burst = 200, 400
	cli, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cli, p
}

// TestAPIServerOutage: the API server stops answering for a few seconds
// while a revision's objects are applied, and again while its rollout is
// watched; the revision is DEPLOYED all the same, its deploy log saying
// when the cluster did not answer.
func TestAPIServerOutage(t *testing.T) {
	cli, proxy := proxied(t, contextA)
	f := newFixture(t, nil, []string{contextA}, func(o *deployk8s.Options) { o.Client = cli })
	direct := f.clis[contextA]
	ns := namespace(t, direct)
	l := f.listener(contextA, ns)
	logged := func(d *controlplane.Deployment, s string) func() bool {
		return func() bool {
			return strings.Contains(strings.Join(deployLog(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID), "\n"), s)
		}
	}
	outage := func(d *controlplane.Deployment, during string) {
		proxy.pause()
		eventually(t, "the deployer meets the outage while "+during, logged(d, "did not answer while "+during))
		time.Sleep(4 * time.Second) // the outage goes on
		proxy.resume()
	}

	proxy.pause() // down before the first apply
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 2}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("outage"), l.ID))
	proxy.resume()
	outage(d, "applying the revision's objects")
	eventually(t, "the revision's objects are applied", logged(d, "applied; waiting for the rollout"))
	outage(d, "watching the rollout")

	r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	if r.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	logs := strings.Join(deployLog(t, f.cp, f.tenant, d.ID, r.ID), "\n")
	if n := strings.Count(logs, "answers again after"); n != 2 {
		t.Errorf("the deploy log tells %d returns of the cluster, want 2:\n%s", n, logs)
	}
	api, err := direct.AppsV1().Deployments(ns).Get(context.Background(), "dp-"+d.ID+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if api.Status.AvailableReplicas != 2 {
		t.Errorf("%d available replicas, want 2", api.Status.AvailableReplicas)
	}
}

// shape is what matters of an object for the restore tests: its labels,
// annotations, owners and spec (or type and data), or "absent".
func shape(t testing.TB, cli kubernetes.Interface, ns, kind, name string) string {
	t.Helper()
	ctx := context.Background()
	var obj any
	var err error
	pick := func(m metav1.ObjectMeta, body ...any) any {
		ann := map[string]string{}
		for k, v := range m.Annotations {
			if !strings.Contains(k, "kubernetes.io/") { // the controllers' (a Deployment's rollout number)
				ann[k] = v
			}
		}
		return []any{m.Labels, ann, m.OwnerReferences, body}
	}
	switch kind {
	case "Deployment":
		if d, e := cli.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); e == nil {
			obj = pick(d.ObjectMeta, d.Spec)
		} else {
			err = e
		}
	case "StatefulSet":
		if s, e := cli.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{}); e == nil {
			obj = pick(s.ObjectMeta, s.Spec)
		} else {
			err = e
		}
	case "Service":
		if s, e := cli.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); e == nil {
			obj = pick(s.ObjectMeta, s.Spec.Selector, s.Spec.Ports, s.Spec.ClusterIP == corev1.ClusterIPNone)
		} else {
			err = e
		}
	case "Secret":
		if s, e := cli.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); e == nil {
			obj = pick(s.ObjectMeta, s.Type, s.Data)
		} else {
			err = e
		}
	case "ConfigMap":
		if c, e := cli.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); e == nil {
			obj = pick(c.ObjectMeta, c.Data)
		} else {
			err = e
		}
	case "HorizontalPodAutoscaler":
		if h, e := cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{}); e == nil {
			obj = pick(h.ObjectMeta, h.Spec)
		} else {
			err = e
		}
	default:
		t.Fatalf("no shape for %s", kind)
	}
	if k8serrors.IsNotFound(err) {
		return "absent"
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// objectsOf names every object of a deployment's active revision rev.
func objectsOf(dep, rev string) [][2]string {
	p := "dp-" + dep
	return [][2]string{{"ConfigMap", p}, {"Secret", p + "-" + rev}, {"Secret", p + "-services"}, {"Secret", p + "-active"},
		{"StatefulSet", p + "-db"}, {"Service", p + "-db"}, {"Deployment", p + "-redis"}, {"Service", p + "-redis"},
		{"Deployment", p + "-api"}, {"HorizontalPodAutoscaler", p + "-api"}, {"Deployment", p + "-queue"},
		{"HorizontalPodAutoscaler", p + "-queue"}, {"Service", p}}
}

// snapshot is the shape of each of the objects.
func snapshot(t testing.TB, cli kubernetes.Interface, ns string, objs [][2]string) map[[2]string]string {
	t.Helper()
	out := map[[2]string]string{}
	for _, o := range objs {
		out[o] = shape(t, cli, ns, o[0], o[1])
	}
	return out
}

// sameAs waits until every object has its shape in want, and fails
// naming those that do not.
func sameAs(t testing.TB, cli kubernetes.Interface, ns, what string, want map[[2]string]string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var differ []string
		for o, w := range want {
			if got := shape(t, cli, ns, o[0], o[1]); got != w {
				differ = append(differ, fmt.Sprintf("%s %s:\n  got  %s\n  want %s", o[0], o[1], got, w))
			}
		}
		if len(differ) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: objects differ from the active revision's:\n%s", what, strings.Join(differ, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logBuffer is a slog handler's output that tests read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestFailedRevisionRestoresEverything: a revision that fails after an
// active one, having changed every object (the API server's and queue's
// Deployments, the autoscaler it drops, the database, Redis, Services,
// labels, secrets), leaves every object as the active revision had it;
// objects then changed or deleted by hand are put back by Reconcile, which
// touches nothing while nothing differs.
func TestFailedRevisionRestoresEverything(t *testing.T) {
	logs := &logBuffer{}
	f := newFixture(t, nil, []string{contextA}, func(o *deployk8s.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	ctx := context.Background()
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"min_scale": 1, "max_scale": 3, "redis_memory_mb": 64,
			"db_cpu": 0.5, "labels": {"team": "one"}}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"},
		"secrets": [{"name": "K", "value": "v1"}]}`, uniq("restore"), l.ID))
	first := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, first); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	objs := objectsOf(d.ID, first)
	want := snapshot(t, cli, ns, objs)
	for o, s := range want {
		if s == "absent" && o[1] != "dp-"+d.ID+"-queue" {
			t.Fatalf("%s %s does not exist after the first revision", o[0], o[1])
		}
	}

	// min_scale 4 is outside the first revision's autoscaler's range: the
	// restored Deployment goes back to its minimum (one within the range
	// would be kept, as the autoscaler's).
	d = f.patch(d.ID, `{"source_config": {"resource_spec": {"min_scale": 4, "max_scale": 4, "redis_memory_mb": 128, "db_cpu": 1,
		"queue_max_scale": 4, "labels": {"team": "two", "pod-container-running-failed.stage.kwok.x-k8s.io": "true"}}},
		"source_revision_config": {"image_uri": "example.com/agent:v2"},
		"secrets": [{"name": "K", "value": "v2"}]}`)
	second := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, second); r.Status != controlplane.RevisionDeployFailed ||
		!strings.Contains(deref(r.StatusMessage), "exit code 1") {
		t.Fatalf("second revision %s: %s, want DEPLOY_FAILED for its containers' exit code 1", r.Status, deref(r.StatusMessage))
	}
	sameAs(t, cli, ns, "after the failed revision", want)

	// Reconcile finds nothing to repair.
	if err := f.clusters[contextA].Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "repaired objects") {
		t.Errorf("Reconcile repaired objects that match the active revision:\n%s", logs)
	}
	sameAs(t, cli, ns, "after a Reconcile with nothing to repair", want)

	// By hand: the autoscaler, Redis's Service and the revision's Secret
	// deleted; the API server's image, the database's CPU and the
	// services Secret changed (kubectl edit takes the fields it changes).
	p := "dp-" + d.ID
	edit := metav1.UpdateOptions{FieldManager: "kubectl-edit"}
	if err := cli.AutoscalingV2().HorizontalPodAutoscalers(ns).Delete(ctx, p+"-api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.CoreV1().Services(ns).Delete(ctx, p+"-redis", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cli.CoreV1().Secrets(ns).Delete(ctx, p+"-"+first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	api, err := cli.AppsV1().Deployments(ns).Get(ctx, p+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	api.Spec.Template.Spec.Containers[0].Image = "example.com/by-hand:1"
	if _, err := cli.AppsV1().Deployments(ns).Update(ctx, api, edit); err != nil {
		t.Fatal(err)
	}
	db, err := cli.AppsV1().StatefulSets(ns).Get(ctx, p+"-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = db.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]
	if _, err := cli.AppsV1().StatefulSets(ns).Update(ctx, db, edit); err != nil {
		t.Fatal(err)
	}
	sv, err := cli.CoreV1().Secrets(ns).Get(ctx, p+"-services", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sv.Data["REDIS_URI"] = []byte("redis://elsewhere:6379")
	if _, err := cli.CoreV1().Secrets(ns).Update(ctx, sv, edit); err != nil {
		t.Fatal(err)
	}
	if err := f.clusters[contextA].Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	sameAs(t, cli, ns, "after Reconcile", want)
	for _, o := range []string{"HorizontalPodAutoscaler " + p + "-api", "Service " + p + "-redis", "Secret " + p + "-" + first,
		"Deployment " + p + "-api", "StatefulSet " + p + "-db", "Secret " + p + "-services"} {
		if !strings.Contains(logs.String(), o) {
			t.Errorf("the log does not name %s among the repaired objects:\n%s", o, logs)
		}
	}
}

// TestDBStorageRefused: a db_storage_gi the cluster cannot give the
// database's volume (its StorageClass does not expand volumes) fails its
// revision saying so, with every object as the active revision had it;
// the next revision, which still carries that db_storage_gi, deploys with
// the volume as it is.
func TestDBStorageRefused(t *testing.T) {
	f := newFixture(t, nil, []string{contextA}, nil)
	cli := f.clis[contextA]
	ns := namespace(t, cli)
	l := f.listener(contextA, ns)
	ctx := context.Background()
	d := f.create(fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_config": {"listener_id": %q, "resource_spec": {"db_storage_gi": 1}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, uniq("storage"), l.ID))
	first := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, first); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	claim := "data-dp-" + d.ID + "-db-0"
	size := func() string {
		c, err := cli.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := c.Spec.Resources.Requests[corev1.ResourceStorage]
		return q.String()
	}
	eventually(t, "the database's claim exists", func() bool {
		_, err := cli.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		return err == nil
	})
	want := snapshot(t, cli, ns, objectsOf(d.ID, first))

	d = f.patch(d.ID, `{"source_config": {"resource_spec": {"db_storage_gi": 2}}}`)
	r := waitTerminal(t, f.cp, f.tenant, d.ID, *d.LatestRevisionID)
	msg := deref(r.StatusMessage)
	if r.Status != controlplane.RevisionDeployFailed || !strings.Contains(msg, "database's volume from 1Gi to 2Gi") ||
		!strings.Contains(msg, "keeps 1Gi") {
		t.Fatalf("the revision growing the database: %s %q, want DEPLOY_FAILED saying the volume keeps 1Gi", r.Status, msg)
	}
	sameAs(t, cli, ns, "after the refused size", want)
	if s := size(); s != "1Gi" {
		t.Errorf("the claim asks for %s, want 1Gi", s)
	}

	// The deployment's resource_spec keeps db_storage_gi 2: the next
	// revision carries it.
	d = f.patch(d.ID, `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	third := *d.LatestRevisionID
	if r := waitTerminal(t, f.cp, f.tenant, d.ID, third); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("the next revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	logs := strings.Join(deployLog(t, f.cp, f.tenant, d.ID, third), "\n")
	if !strings.Contains(logs, "the database's volume keeps 1Gi") {
		t.Errorf("the deploy log does not say the volume keeps its size:\n%s", logs)
	}
	st, err := cli.AppsV1().StatefulSets(ns).Get(ctx, "dp-"+d.ID+"-db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := st.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "1Gi" || size() != "1Gi" {
		t.Errorf("claim template %s, claim %s; want both 1Gi", q.String(), size())
	}
}
