package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/deployplane/deployplane/deployk8s"
)

// TestAgentScale: AGENT_SCALE deployments, half on kube-a and half on
// kube-b, reach DEPLOYED through two agents (processes of the built
// command, one per cluster, in front of a server that has no
// kubeconfig), beside the same deployments through the server's own
// Kubernetes deployers (a server with -kubeconfig: the push baseline),
// run first in the same test. It reports the wall time per deployment of
// both and their ratio, the requests each agent makes a minute once
// everything is DEPLOYED (from the server's request log), and the latency
// of GET /v2/deployments and GET /v2/deployments/{id} over TCP while the
// deployments roll out, beside the same GETs once idle. Skipped unless
// AGENT_SCALE and DEPLOYPLANE_TEST_KUBECONFIG are set:
//
//	AGENT_SCALE=1000 go test -count=1 -run 'TestAgentScale$' -v -timeout 2h ./cmd/deployplane/
func TestAgentScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("AGENT_SCALE"))
	if n <= 0 {
		t.Skip("set AGENT_SCALE to a number of deployments (AGENT_SCALE=1000) and DEPLOYPLANE_TEST_KUBECONFIG to run the agents' scale test; TestAgentScaleSmall runs 20")
	}
	agentScale(t, n, deployk8s.DefaultReconcileEvery, 1000)
}

// TestAgentScaleSmall is TestAgentScale with 20 deployments and the
// agents reconciling every 2 s: the path of the scale test, and that an
// idle agent's reconciliations ask the control plane for no deployment
// and no revision (only a page of the listener's deployments).
func TestAgentScaleSmall(t *testing.T) {
	agentScale(t, 20, 2*time.Second, 200)
}

// podsPerDeployment is what a deployment runs on a cluster: the API
// server, the queue worker, the database and Redis.
const podsPerDeployment = 4

// scaleWorkers is how many revisions each side drives at once: the
// server's 16 workers (-tenant-workers -1: all of them for the one
// tenant), two agents of 8.
const scaleWorkers = 16

// agentScale runs the scale test with n deployments, the agents
// reconciling every reconcileEvery, idleGets GETs measured once idle.
func agentScale(t *testing.T, n int, reconcileEvery time.Duration, idleGets int) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	contexts := []string{"kube-a", "kube-b"}
	stamp := randSuffix()
	for _, name := range contexts {
		cli := kubeClient(t, kubeconfig, name)
		ensurePods(t, cli, name, (n+1)/2*podsPerDeployment, "scale-"+stamp)
		// What a run that failed leaves.
		t.Cleanup(func() {
			sweep(cli, "scale-"+stamp)
			sweep(cli, "scale-"+stamp+"-"+name)
		})
	}
	// Two keys of one tenant: "k" creates, deletes and follows the
	// events, "g" sends the GETs whose latency is measured, each within
	// its own rate limit.
	keys := filepath.Join(t.TempDir(), "keys.json")
	tenant := "00000000-0000-4000-8000-00000000a9e5"
	if err := os.WriteFile(keys, []byte(`[{"key": "k", "tenant_ids": ["`+tenant+`"]}, {"key": "g", "tenant_ids": ["`+tenant+`"]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, home := binary(t), t.TempDir()
	env := processEnv(home)
	serverArgs := []string{"-keys", keys, "-tenant-workers", "-1", "-log-format", "json", "-registry-addr", "off"}

	// The baseline: the server drives both clusters itself.
	pushLog := newRequestTally()
	push, pushURL := startServerProc(t, pushLog, env, append(serverArgs, "-db", filepath.Join(t.TempDir(), "db"),
		"-kubeconfig", kubeconfig, "-k8s-instance", "scale-"+stamp)...)
	var pushListeners []string
	for _, name := range contexts {
		pushListeners = append(pushListeners, k8sListener(t, pushURL, name))
	}
	base := rollout(t, pushURL, pushListeners, n, "push-"+stamp)
	deleteAll(t, pushURL, base.ids)
	push.kill(t)

	// Ours: a server without the clusters, an agent in front of each.
	agentLog := newRequestTally()
	_, url := startServerProc(t, agentLog, env, append(serverArgs, "-db", filepath.Join(t.TempDir(), "db"), "-sim-agents=false")...)
	var listeners []string
	agents := map[string]*proc{}
	for _, name := range contexts {
		lid := k8sListener(t, url, name)
		listeners = append(listeners, lid)
		status, tok := call(t, "POST", url+"/v2/listeners/"+lid+"/tokens", "k", `{}`)
		if status != 201 {
			t.Fatalf("create a listener token: %d %v", status, tok)
		}
		agents[lid] = startProc(t, bin, processEnv(home, "DEPLOYPLANE_AGENT_TOKEN="+tok["token"].(string)),
			"agent", "-control-plane", url, "-listener-id", lid, "-kubeconfig", kubeconfig, "-context", name,
			"-instance", "scale-"+stamp+"-"+name, "-concurrency", strconv.Itoa(scaleWorkers/len(contexts)),
			"-reconcile-every", reconcileEvery.String(), "-log-format", "json")
	}
	ours := rollout(t, url, listeners, n, "agent-"+stamp)
	rolled := agentLog.count(ours.start, ours.end)

	// Idle: a window of two of the agents' periods (10 s at least) in
	// which their reconciliations found every deployment unchanged.
	window := max(2*reconcileEvery, 10*time.Second)
	idle := agentLog.count(agentLog.awaitSteady(t, listeners, ours.end, window))
	ours.idle = getLoadFor(t, url, ours.ids, idleGets)

	t.Logf("%d deployments (%d failed) over %v, %d revisions at once: agents %v (%v per deployment); push (baseline) %v (%v per deployment; %d failed); x-baseline %.2f",
		n, ours.failed, contexts, scaleWorkers, ours.total.Round(time.Millisecond), ours.per().Round(time.Millisecond),
		base.total.Round(time.Millisecond), base.per().Round(time.Millisecond), base.failed, float64(base.per())/float64(ours.per()))
	for _, lid := range listeners {
		t.Logf("agent of %s: %d requests while rolling out (%.1f a deployment: %s); idle %.1f requests a minute (%s over %v)",
			lid, rolled.total(lid), float64(rolled.total(lid))/float64(n/len(listeners)), rolled.kinds(lid),
			float64(idle.total(lid))*float64(time.Minute)/float64(window), idle.kinds(lid), window)
		if k := idle.byKind[lid]; k["deployment"]+k["revision"] > 0 {
			t.Errorf("the idle agent of %s asked for deployments or revisions one by one: %s", lid, idle.kinds(lid))
		}
	}
	for _, l := range []struct {
		what      string
		ours, bas []time.Duration
		idle      []time.Duration
	}{
		{"GET /v2/deployments", ours.gets.list, base.gets.list, ours.idle.list},
		{"GET /v2/deployments/{id}", ours.gets.one, base.gets.one, ours.idle.one},
	} {
		t.Logf("%s while rolling out: agents %s; push %s; x-baseline (p50) %.2f; idle after %s",
			l.what, percentiles(l.ours), percentiles(l.bas), float64(pct(l.bas, 0.5))/float64(max(1, pct(l.ours, 0.5))), percentiles(l.idle))
	}
	if r := agentLog.refused(); len(r) > 0 {
		t.Logf("the server refused (429, 503) during the agents' run: %v", r)
	}
	if r := pushLog.refused(); len(r) > 0 {
		t.Logf("the server refused (429, 503) during the push run: %v", r)
	}
	deleteAll(t, url, ours.ids)
	for lid, a := range agents {
		select {
		case <-a.done:
			t.Errorf("the agent of %s exited: %v\n%s", lid, a.err, tail(a.log.String(), 4000))
		default:
		}
	}
}

// ensurePods adds fake nodes (kwok's, as .ci/kube/up.sh makes them) to the
// cluster until its nodes have room for need more pods than it runs, and
// removes them at the end of the test.
func ensurePods(t *testing.T, cli kubernetes.Interface, cluster string, need int, prefix string) {
	t.Helper()
	ctx := context.Background()
	nodes, err := cli.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: %v", cluster, err)
	}
	room := 0
	for _, n := range nodes.Items {
		room += int(n.Status.Allocatable.Pods().Value())
	}
	pods, err := cli.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%s: %v", cluster, err)
	}
	room -= len(pods.Items)
	const perNode = 110
	var added []string
	for i := 0; room < need+need/10; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		pods := resource.MustParse(strconv.Itoa(perNode))
		list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods: pods}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}},
			Status: corev1.NodeStatus{Allocatable: list, Capacity: list}}
		if _, err := cli.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: adding a node: %v", cluster, err)
		}
		added = append(added, name)
		room += perNode
	}
	if len(added) == 0 {
		return
	}
	t.Cleanup(func() {
		for _, name := range added {
			cli.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	for deadline := nearDeadline(t); ; {
		ready := 0
		for _, name := range added {
			n, err := cli.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == len(added) {
			t.Logf("%s: added %d nodes for %d pods", cluster, len(added), need)
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: %d of the %d nodes added are ready", cluster, ready, len(added))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// phase is what a rollout measured.
type phase struct {
	ids        []string
	start, end time.Time
	total      time.Duration // the first create to the last revision terminal
	n, failed  int
	gets       *getLoad // while rolling out
	idle       *getLoad // the same GETs once idle (the agents' run)
}

// per is the wall time per deployment.
func (p *phase) per() time.Duration { return p.total / time.Duration(max(1, p.n)) }

// rollout creates n deployments at once (scaleWorkers clients), in turn on
// each listener, and waits until each revision is terminal (from the
// event stream), while a small load of GETs runs.
func rollout(t *testing.T, url string, listeners []string, n int, prefix string) *phase {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	terminal := followRevisions(ctx, t, url)
	p := &phase{n: n, gets: &getLoad{}}
	stopGets := p.gets.run(ctx, url, 2)
	type created struct{ dep, rev string }
	out := make(chan created, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	p.start = time.Now()
	for range scaleWorkers {
		wg.Go(func() {
			for i := range jobs {
				status, d := callRetry(t, "POST", url+"/v2/deployments", fmt.Sprintf(`{"name": "%s-%d", "source": "external_docker",
					"source_config": {"listener_id": "%s", "resource_spec": {"db_storage_gi": 1}},
					"source_revision_config": {"image_uri": "example.com/agent:v1"}}`, prefix, i, listeners[i%len(listeners)]))
				if status != 201 {
					t.Errorf("create: %d %v", status, d)
					continue
				}
				out <- created{d["id"].(string), d["latest_revision_id"].(string)}
			}
		})
	}
	go func() {
		for i := range n {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		close(out)
	}()
	want := map[string]bool{} // revisions created, not yet terminal
	seen := map[string]string{}
	creating := true
	deadline := nearDeadline(t)
	for creating || len(want) > 0 {
		select {
		case c, ok := <-out:
			if !ok {
				creating, out = false, nil
				continue
			}
			p.ids = append(p.ids, c.dep)
			p.gets.add(c.dep)
			if s, ok := seen[c.rev]; ok {
				p.note(t, c.rev, s)
			} else {
				want[c.rev] = true
			}
		case r := <-terminal:
			if want[r.rev] {
				delete(want, r.rev)
				p.note(t, r.rev, r.status)
			} else {
				seen[r.rev] = r.status
			}
		case <-deadline:
			t.Fatalf("%d revisions of %d not terminal at the test's deadline", len(want), n)
		}
	}
	p.end = time.Now()
	p.total = p.end.Sub(p.start)
	stopGets()
	return p
}

// note records a revision's terminal status.
func (p *phase) note(t *testing.T, rev, status string) {
	if status != "DEPLOYED" {
		p.failed++
		t.Errorf("revision %s ended %s", rev, status)
	}
}

// revStatus is a revision's terminal status.
type revStatus struct{ rev, status string }

// followRevisions follows the tenant's event stream (key "k") until ctx
// ends and sends the terminal status of each revision.
func followRevisions(ctx context.Context, t *testing.T, url string) <-chan revStatus {
	t.Helper()
	out := make(chan revStatus, 1024)
	opened := make(chan struct{})
	go func() {
		last := ""
		once := sync.OnceFunc(func() { close(opened) })
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v2/events", nil)
			req.Header.Set("X-Api-Key", "k")
			if last != "" {
				req.Header.Set("Last-Event-ID", last)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("the event stream: %v", err)
				}
				once()
				return
			}
			once()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			event := ""
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "id: "):
					last = strings.TrimPrefix(line, "id: ")
				case strings.HasPrefix(line, "event: "):
					event = strings.TrimPrefix(line, "event: ")
					if event == "gap" {
						t.Errorf("the event stream has a gap: events were lost")
					}
				case strings.HasPrefix(line, "data: ") && event == "revision":
					var e struct {
						RevisionID string `json:"revision_id"`
						Revision   struct {
							Status string `json:"status"`
						} `json:"revision"`
					}
					if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
						t.Errorf("an event: %v", err)
						continue
					}
					switch e.Revision.Status {
					case "DEPLOYED", "SKIPPED", "INTERRUPTED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED":
						select {
						case out <- revStatus{e.RevisionID, e.Revision.Status}:
						case <-ctx.Done():
						}
					}
				}
			}
			resp.Body.Close()
		}
	}()
	<-opened
	return out
}

// callRetry is call with key "k", sent again a second later (Retry-After's
// unit) while the answer is 429 (the key's rate limit) or 503 (the
// tenant's share of the requests in progress, which its agents' requests
// count against too).
func callRetry(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	for {
		status, d := call(t, method, url, "k", body)
		if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
			return status, d
		}
		time.Sleep(time.Second)
	}
}

// deleteAll deletes the deployments and waits until the list is empty
// (each teardown done).
func deleteAll(t *testing.T, url string, ids []string) {
	t.Helper()
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range scaleWorkers {
		wg.Go(func() {
			for id := range jobs {
				if status, body := callRetry(t, "DELETE", url+"/v2/deployments/"+id, ""); status != 204 && status != 202 {
					t.Errorf("DELETE: %d %v", status, body)
				}
			}
		})
	}
	for _, id := range ids {
		jobs <- id
	}
	close(jobs)
	wg.Wait()
	for deadline := nearDeadline(t); ; {
		_, page := call(t, "GET", url+"/v2/deployments?limit=1", "k", "")
		if rs, _ := page["resources"].([]any); len(rs) == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("deployments are left after DELETE: %v", page)
		case <-time.After(time.Second): // a client's polling interval
		}
	}
}

// getLoad is a small load of GETs over TCP, keep-alive: GET
// /v2/deployments and GET /v2/deployments/{id} of a deployment created
// so far, in turn, with key "g", with a pause of 40 ms after each: two
// clients stay within the key's rate limit (50 a second).
type getLoad struct {
	mu        sync.Mutex
	ids       []string
	list, one []time.Duration
}

func (g *getLoad) add(id string) {
	g.mu.Lock()
	g.ids = append(g.ids, id)
	g.mu.Unlock()
}

// run starts workers goroutines of GETs until stop is called.
func (g *getLoad) run(ctx context.Context, url string, workers int) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i++ {
				g.get(ctx, hc, url, i%2 == 0)
				select {
				case <-ctx.Done():
				case <-time.After(40 * time.Millisecond):
				}
			}
		})
	}
	return func() { cancel(); wg.Wait(); hc.CloseIdleConnections() }
}

// get sends one GET (the list, or one deployment) and records its latency.
func (g *getLoad) get(ctx context.Context, hc *http.Client, url string, list bool) {
	g.mu.Lock()
	path := "/v2/deployments"
	if len(g.ids) > 0 && !list {
		path += "/" + g.ids[rand.IntN(len(g.ids))]
	} else {
		list = true
	}
	g.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+path, nil)
	req.Header.Set("X-Api-Key", "g")
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return // the load stopping
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if resp.StatusCode != 200 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if list {
		g.list = append(g.list, d)
	} else {
		g.one = append(g.one, d)
	}
}

// getLoadFor sends the same GETs, one client, 25 ms apart (within the
// key's rate limit), n of them, and answers them.
func getLoadFor(t *testing.T, url string, ids []string, n int) *getLoad {
	t.Helper()
	g := &getLoad{ids: ids}
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	for i := range n {
		g.get(context.Background(), hc, url, i%2 == 0)
		time.Sleep(25 * time.Millisecond)
	}
	return g
}

// pct is the p-th quantile of lat (0 for none).
func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func percentiles(lat []time.Duration) string {
	r := func(d time.Duration) time.Duration {
		if d < time.Millisecond {
			return d.Round(time.Microsecond)
		}
		return d.Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("%d GETs, p50 %v, p90 %v, p99 %v, max %v", len(lat), r(pct(lat, 0.5)), r(pct(lat, 0.9)), r(pct(lat, 0.99)), r(pct(lat, 1)))
}

// requestTally reads a server's JSON log and keeps, of each request of an
// agent route, when it ended, its listener and its kind.
type requestTally struct {
	mu      sync.Mutex
	partial []byte
	reqs    []agentRequest
	refusal map[string]int // 429 and 503 answers: "agent" or the method and path
	wrote   chan struct{}
}

type agentRequest struct {
	at       time.Time
	listener string
	kind     string // claim, heartbeat, ..., list (the listener's deployments), deployment, revision, logs of a revision
}

func newRequestTally() *requestTally {
	return &requestTally{wrote: make(chan struct{}), refusal: map[string]int{}}
}

func (r *requestTally) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.partial = append(r.partial, p...)
	for {
		i := bytes.IndexByte(r.partial, '\n')
		if i < 0 {
			break
		}
		r.line(r.partial[:i])
		r.partial = r.partial[i+1:]
	}
	r.partial = slices.Clip(r.partial)
	close(r.wrote)
	r.wrote = make(chan struct{})
	return len(p), nil
}

// line notes one line of the log.
func (r *requestTally) line(b []byte) {
	if !bytes.Contains(b, []byte(`"msg":"request"`)) {
		return
	}
	var l struct {
		Time   time.Time `json:"time"`
		Method string    `json:"method"`
		Path   string    `json:"path"`
		Status int       `json:"status"`
	}
	if json.Unmarshal(b, &l) != nil {
		return
	}
	rest, ok := strings.CutPrefix(l.Path, "/v2/listeners/")
	lid, route, agent := strings.Cut(rest, "/agent/")
	if l.Status == 429 || l.Status == 503 {
		k := l.Method + " " + l.Path
		if ok && agent {
			k = "agent " + strconv.Itoa(l.Status)
		} else if strings.HasPrefix(l.Path, "/v2/deployments/") {
			k = l.Method + " /v2/deployments/{id}"
		}
		r.refusal[k]++
	}
	if !ok || !agent {
		return
	}
	kind := route
	switch parts := strings.Split(route, "/"); {
	case parts[0] != "deployments":
	case len(parts) == 1:
		kind = "list"
	case len(parts) == 2:
		kind = "deployment"
	case len(parts) == 4:
		kind = "revision"
	default:
		kind = strings.ToLower(l.Method) + " revision logs"
	}
	r.reqs = append(r.reqs, agentRequest{at: l.Time, listener: lid, kind: kind})
}

func (r *requestTally) refused() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.refusal)
}

// counted is a count of requests of each listener's agents, by kind.
type counted struct{ byKind map[string]map[string]int }

func (c counted) total(lid string) int {
	n := 0
	for _, k := range c.byKind[lid] {
		n += k
	}
	return n
}

func (c counted) kinds(lid string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.byKind[lid])) {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.byKind[lid][k]))
	}
	return strings.Join(parts, ", ")
}

// count counts the requests that ended in [from, to).
func (r *requestTally) count(from, to time.Time) counted {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := counted{byKind: map[string]map[string]int{}}
	for _, q := range r.reqs {
		if q.at.Before(from) || !q.at.Before(to) {
			continue
		}
		if c.byKind[q.listener] == nil {
			c.byKind[q.listener] = map[string]int{}
		}
		c.byKind[q.listener][q.kind]++
	}
	return c
}

// awaitSteady waits, after since, for a window of length window that
// starts with one of each listener's agent's reading of the list of its
// deployments and in which no agent asked for a deployment or a revision
// (each reconciliation begins with that list, so the window holds at
// least one that found everything unchanged when it is longer than two of
// their periods), and answers the window. It fails the test shortly
// before its deadline, saying what the agents still ask.
func (r *requestTally) awaitSteady(t *testing.T, listeners []string, since time.Time, window time.Duration) (from, to time.Time) {
	t.Helper()
	deadline := nearDeadline(t)
	for {
		r.mu.Lock()
		// The last request of any kind that asked for a deployment or a
		// revision, and the newest request seen.
		var asked, newest time.Time
		for _, q := range r.reqs {
			if q.at.After(newest) {
				newest = q.at
			}
			if (q.kind == "deployment" || q.kind == "revision") && q.at.After(asked) {
				asked = q.at
			}
		}
		// The first list of each agent after both since and asked.
		from = time.Time{}
		lists := 0
		for _, lid := range listeners {
			for _, q := range r.reqs {
				if q.listener == lid && q.kind == "list" && q.at.After(since) && q.at.After(asked) {
					lists++
					if q.at.After(from) {
						from = q.at
					}
					break
				}
			}
		}
		wrote := r.wrote
		r.mu.Unlock()
		if lists == len(listeners) && newest.Sub(from) >= window {
			return from, from.Add(window)
		}
		select {
		case <-wrote:
		case <-deadline:
			t.Fatalf("the agents' reconciliations do not settle: the last request for a deployment or a revision at %v, the last request seen at %v",
				asked.Format(time.TimeOnly), newest.Format(time.TimeOnly))
		}
	}
}
