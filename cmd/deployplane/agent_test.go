package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deployplane/deployplane/deployk8s"
)

// agentDeployment creates an external_docker deployment on the listener
// and returns its id and its revision's.
func agentDeployment(t *testing.T, url, listenerID string) (dep, rev string) {
	t.Helper()
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "`+randSuffix()+`", "source": "external_docker",
		"source_config": {"listener_id": "`+listenerID+`"}, "source_revision_config": {"image_uri": "registry.example/agent:1"}}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	return d["id"].(string), d["latest_revision_id"].(string)
}

// On a default server (-deployer sim) a listener the server does not drive
// (a k8s cluster it was not given) is served by a simulated agent inside
// it: its deployment reaches DEPLOYED and READY through the agent routes,
// the listener shows the agent CONNECTED with its version, and DELETE
// goes through the agent too.
func TestSimAgents(t *testing.T) {
	url, _, stderr := server(t, []string{"-db", ":memory:", "-sim-step", "10ms"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "sim_agents=true") {
		t.Errorf("the start log does not say the simulated agents run:\n%s", stderr)
	}
	lid := k8sListener(t, url, "nowhere")
	dep, rev := agentDeployment(t, url, lid)
	waitStatus(t, url, "k", dep, rev, "DEPLOYED")
	if _, d := call(t, "GET", url+"/v2/deployments/"+dep, "k", ""); d["status"] != "READY" {
		t.Errorf("deployment %v, want READY", d["status"])
	}
	if _, l := call(t, "GET", url+"/v2/listeners/"+lid, "k", ""); l["status"] != "CONNECTED" || l["version"] != simVersion {
		t.Errorf("listener status %v version %v, want CONNECTED %s", l["status"], l["version"], simVersion)
	}
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, url, dep)
}

// With -sim-agents=false nothing serves such a listener: the revision
// waits QUEUED saying so, and the listener shows no agent; once an agent
// runs (deployplane agent, here simulated, with a listener token) it is
// DEPLOYED.
func TestAgentCommand(t *testing.T) {
	url, _, stderr := server(t, []string{"-db", ":memory:", "-sim-agents=false"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "sim_agents=false") {
		t.Errorf("the start log does not say no simulated agent runs:\n%s", stderr)
	}
	lid := k8sListener(t, url, "nowhere")
	dep, rev := agentDeployment(t, url, lid)
	_, r := call(t, "GET", url+"/v2/deployments/"+dep+"/revisions/"+rev, "k", "")
	if msg, _ := r["status_message"].(string); r["status"] != "QUEUED" || !strings.Contains(msg, "Waiting for the agent of listener "+lid) {
		t.Errorf("revision %v %q, want QUEUED waiting for the agent", r["status"], msg)
	}
	if _, l := call(t, "GET", url+"/v2/listeners/"+lid, "k", ""); l["status"] != "DISCONNECTED" || l["last_heartbeat_at"] != nil {
		t.Errorf("listener status %v last_heartbeat_at %v, want DISCONNECTED, never seen", l["status"], l["last_heartbeat_at"])
	}

	token := listenerToken(t, url, lid)
	ctx, cancel := context.WithCancel(context.Background())
	agentLog := newWatcher()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "-control-plane", url, "-listener-id", lid, "-deployer", "sim", "-sim-step", "10ms"},
			func(k string) string { return map[string]string{"DEPLOYPLANE_AGENT_TOKEN": token}[k] }, nil, agentLog)
	}()
	waitStatus(t, url, "k", dep, rev, "DEPLOYED")
	if _, l := call(t, "GET", url+"/v2/listeners/"+lid, "k", ""); l["status"] != "CONNECTED" || !strings.HasPrefix(l["version"].(string), "deployplane-agent ") {
		t.Errorf("listener status %v version %v, want CONNECTED deployplane-agent ...", l["status"], l["version"])
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the agent: %v\n%s", err, agentLog.String())
	}
	if strings.Contains(agentLog.String(), token) {
		t.Errorf("the agent logged its token:\n%s", agentLog.String())
	}
}

// An agent in front of a real cluster: the server has no kubeconfig (and
// runs no simulated agent), `deployplane agent -kubeconfig -context kube-a`
// with a listener token drives the listener's deployment there to
// DEPLOYED with the Service's address as url, labelled with the agent's
// instance, and DELETE removes it through the agent. Needs the test
// clusters (DEPLOYPLANE_TEST_KUBECONFIG, .ci/kube.sh).
func TestAgentOnKubernetes(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	url, _, stderr := server(t, []string{"-db", ":memory:", "-sim-agents=false"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "k8s_clusters=[]") {
		t.Errorf("the server was given clusters:\n%s", stderr)
	}
	lid := k8sListener(t, url, "edge-"+randSuffix())
	token := listenerToken(t, url, lid)
	ctx, cancel := context.WithCancel(context.Background())
	agentLog := newWatcher()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"agent", "-control-plane", url, "-listener-id", lid, "-kubeconfig", kubeconfig, "-context", "kube-a"},
			func(k string) string { return map[string]string{"DEPLOYPLANE_AGENT_TOKEN": token}[k] }, nil, agentLog)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the agent: %v\n%s", err, agentLog.String())
		}
	}()
	dep, rev := k8sDeployment(t, url, lid)
	waitStatus(t, url, "k", dep, rev, "DEPLOYED")
	_, d := call(t, "GET", url+"/v2/deployments/"+dep, "k", "")
	if want := "http://dp-" + dep + ".default.svc.cluster.local:8000"; d["url"] != want || d["status"] != "READY" {
		t.Errorf("deployment url %v status %v, want %s READY", d["url"], d["status"], want)
	}
	cli := kubeClient(t, kubeconfig, "kube-a")
	owner, err := cli.CoreV1().ConfigMaps("default").Get(context.Background(), "dp-"+dep, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deployment's owner in kube-a: %v", err)
	}
	if got := owner.Labels[deployk8s.LabelInstance]; got != "deployplane-"+lid {
		t.Errorf("the owner's instance label %q, want the agent's, deployplane-%s", got, lid)
	}
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	waitGone(t, url, dep)
	if _, err := cli.CoreV1().ConfigMaps("default").Get(context.Background(), "dp-"+dep, metav1.GetOptions{}); err == nil {
		t.Errorf("the deployment's owner is still in kube-a after DELETE")
	}
}

// waitGone waits until the deployment is removed (404).
func waitGone(t *testing.T, url, dep string) {
	t.Helper()
	deadline := nearDeadline(t)
	for {
		status, _ := call(t, "GET", url+"/v2/deployments/"+dep, "k", "")
		if status == 404 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("deployment %s still there after DELETE: %d", dep, status)
		case <-time.After(50 * time.Millisecond): // a client's polling interval
		}
	}
}

// The agent's flags: what is required, the credential from the
// environment only, and the engine they imply.
func TestAgentFlags(t *testing.T) {
	base := []string{"-control-plane", "https://cp.example", "-listener-id", "l1"}
	token := map[string]string{"DEPLOYPLANE_AGENT_TOKEN": "dpl_lt_x"}
	for _, c := range []struct {
		name    string
		args    []string
		env     map[string]string
		engine  string // the engine chosen; "" for a usage error
		message string // in the usage error
	}{
		{"no control plane", []string{"-listener-id", "l1", "-deployer", "sim"}, token, "", "-control-plane"},
		{"no listener", []string{"-control-plane", "https://cp.example", "-deployer", "sim"}, token, "", "-listener-id"},
		{"no credential", append(base, "-deployer", "sim"), nil, "", "DEPLOYPLANE_AGENT_TOKEN"},
		{"both credentials", append(base, "-deployer", "sim"), map[string]string{"DEPLOYPLANE_AGENT_TOKEN": "a", "DEPLOYPLANE_API_KEY": "b"}, "", "not both"},
		{"a token given as a flag", append(base, "-token", "dpl_lt_x"), token, "", ""},
		{"tenant with a token", append(base, "-deployer", "sim", "-tenant-id", "t"), token, "", "-tenant-id"},
		{"no engine", base, token, "", "-kubeconfig FILE"},
		{"kubeconfig", append(base, "-kubeconfig", "/k"), token, "k8s", ""},
		{"context", append(base, "-context", "prod"), token, "k8s", ""},
		{"in a pod", base, map[string]string{"DEPLOYPLANE_AGENT_TOKEN": "x", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "k8s", ""},
		{"docker", append(base, "-docker-host", "unix:///d.sock", "-docker-network", "host"), token, "docker", ""},
		{"both engines", append(base, "-docker-host", "unix:///d.sock", "-kubeconfig", "/k"), token, "", "not both"},
		{"sim", append(base, "-deployer", "sim"), token, "sim", ""},
		{"unknown engine", append(base, "-deployer", "nomad"), token, "", "-deployer"},
		{"api key", append(base, "-deployer", "sim", "-tenant-id", "t"), map[string]string{"DEPLOYPLANE_API_KEY": "k"}, "sim", ""},
		{"bad instance", append(base, "-deployer", "sim", "-instance", "-x-"), token, "", "-instance"},
	} {
		var stderr bytes.Buffer
		cfg, err := parseAgentFlags(c.args, func(k string) string { return c.env[k] }, &stderr)
		switch {
		case c.engine == "" && !errors.Is(err, errUsage):
			t.Errorf("%s: %v, want a usage error", c.name, err)
		case c.engine == "" && !strings.Contains(stderr.String(), c.message):
			t.Errorf("%s: %q does not say %q", c.name, stderr.String(), c.message)
		case c.engine != "" && err != nil:
			t.Errorf("%s: %v\n%s", c.name, err, stderr.String())
		case c.engine != "" && cfg.engine != c.engine:
			t.Errorf("%s: engine %s, want %s", c.name, cfg.engine, c.engine)
		case c.engine != "" && cfg.instance != "deployplane-l1":
			t.Errorf("%s: instance %s, want deployplane-l1", c.name, cfg.instance)
		}
	}
	var stderr bytes.Buffer
	if _, err := parseAgentFlags([]string{"-h"}, func(string) string { return "" }, &stderr); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(stderr.String(), "DEPLOYPLANE_AGENT_TOKEN") {
		t.Errorf("-h: %v\n%s", err, stderr.String())
	}
}
