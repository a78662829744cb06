package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/deploydocker"
)

// The agent's faults on a Docker host, every party in a process of its
// own: the control plane is the built command with a bbolt store that
// drives no Docker engine and runs no simulated agent, so that it leaves
// every docker listener to agents, and each agent is `deployplane agent
// -docker-host` on the test daemon with a listener token made over HTTP,
// its containers on the host network and its proxy at an address of its
// own. The subtests share the control plane; all but the outage run at
// once, each on listeners of its own, and the outage runs last, since it
// stops the control plane, with the deployment and the agent that
// PatchWhileAgentDown leaves. Revisions are held in DEPLOYING by a gate
// their containers wait for (testdata/okserver's OKSERVER_GATE), and no
// check depends on how long a step takes: every wait polls a condition
// until shortly before the test binary's deadline.
func TestAgentOnDocker(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	cli, err := client.New(client.FromEnv, client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	f := &dockerFaults{top: t, bin: binary(t), home: t.TempDir(), host: host, cli: cli, nonce: "agentdocker-" + randSuffix()}
	f.image = okImage(t, f.nonce)
	f.cp = startControlPlane(t, f.bin, f.home)

	patched := &servedDeployment{}
	t.Run("AtOnce", func(t *testing.T) {
		t.Run("Kill9MidRollout", func(t *testing.T) { t.Parallel(); f.kill9MidRollout(t) })
		t.Run("PatchWhileAgentDown", func(t *testing.T) { t.Parallel(); f.patchWhileAgentDown(t, patched) })
		t.Run("TwoAgentsOneListener", func(t *testing.T) { t.Parallel(); f.twoAgentsOneListener(t) })
		t.Run("TwoListenersOneHost", func(t *testing.T) { t.Parallel(); f.twoListenersOneHost(t) })
	})
	t.Run("ControlPlaneOutage", func(t *testing.T) {
		if patched.agent == nil {
			t.Skip("PatchWhileAgentDown did not leave its deployment, which the outage needs")
		}
		f.outage(t, patched)
	})
}

// dockerFaults is what the subtests of TestAgentOnDocker share.
type dockerFaults struct {
	top   *testing.T // the test: what the outage reuses lives until its end
	bin   string     // the command
	home  string     // $HOME of every process
	host  string     // the daemon's address
	cli   *client.Client
	nonce string // the test image's: its /ok answers "ok <nonce>"
	image string
	cp    *controlPlane
}

// servedDeployment is a deployment DEPLOYED by a running agent, at the
// agent's proxy, its container saying say.
type servedDeployment struct {
	lid, dep, rev, say string
	proxy              string
	agent              *proc
}

// listener registers a docker listener with a token and returns both.
// Once owner ends, the containers of its agents' default instance are
// removed.
func (f *dockerFaults) listener(t *testing.T, owner testing.TB) (lid, token string) {
	t.Helper()
	status, l := call(t, "POST", f.cp.url+"/v2/listeners", "k", `{"compute_type": "docker", "compute_id": "edge-`+randSuffix()+`"}`)
	if status != 201 {
		t.Fatalf("create listener: %d %v", status, l)
	}
	lid = l["id"].(string)
	owner.Cleanup(func() { f.sweep("deployplane-" + lid) })
	return lid, listenerToken(t, f.cp.url, lid)
}

// sweep removes the containers of instance.
func (f *dockerFaults) sweep(instance string) {
	ctx := context.Background()
	res, _ := f.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance)})
	for _, c := range res.Items {
		_, _ = f.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// agent starts `deployplane agent` for the listener on the test daemon,
// its proxy at the address proxy, with more flags; owner's end kills it.
func (f *dockerFaults) agent(t *testing.T, owner testing.TB, lid, token, proxy string, more ...string) *proc {
	t.Helper()
	return startProcFor(t, owner, f.bin, processEnv(f.home, "DEPLOYPLANE_AGENT_TOKEN="+token), append([]string{"agent",
		"-control-plane", f.cp.url, "-listener-id", lid, "-docker-host", f.host, "-docker-network", "host",
		"-build-network", "host", "-docker-proxy-addr", proxy, "-docker-postgres-image", "", "-docker-redis-image", ""}, more...)...)
}

// create creates a deployment of the test image on the listener with the
// secrets (JSON objects, comma-separated) and returns it and its first
// revision.
func (f *dockerFaults) create(t *testing.T, lid, secrets string) (dep, rev string) {
	t.Helper()
	status, d := call(t, "POST", f.cp.url+"/v2/deployments", "k", `{"name": "`+randSuffix()+`", "source": "external_docker",
		"source_config": {"listener_id": "`+lid+`"}, "source_revision_config": {"image_uri": "`+f.image+`"}, "secrets": [`+secrets+`]}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	return d["id"].(string), d["latest_revision_id"].(string)
}

// patchSay changes the deployment's OKSERVER_SAY (its only secret) and
// returns the revision the PATCH made.
func (f *dockerFaults) patchSay(t *testing.T, dep, prev, say string) string {
	t.Helper()
	status, p := call(t, "PATCH", f.cp.url+"/v2/deployments/"+dep, "k", `{"secrets": [{"name": "OKSERVER_SAY", "value": "`+say+`"}]}`)
	if status != 200 || p["latest_revision_id"] == prev {
		t.Fatalf("PATCH: %d %v, want a new revision", status, p)
	}
	return p["latest_revision_id"].(string)
}

// containers lists the instance's containers (running only, or all):
// deployment id -> container ids, sorted.
func (f *dockerFaults) containers(t *testing.T, instance string, all bool) map[string][]string {
	t.Helper()
	res, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: all,
		Filters: make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range res.Items {
		dep := c.Labels[deploydocker.LabelDeployment]
		out[dep] = append(out[dep], c.ID)
		slices.Sort(out[dep])
	}
	return out
}

// answer is what GET u+path answers with 200, "" for anything else.
func answer(u, path string) string {
	resp, err := http.Get(u + path)
	if err != nil {
		return ""
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// answers reports whether the deployment at u answers /ok as the test
// image does.
func (f *dockerFaults) answers(u string) bool { return answer(u, "/ok") == "ok "+f.nonce }

// awaitSay polls the deployment at u, as a client would, until its /say
// answers say.
func awaitSay(t *testing.T, u, say string, a *proc) {
	t.Helper()
	eventually(t, u+"/say answering "+say, func() (bool, string) {
		got := answer(u, "/say")
		return got == say, fmt.Sprintf("%q; agent:\n%s", got, a.log)
	})
}

// gate answers 503 until opened, then 200: a container of the test image
// given its url as OKSERVER_GATE listens only once it is open, its
// revision DEPLOYING until then. The containers reach it on the host
// network.
type gate struct {
	srv  *httptest.Server
	open atomic.Bool
}

func newGate(t *testing.T) *gate {
	g := &gate{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !g.open.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// secret is the secret that makes a container wait for the gate.
func (g *gate) secret() string { return `{"name": "OKSERVER_GATE", "value": "` + g.srv.URL + `"}` }

// revisionStatus is the revision's status.
func (f *dockerFaults) revisionStatus(t *testing.T, dep, rev string) any {
	t.Helper()
	_, r := call(t, "GET", f.cp.url+"/v2/deployments/"+dep+"/revisions/"+rev, "k", "")
	return r["status"]
}

// drove counts the times the agent began to drive a revision of the
// deployment.
func drove(a *proc, dep string) int {
	return len(regexp.MustCompile(`msg="agent: deploying" deployment=`+dep+` `).FindAllString(a.log.String(), -1))
}

// kill -9 of the agent, one deployment DEPLOYED and another in DEPLOYING
// (its container running, waiting for its gate): the agent started again
// adopts the running container of the first (its url answers again, at
// the same address) and, once the dead agent's lease expires, resumes the
// second from DEPLOYING with the container it had started, so that each
// deployment runs exactly one container. DELETE removes the containers; a
// revoked token stops the agent (exit 1) with a message saying so.
func (f *dockerFaults) kill9MidRollout(t *testing.T) {
	lid, token := f.listener(t, t)
	instance := "deployplane-" + lid // the agent's default
	proxy := freeAddr(t)             // the same address after the restart: the urls stay
	agent := f.agent(t, t, lid, token, proxy)

	dep1, rev1 := f.create(t, lid, "")
	waitStatus(t, f.cp.url, "k", dep1, rev1, "DEPLOYED")
	_, d := call(t, "GET", f.cp.url+"/v2/deployments/"+dep1, "k", "")
	depURL := "http://" + proxy + "/" + dep1
	if d["url"] != depURL || d["status"] != "READY" {
		t.Fatalf("deployment url %v status %v, want %s READY", d["url"], d["status"], depURL)
	}
	if !f.answers(depURL) {
		t.Fatalf("%s/ok does not answer once DEPLOYED\nagent:\n%s", depURL, agent.log)
	}
	if _, l := call(t, "GET", f.cp.url+"/v2/listeners/"+lid, "k", ""); l["status"] != "CONNECTED" || !strings.HasPrefix(l["version"].(string), "deployplane-agent ") {
		t.Errorf("listener status %v version %v, want CONNECTED deployplane-agent ...", l["status"], l["version"])
	}
	before := f.containers(t, instance, true)
	if len(before) != 1 || len(before[dep1]) != 1 {
		t.Fatalf("containers %v, want one of %s", before, dep1)
	}

	// A second deployment whose server listens only once its gate is
	// open: kill -9 of the agent while it is DEPLOYING, its container
	// running.
	g := newGate(t)
	dep2, rev2 := f.create(t, lid, g.secret())
	eventually(t, "the second revision DEPLOYING with its container running", func() (bool, string) {
		st, running := f.revisionStatus(t, dep2, rev2), f.containers(t, instance, false)[dep2]
		if st == "DEPLOYED" || st == "DEPLOY_FAILED" {
			t.Fatalf("revision %v before the kill\nagent:\n%s", st, agent.log)
		}
		return st == "DEPLOYING" && len(running) == 1, fmt.Sprintf("revision %v, containers %v", st, running)
	})
	before = f.containers(t, instance, true)
	agent.kill(t)
	if f.answers(depURL) {
		t.Fatalf("%s answers with its agent killed", depURL)
	}

	agent = f.agent(t, t, lid, token, proxy)
	eventually(t, depURL+" answering again", func() (bool, string) { // the container adopted: the new proxy routes to it
		return f.answers(depURL), agent.log.String()
	})
	g.open.Store(true)
	waitStatus(t, f.cp.url, "k", dep2, rev2, "DEPLOYED")
	eventually(t, "the second deployment answering", func() (bool, string) {
		return f.answers("http://" + proxy + "/" + dep2), agent.log.String()
	})
	resumed := regexp.MustCompile(`msg="agent: deploying" deployment=` + dep2 + ` revision=` + rev2 + ` status=DEPLOYING`)
	if !resumed.MatchString(agent.log.String()) {
		t.Errorf("the restarted agent did not resume the revision from DEPLOYING:\n%s", agent.log)
	}
	historyOnce(t, f.cp.url, dep2, rev2)
	if after := f.containers(t, instance, true); !slices.Equal(after[dep1], before[dep1]) || !slices.Equal(after[dep2], before[dep2]) || len(after) != 2 {
		t.Errorf("containers after the restart %v, want those before it, %v", after, before)
	}

	for _, dep := range []string{dep1, dep2} {
		if status, body := call(t, "DELETE", f.cp.url+"/v2/deployments/"+dep, "k", ""); status != 204 && status != 202 {
			t.Fatalf("DELETE: %d %v", status, body)
		}
	}
	waitGone(t, f.cp.url, dep1)
	waitGone(t, f.cp.url, dep2)
	if left := f.containers(t, instance, true); len(left) != 0 {
		t.Errorf("containers after DELETE: %v", left)
	}

	// The token revoked: the agent stops, saying why.
	status, page := call(t, "GET", f.cp.url+"/v2/listeners/"+lid+"/tokens", "k", "")
	if status != 200 || len(page["resources"].([]any)) != 1 {
		t.Fatalf("the listener's tokens: %d %v", status, page)
	}
	id := page["resources"].([]any)[0].(map[string]any)["id"].(string)
	if status, body := call(t, "DELETE", f.cp.url+"/v2/listeners/"+lid+"/tokens/"+id, "k", ""); status != 204 {
		t.Fatalf("revoke the token: %d %v", status, body)
	}
	if code := agent.exitCode(t); code != 1 {
		t.Errorf("the agent exited %d after its token was revoked, want 1\n%s", code, agent.log)
	}
	if s := agent.log.String(); !strings.Contains(s, "refused the agent's listener token (401): it was revoked") || strings.Contains(s, token) {
		t.Errorf("the agent does not say its token was revoked, or shows the token:\n%s", s)
	}
}

// A PATCH made while the listener's only agent is stopped waits QUEUED,
// saying so, the active revision's container still running (the
// deployment's url does not answer meanwhile: the agent's proxy serves
// it); once the agent is back the new revision is DEPLOYED, the url
// answers from its container, and the old one is removed. The deployment
// and the agent, which runs until the test ends, are left in served for
// the outage.
func (f *dockerFaults) patchWhileAgentDown(t *testing.T, served *servedDeployment) {
	lid, token := f.listener(t, f.top)
	instance, proxy := "deployplane-"+lid, freeAddr(t)
	a := f.agent(t, t, lid, token, proxy)
	dep, rev := f.create(t, lid, `{"name": "OKSERVER_SAY", "value": "v1"}`)
	waitStatus(t, f.cp.url, "k", dep, rev, "DEPLOYED")
	depURL := "http://" + proxy + "/" + dep
	awaitSay(t, depURL, "v1", a)
	old := f.containers(t, instance, false)[dep]
	if len(old) != 1 {
		t.Fatalf("deployment %s runs containers %v, want one", dep, old)
	}
	a.stop(t)

	next := f.patchSay(t, dep, rev, "v2")
	_, r := call(t, "GET", f.cp.url+"/v2/deployments/"+dep+"/revisions/"+next, "k", "")
	if msg, _ := r["status_message"].(string); r["status"] != "QUEUED" || !strings.Contains(msg, "Waiting for the agent of listener "+lid) {
		t.Errorf("the revision made while the agent is down: %v %q, want QUEUED waiting for the agent", r["status"], msg)
	}
	if running, all := f.containers(t, instance, false), f.containers(t, instance, true); !slices.Equal(running[dep], old) || len(all) != 1 || !slices.Equal(all[dep], old) {
		t.Errorf("containers while the agent is down: running %v, all %v; want the active revision's %v only", running, all, old)
	}

	a = f.agent(t, f.top, lid, token, proxy)
	waitStatus(t, f.cp.url, "k", dep, next, "DEPLOYED")
	historyOnce(t, f.cp.url, dep, next)
	if _, d := call(t, "GET", f.cp.url+"/v2/deployments/"+dep, "k", ""); d["active_revision_id"] != next || d["status"] != "READY" || d["url"] != depURL {
		t.Errorf("the deployment: active %v status %v url %v, want %s READY %s", d["active_revision_id"], d["status"], d["url"], next, depURL)
	}
	awaitSay(t, depURL, "v2", a)
	eventually(t, "one container of the deployment, not the old one", func() (bool, string) {
		all := f.containers(t, instance, true)
		return len(all) == 1 && len(all[dep]) == 1 && all[dep][0] != old[0], fmt.Sprint(all)
	})
	*served = servedDeployment{lid: lid, dep: dep, rev: next, say: "v2", proxy: proxy, agent: a}
}

// Two agents of one listener on one Docker host (one token, the same
// instance, each with its proxy), each driving one revision at a time
// (-concurrency 1), share its deployments. The second one starts while
// the first has a deployment DEPLOYED and another DEPLOYING (its
// container waiting for a gate): its reconcile at the start leaves both
// containers alone. Then two deployments are DEPLOYING at once, one
// driven by each agent; the third waits. Once the gate opens, all are
// DEPLOYED, each revision taken up by one agent only (the claim's lease
// decides), its status history without a repeated entry, each deployment
// with one container, answering at its url: the proxy of the agent that
// drove it. (The other agent's proxy does not serve it: docs/docker.md
// says to run one agent of a listener on a host, and what happens with
// two.)
func (f *dockerFaults) twoAgentsOneListener(t *testing.T) {
	lid, token := f.listener(t, t)
	instance, proxies := "deployplane-"+lid, []string{freeAddr(t), freeAddr(t)}
	agents := []*proc{f.agent(t, t, lid, token, proxies[0], "-concurrency", "1")}
	first, firstRev := f.create(t, lid, "")
	waitStatus(t, f.cp.url, "k", first, firstRev, "DEPLOYED")
	g := newGate(t)
	var deps [][2]string
	for range 3 {
		dep, rev := f.create(t, lid, g.secret())
		deps = append(deps, [2]string{dep, rev})
	}
	// deploying counts the held revisions DEPLOYING with their container
	// running.
	deploying := func() (int, string) {
		n, running := 0, f.containers(t, instance, false)
		var seen []string
		for _, d := range deps {
			st := f.revisionStatus(t, d[0], d[1])
			if st == "DEPLOYING" && len(running[d[0]]) == 1 {
				n++
			}
			seen = append(seen, fmt.Sprintf("%v (%d running)", st, len(running[d[0]])))
		}
		return n, strings.Join(seen, ", ")
	}
	eventually(t, "the first agent's revision DEPLOYING", func() (bool, string) { n, seen := deploying(); return n == 1, seen })
	before := f.containers(t, instance, true)
	agents = append(agents, f.agent(t, t, lid, token, proxies[1], "-concurrency", "1"))
	agents[1].log.await(t, regexp.MustCompile(`msg="agent: running"`)) // its reconcile is done before it runs
	if after := f.containers(t, instance, true); !mapsEqual(after, before) {
		t.Errorf("the listener's containers after the second agent's start %v, want those before it, %v\nsecond agent:\n%s", after, before, agents[1].log)
	}

	eventually(t, "two revisions DEPLOYING at once", func() (bool, string) { n, seen := deploying(); return n == 2, seen })
	var byFirst, bySecond int
	eventually(t, "the agents' logs saying what they took up", func() (bool, string) { // the lines may trail the reports
		byFirst, bySecond = 0, 0
		for _, d := range deps {
			byFirst, bySecond = byFirst+drove(agents[0], d[0]), bySecond+drove(agents[1], d[0])
		}
		return byFirst+bySecond >= 2, fmt.Sprintf("%d and %d", byFirst, bySecond)
	})
	if byFirst != 1 || bySecond != 1 {
		t.Errorf("with two revisions held mid-rollout, the agents took up %d and %d, want one each", byFirst, bySecond)
	}
	g.open.Store(true)
	for _, d := range deps {
		waitStatus(t, f.cp.url, "k", d[0], d[1], "DEPLOYED")
	}
	all := f.containers(t, instance, true)
	for _, d := range append(deps, [2]string{first, firstRev}) {
		dep, rev := d[0], d[1]
		historyOnce(t, f.cp.url, dep, rev)
		if len(all[dep]) != 1 {
			t.Errorf("deployment %s has containers %v, want one", dep, all[dep])
		}
		n := []int{drove(agents[0], dep), drove(agents[1], dep)}
		if n[0]+n[1] != 1 {
			t.Errorf("deployment %s was taken up %d times by the first agent and %d by the second, want once in all", dep, n[0], n[1])
			continue
		}
		by := slices.Index(n, 1)
		_, got := call(t, "GET", f.cp.url+"/v2/deployments/"+dep, "k", "")
		if u := "http://" + proxies[by] + "/" + dep; got["url"] != u || !f.answers(u) {
			t.Errorf("deployment %s, driven by agent %d: url %v, want %s answering", dep, by, got["url"], u)
		}
	}
	if len(all) != len(deps)+1 {
		t.Errorf("the listener's containers %v, want one of each of its deployments", all)
	}
}

// Two listeners whose agents share the Docker host (each labels its
// containers with its own default -instance): agent B starting up (its
// reconcile removes a container of its instance whose deployment does not
// exist) leaves A's containers alone, although B's control plane routes
// do not know A's deployments; deleting one of A's deployments removes
// its container only, B's and A's other one staying as they were.
func (f *dockerFaults) twoListenersOneHost(t *testing.T) {
	la, tokenA := f.listener(t, t)
	lb, tokenB := f.listener(t, t)
	instA, instB := "deployplane-"+la, "deployplane-"+lb
	f.agent(t, t, la, tokenA, freeAddr(t))
	a1, r1 := f.create(t, la, "")
	a2, r2 := f.create(t, la, "")
	waitStatus(t, f.cp.url, "k", a1, r1, "DEPLOYED")
	waitStatus(t, f.cp.url, "k", a2, r2, "DEPLOYED")
	before := f.containers(t, instA, true)
	if len(before) != 2 || len(before[a1]) != 1 || len(before[a2]) != 1 {
		t.Fatalf("A's containers %v, want one of each of its deployments", before)
	}

	// A container of B's instance, of a deployment the control plane does
	// not have: B's reconcile at its start removes it.
	ghost, err := f.cli.ContainerCreate(context.Background(), client.ContainerCreateOptions{Config: &container.Config{Image: f.image,
		Labels: map[string]string{deploydocker.LabelInstance: instB, deploydocker.LabelTenant: f.cp.tenant,
			deploydocker.LabelDeployment: "0190a2b4-0000-7000-8000-0000000000ff", deploydocker.LabelRevision: "0190a2b4-0000-7000-8000-0000000000fe",
			deploydocker.LabelReplica: "0"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := f.agent(t, t, lb, tokenB, freeAddr(t))
	b.log.await(t, regexp.MustCompile(`msg="agent: running"`)) // the reconcile is done before it runs
	if _, err := f.cli.ContainerInspect(context.Background(), ghost.ID, client.ContainerInspectOptions{}); !cerrdefs.IsNotFound(err) {
		t.Errorf("the container of B's instance whose deployment does not exist: %v, want it removed\nagent B:\n%s", err, b.log)
	}
	if after := f.containers(t, instA, true); !mapsEqual(after, before) {
		t.Errorf("A's containers after B's start %v, want those before it, %v", after, before)
	}

	b1, rb := f.create(t, lb, "")
	waitStatus(t, f.cp.url, "k", b1, rb, "DEPLOYED")
	ofB := f.containers(t, instB, true)
	if len(ofB) != 1 || len(ofB[b1]) != 1 {
		t.Fatalf("B's containers %v, want one of its deployment", ofB)
	}
	if status, body := call(t, "DELETE", f.cp.url+"/v2/deployments/"+a1, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, f.cp.url, a1)
	if after := f.containers(t, instA, true); len(after) != 1 || !slices.Equal(after[a2], before[a2]) {
		t.Errorf("A's containers after the DELETE of %s: %v, want %s's only, %v", a1, after, a2, before[a2])
	}
	if after := f.containers(t, instB, true); !mapsEqual(after, ofB) {
		t.Errorf("B's containers after the DELETE of one of A's: %v, want %v", after, ofB)
	}
}

func mapsEqual(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// The control plane stopped while PatchWhileAgentDown's agent runs: its
// address refuses or drops every call (a doorman there drops them,
// counting them). The agent says once that its calls fail and tries again
// with backoff, not once per try; the deployment's url keeps answering
// from its container, whose output the agent says once it cannot write.
// Restarted on the same address and store, the control plane has the
// agent back: the container's output reaches its deploy log again, and a
// PATCH made then is DEPLOYED, the url answering from the new revision's
// container.
func (f *dockerFaults) outage(t *testing.T, s *servedDeployment) {
	depURL := "http://" + s.proxy + "/" + s.dep
	mark := len(s.agent.log.String())
	f.cp.stop(t)
	door := newDoorman(t, f.cp.addr)
	base := "/v2/listeners/" + s.lid + "/agent/"
	const rounds = 4 // claims dropped, a growing wait of the backoff between each two
	failed := regexp.MustCompile(`msg="agent: claiming work failed; trying again with backoff"`)
	s.agent.log.await(t, failed)
	eventually(t, fmt.Sprintf("%d claims and a heartbeat dropped", rounds), func() (bool, string) {
		c, h := door.count(base+"claim"), door.count(base+"heartbeat")
		return c >= rounds && h >= 1, fmt.Sprintf("%d claims, %d heartbeats", c, h)
	})
	select {
	case <-s.agent.done:
		t.Fatalf("the agent exited while the control plane was away: %v\n%s", s.agent.err, s.agent.log)
	default:
	}
	// The container serves on, and its output (a line for each /say)
	// cannot reach the deploy log.
	if got := answer(depURL, "/say?from=outage"); got != s.say {
		t.Errorf("%s/say while the control plane is away: %q, want %q\nagent:\n%s", depURL, got, s.say, s.agent.log)
	}
	logWrite := regexp.MustCompile(`msg="deploydocker: writing the revision's log lines" deployment=` + s.dep + ` revision=` + s.rev + ` `)
	s.agent.log.await(t, logWrite)
	// One line per kind of failure, not one per try, and nothing else:
	// the calls refused before the doorman listened may have their line
	// (and those made while the control plane shut down), the calls it
	// dropped have one; the writes of the container's output one.
	away := strings.Split(strings.TrimSuffix(s.agent.log.String()[mark:], "\n"), "\n")
	failedLine := regexp.MustCompile(`msg="agent: (claiming work|heartbeat) failed; trying again with backoff".* err=(.*)$`)
	last, closed, logWrites := map[string]string{}, map[string]int{}, 0
	for _, l := range away {
		if logWrite.MatchString(l) {
			if logWrites++; logWrites > 1 {
				t.Errorf("the agent warned again that the container's output cannot be written: %s", l)
			}
			continue
		}
		m := failedLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("the agent logged while the control plane was away: %s", l)
			continue
		}
		kind := m[2]
		switch {
		case strings.Contains(kind, "connection refused"):
			kind = "refused"
		case strings.Contains(kind, "EOF"):
			kind = "closed"
			closed[m[1]]++
		}
		if last[m[1]] == kind {
			t.Errorf("the agent logged the same failure of %s twice in a row: %s", m[1], l)
		}
		last[m[1]] = kind
	}
	if closed["claiming work"] == 0 || closed["heartbeat"] == 0 {
		t.Errorf("the agent did not say its calls were dropped (%v):\n%s", closed, strings.Join(away, "\n"))
	}
	door.close()

	// Back on the same address and store: the container's output reaches
	// its deploy log again.
	f.cp.start(t)
	if got := answer(depURL, "/say?from=restart"); got != s.say {
		t.Errorf("%s/say once the control plane is back: %q, want %q", depURL, got, s.say)
	}
	eventually(t, "the container's output after the restart in its deploy log", func() (bool, string) {
		_, page := call(t, "GET", f.cp.url+"/v2/deployments/"+s.dep+"/revisions/"+s.rev+"/logs?type=deploy&order=desc&limit=20", "k", "")
		logs, _ := page["logs"].([]any)
		for _, l := range logs {
			if l.(map[string]any)["message"] == "okserver said "+s.say+" to restart" {
				return true, ""
			}
		}
		return false, fmt.Sprint(page["logs"])
	})
	s.agent.log.await(t, regexp.MustCompile(`msg="deploydocker: writing the revision's log lines works again" deployment=`+s.dep))
	next := f.patchSay(t, s.dep, s.rev, "v3")
	waitStatus(t, f.cp.url, "k", s.dep, next, "DEPLOYED")
	historyOnce(t, f.cp.url, s.dep, next)
	awaitSay(t, depURL, "v3", s.agent)
	s.agent.log.await(t, regexp.MustCompile(`msg="agent: claiming work works again"`))
	eventually(t, "one container of the deployment", func() (bool, string) {
		all := f.containers(t, "deployplane-"+s.lid, true)
		return len(all) == 1 && len(all[s.dep]) == 1, fmt.Sprint(all)
	})
}
