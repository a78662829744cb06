package main

import (
	"bytes"
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
		{"-deployer", "docker", "-docker-idle-timeout", "-1m"},
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
		"-docker-network", "host", "-docker-host", sock, "-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-docker-host") {
		t.Errorf("-deployer docker with no daemon: %v, want an error naming -docker-host", err)
	}
}

// -docker-network and -build-network: Docker's default bridge unless the
// operator says otherwise, never a network the proxy could not reach, and
// not one on which the deployments' containers could not reach their
// databases. Each refusal names the flag and says what to do instead.
func TestNetworkFlags(t *testing.T) {
	// Where a refusal would not come, the server starts on no daemon and
	// fails at once.
	safe := func(args ...string) []string {
		sock := "unix://" + filepath.Join(t.TempDir(), "none.sock")
		return append([]string{"-addr", "127.0.0.1:0", "-db", ":memory:", "-docker-host", sock,
			"-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "off"}, args...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-deployer", "docker"}, "-docker-network bridge: on Docker's default bridge containers cannot find their database"},
		{[]string{"-deployer", "docker", "-docker-network", "default"}, "docker network create deployplane"},
		{[]string{"-docker-endpoint", "east=unix:///a.sock", "-docker-network", "none"}, "-docker-network none: the deployments' proxy could not reach"},
		{[]string{"-deployer", "docker", "-docker-network", "container:x"}, "could not reach the containers"},
		{[]string{"-deployer", "docker", "-docker-network", "host", "-build-network", ""}, "-build-network must not be empty"},
		{[]string{"-deployer", "docker", "-shared-postgres-dsn", "postgres://admin:pw@127.0.0.1:1/postgres"},
			"-shared-postgres-dsn names 127.0.0.1, a loopback address, which containers on -docker-network bridge cannot reach"},
		{[]string{"-deployer", "docker", "-docker-network", "deployplane", "-shared-postgres-dsn", "postgres://admin:pw@db.invalid:5432/postgres",
			"-shared-redis-url", "redis://:pw@localhost:1"}, "-shared-redis-url names localhost"},
	} {
		var stderr bytes.Buffer
		err := run(context.Background(), safe(tc.args...), func(string) string { return "" }, io.Discard, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: %v, %q; want a usage error saying %q", tc.args, err, stderr.String(), tc.want)
		}
	}
	// Accepted (the flags pass; the missing daemon fails the start).
	for _, args := range [][]string{
		{"-docker-network", "deployplane"},
		{"-docker-network", "bridge", "-docker-postgres-image", "", "-docker-redis-image", "", "-build-network", "none"},
		{"-docker-network", "host", "-shared-postgres-dsn", "postgres://admin:pw@127.0.0.1:1/postgres"},
	} {
		args = append([]string{"-deployer", "docker"}, args...)
		var stderr bytes.Buffer
		err := run(context.Background(), safe(args...), func(string) string { return "" }, io.Discard, &stderr)
		if err == nil || errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want the flags accepted\n%s", args, err, stderr.String())
		}
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
	url, _, stderr := server(t, []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host, "-docker-network", "host", "-build-network", "host",
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
