package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubernetesGuide runs every command of docs/kubernetes.md's "The
// first ten minutes", in order, as one bash script: a cluster of its own
// from .ci/kube/cluster.sh, the chart installed with helm, the server run
// as the chart's ServiceAccount, the real langgraph deploy --image pushing
// an image of the test server, and the clean-up. The script runs with a
// $HOME of its own (so ~/deployplane-kube is the test's), the caches of
// this machine (nothing is built twice), helm and langgraph on $PATH, and
// the server's ports 8124 and 8126 moved to free ones; the image my-agent:1
// and a project directory for path/to/your/project are made first. Then
// it checks what the guide promises: the deployment DEPLOYED with its
// objects in the namespace agents, and everything gone after the
// clean-up.
func TestKubernetesGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster, builds the command and runs the langgraph CLI; skipped with -short")
	}
	if os.Getenv("DEPLOYPLANE_TEST_HELM") == "" || os.Getenv("DEPLOYPLANE_TEST_KUBECONFIG") == "" {
		t.Skip("DEPLOYPLANE_TEST_HELM or DEPLOYPLANE_TEST_KUBECONFIG is not set (.ci/run builds helm and the test clusters' binary, which the guide's cluster reuses)")
	}
	ctx, host, docker := langgraphDockerEnv(t)
	lg := langgraphClient(t)
	script := guideScript(t, filepath.Join("..", "..", "docs", "kubernetes.md"), "The first ten minutes")

	home := t.TempDir()
	bin := filepath.Join(home, "bin")
	project := filepath.Join(home, "project")
	for _, d := range []string{bin, project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A wrapper, not a link: the CLI's script finds its files beside itself.
	if err := os.WriteFile(filepath.Join(bin, "langgraph"), []byte("#!/bin/sh\nexec '"+lg+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "langgraph.json"), []byte(`{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "agent.py"), []byte("graph = None\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	image := "my-agent:1"
	buildOKServerImage(ctx, t, docker, image)
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "-H", host, "images", "--format", "{{.Repository}}:{{.Tag}}").Output()
		for _, ref := range strings.Fields(string(out)) {
			if ref == image || strings.Contains(ref, "/deployments/") && strings.HasSuffix(ref, "/my-agent:1") {
				_ = exec.Command("docker", "-H", host, "rmi", "-f", ref).Run()
			}
		}
	})

	api, reg := freePort(t), freePort(t)
	script = strings.NewReplacer("8124", api, "8126", reg, "path/to/your/project", project,
		"SERVER=$!", "SERVER=$!; echo $SERVER > ~/deployplane-kube/server.pid").Replace(script)
	if !strings.Contains(script, "server.pid") {
		t.Fatal("the guide no longer starts the server as SERVER=$!, which the test needs to stop it on a failure")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cluster := filepath.Join(home, "deployplane-kube")
	t.Cleanup(func() {
		_ = exec.Command("bash", filepath.Join(repo, ".ci", "kube", "cluster.sh"), "down", cluster).Run()
	})

	// helm is this machine's, else the one the guide links next to
	// kubectl (.ci/helm/build.sh answers the tests' build from its cache).
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail -x\n"+script)
	cmd.Dir = repo
	cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"), "XDG_CACHE_HOME=" + cache,
		"GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE"), "GOPATH=" + goEnv("GOPATH"), "GOFLAGS=" + goEnv("GOFLAGS"),
		"GOPROXY=" + goEnv("GOPROXY"), "GOTOOLCHAIN=" + goEnv("GOTOOLCHAIN"), "DOCKER_HOST=" + host, "NO_COLOR=1"}
	// Into a file: a process the script left behind (a server it did not
	// stop, on a failure) must not keep the test waiting for a pipe.
	log, err := os.Create(filepath.Join(home, "guide.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	t.Cleanup(func() { // what a failed script left running
		if pid, err := os.ReadFile(filepath.Join(cluster, "server.pid")); err == nil {
			_ = exec.Command("kill", strings.TrimSpace(string(pid))).Run()
		}
	})
	start := time.Now()
	err = cmd.Run()
	t.Logf("the guide's commands took %s", time.Since(start).Round(time.Second))
	out, _ := os.ReadFile(log.Name())
	if err != nil {
		server, _ := os.ReadFile(filepath.Join(cluster, "server.log"))
		t.Fatalf("the guide's commands failed: %v\n%s\nserver log:\n%s", err, out, server)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^node/fake-node-0 condition met`), // kubectl wait: the nodes Ready
		regexp.MustCompile(`(?m)^deployment.apps/deployplane `),   // the chart's objects
		regexp.MustCompile(`(?m)^role.rbac.authorization.k8s.io/deployplane `),
		regexp.MustCompile(`(?m)^yes$`),                               // can-i patch deployments -n agents
		regexp.MustCompile(`(?m)^no$`),                                // can-i get secrets -n default
		regexp.MustCompile(`Deployment successful`),                   // langgraph deploy
		regexp.MustCompile(`"status":\s*"READY"`),                     // the list
		regexp.MustCompile(`(?m)^deployment.apps/dp-[0-9a-f-]+-api `), // its objects in agents
		regexp.MustCompile(`(?m)^statefulset.apps/dp-[0-9a-f-]+-db `),
		regexp.MustCompile(`(?m)^service/dp-[0-9a-f-]+ `),
	} {
		if !want.Match(out) {
			t.Errorf("the guide's output has no %s:\n%s", want, out)
		}
	}
	if _, err := os.Stat(cluster); !os.IsNotExist(err) {
		t.Errorf("the cluster's directory is left after cluster.sh down: %v", err)
	}
	eventually(t, "the server stopped by kill", func() (bool, string) {
		c, err := net.Dial("tcp", "127.0.0.1:"+api)
		if err != nil {
			return true, ""
		}
		c.Close()
		return false, fmt.Sprintf("%s still accepts connections", api)
	})
}

// guideScript is the bash of every ```sh block of section (a "## "
// heading) of the Markdown file, in order; it fails the test when the
// section has none.
func guideScript(t *testing.T, file, section string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	in, block, blocks := false, false, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = strings.TrimPrefix(line, "## ") == section
		case in && !block && line == "```sh":
			block = true
			blocks++
		case in && block && line == "```":
			block = false
		case in && block:
			b.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if blocks == 0 {
		t.Fatalf("%s has no sh block under ## %s", file, section)
	}
	return b.String()
}

// freePort is a TCP port on loopback that nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}
