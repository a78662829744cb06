package deployk8s

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// TestScale: DEPLOYK8S_SCALE deployments created at
// once against cluster kube-a all reach DEPLOYED; it reports the wall
// time per deployment beside the bare client-go apply calls the Deployer
// makes for the same objects (the baseline, run first in the same
// process), and the latency of GET /v2/deployments/{id} (the HTTP API)
// while they roll out, beside the same GETs once they have. Skipped
// unless DEPLOYK8S_SCALE and DEPLOYPLANE_TEST_KUBECONFIG are set:
//
//	DEPLOYK8S_SCALE=1000 go test -run TestScale -v -timeout 2h ./deployk8s/
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEPLOYK8S_SCALE"))
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if n <= 0 || path == "" {
		t.Skip("set DEPLOYK8S_SCALE (a number of deployments) and DEPLOYPLANE_TEST_KUBECONFIG to run the scale test")
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
	// The baseline's pods are not needed: the quota keeps the nodes for ours.
	if _, err := cli.CoreV1().ResourceQuotas(baseNS).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const workers = 16 // the control plane's Workers below

	// The baseline: the apply calls of one revision (owner, Secret, the
	// API server's and queue's Deployments, Service), made directly, for
	// n deployments by as many workers.
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
	// The baseline's objects go before ours start: its ReplicaSets, refused
	// pods by the quota, would otherwise be retried by the controller
	// manager's ReplicaSet controller for the whole run, spending the
	// client rate limit that our pods' creation needs (the first 1,000 run
	// took 25 minutes that way).
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

	// Ours: n deployments created in the control plane, run to DEPLOYED.
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 100 * time.Millisecond, Workers: workers, Logger: quietLogger()})
	ours, err := New(&Options{Client: cli, Cluster: "kube-a", Instance: "scale-ours-" + stamp, Namespace: ourNS, NoServices: true,
		State: cp, PollInterval: time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(rctx, ours) }()
	defer func() { cancel(); <-done }()
	src := controlplane.SourceExternalDocker
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
	t.Logf("%d deployments (%d failed), %d workers: ours %v (%v per deployment, created to DEPLOYED); bare apply calls %v (%v per deployment); ratio %.1fx",
		n, failed, workers, total.Round(time.Millisecond), (total / time.Duration(n)).Round(time.Microsecond),
		base.Round(time.Millisecond), (base / time.Duration(n)).Round(time.Microsecond), float64(total)/float64(base))
	t.Logf("GET /v2/deployments/{id} while rolling out: %d calls, p50 %v, p99 %v, max %v; after (baseline): %d calls, p50 %v, p99 %v; p50 ratio %.1fx",
		len(lat), pct(lat, 0.5), pct(lat, 0.99), pct(lat, 1), len(idle), pct(idle, 0.5), pct(idle, 0.99),
		float64(pct(lat, 0.5))/float64(max(1, pct(idle, 0.5))))
}

// scaleTenant is the tenant of the scale test's deployments.
const scaleTenant = "00000000-0000-4000-8000-00000000b1b1"

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
