package deployk8s

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// TestScale: DEPLOYK8S_SCALE deployments created at once against cluster
// kube-a all reach DEPLOYED. It reports the wall time per deployment
// beside a baseline run first in the same process: the same apply calls,
// made directly, each deployment then waiting for the same rollout with
// a client-go watch of its Deployments, by as many workers as the
// control plane has; the latency of GET /v2/deployments/{id} (the HTTP
// API) while they roll out, beside the same GETs once they have; and the
// requests the Deployer makes to the API server once every deployment is
// DEPLOYED and nothing changes, per minute, over DEPLOYK8S_IDLE (default
// 2m; Start reconciling every Options.ReconcileEvery, its default).
// Skipped unless DEPLOYK8S_SCALE and DEPLOYPLANE_TEST_KUBECONFIG are set:
//
//	DEPLOYK8S_SCALE=1000 go test -count=1 -run TestScale -v -timeout 2h ./deployk8s/
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEPLOYK8S_SCALE"))
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if n <= 0 || path == "" {
		t.Skip("set DEPLOYK8S_SCALE (a number of deployments) and DEPLOYPLANE_TEST_KUBECONFIG to run the scale test")
	}
	idleFor := 2 * time.Minute
	if v := os.Getenv("DEPLOYK8S_IDLE"); v != "" {
		var err error
		if idleFor, err = time.ParseDuration(v); err != nil {
			t.Fatalf("DEPLOYK8S_IDLE: %v", err)
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: "kube-a"}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cli, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mkns := func(name string) {
		if _, err := cli.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	stamp := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	baseNS, ourNS := "scale-base-"+stamp, "scale-ours-"+stamp
	mkns(baseNS)
	mkns(ourNS)
	const workers = 16 // the control plane's Workers below

	// The baseline: for each of n deployments, by as many workers, the
	// apply calls of one revision (owner, Secret, the API server's and
	// queue's Deployments, the deletions of what it does not have,
	// Service) made directly, then a watch of its two Deployments until
	// both rolled out as Deploy requires (rolledOut).
	d, err := New(&Options{Client: cli, Cluster: "kube-a", Instance: "scale-base-" + stamp, NoServices: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	spec := &controlplane.ResourceSpec{}
	jobs := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				w := &controlplane.Work{Tenant: "bench", ResourceSpec: spec,
					Deployment: controlplane.Deployment{ID: fmt.Sprintf("00000000-0000-7000-8000-%012d", i)},
					Revision:   controlplane.Revision{ID: fmt.Sprintf("00000000-0000-7000-9000-%012d", i)}}
				if msg, err := d.apply(ctx, &run{d: d, w: w, ns: baseNS}, "example.com/agent:v1"); err != nil || msg != "" {
					t.Errorf("apply: %v %s", err, msg)
					continue
				}
				if err := watchRollout(ctx, cli, baseNS, w.Deployment.ID); err != nil {
					t.Errorf("watching the rollout: %v", err)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	base := time.Since(start)
	// The baseline's objects go before ours start, their pods with them,
	// so that ours find the nodes as the baseline did.
	gone, err := cli.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + baseNS})
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.CoreV1().Namespaces().Delete(ctx, baseNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for ev := range gone.ResultChan() {
		if ev.Type == watch.Deleted {
			break
		}
	}
	gone.Stop()
	if _, err := cli.CoreV1().Namespaces().Get(ctx, baseNS, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the baseline's namespace is still there after its watch ended: %v", err)
	}

	// Ours: n deployments created in the control plane, run to DEPLOYED,
	// by a Deployer whose requests are counted.
	counted := rest.CopyConfig(cfg)
	reqs := &requestCounter{}
	counted.Wrap(reqs.wrap)
	ourCli, err := kubernetes.NewForConfig(counted)
	if err != nil {
		t.Fatal(err)
	}
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 100 * time.Millisecond, Workers: workers, TenantWorkers: -1,
		Logger: quietLogger()})
	ours, err := New(&Options{Client: ourCli, Cluster: "kube-a", Instance: "scale-ours-" + stamp, Namespace: ourNS, NoServices: true,
		State: cp, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	if err := ours.Start(rctx); err != nil {
		t.Fatal(err)
	}
	go func() { defer close(done); cp.Run(rctx, ours) }()
	defer func() { cancel(); <-done }()
	src := controlplane.SourceExternalDocker
	reqs.reset()
	start = time.Now()
	var ids []string
	for i := range n {
		name := fmt.Sprintf("scale-%d", i)
		dep, err := cp.CreateDeployment(ctx, scaleTenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("example.com/agent:v1")}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, dep.ID)
	}
	// GET /v2/deployments/{id} latency, through the HTTP API, while they
	// roll out, and (the baseline) once they all have.
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey("k"), Tenants: []string{scaleTenant}}})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(httphandler.New(cp, &httphandler.Options{Authenticator: keys}))
	defer api.Close()
	get := func(i int) time.Duration {
		req, _ := http.NewRequest("GET", api.URL+"/v2/deployments/"+ids[i%len(ids)], nil)
		req.Header.Set("X-Api-Key", "k")
		t0 := time.Now()
		resp, err := api.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET deployment: %d", resp.StatusCode)
		}
		return time.Since(t0)
	}
	var lat []time.Duration
	stopGets := make(chan struct{})
	gets := make(chan struct{})
	go func() {
		defer close(gets)
		for i := 0; ; i++ {
			select {
			case <-stopGets:
				return
			case <-time.After(10 * time.Millisecond):
			}
			lat = append(lat, get(i))
		}
	}()
	failed := 0
	for _, id := range ids {
		dep, err := cp.GetDeployment(ctx, scaleTenant, id)
		if err != nil {
			t.Fatal(err)
		}
		for {
			r, err := cp.WaitRevision(ctx, scaleTenant, id, *dep.LatestRevisionID, &controlplane.WaitRevisionQuery{Wait: "terminal", Timeout: new(60)})
			if err != nil {
				t.Fatal(err)
			}
			if controlplane.IsTerminal(r.Status) {
				if r.Status != controlplane.RevisionDeployed {
					failed++
					t.Errorf("%s: %s %s", id, r.Status, *r.StatusMessage)
				}
				break
			}
		}
	}
	total := time.Since(start)
	rollout := reqs.reset()
	close(stopGets)
	<-gets
	var idle []time.Duration
	for i := range min(max(200, len(lat)), 2000) {
		idle = append(idle, get(i))
	}
	pct := func(lat []time.Duration, p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		slices.Sort(lat)
		return lat[min(len(lat)-1, int(float64(len(lat))*p))]
	}
	t.Logf("%d deployments (%d failed), %d workers: ours %v (%v per deployment, created to DEPLOYED); baseline (the same applies, "+
		"then a watch until the same rollout completes) %v (%v per deployment); x-baseline %.2f",
		n, failed, workers, total.Round(time.Millisecond), (total / time.Duration(n)).Round(time.Microsecond),
		base.Round(time.Millisecond), (base / time.Duration(n)).Round(time.Microsecond), float64(base)/float64(total))
	t.Logf("GET /v2/deployments/{id} while rolling out: %d calls, p50 %v, p99 %v, max %v; after (baseline): %d calls, p50 %v, p99 %v; p50 ratio %.1fx",
		len(lat), pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1), len(idle), pct(idle, 0.5), pct(idle, 0.99),
		float64(pct(lat, 0.5))/float64(max(1, pct(idle, 0.5))))
	t.Logf("requests to the API server while rolling out: %d (%.1f a deployment): %s", rollout.total(), float64(rollout.total())/float64(n), rollout)

	// Idle: every deployment DEPLOYED, nothing changes.
	reqs.reset()
	time.Sleep(idleFor)
	quiet := reqs.reset()
	t.Logf("requests to the API server over %v idle, %d deployments DEPLOYED: %.1f a minute: %s", idleFor, n,
		float64(quiet.total())/idleFor.Minutes(), quiet)
}

// watchRollout waits, with a watch, until the API server's and queue's
// Deployments of a deployment in ns have rolled out (rolledOut, one
// replica at least).
func watchRollout(ctx context.Context, cli kubernetes.Interface, ns, dep string) error {
	sel := labels.SelectorFromSet(labels.Set{LabelDeployment: dep}).String()
	list, err := cli.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err
	}
	state := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		state[list.Items[i].Name] = &list.Items[i]
	}
	complete := func() bool {
		for _, name := range []string{apiName(dep), queueName(dep)} {
			if dp := state[name]; dp == nil {
				return false
			} else if ok, _ := rolledOut(dp, 1); !ok {
				return false
			}
		}
		return true
	}
	if complete() {
		return nil
	}
	w, err := cli.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if dp, ok := ev.Object.(*appsv1.Deployment); ok {
			state[dp.Name] = dp
		}
		if complete() {
			return nil
		}
	}
	return fmt.Errorf("the watch of deployment %s ended before its rollout", dep)
}

// requestCounter counts the requests a client sends, by verb and
// resource ("list deployments", "watch pods", "patch secrets").
type requestCounter struct {
	mu sync.Mutex
	n  requestCounts
}

// requestCounts are counts of requests by verb and resource.
type requestCounts map[string]int

func (c requestCounts) total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

func (c requestCounts) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.n == nil {
			c.n = requestCounts{}
		}
		c.n[requestKind(r)]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// reset returns the counts so far and starts again from zero.
func (c *requestCounter) reset() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = requestCounts{}
	return n
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestKind is a request's verb and resource: the path's resource (the
// segment after the namespace, or after the group version), "get" or
// "list" by whether a name follows, "watch" with watch=true.
func requestKind(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(r.Method) + " " + r.URL.Path
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return strings.ToLower(r.Method) + " " + r.URL.Path
	}
	resource, named := parts[0], len(parts) > 1
	verb := map[string]string{"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[r.Method]
	if r.Method == "GET" {
		switch {
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	}
	return verb + " " + resource
}

// scaleTenant is the tenant of the scale test's deployments.
const scaleTenant = "00000000-0000-4000-8000-00000000b1b1"

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
