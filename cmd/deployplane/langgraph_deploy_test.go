package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLanggraphDeployImage drives the real `langgraph deploy --image`
// against a server with the Docker deployer and the built-in registry:
// the CLI creates an internal_docker deployment, asks for a push token,
// logs in to the registry, pushes,
// PATCHes the digest and polls the revision to DEPLOYED; the deployment's
// url answers. Then deploy revisions list, deploy list, deploy logs and
// deploy delete, each exiting 0 with the expected ids and statuses. It
// logs, for BENCHMARKS.md, the CLI's time from start to DEPLOYED beside a
// bare `docker push` of an image of the same size to the same registry.
func TestLanggraphDeployImage(t *testing.T) {
	ctx, host, docker := langgraphDockerEnv(t)
	client := langgraphClient(t)
	suffix := randSuffix()
	// Two images of the test server (FROM scratch, a static binary), each
	// its own layer: one for the CLI, one for the bare push.
	imgCLI, imgBare := "rules20-okserver-"+suffix+":cli", "rules20-okserver-"+suffix+":bare"
	for _, img := range []string{imgCLI, imgBare} {
		buildOKServerImage(ctx, t, docker, img)
	}
	t.Cleanup(func() {
		// The local images and every tag the pushes added.
		out, _ := exec.Command("docker", "-H", host, "images", "--format", "{{.Repository}}:{{.Tag}}").Output()
		for _, ref := range strings.Fields(string(out)) {
			if strings.Contains(ref, "rules20-okserver-"+suffix) || strings.Contains(ref, "/deployments/") && strings.Contains(ref, "rules20-e2e-"+suffix) {
				exec.Command("docker", "-H", host, "rmi", "-f", ref).Run()
			}
		}
	})

	url, _, stderr := server(t, []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host, "-docker-network", "host", "-build-network", "host",
		"-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0", "-registry-storage", t.TempDir(),
		"-docker-instance", "rules20-" + suffix, "-docker-postgres-image", "", "-docker-redis-image", ""},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "langgraph.json"), []byte(`{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "agent.py"), []byte("graph = None\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lg := func(args ...string) (string, time.Duration) {
		t.Helper()
		cmd := exec.CommandContext(ctx, client, args...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "LANGGRAPH_HOST_URL="+url, "LANGSMITH_API_KEY=k", "DOCKER_HOST="+host, "NO_COLOR=1")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("langgraph %v: %v\n%s\nserver log:\n%s", args, err, out, stderr)
		}
		return string(out), took
	}

	name := "rules20-e2e-" + suffix
	out, took := lg("deploy", "--image", imgCLI, "--name", name, "--no-input")
	status, page := call(t, "GET", url+"/v2/deployments?name_contains="+name, "k", "")
	res, _ := page["resources"].([]any)
	if status != 200 || len(res) != 1 {
		t.Fatalf("the deployment the CLI created: %d %v\nCLI output:\n%s", status, page, out)
	}
	d := res[0].(map[string]any)
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	if !strings.Contains(out, "Deployment ID: "+id) || !strings.Contains(out, "Deployment successful") {
		t.Errorf("langgraph deploy --image output lacks the id or the success:\n%s", out)
	}
	src := d["source_revision_config"].(map[string]any)
	image, _ := src["image_uri"].(string)
	if d["source"] != "internal_docker" || d["status"] != "READY" || !strings.Contains(image, "/deployments/"+id+"/") || !strings.Contains(image, "@sha256:") {
		t.Errorf("deployment after the CLI: %v", d)
	}
	_, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
	if r["status"] != "DEPLOYED" {
		t.Errorf("revision %s: %v", rev, r)
	}
	depURL, _ := d["url"].(string)
	resp, err := http.Get(depURL + "/ok")
	if err != nil {
		t.Fatalf("GET the deployment's url %q: %v", depURL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok "+imgCLI {
		t.Errorf("GET %s/ok: %d %q", depURL, resp.StatusCode, body)
	}

	// The bare docker push of the other image, to the same registry, with
	// a token of a second deployment.
	status, d2 := call(t, "POST", url+"/v2/deployments", "k", `{"name": "rules20-bare-`+suffix+`", "source": "internal_docker"}`)
	if status != 201 {
		t.Fatal(status, d2)
	}
	_, tok := call(t, "POST", url+"/v2/deployments/"+d2["id"].(string)+"/push-token", "k", "")
	regURL := tok["registry_url"].(string)
	cfg := t.TempDir()
	login := exec.CommandContext(ctx, "docker", "-H", host, "--config", cfg, "login", "-u", "oauth2accesstoken", "--password-stdin", strings.Split(regURL, "/")[0])
	login.Stdin = strings.NewReader(tok["token"].(string) + "\n")
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("docker login: %v\n%s", err, out)
	}
	remote := regURL + "/okserver:bare"
	docker("tag", imgBare, remote)
	start := time.Now()
	docker("--config", cfg, "push", remote)
	bare := time.Since(start)
	t.Logf("BENCHMARK langgraph deploy --image start to DEPLOYED: %v; bare docker push of the same size: %v; ratio %.1f",
		took.Round(time.Millisecond), bare.Round(time.Millisecond), took.Seconds()/bare.Seconds())

	out, _ = lg("deploy", "revisions", "list", id)
	if !strings.Contains(out, rev) || !strings.Contains(out, "DEPLOYED") {
		t.Errorf("deploy revisions list:\n%s", out)
	}
	out, _ = lg("deploy", "list")
	if !strings.Contains(out, id) || !strings.Contains(out, name) {
		t.Errorf("deploy list:\n%s", out)
	}
	out, _ = lg("deploy", "logs", "--deployment-id", id)
	if !strings.Contains(out, "okserver "+imgCLI+" listening") {
		t.Errorf("deploy logs lacks the server's output:\n%s", out)
	}
	out, _ = lg("deploy", "delete", id, "--force")
	if !strings.Contains(out, "Deleted deployment "+id) {
		t.Errorf("deploy delete:\n%s", out)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		status, _ := call(t, "GET", url+"/v2/deployments/"+id, "k", "")
		if status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deployment is still there after delete: %d", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func randSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// langgraphDockerEnv skips the test unless a Docker daemon
// (DEPLOYPLANE_TEST_DOCKER) and the docker command are there, and returns
// a context ending a tenth of the test's time before its deadline, the
// daemon's address and a function running docker against it (failing the
// test if it fails, answering its output).
func langgraphDockerEnv(t *testing.T) (context.Context, string, func(args ...string) string) {
	t.Helper()
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: langgraph deploy --image needs a Docker daemon (.ci/run starts one)")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command: langgraph deploy --image runs it")
	}
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
	}
	t.Cleanup(cancel)
	docker := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "docker", append([]string{"-H", host}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("docker %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	return ctx, host, docker
}

// buildOKServerImage builds the image img of the test server
// (testdata/okserver, a static binary FROM scratch) with docker; img is
// also its nonce, so each image is a layer of its own.
func buildOKServerImage(ctx context.Context, t *testing.T, docker func(args ...string) string, img string) {
	t.Helper()
	dir := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w -X main.nonce="+img, "-o", filepath.Join(dir, "okserver"), "./testdata/okserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test server: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY okserver /okserver\nENTRYPOINT [\"/okserver\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	docker("build", "-q", "-t", img, dir)
}
