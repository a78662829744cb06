package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// gitHTTP serves the repositories under root over smart HTTP with `git
// http-backend`, or skips without git.
func gitHTTP(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git is not installed (.ci/run installs it): %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed: %v", err)
	}
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, Stderr: io.Discard})
	t.Cleanup(srv.Close)
	return srv.URL
}

// gitRepo makes root/agent.git, a bare repository whose main holds
// files, with the git CLI.
func gitRepo(t *testing.T, root string, files map[string]string) {
	t.Helper()
	work := t.TempDir()
	for n, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, n)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(work, "init", "-q", "-b", "main")
	git(work, "add", ".")
	git(work, "commit", "-q", "-m", "agent")
	git(root, "clone", "-q", "--bare", work, filepath.Join(root, "agent.git"))
}

// testBaseImage imports a FROM scratch image holding deploydocker's test
// server (built here, nothing pulled) at /server, removed at the end.
func testBaseImage(t *testing.T, host string) string {
	t.Helper()
	return importBaseImage(t, host, map[string]string{"server": "../../deploydocker/testdata/server"})
}

// importBaseImage imports a FROM scratch image of the Go commands bins
// names (path in the image: package directory), built here statically,
// and removes it at the end.
func importBaseImage(t *testing.T, host string, bins map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, pkg := range bins {
		bin := filepath.Join(t.TempDir(), "bin")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", pkg, err, out)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	tw.Close()
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ref := "cmdtest-base-" + randHex() + ":1"
	res, err := cli.ImageImport(context.Background(), client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

func randHex() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// With -deployer docker the server builds github revisions: the clone goes
// through the server's egress policy (a loopback git server is refused,
// BUILD_FAILED saying so, unless -egress-allow-hosts names it), the image
// is built on the daemon, and the revision is DEPLOYED at a url the proxy
// serves, with its build log readable over HTTP.
func TestDockerBuildsGitHubRevisions(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	root := t.TempDir()
	gitURL := gitHTTP(t, root)
	base := testBaseImage(t, host)
	gitRepo(t, root, map[string]string{
		"langgraph.json": `{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`,
		"Dockerfile":     "FROM " + base + "\nENV VERSION=built-by-the-server\nENTRYPOINT [\"/server\"]\n",
	})
	gitHost := strings.TrimPrefix(gitURL, "http://")
	for _, tc := range []struct {
		name   string
		allow  string
		status string
	}{
		{"egress refuses the loopback git server", "", "BUILD_FAILED"},
		{"allowed", gitHost, "DEPLOYED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host, "-docker-network", "host", "-build-network", "host",
				"-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0", "-docker-instance", "cmdtest-" + randHex(),
				"-docker-postgres-image", "", "-docker-redis-image", "", "-allow-unverified-integrations"}
			if tc.allow != "" {
				args = append(args, "-egress-allow-hosts", tc.allow)
			}
			url, _, _ := server(t, args, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
			d := githubDeploymentOf(t, url, "k", "built-"+randHex(), gitURL+"/agent.git", false)
			id, rev := d["id"].(string), d["latest_revision_id"].(string)
			t.Cleanup(func() { // before the server stops: its containers and images go
				call(t, "DELETE", url+"/v2/deployments/"+id, "k", "")
				deadline := time.Now().Add(2 * time.Minute)
				for time.Now().Before(deadline) {
					if status, _ := call(t, "GET", url+"/v2/deployments/"+id, "k", ""); status == 404 {
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				t.Errorf("deployment %s not deleted after 2 minutes", id)
			})
			waitStatus(t, url, "k", id, rev, tc.status)
			_, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
			_, page := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev+"/logs?type=build&limit=1000", "k", "")
			logs, _ := page["logs"].([]any)
			var text strings.Builder
			for _, l := range logs {
				m := l.(map[string]any)
				text.WriteString("[" + m["level"].(string) + "] " + m["message"].(string) + "\n")
			}
			if tc.status == "BUILD_FAILED" {
				msg, _ := r["status_message"].(string)
				if !strings.HasPrefix(msg, "clone failed: ") || !strings.Contains(text.String(), "[ERROR] "+msg) {
					t.Errorf("status_message %q; build log:\n%s", msg, text.String())
				}
				return
			}
			if !strings.Contains(text.String(), "Successfully built") {
				t.Errorf("the build log has not the build's output:\n%s", text.String())
			}
			_, dep := call(t, "GET", url+"/v2/deployments/"+id, "k", "")
			u, _ := dep["url"].(string)
			if !strings.HasSuffix(u, "/"+id) || !strings.HasPrefix(u, "http://127.0.0.1:") {
				t.Fatalf("url %q, want the proxy's", u)
			}
			deadline := time.Now().Add(2 * time.Minute)
			for {
				v, err := getBody(u + "/version")
				if err == nil && v == "built-by-the-server" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("GET url/version: %q, %v", v, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func getBody(u string) (string, error) {
	if _, err := url.Parse(u); err != nil {
		return "", err
	}
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A github revision's RUN step that connects to this server's own API
// port fails with -build-network none, and its build log says on which
// network the steps ran and why the connection failed: a tenant's
// Dockerfile does not reach the control plane.
func TestBuildNetworkKeepsStepsOffTheServer(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	root := t.TempDir()
	gitURL := gitHTTP(t, root)
	// imagebuild's test shell: "sh -c 'connect HOST:PORT'" dials there.
	base := importBaseImage(t, host, map[string]string{"bin/sh": "../../imagebuild/testdata/fakesh"})
	url, _, _ := server(t, []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host, "-docker-network", "host",
		"-build-network", "none", "-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0",
		"-docker-instance", "cmdtest-" + randHex(), "-docker-postgres-image", "", "-docker-redis-image", "",
		"-allow-unverified-integrations", "-egress-allow-hosts", strings.TrimPrefix(gitURL, "http://")},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	api := strings.TrimPrefix(url, "http://")
	gitRepo(t, root, map[string]string{
		"langgraph.json": `{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`,
		"Dockerfile":     "FROM " + base + "\nRUN connect " + api + "\n",
	})
	d := githubDeploymentOf(t, url, "k", "net-"+randHex(), gitURL+"/agent.git", false)
	id, rev := d["id"].(string), d["latest_revision_id"].(string)
	t.Cleanup(func() { deleteDeployment(t, url, id) })
	waitStatus(t, url, "k", id, rev, "BUILD_FAILED")
	_, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
	_, page := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev+"/logs?type=build&limit=1000", "k", "")
	logs, _ := page["logs"].([]any)
	var text strings.Builder
	for _, l := range logs {
		text.WriteString(l.(map[string]any)["message"].(string) + "\n")
	}
	msg, _ := r["status_message"].(string)
	if want := "build failed: The command '/bin/sh -c connect " + api + "' returned a non-zero code: 1"; msg != want {
		t.Errorf("status_message %q, want %q", msg, want)
	}
	for _, want := range []string{`Build steps run on Docker network "none": no network at all`, "connect: connection refused"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the build log lacks %q:\n%s", want, text.String())
		}
	}
}
