package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// -deployer takes sim or docker; docker fails at start, naming the flag,
// when the daemon does not answer.
func TestDeployerFlags(t *testing.T) {
	for _, args := range [][]string{{"-deployer", "kubernetes"}, {"-deployer", "docker", "-docker-health-timeout", "0s"},
		{"-docker-endpoint", "east"}, {"-docker-endpoint", "=unix:///x.sock"}, {"-docker-endpoint", "east="},
		{"-docker-endpoint", "east=unix:///a.sock", "-docker-endpoint", "east=unix:///b.sock"},
		{"-docker-endpoint", "east=unix:///a.sock", "-docker-network", ""}} {
		err := run(context.Background(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	sock := "unix://" + filepath.Join(t.TempDir(), "none.sock")
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-db", ":memory:", "-deployer", "docker",
		"-docker-host", sock, "-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-docker-host") {
		t.Errorf("-deployer docker with no daemon: %v, want an error naming -docker-host", err)
	}
}

// With -deployer docker the server's revisions run on the daemon: an image
// that cannot be pulled ends DEPLOY_FAILED saying so (the simulated
// deployer would have DEPLOYED it), once -docker-pull-retry-timeout has
// passed for a registry that does not answer. deploydocker's own tests deploy real
// images.
func TestDockerDeployerWired(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	b := make([]byte, 6)
	rand.Read(b)
	url, _, stderr := server(t, []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host,
		"-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0", "-docker-instance", "cmdtest-" + hex.EncodeToString(b),
		"-docker-pull-retry-timeout", "2s"},
		map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if !strings.Contains(stderr.String(), "deployer=docker") {
		t.Errorf("the start log does not say deployer=docker:\n%s", stderr)
	}
	// /readyz asks the deployer too: the daemon answers its ping.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		status, r := call(t, "GET", url+"/readyz", "", "")
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /readyz: %d %v", status, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	body := `{"name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "127.0.0.1:1/none/such:1"}}`
	status, d := call(t, "POST", url+"/v2/deployments", "k", body)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	revURL := url + "/v2/deployments/" + d["id"].(string) + "/revisions/" + d["latest_revision_id"].(string)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, rev := call(t, "GET", revURL, "k", "")
		if rev["status"] == "DEPLOY_FAILED" {
			if msg, _ := rev["status_message"].(string); !strings.Contains(msg, "Pulling image") {
				t.Errorf("status_message %q", msg)
			}
			break
		}
		if rev["status"] == "DEPLOYED" || time.Now().After(deadline) {
			t.Fatalf("revision %v, want DEPLOY_FAILED from the docker deployer", rev["status"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, dep := call(t, "GET", url+"/v2/deployments/"+d["id"].(string), "k", ""); dep["url"] != nil {
		t.Errorf("url %v, want null", dep["url"])
	}
}
