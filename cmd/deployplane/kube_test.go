package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/deployplane/deployplane/deployk8s"
)

// TestKubeconfigWired: with -kubeconfig, each context is a cluster that k8s
// listeners name: a deployment on kube-b's listener is DEPLOYED by the
// cluster (its rollout read from the API server) with the Service's
// address as url, one naming a context the kubeconfig lacks is served by
// its listener's agent (the server's simulated one: DEPLOYED, and removed
// through the agent on DELETE, after which its listener can be deleted),
// and DELETE goes through the cluster. Its objects carry the server's
// -k8s-instance (each test server has its own: one reconciling the
// cluster removes the objects of its instance that its store does not
// know). Needs the test clusters (DEPLOYPLANE_TEST_KUBECONFIG,
// .ci/kube.sh).
func TestKubeconfigWired(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	instance := "cmdtest-" + randSuffix()
	url, _, stderr := server(t, []string{"-db", ":memory:", "-kubeconfig", kubeconfig, "-k8s-instance", instance},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "k8s_clusters=\"[kube-a kube-b]\"") && !strings.Contains(stderr.String(), "k8s_clusters=[kube-a kube-b]") {
		t.Errorf("the start log does not name the clusters:\n%s", stderr)
	}
	listener := func(computeID string) string { return k8sListener(t, url, computeID) }
	create := func(listenerID string) (dep, rev string) { return k8sDeployment(t, url, listenerID) }
	lz := listener("kube-z")
	db, rb := create(listener("kube-b"))
	dz, rz := create(lz)
	waitStatus(t, url, "k", db, rb, "DEPLOYED")
	waitStatus(t, url, "k", dz, rz, "DEPLOYED")
	_, d := call(t, "GET", url+"/v2/deployments/"+db, "k", "")
	if want := "http://dp-" + db + ".default.svc.cluster.local:8000"; d["url"] != want || d["status"] != "READY" {
		t.Errorf("deployment on kube-b: url %v status %v, want %s READY", d["url"], d["status"], want)
	}
	owner, err := kubeClient(t, kubeconfig, "kube-b").CoreV1().ConfigMaps("default").Get(context.Background(), "dp-"+db, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deployment's owner in kube-b: %v", err)
	}
	if got := owner.Labels[deployk8s.LabelInstance]; got != instance {
		t.Errorf("the owner's instance label %q, want the server's -k8s-instance %s", got, instance)
	}
	if _, l := call(t, "GET", url+"/v2/listeners/"+lz, "k", ""); l["status"] != "CONNECTED" || l["version"] != simVersion {
		t.Errorf("kube-z's listener: %v %v, want CONNECTED to the simulated agent", l["status"], l["version"])
	}
	for _, id := range []string{db, dz} {
		if status, body := call(t, "DELETE", url+"/v2/deployments/"+id, "k", ""); status != 204 && status != 202 {
			t.Fatalf("DELETE: %d %v", status, body)
		}
	}
	waitGone(t, url, dz) // torn down by its agent
	if status, body := call(t, "DELETE", url+"/v2/listeners/"+lz, "k", ""); status != 204 {
		t.Errorf("DELETE of kube-z's listener once its deployment is deleted: %d %v", status, body)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		status, _ := call(t, "GET", url+"/v2/deployments/"+db, "k", "")
		if status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deployment on kube-b is still there after DELETE: %d", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKubeconfigMergedAndBroken: $KUBECONFIG names two files, merged as
// kubectl merges them: the test clusters' file and one with a context
// whose client certificate does not exist (its cluster is in the first
// file) and one whose API server's port is closed. The server starts with
// all four contexts; kube-a deploys; the broken context's deployment
// fails saying so; /readyz answers 200 with each cluster's state in its
// body, the log tells the unreachable cluster once, and GET /metrics has
// deployplane_cluster_up for each.
func TestKubeconfigMergedAndBroken(t *testing.T) {
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := raw.Contexts["kube-a"]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	extra := clientcmdapi.NewConfig()
	extra.Clusters["down"] = &clientcmdapi.Cluster{Server: "https://" + closed, CertificateAuthority: raw.Clusters[a.Cluster].CertificateAuthority}
	extra.AuthInfos["no-cert"] = &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(dir, "missing.crt"), ClientKey: filepath.Join(dir, "missing.key")}
	extra.Contexts["kube-broken"] = &clientcmdapi.Context{Cluster: a.Cluster, AuthInfo: "no-cert"}
	extra.Contexts["kube-down"] = &clientcmdapi.Context{Cluster: "down", AuthInfo: a.AuthInfo}
	second := filepath.Join(dir, "second")
	if err := clientcmd.WriteToFile(*extra, second); err != nil {
		t.Fatal(err)
	}

	url, _, stderr := server(t, []string{"-db", ":memory:", "-k8s-instance", "cmdtest-" + randSuffix()},
		map[string]string{"DEPLOYPLANE_API_KEY": "k", "KUBECONFIG": path + string(filepath.ListSeparator) + second})
	if !strings.Contains(stderr.String(), `k8s_clusters="[kube-a kube-b kube-broken kube-down]"`) {
		t.Errorf("the start log does not name the four clusters:\n%s", stderr)
	}
	if !regexp.MustCompile(`cannot be used.*cluster=kube-broken.*missing\.crt`).MatchString(stderr.String()) {
		t.Errorf("the log does not say why kube-broken cannot be used:\n%s", stderr)
	}

	var body struct {
		Status   string            `json:"status"`
		Clusters map[string]string `json:"clusters"`
	}
	for deadline := time.Now().Add(time.Minute); ; {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz: %d %s", resp.StatusCode, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := map[string]string{"kube-a": "ok", "kube-b": "ok", "kube-broken": "unreachable", "kube-down": "unreachable"}
	if !maps.Equal(body.Clusters, want) {
		t.Errorf("/readyz clusters %v, want %v", body.Clusters, want)
	}
	if _, err := http.Get(url + "/readyz"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stderr.String(), `msg="deployk8s: the cluster does not answer" cluster=kube-down`); n != 1 {
		t.Errorf("the log tells kube-down's outage %d times, want once:\n%s", n, stderr)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`deployplane_cluster_up{cluster="kube-a"} 1`, `deployplane_cluster_up{cluster="kube-down"} 0`,
		`deployplane_cluster_up{cluster="kube-broken"} 0`} {
		if !strings.Contains(string(metrics), m) {
			t.Errorf("GET /metrics has no %s", m)
		}
	}

	listener := func(computeID string) string { return k8sListener(t, url, computeID) }
	create := func(listenerID string) (dep, rev string) { return k8sDeployment(t, url, listenerID) }
	da, ra := create(listener("kube-a"))
	dbroken, rbroken := create(listener("kube-broken"))
	waitStatus(t, url, "k", da, ra, "DEPLOYED")
	waitStatus(t, url, "k", dbroken, rbroken, "DEPLOY_FAILED")
	_, r := call(t, "GET", url+"/v2/deployments/"+dbroken+"/revisions/"+rbroken, "k", "")
	if msg, _ := r["status_message"].(string); !strings.Contains(msg, `"kube-broken"`) || !strings.Contains(msg, "cannot be used") ||
		strings.Contains(msg, dir) {
		t.Errorf("status_message %q, want it to say kube-broken cannot be used, without the file", msg)
	}
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+da, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if status, _ := call(t, "GET", url+"/v2/deployments/"+da, "k", ""); status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deployment on kube-a is still there after DELETE")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKubeconfigHome: without -kubeconfig and $KUBECONFIG the clusters are
// the contexts of ~/.kube/config.
func TestKubeconfigHome(t *testing.T) {
	path := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if path == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	home := t.TempDir()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".kube", "config"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, stderr := server(t, []string{"-db", ":memory:", "-k8s-instance", "cmdtest-" + randSuffix()}, map[string]string{"DEPLOYPLANE_API_KEY": "k", "HOME": home})
	if !strings.Contains(stderr.String(), `k8s_clusters="[kube-a kube-b]"`) {
		t.Errorf("the start log does not name the clusters of ~/.kube/config:\n%s", stderr)
	}
}

// k8sListener registers a k8s listener for the kubeconfig context
// computeID on the server at url (key "k") and answers its id.
func k8sListener(t *testing.T, url, computeID string) string {
	t.Helper()
	status, l := call(t, "POST", url+"/v2/listeners", "k", `{"compute_type": "k8s", "compute_id": "`+computeID+`"}`)
	if status != 201 {
		t.Fatalf("create listener %s: %d %v", computeID, status, l)
	}
	return l["id"].(string)
}

// k8sDeployment creates an external_docker deployment on the listener and
// answers its id and its first revision's.
func k8sDeployment(t *testing.T, url, listenerID string) (dep, rev string) {
	t.Helper()
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "k8s21-`+randSuffix()+`", "source": "external_docker",
		"source_config": {"listener_id": "`+listenerID+`", "resource_spec": {"db_storage_gi": 1}},
		"source_revision_config": {"image_uri": "example.com/agent:v1"}}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	return d["id"].(string), d["latest_revision_id"].(string)
}

// TestK8sScopeFlags: -k8s-namespaces (the server's and the agent's) is a
// list of namespace names, duplicates dropped, -k8s-instance a label
// value; others are usage errors that say what is wrong.
func TestK8sScopeFlags(t *testing.T) {
	cases := []struct {
		args []string
		want []string
		msg  string
	}{
		{nil, nil, ""},
		{[]string{"-k8s-namespaces", "agents, team-b,agents"}, []string{"agents", "team-b"}, ""},
		{[]string{"-k8s-namespaces", "Agents"}, nil, `-k8s-namespaces: "Agents" is no namespace name`},
		{[]string{"-k8s-namespaces", "a,,b"}, nil, `-k8s-namespaces: "" is no namespace name`},
	}
	for _, c := range cases {
		var stderr bytes.Buffer
		f := &deployerFlags{}
		fs := flag.NewFlagSet("deployplane", flag.ContinueOnError)
		fs.SetOutput(&stderr)
		f.register(fs, func(string) string { return "" })
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if msg := f.check(); !strings.Contains(msg, c.msg) || (c.msg == "") != (msg == "") || (msg == "" && !slices.Equal(f.namespaces, c.want)) {
			t.Errorf("server %q: %q %q, want %q %q", c.args, msg, f.namespaces, c.msg, c.want)
		}
		stderr.Reset()
		args := append([]string{"-control-plane", "https://cp.example", "-listener-id", "l1", "-deployer", "k8s"}, c.args...)
		a, err := parseAgentFlags(args, func(k string) string { return map[string]string{"DEPLOYPLANE_AGENT_TOKEN": "dpl_lt_x"}[k] }, &stderr)
		switch {
		case c.msg == "" && (err != nil || !slices.Equal(a.deployer.namespaces, c.want)):
			t.Errorf("agent %q: %v %s, want %q", c.args, err, stderr.String(), c.want)
		case c.msg != "" && (!errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.msg)):
			t.Errorf("agent %q: %v %q, want a usage error saying %q", c.args, err, stderr.String(), c.msg)
		}
	}
	err := run(context.Background(), []string{"-k8s-instance", "two words"}, func(string) string { return "" }, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) {
		t.Errorf("-k8s-instance 'two words': %v, want a usage error", err)
	}
}

// TestK8sInClusterOff: in a pod ($KUBERNETES_SERVICE_HOST set) without a
// kubeconfig the server drives its own cluster, and fails to start when
// it cannot; -k8s-in-cluster=false drives none.
func TestK8sInClusterOff(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1") // no port, no token: no usable in-cluster configuration
	home := t.TempDir()
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-db", ":memory:"},
		func(k string) string { return map[string]string{"HOME": home, "DEPLOYPLANE_API_KEY": "k"}[k] }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "in-cluster configuration") {
		t.Errorf("a pod's server without a usable in-cluster configuration: %v, want it to fail saying so", err)
	}
	_, _, stderr := server(t, []string{"-db", ":memory:", "-k8s-in-cluster=false"}, map[string]string{"HOME": home, "DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "k8s_clusters=[]") {
		t.Errorf("-k8s-in-cluster=false: the server drives clusters:\n%s", stderr)
	}
}

// TestDeployerK8s: with -deployer k8s, deployments without a listener run
// on the kubeconfig's current context (kube-a), in the first of
// -k8s-namespaces; -k8s-default-cluster names another context (kube-b);
// a context the kubeconfig does not have stops the start, naming the
// contexts it has.
func TestDeployerK8s(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	err := run(context.Background(), []string{"-db", ":memory:", "-deployer", "k8s", "-kubeconfig", kubeconfig, "-k8s-default-cluster", "kube-z"},
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `no cluster "kube-z"`) || !strings.Contains(err.Error(), "kube-a kube-b") {
		t.Errorf("-k8s-default-cluster kube-z: %v, want an error naming it and the contexts there are", err)
	}
	for _, c := range []struct{ context, flag string }{{"kube-a", ""}, {"kube-b", "kube-b"}} {
		t.Run(c.context, func(t *testing.T) {
			cli := kubeClient(t, kubeconfig, c.context)
			ns := kubeNamespace(t, cli, "deployer-k8s-")
			instance := "deployerk8s-" + randSuffix()
			args := []string{"-db", ":memory:", "-deployer", "k8s", "-kubeconfig", kubeconfig, "-k8s-instance", instance,
				"-k8s-namespaces", ns + ",default"}
			if c.flag != "" {
				args = append(args, "-k8s-default-cluster", c.flag)
			}
			url, _, stderr := server(t, args, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
			if !strings.Contains(stderr.String(), "default_cluster="+c.context) {
				t.Errorf("the start log does not name the default cluster %s:\n%s", c.context, stderr)
			}
			status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "`+randSuffix()+`", "source": "external_docker",
				"source_revision_config": {"image_uri": "example.com/agent:1"}}`)
			if status != 201 {
				t.Fatalf("create: %d %v", status, d)
			}
			dep, rev := d["id"].(string), d["latest_revision_id"].(string)
			waitStatus(t, url, "k", dep, rev, "DEPLOYED")
			_, d = call(t, "GET", url+"/v2/deployments/"+dep, "k", "")
			if want := "http://dp-" + dep + "." + ns + ".svc.cluster.local:8000"; d["url"] != want {
				t.Errorf("url %v, want %s", d["url"], want)
			}
			if _, err := cli.AppsV1().Deployments(ns).Get(context.Background(), "dp-"+dep+"-api", metav1.GetOptions{}); err != nil {
				t.Errorf("the API server's Deployment in %s of %s: %v", ns, c.context, err)
			}
			if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 204 && status != 202 {
				t.Fatalf("DELETE: %d %v", status, body)
			}
			waitGone(t, url, dep)
			if _, err := cli.AppsV1().Deployments(ns).Get(context.Background(), "dp-"+dep+"-api", metav1.GetOptions{}); err == nil {
				t.Errorf("the API server's Deployment is left after DELETE")
			}
		})
	}
}
