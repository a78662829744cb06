package main

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/deploydocker"
)

// okImage builds testdata/okserver with nonce and pushes it, as a FROM
// scratch image, to a registry of the test's on 127.0.0.1 (the daemon
// pulls from it for real); it returns the image's reference.
func okImage(t *testing.T, nonce string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "okserver")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -X main.nonce="+nonce, "-o", bin, "./testdata/okserver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test server: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "okserver", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(b)
	tw.Close()
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/okserver"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := &httptest.Server{Listener: l, Config: &http.Server{Handler: registry.New(registry.Logger(nopLog()))}}
	reg.Start()
	t.Cleanup(reg.Close)
	ref := l.Addr().String() + "/okserver:" + nonce
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return ref
}

// TestDockerEndpoints: with two -docker-endpoint engines (both on the test
// daemon, which is the hard case: only the labels tell their containers
// apart), a deployment with a docker listener runs on the engine its
// compute_id names, and one naming no configured engine is served by the
// listener's agent (here the server's simulated one: DEPLOYED, with no
// container on either engine). After a restart each engine's Reconcile adopts only its own
// containers (the other's keep running, untouched), one proxy serves both
// deployments' urls, and DELETE of one deployment leaves the other
// engine's containers alone.
func TestDockerEndpoints(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	suffix := randSuffix()
	nonce := "k8s21-endpoints-" + suffix
	image := okImage(t, nonce)
	instance := "k8s21-" + suffix
	cli, err := client.New(client.FromEnv, client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// running lists an endpoint's running containers: deployment id ->
	// container ids.
	running := func(endpoint string) map[string][]string {
		t.Helper()
		f := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance+"-"+endpoint)
		res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: f})
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
		for _, ep := range []string{"east", "west"} {
			f := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance+"-"+ep)
			res, _ := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
			for _, c := range res.Items {
				cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
			}
		}
	})

	args := []string{"-db", filepath.Join(t.TempDir(), "db"), "-docker-endpoint", "east=" + host, "-docker-endpoint", "west=" + host,
		"-docker-network", "host", "-build-network", "host",
		"-docker-instance", instance, "-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "off",
		"-docker-postgres-image", "", "-docker-redis-image", ""}
	env := map[string]string{"DEPLOYPLANE_API_KEY": "k"}
	url, _, stderr, stop := startServer(t, args, env)
	if !strings.Contains(stderr.String(), "docker_endpoints=") {
		t.Errorf("the start log does not name the endpoints:\n%s", stderr)
	}
	listener := func(computeID string) string {
		t.Helper()
		status, l := call(t, "POST", url+"/v2/listeners", "k", `{"compute_type": "docker", "compute_id": "`+computeID+`"}`)
		if status != 201 {
			t.Fatalf("create listener %s: %d %v", computeID, status, l)
		}
		return l["id"].(string)
	}
	create := func(listenerID string) (dep, rev string) {
		t.Helper()
		status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "`+randSuffix()+`", "source": "external_docker",
			"source_config": {"listener_id": "`+listenerID+`"}, "source_revision_config": {"image_uri": "`+image+`"}}`)
		if status != 201 {
			t.Fatalf("create: %d %v", status, d)
		}
		return d["id"].(string), d["latest_revision_id"].(string)
	}
	de, re := create(listener("east"))
	dw, rw := create(listener("west"))
	ln := listener("north")
	dn, rn := create(ln)
	waitStatus(t, url, "k", de, re, "DEPLOYED")
	waitStatus(t, url, "k", dw, rw, "DEPLOYED")
	waitStatus(t, url, "k", dn, rn, "DEPLOYED")
	if _, l := call(t, "GET", url+"/v2/listeners/"+ln, "k", ""); l["status"] != "CONNECTED" || l["version"] != simVersion {
		t.Errorf("north's listener: %v %v, want CONNECTED to the simulated agent", l["status"], l["version"])
	}
	east, west := running("east"), running("west")
	if len(east) != 1 || len(east[de]) != 1 || len(west) != 1 || len(west[dw]) != 1 {
		t.Fatalf("east runs %v, west %v; want %s on east and %s on west, one container each", east, west, de, dw)
	}
	answers := func(u string) {
		t.Helper()
		resp, err := http.Get(u + "/ok")
		if err != nil {
			t.Fatalf("GET %s/ok: %v", u, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "ok "+nonce {
			t.Errorf("GET %s/ok: %d %q", u, resp.StatusCode, b)
		}
	}
	for _, id := range []string{de, dw} {
		_, d := call(t, "GET", url+"/v2/deployments/"+id, "k", "")
		u, _ := d["url"].(string)
		answers(u)
	}

	// A restart: each engine reconciles its own containers and adopts them.
	stop()
	url, _, stderr, _ = startServer(t, args, env)
	m := regexp.MustCompile(`proxy_url=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no proxy_url in the start log:\n%s", stderr)
	}
	proxyURL := strings.Trim(m[1], `"`)
	if e, w := running("east"), running("west"); !slices.Equal(e[de], east[de]) || !slices.Equal(w[dw], west[dw]) || len(e) != 1 || len(w) != 1 {
		t.Errorf("after the restart east runs %v, west %v; want the same containers as before, %v and %v", e, w, east, west)
	}
	answers(proxyURL + "/" + de)
	answers(proxyURL + "/" + dw)

	// DELETE of the east deployment: its engine removes its containers,
	// and only those.
	if status, body := call(t, "DELETE", url+"/v2/deployments/"+de, "k", ""); status != 204 && status != 202 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		status, _ := call(t, "GET", url+"/v2/deployments/"+de, "k", "")
		if status == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deployment is still there after DELETE: %d", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e, w := running("east"), running("west"); len(e) != 0 || !slices.Equal(w[dw], west[dw]) || len(w) != 1 {
		t.Errorf("after DELETE east runs %v, west %v; want nothing on east and west's container as before (%v)", e, w, west)
	}
	answers(proxyURL + "/" + dw)
}

func nopLog() *log.Logger { return log.New(io.Discard, "", 0) }
