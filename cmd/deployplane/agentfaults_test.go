package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/deployplane/deployplane/deployk8s"
)

// The agent's faults on the test clusters, every party in a process of its
// own: the control plane is the built command with a bbolt store and no
// kubeconfig (so it drives no cluster and leaves every k8s listener to
// agents), each agent is `deployplane agent` with a listener token made
// over HTTP, and the tests kill and restart them. The subtests share one
// control plane; all but the outage run at once, each on listeners of its
// own, and the outage runs last, since it stops the control plane. No
// check depends on how long a step takes: every wait polls a condition
// until shortly before the test binary's deadline.
func TestAgentFaults(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	if testing.Short() {
		t.Skip("builds the command and runs its processes against the test clusters; skipped with -short")
	}
	f := &faults{bin: binary(t), kubeconfig: kubeconfig, home: t.TempDir(),
		kube: map[string]kubernetes.Interface{"kube-a": kubeClient(t, kubeconfig, "kube-a"), "kube-b": kubeClient(t, kubeconfig, "kube-b")}}
	f.cp = startControlPlane(t, f.bin, f.home)

	// The listeners of the two clusters and their agents, which the
	// outage reuses: started here, they run until the test ends.
	two := &twoClusters{}
	for _, c := range []string{"kube-a", "kube-b"} {
		lid := k8sListener(t, f.cp.url, "edge-"+randSuffix())
		two.listeners = append(two.listeners, lid)
		two.agents = append(two.agents, f.agent(t, lid, listenerToken(t, f.cp.url, lid), c))
	}

	t.Run("AtOnce", func(t *testing.T) {
		t.Run("TwoClusters", func(t *testing.T) { t.Parallel(); f.twoClusters(t, two) })
		t.Run("Kill9MidRollout", func(t *testing.T) { t.Parallel(); f.kill9MidRollout(t) })
		t.Run("PatchWhileAgentDown", func(t *testing.T) { t.Parallel(); f.patchWhileAgentDown(t) })
		t.Run("TwoAgentsOneListener", func(t *testing.T) { t.Parallel(); f.twoAgentsOneListener(t) })
		t.Run("TwoListenersOneCluster", func(t *testing.T) { t.Parallel(); f.twoListenersOneCluster(t) })
		t.Run("TokenRevoked", func(t *testing.T) { t.Parallel(); f.tokenRevoked(t) })
		t.Run("ProxyNotFound", func(t *testing.T) { t.Parallel(); f.proxyNotFound(t) })
	})
	t.Run("ControlPlaneOutage", func(t *testing.T) {
		if len(two.deployments) != 2 {
			t.Skip("TwoClusters did not leave its deployments, which the outage needs")
		}
		f.outage(t, two)
	})
}

// faults is what the subtests of TestAgentFaults share.
type faults struct {
	bin        string // the command
	kubeconfig string
	home       string // $HOME of every process: no ~/.kube/config
	kube       map[string]kubernetes.Interface
	cp         *controlPlane
}

// twoClusters are a listener on each test cluster, each with its agent,
// and (once TwoClusters made them) a deployment on each.
type twoClusters struct {
	listeners   []string // kube-a's, kube-b's
	agents      []*proc
	deployments [][2]string // id and revision, on listeners[i]
}

// A deployment on a listener whose agent drives kube-a and one on a
// listener whose agent drives kube-b both reach DEPLOYED, and each one's
// objects are in its own cluster only, labelled with its agent's
// instance.
func (f *faults) twoClusters(t *testing.T, two *twoClusters) {
	var deps [][2]string
	for _, lid := range two.listeners {
		dep, rev := k8sDeployment(t, f.cp.url, lid)
		deps = append(deps, [2]string{dep, rev})
	}
	for i, c := range []string{"kube-a", "kube-b"} {
		dep, rev := deps[i][0], deps[i][1]
		waitStatus(t, f.cp.url, "k", dep, rev, "DEPLOYED")
		f.oneSet(t, c, "deployplane-"+two.listeners[i], dep, rev)
		other := map[string]string{"kube-a": "kube-b", "kube-b": "kube-a"}[c]
		if objs := objectsOf(t, f.kube[other], deployk8s.LabelDeployment+"="+dep); len(objs) != 0 {
			t.Errorf("the deployment on %s's listener has objects in %s too: %v", c, other, objs)
		}
	}
	if !t.Failed() {
		two.deployments = deps
	}
}

// An agent killed with SIGKILL in the middle of a rollout (the revision
// DEPLOYING, its objects applied, its pods held back by a ResourceQuota),
// then started again: once the dead agent's lease expires the new one
// resumes the revision from DEPLOYING and it is DEPLOYED, its status
// history without a repeated entry, with one set of objects and nothing
// else of the listener's agents in the cluster.
func (f *faults) kill9MidRollout(t *testing.T) {
	cli := f.kube["kube-a"]
	ns := kubeNamespace(t, cli)
	ctx := context.Background()
	holdPods(t, cli, ns)
	lid := nsListener(t, f.cp.url, ns)
	token := listenerToken(t, f.cp.url, lid)
	first := f.agent(t, lid, token, "kube-a")
	dep, rev := k8sDeployment(t, f.cp.url, lid)
	eventually(t, "the revision DEPLOYING with its API server's Deployment applied", func() (bool, string) {
		_, r := call(t, "GET", f.cp.url+"/v2/deployments/"+dep+"/revisions/"+rev, "k", "")
		api, err := cli.AppsV1().Deployments(ns).Get(ctx, "dp-"+dep+"-api", metav1.GetOptions{})
		return r["status"] == "DEPLOYING" && err == nil && api.Spec.Template.Labels[deployk8s.LabelRevision] == rev,
			fmt.Sprintf("revision %v, Deployment: %v", r["status"], err)
	})
	first.kill(t)
	if _, r := call(t, "GET", f.cp.url+"/v2/deployments/"+dep+"/revisions/"+rev, "k", ""); r["status"] != "DEPLOYING" {
		t.Fatalf("the revision after its agent was killed: %v, want DEPLOYING still", r["status"])
	}
	releasePods(t, cli, ns)
	second := f.agent(t, lid, token, "kube-a")
	waitStatus(t, f.cp.url, "k", dep, rev, "DEPLOYED")
	resumed := regexp.MustCompile(`msg="agent: deploying" deployment=` + dep + ` revision=` + rev + ` status=DEPLOYING`)
	if !resumed.MatchString(second.log.String()) {
		t.Errorf("the second agent did not resume the revision from DEPLOYING:\n%s", second.log)
	}
	historyOnce(t, f.cp.url, dep, rev)
	f.oneSet(t, "kube-a", "deployplane-"+lid, dep, rev)
	for _, o := range objectsOf(t, cli, deployk8s.LabelInstance+"=deployplane-"+lid) {
		if o.labels[deployk8s.LabelDeployment] != dep {
			t.Errorf("an orphan of the listener's agents: %s (deployment %q)", o, o.labels[deployk8s.LabelDeployment])
		}
	}
}

// A PATCH made while the listener's only agent is stopped waits QUEUED,
// saying so, the cluster still serving the active revision; once the
// agent is back the new revision is DEPLOYED and the cluster runs it.
func (f *faults) patchWhileAgentDown(t *testing.T) {
	cli := f.kube["kube-b"]
	lid := k8sListener(t, f.cp.url, "edge-"+randSuffix())
	token := listenerToken(t, f.cp.url, lid)
	a := f.agent(t, lid, token, "kube-b")
	dep, rev := k8sDeployment(t, f.cp.url, lid)
	waitStatus(t, f.cp.url, "k", dep, rev, "DEPLOYED")
	a.stop(t)

	status, p := call(t, "PATCH", f.cp.url+"/v2/deployments/"+dep, "k", `{"source_revision_config": {"image_uri": "example.com/agent:v2"}}`)
	if status != 200 || p["latest_revision_id"] == rev {
		t.Fatalf("PATCH: %d %v, want a new revision", status, p)
	}
	next := p["latest_revision_id"].(string)
	_, r := call(t, "GET", f.cp.url+"/v2/deployments/"+dep+"/revisions/"+next, "k", "")
	if msg, _ := r["status_message"].(string); r["status"] != "QUEUED" || !strings.Contains(msg, "Waiting for the agent of listener "+lid) {
		t.Errorf("the revision made while the agent is down: %v %q, want QUEUED waiting for the agent", r["status"], msg)
	}
	if got := apiRevision(t, cli, dep); got != rev {
		t.Errorf("the cluster runs revision %s while the agent is down, want the active %s", got, rev)
	}

	f.agent(t, lid, token, "kube-b")
	waitStatus(t, f.cp.url, "k", dep, next, "DEPLOYED")
	historyOnce(t, f.cp.url, dep, next)
	if _, d := call(t, "GET", f.cp.url+"/v2/deployments/"+dep, "k", ""); d["active_revision_id"] != next || d["status"] != "READY" {
		t.Errorf("the deployment: active %v status %v, want %s READY", d["active_revision_id"], d["status"], next)
	}
	if got := apiRevision(t, cli, dep); got != next {
		t.Errorf("the cluster runs revision %s, want the PATCH's %s", got, next)
	}
	for _, o := range objectsOf(t, cli, deployk8s.LabelDeployment+"="+dep+","+deployk8s.LabelComponent+"=secrets") {
		if o.labels[deployk8s.LabelRevision] != next {
			t.Errorf("a Secret of revision %s is left: %s", o.labels[deployk8s.LabelRevision], o)
		}
	}
}

// Two agents of one listener (as a Deployment of two replicas runs
// them: one token, one instance), each driving one revision at a time
// (-concurrency 1), share its deployments. With the pods held back by a
// ResourceQuota, the first two deployments are DEPLOYING at once, one
// driven by each agent; the others wait. Once the pods may run, all are
// DEPLOYED, each revision taken up by one agent only (the claim's lease
// decides), its status history without a repeated entry, and each
// deployment has one set of objects.
func (f *faults) twoAgentsOneListener(t *testing.T) {
	cli := f.kube["kube-b"]
	ns := kubeNamespace(t, cli)
	holdPods(t, cli, ns)
	lid := nsListener(t, f.cp.url, ns)
	token := listenerToken(t, f.cp.url, lid)
	agents := []*proc{f.agent(t, lid, token, "kube-b", "-concurrency", "1"), f.agent(t, lid, token, "kube-b", "-concurrency", "1")}
	// takenUp counts, per agent, the times it began to drive the
	// deployment's revision.
	takenUp := func(dep string) []int {
		drove := regexp.MustCompile(`msg="agent: deploying" deployment=` + dep + ` `)
		return []int{len(drove.FindAllString(agents[0].log.String(), -1)), len(drove.FindAllString(agents[1].log.String(), -1))}
	}
	var deps [][2]string
	for range 4 {
		dep, rev := k8sDeployment(t, f.cp.url, lid)
		deps = append(deps, [2]string{dep, rev})
	}
	held := 0
	eventually(t, "two revisions DEPLOYING at once", func() (bool, string) {
		held = 0
		var seen []any
		for _, d := range deps {
			_, r := call(t, "GET", f.cp.url+"/v2/deployments/"+d[0]+"/revisions/"+d[1], "k", "")
			if r["status"] == "DEPLOYING" {
				held++
			}
			seen = append(seen, r["status"])
		}
		return held == 2, fmt.Sprint(seen)
	})
	var byFirst, bySecond int
	eventually(t, "the agents' logs saying what they took up", func() (bool, string) { // the lines may trail the reports
		byFirst, bySecond = 0, 0
		for _, d := range deps {
			n := takenUp(d[0])
			byFirst, bySecond = byFirst+n[0], bySecond+n[1]
		}
		return byFirst+bySecond >= held, fmt.Sprintf("%d and %d", byFirst, bySecond)
	})
	if byFirst != 1 || bySecond != 1 {
		t.Errorf("with two revisions held mid-rollout, the agents took up %d and %d, want one each", byFirst, bySecond)
	}
	releasePods(t, cli, ns)
	for _, d := range deps {
		waitStatus(t, f.cp.url, "k", d[0], d[1], "DEPLOYED")
	}
	for _, d := range deps {
		dep, rev := d[0], d[1]
		historyOnce(t, f.cp.url, dep, rev)
		f.oneSet(t, "kube-b", "deployplane-"+lid, dep, rev)
		if n := takenUp(dep); n[0]+n[1] != 1 {
			t.Errorf("deployment %s was taken up %d times by the first agent and %d by the second, want once in all", dep, n[0], n[1])
		} else {
			t.Logf("deployment %s was driven by agent %d", dep, slices.Index(n, 1))
		}
	}
}

// Two listeners whose agents share kube-a (each labels its objects
// with its own default -instance): agent B starting up (its first
// reconcile removes an owner of its instance whose deployment does not
// exist) leaves A's deployments alone, although B's control plane routes
// do not know them; deleting one of A's deployments removes its objects
// only, B's and A's other one staying as they were.
func (f *faults) twoListenersOneCluster(t *testing.T) {
	cli := f.kube["kube-a"]
	ctx := context.Background()
	la, lb := k8sListener(t, f.cp.url, "edge-"+randSuffix()), k8sListener(t, f.cp.url, "edge-"+randSuffix())
	f.agent(t, la, listenerToken(t, f.cp.url, la), "kube-a")
	a1, r1 := k8sDeployment(t, f.cp.url, la)
	a2, r2 := k8sDeployment(t, f.cp.url, la)
	waitStatus(t, f.cp.url, "k", a1, r1, "DEPLOYED")
	waitStatus(t, f.cp.url, "k", a2, r2, "DEPLOYED")
	before := uids(append(f.oneSet(t, "kube-a", "deployplane-"+la, a1, r1), f.oneSet(t, "kube-a", "deployplane-"+la, a2, r2)...))

	// Once B's first reconcile has removed the ghost, it has passed
	// every owner it would have touched.
	ghostNS, ghost := f.ghost(t, "deployplane-"+lb)
	f.agent(t, lb, listenerToken(t, f.cp.url, lb), "kube-a")
	eventually(t, "agent B's reconcile removes its instance's owner of no deployment", func() (bool, string) {
		_, err := cli.CoreV1().ConfigMaps(ghostNS).Get(ctx, "dp-"+ghost, metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
	after := uids(append(f.oneSet(t, "kube-a", "deployplane-"+la, a1, r1), f.oneSet(t, "kube-a", "deployplane-"+la, a2, r2)...))
	sameObjects(t, "A's objects after B's reconcile", before, after)

	b1, rb := k8sDeployment(t, f.cp.url, lb)
	waitStatus(t, f.cp.url, "k", b1, rb, "DEPLOYED")
	kept := uids(append(f.oneSet(t, "kube-a", "deployplane-"+la, a2, r2), f.oneSet(t, "kube-a", "deployplane-"+lb, b1, rb)...))
	if status, body := call(t, "DELETE", f.cp.url+"/v2/deployments/"+a1, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, f.cp.url, a1)
	if objs := objectsOf(t, cli, deployk8s.LabelDeployment+"="+a1); len(objs) != 0 {
		t.Errorf("objects of the deleted deployment are left: %v", objs)
	}
	after = uids(append(f.oneSet(t, "kube-a", "deployplane-"+la, a2, r2), f.oneSet(t, "kube-a", "deployplane-"+lb, b1, rb)...))
	sameObjects(t, "the other deployments' objects after the DELETE", kept, after)
}

// Revoking the token of a running agent stops it: the process exits
// with a non-zero status, its log saying the token was revoked.
func (f *faults) tokenRevoked(t *testing.T) {
	lid := k8sListener(t, f.cp.url, "edge-"+randSuffix())
	token := listenerToken(t, f.cp.url, lid)
	a := f.agent(t, lid, token, "kube-a")
	eventually(t, "the listener CONNECTED", func() (bool, string) {
		_, l := call(t, "GET", f.cp.url+"/v2/listeners/"+lid, "k", "")
		return l["status"] == "CONNECTED", fmt.Sprint(l["status"])
	})
	status, page := call(t, "GET", f.cp.url+"/v2/listeners/"+lid+"/tokens", "k", "")
	if status != 200 || len(page["resources"].([]any)) != 1 {
		t.Fatalf("the listener's tokens: %d %v", status, page)
	}
	id := page["resources"].([]any)[0].(map[string]any)["id"].(string)
	if status, body := call(t, "DELETE", f.cp.url+"/v2/listeners/"+lid+"/tokens/"+id, "k", ""); status != 204 {
		t.Fatalf("DELETE token: %d %v", status, body)
	}
	a.wait(t)
	var exit *exec.ExitError
	if !errors.As(a.err, &exit) || exit.ExitCode() == 0 {
		t.Errorf("the agent exited with %v, want a non-zero status", a.err)
	}
	if log := a.log.String(); !regexp.MustCompile(`listener token.*revoked`).MatchString(log) || strings.Contains(log, token) {
		t.Errorf("the agent's log does not say its token was revoked, or shows the token:\n%s", log)
	}
}

// An agent whose control plane is behind a proxy that answers 404 Not
// Found to its reads of a deployment (a path the proxy does not pass on)
// removes nothing of that deployment: its reconcile takes the answer for
// no word on the deployment, while it removes the objects of a deployment
// the control plane itself says does not exist.
func (f *faults) proxyNotFound(t *testing.T) {
	cli := f.kube["kube-a"]
	ctx := context.Background()
	lid := k8sListener(t, f.cp.url, "edge-"+randSuffix())
	token := listenerToken(t, f.cp.url, lid)
	a := f.agent(t, lid, token, "kube-a")
	dep, rev := k8sDeployment(t, f.cp.url, lid)
	waitStatus(t, f.cp.url, "k", dep, rev, "DEPLOYED")
	before := uids(f.oneSet(t, "kube-a", "deployplane-"+lid, dep, rev))
	a.stop(t)

	target, err := neturl.Parse(f.cp.url)
	if err != nil {
		t.Fatal(err)
	}
	pass := httputil.NewSingleHostReverseProxy(target)
	pass.ErrorLog = nopLog() // the agent killed at the end cuts its long poll
	var mu sync.Mutex
	dropped := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/agent/deployments/"+dep) {
			mu.Lock()
			dropped++
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"detail": "Not Found"}`)
			return
		}
		pass.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	ghostNS, ghost := f.ghost(t, "deployplane-"+lid)
	startProc(t, f.bin, processEnv(f.home, "DEPLOYPLANE_AGENT_TOKEN="+token), "agent", "-control-plane", proxy.URL,
		"-listener-id", lid, "-kubeconfig", f.kubeconfig, "-context", "kube-a")
	eventually(t, "the agent's reconcile removes the owner of a deployment the control plane does not have", func() (bool, string) {
		_, err := cli.CoreV1().ConfigMaps(ghostNS).Get(ctx, "dp-"+ghost, metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
	mu.Lock()
	n := dropped
	mu.Unlock()
	if n == 0 {
		t.Fatal("the agent's reconcile did not read the deployment through the proxy")
	}
	sameObjects(t, "the deployment's objects after a reconcile read 404 Not Found for it", before,
		uids(f.oneSet(t, "kube-a", "deployplane-"+lid, dep, rev)))
}

// ghost makes the owner of a deployment the control plane does not have,
// labelled with instance, in a namespace of its own that a list of every
// namespace's objects gives last (a list is in namespace and name order):
// once a reconcile of instance has removed it, it has passed every other
// owner of instance. It returns the namespace and the deployment's id.
func (f *faults) ghost(t *testing.T, instance string) (ns, id string) {
	t.Helper()
	cli := f.kube["kube-a"]
	ns, id = kubeNamespace(t, cli, "zz-"), "0190a2b4-0000-7000-8000-0000000000ff"
	if _, err := cli.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dp-" + id,
		Labels: map[string]string{deployk8s.LabelInstance: instance, deployk8s.LabelDeployment: id,
			deployk8s.LabelComponent: "owner", deployk8s.LabelTenant: f.cp.tenant},
		Annotations: map[string]string{deployk8s.AnnotationTenant: f.cp.tenant}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return ns, id
}

// The control plane stopped while the agents of TwoClusters run: its
// address refuses or drops every call (a doorman there drops them,
// counting them). The agents say once that their calls fail and try again
// with backoff, not once per try; the clusters keep serving (each
// Deployment has its replicas ready). Restarted on the same address and
// store, it has the agents back: a PATCH made right after the restart is
// DEPLOYED.
func (f *faults) outage(t *testing.T, two *twoClusters) {
	f.cp.stop(t)
	door := newDoorman(t, f.cp.addr)
	claims := func(lid string) int { return door.count("/v2/listeners/" + lid + "/agent/claim") }
	const rounds = 4 // claims dropped, a growing wait of the backoff between each two
	failed := regexp.MustCompile(`msg="agent: claiming work failed; trying again with backoff"`)
	for i, lid := range two.listeners {
		a := two.agents[i]
		a.log.await(t, failed)
		eventually(t, fmt.Sprintf("%d claims of agent %d dropped", rounds, i), func() (bool, string) {
			return claims(lid) >= rounds, fmt.Sprintf("%d claims", claims(lid))
		})
		select {
		case <-a.done:
			t.Fatalf("agent %d exited while the control plane was away: %v\n%s", i, a.err, a.log)
		default:
		}
	}
	for i, c := range []string{"kube-a", "kube-b"} {
		api, err := f.kube[c].AppsV1().Deployments("default").Get(context.Background(), "dp-"+two.deployments[i][0]+"-api", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s while the control plane is away: %v", c, err)
		}
		if api.Status.ReadyReplicas < 1 || api.Spec.Replicas == nil || api.Status.ReadyReplicas != *api.Spec.Replicas {
			t.Errorf("%s does not serve the deployment while the control plane is away: %+v", c, api.Status)
		}
	}
	failedLine := regexp.MustCompile(`(?m)^.*` + failed.String() + `.*$`)
	for i, lid := range two.listeners {
		// One line per kind of failure, not one per try: the calls
		// refused before the doorman listened may have their line, the
		// calls it dropped have one.
		var dropped []string
		for _, l := range failedLine.FindAllString(two.agents[i].log.String(), -1) {
			if !strings.Contains(l, "connection refused") {
				dropped = append(dropped, l)
			}
		}
		if tries := claims(lid); len(dropped) != 1 || tries < rounds {
			t.Errorf("agent %d logged %d lines for %d claims dropped, want one:\n%s", i, len(dropped), tries, two.agents[i].log)
		}
	}
	door.close()

	f.cp.start(t)
	var next []string
	for _, d := range two.deployments {
		status, p := call(t, "PATCH", f.cp.url+"/v2/deployments/"+d[0], "k", `{"source_revision_config": {"image_uri": "example.com/agent:v3"}}`)
		if status != 200 {
			t.Fatalf("PATCH after the restart: %d %v", status, p)
		}
		next = append(next, p["latest_revision_id"].(string))
	}
	for i, d := range two.deployments {
		waitStatus(t, f.cp.url, "k", d[0], next[i], "DEPLOYED")
		historyOnce(t, f.cp.url, d[0], next[i])
		two.agents[i].log.await(t, regexp.MustCompile(`msg="agent: claiming work works again"`))
	}
}

// controlPlane is the command serving the API in a process of its own,
// over a bbolt store in a temporary directory, started again on the same
// address and store after stop.
type controlPlane struct {
	bin, db, home string
	addr          string // host:port: 127.0.0.1:0 until the first start
	url           string
	tenant        string // the default tenant
	p             *proc
}

func startControlPlane(t *testing.T, bin, home string) *controlPlane {
	t.Helper()
	c := &controlPlane{bin: bin, db: filepath.Join(t.TempDir(), "deployplane.db"), home: home, addr: "127.0.0.1:0"}
	c.start(t)
	return c
}

// start starts the server at its address, without a kubeconfig and
// without simulated agents (every k8s listener is an agent's), with key
// "k" and no rate limit (the subtests poll at once).
func (c *controlPlane) start(t *testing.T) {
	t.Helper()
	c.p = startProc(t, c.bin, processEnv(c.home, "DEPLOYPLANE_API_KEY=k"),
		"-addr", c.addr, "-db", c.db, "-sim-agents=false", "-rate-limit", "0")
	select {
	case c.url = <-c.p.log.addr:
	case <-c.p.done:
		t.Fatalf("the control plane exited: %v\n%s", c.p.err, c.p.log)
	case <-nearDeadline(t):
		t.Fatalf("the control plane did not start:\n%s", c.p.log)
	}
	c.addr = strings.TrimPrefix(c.url, "http://")
	start := c.p.log.String()
	if !strings.Contains(start, "k8s_clusters=[]") {
		t.Fatalf("the control plane drives clusters of its own:\n%s", start)
	}
	m := regexp.MustCompile(`default_tenant=(\S+)`).FindStringSubmatch(start)
	if m == nil {
		t.Fatalf("no default tenant in the start log:\n%s", start)
	}
	c.tenant = m[1]
}

// stop stops the server with SIGTERM; it must exit cleanly.
func (c *controlPlane) stop(t *testing.T) { t.Helper(); c.p.stop(t) }

// agent starts `deployplane agent` for the listener with the token,
// driving the kubeconfig context kubeContext, with more flags. Once the
// test ends and the agent is killed, what agents of the listener made in
// the cluster is deleted.
func (f *faults) agent(t *testing.T, lid, token, kubeContext string, more ...string) *proc {
	t.Helper()
	t.Cleanup(func() { sweep(f.kube[kubeContext], "deployplane-"+lid) })
	return startProc(t, f.bin, processEnv(f.home, "DEPLOYPLANE_AGENT_TOKEN="+token), append([]string{"agent", "-control-plane", f.cp.url,
		"-listener-id", lid, "-kubeconfig", f.kubeconfig, "-context", kubeContext}, more...)...)
}

// processEnv is the environment of the processes the tests start: the
// test's, without what would give them a cluster or credentials of their
// own, with home as $HOME, and more.
func processEnv(home string, more ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "KUBECONFIG", k == "KUBERNETES_SERVICE_HOST", k == "HOME", k == "DOCKER_HOST",
			strings.HasPrefix(k, "DEPLOYPLANE_") && !strings.HasPrefix(k, "DEPLOYPLANE_TEST_"):
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "HOME="+home), more...)
}

// proc is a process of the command, its standard error and output kept
// in log; the test's end kills it.
type proc struct {
	cmd  *exec.Cmd
	log  *watcher
	done chan struct{} // closed once it exited
	err  error         // Wait's, once done is closed
}

func startProc(t *testing.T, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startProcFor(t, t, bin, env, args...)
}

// startProcFor is startProc of a process that outlives t: owner's end
// (a test that t is a subtest of) kills it.
func startProcFor(t *testing.T, owner testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), log: newWatcher(), done: make(chan struct{})}
	p.cmd.Env, p.cmd.Stderr, p.cmd.Stdout = env, p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	owner.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits until the process exits.
func (p *proc) wait(t *testing.T) {
	t.Helper()
	select {
	case <-p.done:
	case <-nearDeadline(t):
		t.Fatalf("%s is still running:\n%s", p.cmd.Args, p.log)
	}
}

// stop ends the process with SIGTERM and checks that it exits cleanly.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if p.err != nil {
		t.Errorf("%s after SIGTERM: %v\n%s", p.cmd.Args, p.err, p.log)
	}
}

// kill ends the process with SIGKILL (kill -9).
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
}

// doorman holds the address of a stopped server: it accepts each
// connection, reads its request whole and closes it without an answer,
// counting the requests by path.
type doorman struct {
	ln     net.Listener
	mu     sync.Mutex
	counts map[string]int
	conns  map[net.Conn]bool // open
	wg     sync.WaitGroup
}

func newDoorman(t *testing.T, addr string) *doorman {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening at the stopped control plane's address: %v", err)
	}
	d := &doorman{ln: ln, counts: map[string]int{}, conns: map[net.Conn]bool{}}
	d.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.mu.Lock()
			d.conns[c] = true
			d.mu.Unlock()
			d.wg.Go(func() {
				defer func() {
					d.mu.Lock()
					delete(d.conns, c)
					d.mu.Unlock()
					c.Close()
				}()
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body) // then the close is a FIN: the client reads EOF
				d.mu.Lock()
				d.counts[r.URL.Path]++
				d.mu.Unlock()
			})
		}
	})
	t.Cleanup(d.close)
	return d
}

func (d *doorman) count(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[path]
}

// close stops listening, closes the connections it holds and waits for
// their goroutines.
func (d *doorman) close() {
	_ = d.ln.Close()
	d.mu.Lock()
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
}

// nsListener registers a k8s listener whose deployments run in namespace
// ns and returns its id.
func nsListener(t *testing.T, url, ns string) string {
	t.Helper()
	status, l := call(t, "POST", url+"/v2/listeners", "k", `{"compute_type": "k8s", "compute_id": "edge-`+randSuffix()+`",
		"compute_config": {"k8s_namespaces": ["`+ns+`"]}}`)
	if status != 201 {
		t.Fatalf("create listener: %d %v", status, l)
	}
	return l["id"].(string)
}

// listenerToken creates a token of the listener over HTTP and returns it.
func listenerToken(t *testing.T, url, lid string) string {
	t.Helper()
	status, tok := call(t, "POST", url+"/v2/listeners/"+lid+"/tokens", "k", `{}`)
	if status != 201 {
		t.Fatalf("create a listener token: %d %v", status, tok)
	}
	return tok["token"].(string)
}

// kubeClient is a client of a context of the test clusters' kubeconfig.
func kubeClient(t *testing.T, kubeconfig, kubeContext string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// kubeNamespace makes a namespace (its name begins with prefix, default
// "agentfaults-") for the test, deleted when it ends.
func kubeNamespace(t *testing.T, cli kubernetes.Interface, prefix ...string) string {
	t.Helper()
	ns := strings.Join(prefix, "") + "agentfaults-" + randSuffix()
	if _, err := cli.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}

// sweep deletes the owners of instance's deployments, and with them (by
// garbage collection) everything the deployments have in the cluster.
func sweep(cli kubernetes.Interface, instance string) {
	ctx := context.Background()
	owners, err := cli.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx,
		metav1.ListOptions{LabelSelector: deployk8s.LabelInstance + "=" + instance + "," + deployk8s.LabelComponent + "=owner"})
	if err != nil {
		return
	}
	bg := metav1.DeletePropagationBackground
	for _, o := range owners.Items {
		_ = cli.CoreV1().ConfigMaps(o.Namespace).Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	}
}

// holdPods keeps any pod from being created in the namespace (a
// ResourceQuota of none) until releasePods: a rollout there waits.
func holdPods(t *testing.T, cli kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := cli.CoreV1().ResourceQuotas(ns).Create(context.Background(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "hold"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func releasePods(t *testing.T, cli kubernetes.Interface, ns string) {
	t.Helper()
	if err := cli.CoreV1().ResourceQuotas(ns).Delete(context.Background(), "hold", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kobj is an object of a test cluster, as the checks see it.
type kobj struct {
	kind, ns, name, uid string
	labels              map[string]string
	deleting            bool
}

func (o kobj) String() string { return o.kind + " " + o.ns + "/" + o.name }

// objectsOf lists the objects of every kind package deployk8s makes, and
// the ReplicaSets and Pods of its Deployments and StatefulSets, that match
// the label selector, in every namespace.
func objectsOf(t *testing.T, cli kubernetes.Interface, selector string) []kobj {
	t.Helper()
	ctx, all := context.Background(), metav1.NamespaceAll
	lo := metav1.ListOptions{LabelSelector: selector}
	lists := []struct {
		kind string
		list func() (runtime.Object, error)
	}{
		{"ConfigMap", func() (runtime.Object, error) { return cli.CoreV1().ConfigMaps(all).List(ctx, lo) }},
		{"Secret", func() (runtime.Object, error) { return cli.CoreV1().Secrets(all).List(ctx, lo) }},
		{"Service", func() (runtime.Object, error) { return cli.CoreV1().Services(all).List(ctx, lo) }},
		{"PersistentVolumeClaim", func() (runtime.Object, error) { return cli.CoreV1().PersistentVolumeClaims(all).List(ctx, lo) }},
		{"Pod", func() (runtime.Object, error) { return cli.CoreV1().Pods(all).List(ctx, lo) }},
		{"Deployment", func() (runtime.Object, error) { return cli.AppsV1().Deployments(all).List(ctx, lo) }},
		{"ReplicaSet", func() (runtime.Object, error) { return cli.AppsV1().ReplicaSets(all).List(ctx, lo) }},
		{"StatefulSet", func() (runtime.Object, error) { return cli.AppsV1().StatefulSets(all).List(ctx, lo) }},
		{"HorizontalPodAutoscaler", func() (runtime.Object, error) {
			return cli.AutoscalingV2().HorizontalPodAutoscalers(all).List(ctx, lo)
		}},
	}
	var out []kobj
	for _, l := range lists {
		list, err := l.list()
		if err != nil {
			t.Fatalf("listing %ss: %v", l.kind, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			a, err := meta.Accessor(it)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, kobj{kind: l.kind, ns: a.GetNamespace(), name: a.GetName(), uid: string(a.GetUID()),
				labels: a.GetLabels(), deleting: a.GetDeletionTimestamp() != nil})
		}
	}
	return out
}

// oneSet checks that a deployment of one revision has one set of objects
// in the cluster and returns them: all of instance, in one namespace,
// none being deleted, those that name a revision naming rev; one owner,
// one Secret of the revision, one API server Deployment with all its
// replicas ready and one ReplicaSet.
func (f *faults) oneSet(t *testing.T, cluster, instance, dep, rev string) []kobj {
	t.Helper()
	objs := objectsOf(t, f.kube[cluster], deployk8s.LabelDeployment+"="+dep)
	if len(objs) == 0 {
		t.Errorf("deployment %s has no objects in %s", dep, cluster)
		return nil
	}
	count := map[string]int{}
	for _, o := range objs {
		if o.labels[deployk8s.LabelInstance] != instance || o.ns != objs[0].ns || o.deleting {
			t.Errorf("%s of deployment %s: instance %q, being deleted %v; want %s, in %s like the others, not being deleted",
				o, dep, o.labels[deployk8s.LabelInstance], o.deleting, instance, objs[0].ns)
		}
		if r, ok := o.labels[deployk8s.LabelRevision]; ok && r != rev {
			t.Errorf("%s of deployment %s is revision %s's, want only %s's", o, dep, r, rev)
		}
		count[o.kind+"/"+o.labels[deployk8s.LabelComponent]]++
	}
	for _, k := range []string{"ConfigMap/owner", "Secret/secrets", "Deployment/api", "ReplicaSet/api"} {
		if count[k] != 1 {
			t.Errorf("deployment %s has %d %s objects in %s, want one: %v", dep, count[k], k, cluster, objs)
		}
	}
	api, err := f.kube[cluster].AppsV1().Deployments(objs[0].ns).Get(context.Background(), "dp-"+dep+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if api.Spec.Replicas == nil || api.Status.ReadyReplicas != *api.Spec.Replicas || api.Status.ReadyReplicas < 1 {
		t.Errorf("deployment %s's API server: %+v ready of %v", dep, api.Status.ReadyReplicas, api.Spec.Replicas)
	}
	return objs
}

// uids maps the objects to their uids (a deleted and remade object has
// another).
func uids(objs []kobj) map[string]string {
	m := map[string]string{}
	for _, o := range objs {
		if o.kind != "Pod" { // a Pod's kubelet (kwok) may replace it; its owner is what the agents make
			m[o.String()] = o.uid
		}
	}
	return m
}

// sameObjects checks that the objects are the same ones (by uid).
func sameObjects(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if after[k] != before[k] {
			t.Errorf("%s: %s was %s, is %q", what, k, before[k], after[k])
		}
	}
}

// apiRevision is the revision the deployment's API server Deployment runs
// in the cluster (in namespace default).
func apiRevision(t *testing.T, cli kubernetes.Interface, dep string) string {
	t.Helper()
	api, err := cli.AppsV1().Deployments("default").Get(context.Background(), "dp-"+dep+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return api.Spec.Template.Labels[deployk8s.LabelRevision]
}

// historyOnce checks that no status appears twice in the revision's
// status_history.
func historyOnce(t *testing.T, url, dep, rev string) {
	t.Helper()
	_, r := call(t, "GET", url+"/v2/deployments/"+dep+"/revisions/"+rev, "k", "")
	var statuses []string
	seen := map[string]bool{}
	h, _ := r["status_history"].([]any)
	for _, e := range h {
		s, _ := e.(map[string]any)["status"].(string)
		if seen[s] {
			t.Errorf("revision %s entered %s twice: %v", rev, s, statuses)
		}
		seen[s] = true
		statuses = append(statuses, s)
	}
	if len(statuses) == 0 || statuses[len(statuses)-1] != r["status"] {
		t.Errorf("revision %s: status_history %v, status %v", rev, statuses, r["status"])
	}
}

// eventually polls cond until it holds, failing the test shortly before
// its deadline with what cond said last.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := nearDeadline(t)
	for {
		ok, last := cond()
		if ok {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: not at the test's deadline (last: %s)", what, last)
		case <-time.After(100 * time.Millisecond): // a poll's interval
		}
	}
}
