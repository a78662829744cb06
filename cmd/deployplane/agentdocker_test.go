package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/deploydocker"
)

// An agent on a Docker host, as processes of the built command: a server
// that drives no Docker engine (and runs no simulated agent) and
// `deployplane agent -docker-host` with a listener token, on the test
// daemon, its containers on the host network. The deployment of a docker
// listener reaches DEPLOYED at the agent's proxy, and its url answers.
// kill -9 of the agent, one deployment DEPLOYED and another in DEPLOYING:
// the agent started again adopts the running container of the first
// (its url answers again, at the same address) and, once the dead
// agent's lease expires, resumes the second with the container it had
// started, so that each deployment runs exactly one container. DELETE
// removes the containers; a revoked token stops the agent (exit 1) with a
// message saying so.
func TestAgentOnDocker(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	nonce := "agentdocker-" + randSuffix()
	image := okImage(t, nonce)
	cli, err := client.New(client.FromEnv, client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	bin, home := binary(t), t.TempDir()
	_, url := startServerProc(t, nil, processEnv(home, "DEPLOYPLANE_API_KEY=k"),
		"-db", filepath.Join(t.TempDir(), "db"), "-sim-agents=false", "-registry-addr", "off")
	status, l := call(t, "POST", url+"/v2/listeners", "k", `{"compute_type": "docker", "compute_id": "edge-`+randSuffix()+`"}`)
	if status != 201 {
		t.Fatalf("create listener: %d %v", status, l)
	}
	lid := l["id"].(string)
	status, tok := call(t, "POST", url+"/v2/listeners/"+lid+"/tokens", "k", `{}`)
	if status != 201 {
		t.Fatalf("create a listener token: %d %v", status, tok)
	}
	instance := "deployplane-" + lid // the agent's default
	// containers lists the instance's containers (running only, or all):
	// deployment id -> container ids.
	containers := func(all bool) map[string][]string {
		t.Helper()
		f := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance)
		res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: all, Filters: f})
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
	t.Cleanup(func() {
		f := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance)
		res, _ := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
		for _, c := range res.Items {
			cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		}
	})

	proxy := freeAddr(t) // the same address after the restart: the urls stay
	agentEnv := processEnv(home, "DEPLOYPLANE_AGENT_TOKEN="+tok["token"].(string))
	agentArgs := []string{"agent", "-control-plane", url, "-listener-id", lid, "-docker-host", host,
		"-docker-network", "host", "-build-network", "host", "-docker-proxy-addr", proxy,
		"-docker-postgres-image", "", "-docker-redis-image", ""}
	agent := startProc(t, bin, agentEnv, agentArgs...)

	create := func(secrets string) (dep, rev string) {
		t.Helper()
		status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "`+randSuffix()+`", "source": "external_docker",
			"source_config": {"listener_id": "`+lid+`"}, "source_revision_config": {"image_uri": "`+image+`"}, "secrets": [`+secrets+`]}`)
		if status != 201 {
			t.Fatalf("create: %d %v", status, d)
		}
		return d["id"].(string), d["latest_revision_id"].(string)
	}
	answers := func(u string) bool {
		resp, err := http.Get(u + "/ok")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && strings.TrimSpace(string(b)) == "ok "+nonce
	}
	// awaitAnswer polls u until it answers, as a client would.
	awaitAnswer := func(u string) {
		t.Helper()
		for deadline := nearDeadline(t); !answers(u); {
			select {
			case <-deadline:
				t.Fatalf("%s/ok does not answer\nagent:\n%s", u, agent.log)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	dep1, rev1 := create("")
	waitStatus(t, url, "k", dep1, rev1, "DEPLOYED")
	_, d := call(t, "GET", url+"/v2/deployments/"+dep1, "k", "")
	depURL := "http://" + proxy + "/" + dep1
	if d["url"] != depURL || d["status"] != "READY" {
		t.Fatalf("deployment url %v status %v, want %s READY", d["url"], d["status"], depURL)
	}
	if !answers(depURL) {
		t.Fatalf("%s/ok does not answer once DEPLOYED\nagent:\n%s", depURL, agent.log)
	}
	if _, l := call(t, "GET", url+"/v2/listeners/"+lid, "k", ""); l["status"] != "CONNECTED" || !strings.HasPrefix(l["version"].(string), "deployplane-agent ") {
		t.Errorf("listener status %v version %v, want CONNECTED deployplane-agent ...", l["status"], l["version"])
	}
	before := containers(true)
	if len(before) != 1 || len(before[dep1]) != 1 {
		t.Fatalf("containers %v, want one of %s", before, dep1)
	}

	// A second deployment whose server listens only after a while: kill
	// -9 of the agent while it is DEPLOYING, its container running.
	dep2, rev2 := create(`{"name": "OKSERVER_DELAY", "value": "15s"}`)
	for deadline := nearDeadline(t); ; {
		_, r := call(t, "GET", url+"/v2/deployments/"+dep2+"/revisions/"+rev2, "k", "")
		if r["status"] == "DEPLOYING" && len(containers(false)[dep2]) == 1 {
			break
		}
		if r["status"] == "DEPLOYED" || r["status"] == "DEPLOY_FAILED" {
			t.Fatalf("revision %v before the kill: %v", r["status"], r["status_message"])
		}
		select {
		case <-deadline:
			t.Fatalf("revision %v, containers %v: never DEPLOYING with its container running\nagent:\n%s", r["status"], containers(true), agent.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	before = containers(true)
	agent.kill(t)
	if answers(depURL) {
		t.Fatalf("%s answers with its agent killed", depURL)
	}

	agent = startProc(t, bin, agentEnv, agentArgs...)
	awaitAnswer(depURL) // the container adopted: the new proxy routes to it
	waitStatus(t, url, "k", dep2, rev2, "DEPLOYED")
	awaitAnswer("http://" + proxy + "/" + dep2)
	if after := containers(true); !slices.Equal(after[dep1], before[dep1]) || !slices.Equal(after[dep2], before[dep2]) || len(after) != 2 {
		t.Errorf("containers after the restart %v, want those before it, %v", after, before)
	}

	for _, dep := range []string{dep1, dep2} {
		if status, body := call(t, "DELETE", url+"/v2/deployments/"+dep, "k", ""); status != 204 && status != 202 {
			t.Fatalf("DELETE: %d %v", status, body)
		}
	}
	waitGone(t, url, dep1)
	waitGone(t, url, dep2)
	if left := containers(true); len(left) != 0 {
		t.Errorf("containers after DELETE: %v", left)
	}

	// The token revoked: the agent stops, saying why.
	if status, body := call(t, "DELETE", url+"/v2/listeners/"+lid+"/tokens/"+tok["id"].(string), "k", ""); status != 204 {
		t.Fatalf("revoke the token: %d %v", status, body)
	}
	if code := agent.exitCode(t); code != 1 {
		t.Errorf("the agent exited %d after its token was revoked, want 1\n%s", code, agent.log)
	}
	if s := agent.log.String(); !strings.Contains(s, "refused the agent's listener token (401): it was revoked") {
		t.Errorf("the agent does not say its token was revoked:\n%s", s)
	}
}
