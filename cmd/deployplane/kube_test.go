package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestKubeconfigWired: with -kubeconfig, each context is a cluster that k8s
// listeners name: a deployment on kube-b's listener is DEPLOYED by the
// cluster (its rollout read from the API server) with the Service's
// address as url, one naming a context the kubeconfig lacks ends
// DEPLOY_FAILED saying so, and DELETE goes through the cluster. Needs the
// test clusters (DEPLOYPLANE_TEST_KUBECONFIG, .ci/kube.sh).
func TestKubeconfigWired(t *testing.T) {
	kubeconfig := os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("DEPLOYPLANE_TEST_KUBECONFIG is not set: no Kubernetes control plane to test against (.ci/run starts two)")
	}
	url, _, stderr := server(t, []string{"-db", ":memory:", "-kubeconfig", kubeconfig}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "k8s_clusters=\"[kube-a kube-b]\"") && !strings.Contains(stderr.String(), "k8s_clusters=[kube-a kube-b]") {
		t.Errorf("the start log does not name the clusters:\n%s", stderr)
	}
	listener := func(computeID string) string {
		t.Helper()
		status, l := call(t, "POST", url+"/v2/listeners", "k", `{"compute_type": "k8s", "compute_id": "`+computeID+`"}`)
		if status != 201 {
			t.Fatalf("create listener %s: %d %v", computeID, status, l)
		}
		return l["id"].(string)
	}
	create := func(listenerID string) (dep, rev string) {
		t.Helper()
		status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "k8s21-`+randSuffix()+`", "source": "external_docker",
			"source_config": {"listener_id": "`+listenerID+`", "resource_spec": {"db_storage_gi": 1}},
			"source_revision_config": {"image_uri": "example.com/agent:v1"}}`)
		if status != 201 {
			t.Fatalf("create: %d %v", status, d)
		}
		return d["id"].(string), d["latest_revision_id"].(string)
	}
	db, rb := create(listener("kube-b"))
	dz, rz := create(listener("kube-z"))
	waitStatus(t, url, "k", db, rb, "DEPLOYED")
	waitStatus(t, url, "k", dz, rz, "DEPLOY_FAILED")
	_, d := call(t, "GET", url+"/v2/deployments/"+db, "k", "")
	if want := "http://dp-" + db + ".default.svc.cluster.local:8000"; d["url"] != want || d["status"] != "READY" {
		t.Errorf("deployment on kube-b: url %v status %v, want %s READY", d["url"], d["status"], want)
	}
	_, r := call(t, "GET", url+"/v2/deployments/"+dz+"/revisions/"+rz, "k", "")
	if msg, _ := r["status_message"].(string); !strings.Contains(msg, `k8s "kube-z"`) {
		t.Errorf("status_message %q, want it to name the unknown cluster", msg)
	}
	for _, id := range []string{db, dz} {
		if status, body := call(t, "DELETE", url+"/v2/deployments/"+id, "k", ""); status != 204 && status != 202 {
			t.Fatalf("DELETE: %d %v", status, body)
		}
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
