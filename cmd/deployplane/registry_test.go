package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	_ "github.com/distribution/distribution/v3/registry/auth/token" // the external registry's auth: token
	"github.com/distribution/distribution/v3/registry/handlers"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The built-in registry, wired: POST .../push-token answers a token and
// the registry_url of the deployment's repository; an image pushed there
// with it is what a PATCH by tag deploys, recorded by digest.
func TestRegistryWired(t *testing.T) {
	url, _, stderr := server(t, []string{"-db", ":memory:", "-sim-step", "10ms", "-registry-addr", "127.0.0.1:0",
		"-registry-storage", t.TempDir()}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "lg", "source": "internal_docker", "source_config": {"deployment_type": "dev"}, "source_revision_config": {}}`)
	if status != 201 || d["latest_revision_id"] != nil {
		t.Fatalf("create: %d %v", status, d)
	}
	id := d["id"].(string)
	status, tok := call(t, "POST", url+"/v2/deployments/"+id+"/push-token", "k", "")
	if status != 200 {
		t.Fatalf("push-token: %d %v", status, tok)
	}
	regURL, _ := tok["registry_url"].(string)
	host, prefix, _ := strings.Cut(regURL, "/")
	if prefix != "deployments/"+id || !strings.Contains(stderr.String(), "registry="+host) {
		t.Fatalf("registry_url %q; log:\n%s", regURL, stderr)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(regURL+"/agent:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "oauth2accesstoken", Password: tok["token"].(string)})); err != nil {
		t.Fatalf("push with the token: %v", err)
	}
	dg, _ := img.Digest()
	status, p := call(t, "PATCH", url+"/v2/deployments/"+id, "k",
		`{"revision_source": "internal_docker", "source_revision_config": {"image_uri": "`+regURL+`/agent:v1"}, "tracked_packages": ["langgraph"]}`)
	if status != 200 {
		t.Fatalf("PATCH: %d %v", status, p)
	}
	if got := p["source_revision_config"].(map[string]any)["image_uri"]; got != regURL+"/agent@"+dg.String() {
		t.Errorf("image_uri %v, want the pushed digest %s", got, dg)
	}
	waitStatus(t, url, "k", id, p["latest_revision_id"].(string), "DEPLOYED")
	// A tag never pushed is 422 at image_uri.
	if status, body := call(t, "PATCH", url+"/v2/deployments/"+id, "k", `{"source_revision_config": {"image_uri": "`+regURL+`/agent:v9"}}`); status != 422 {
		t.Errorf("PATCH with a tag never pushed: %d %v", status, body)
	}
	// Another source: the contract's 400.
	status, e := call(t, "POST", url+"/v2/deployments", "k", `{"name": "ext", "source": "external_docker", "source_revision_config": {"image_uri": "r/x:1"}}`)
	if status != 201 {
		t.Fatal(status, e)
	}
	status, body := call(t, "POST", url+"/v2/deployments/"+e["id"].(string)+"/push-token", "k", "")
	if status != 400 || body["detail"] != "push token is only available for 'internal_docker' source deployments" {
		t.Errorf("push-token of external_docker: %d %v", status, body)
	}
}

// Without a registry (the simulated deployer's default) push-token says
// so.
func TestNoRegistry(t *testing.T) {
	url, _, _ := server(t, []string{"-db", ":memory:"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	_, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "lg", "source": "internal_docker"}`)
	status, body := call(t, "POST", url+"/v2/deployments/"+d["id"].(string)+"/push-token", "k", "")
	if status != 400 || !strings.Contains(body["detail"].(string), "runs no registry") {
		t.Errorf("push-token without a registry: %d %v", status, body)
	}
}

// An external registry, wired: a CNCF Distribution registry configured as
// the usage says (auth: token, realm <public URL>/registry/token, the
// certificate the server writes beside -db) takes a push with the
// push-token's token into registry_url, refuses one into another
// deployment's repository, and a PATCH by tag is resolved to the digest
// through it.
func TestExternalRegistryWired(t *testing.T) {
	dir := t.TempDir()
	regSrv := httptest.NewUnstartedServer(nil)
	host := regSrv.Listener.Addr().String()
	// The registry's realm is fixed when it starts, before the server's
	// address is known: a proxy in between is pointed at it later. By
	// name: go-containerregistry refuses a realm at a loopback IP literal.
	var target atomic.Pointer[url.URL]
	realm := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }})
	t.Cleanup(realm.Close)
	realmURL := strings.Replace(realm.URL, "127.0.0.1", "localhost", 1)

	srvURL, _, stderr := server(t, []string{"-db", filepath.Join(dir, "dp.db"), "-sim-step", "10ms",
		"-registry-external-url", "http://" + host, "-registry-token-service", "ext"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	u, _ := url.Parse(srvURL)
	target.Store(u)
	for _, want := range []string{`registry="` + host + ` (external)"`, "realm=" + srvURL + "/registry/token", "service=ext"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, stderr)
		}
	}
	jwks, err := os.ReadFile(filepath.Join(dir, "deployplane-registry-token.jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	if status, served := call(t, "GET", srvURL+"/registry/jwks.json", "", ""); status != 200 || !strings.Contains(string(jwks), served["keys"].([]any)[0].(map[string]any)["kid"].(string)) {
		t.Errorf("GET /registry/jwks.json: %d %v; the file holds %s", status, served, jwks)
	}
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": filepath.Join(dir, "images")}}
	cfg.Auth = configuration.Auth{"token": configuration.Parameters{"realm": realmURL + "/registry/token", "service": "ext",
		"issuer": "deployplane", "rootcertbundle": filepath.Join(dir, "deployplane-registry-token.crt")}}
	app := handlers.NewApp(context.Background(), cfg)
	t.Cleanup(func() { _ = app.Shutdown() })
	regSrv.Config.Handler = app
	regSrv.Start()
	t.Cleanup(regSrv.Close)

	ids := make([]string, 2)
	for i := range ids {
		status, d := call(t, "POST", srvURL+"/v2/deployments", "k", fmt.Sprintf(`{"name": "lg%d", "source": "internal_docker"}`, i))
		if status != 201 {
			t.Fatalf("create: %d %v", status, d)
		}
		ids[i] = d["id"].(string)
	}
	status, tok := call(t, "POST", srvURL+"/v2/deployments/"+ids[0]+"/push-token", "k", "")
	if status != 200 || tok["registry_url"] != host+"/deployments/"+ids[0] {
		t.Fatalf("push-token: %d %v", status, tok)
	}
	regURL := tok["registry_url"].(string)
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuth(&authn.Basic{Username: "oauth2accesstoken", Password: tok["token"].(string)})
	for _, tt := range []struct {
		repo string
		ok   bool
	}{{regURL + "/agent:v1", true}, {host + "/deployments/" + ids[1] + "/agent:v1", false}} {
		ref, err := name.ParseReference(tt.repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img, auth); (err == nil) != tt.ok {
			t.Errorf("push into %s: %v, want success %v", tt.repo, err, tt.ok)
		}
	}
	dg, _ := img.Digest()
	status, p := call(t, "PATCH", srvURL+"/v2/deployments/"+ids[0], "k", `{"source_revision_config": {"image_uri": "`+regURL+`/agent:v1"}}`)
	if status != 200 {
		t.Fatalf("PATCH: %d %v", status, p)
	}
	if got := p["source_revision_config"].(map[string]any)["image_uri"]; got != regURL+"/agent@"+dg.String() {
		t.Errorf("image_uri %v, want the pushed digest %s", got, dg)
	}
	waitStatus(t, srvURL, "k", ids[0], p["latest_revision_id"].(string), "DEPLOYED")
}

// The registry flags that contradict each other.
func TestRegistryFlagsRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-registry-token-key", "k.pem"},
		{"-registry-external-url", "https://r.example.com", "-registry-addr", "127.0.0.1:0"},
		{"-registry-external-url", "https://r.example.com", "-registry-storage", "/x"},
		{"-registry-external-url", "ftp://r.example.com"},
		{"-registry-external-url", "https://r.example.com/path"},
	} {
		if _, err := parseFlags(args, func(string) string { return "" }, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want the usage error", args, err)
		}
	}
}

// TestRegistryQuotaFlag: -registry-quota reaches the registry: a push
// that fits the deployment's quota succeeds, one beyond it is refused
// with the registry's DENIED error (which go-containerregistry, like the
// docker CLI, shows), and another deployment still pushes.
func TestRegistryQuotaFlag(t *testing.T) {
	url, _, stderr := server(t, []string{"-db", ":memory:", "-registry-addr", "127.0.0.1:0",
		"-registry-storage", t.TempDir(), "-registry-quota", "1MiB"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	push := func(deployment string, layer int64) (string, error) {
		t.Helper()
		status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "`+deployment+`", "source": "internal_docker"}`)
		if status != 201 {
			t.Fatalf("create: %d %v", status, d)
		}
		status, tok := call(t, "POST", url+"/v2/deployments/"+d["id"].(string)+"/push-token", "k", "")
		if status != 200 {
			t.Fatalf("push-token: %d %v", status, tok)
		}
		img, err := random.Image(layer, 1)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(tok["registry_url"].(string)+"/agent:v1", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		return d["id"].(string), remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "oauth2accesstoken", Password: tok["token"].(string)}))
	}
	if _, err := push("small", 512<<10); err != nil {
		t.Fatalf("a push of 512 KiB under a quota of 1 MiB: %v", err)
	}
	id, err := push("big", 2<<20)
	var te *transport.Error
	if !errors.As(err, &te) || te.StatusCode != http.StatusForbidden || len(te.Errors) != 1 || te.Errors[0].Code != transport.DeniedErrorCode ||
		!strings.Contains(err.Error(), "DENIED: registry quota exceeded: deployment "+id+" may store 1 MiB of image blobs") {
		t.Fatalf("a push of 2 MiB: %v, want the registry's DENIED over quota", err)
	}
	if _, err := push("other", 512<<10); err != nil {
		t.Fatalf("another deployment's push after a refused one: %v", err)
	}
	if !strings.Contains(stderr.String(), "registry: refused upload over quota") {
		t.Errorf("the log does not record the refusal:\n%s", stderr)
	}
}

// TestRegistryLimitFlags: -h documents the registry's limits, their
// values reach the registry, and nonsensical ones are usage errors.
func TestRegistryLimitFlags(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-registry-max-conns N", "default\n                      256", "-registry-quota SIZE", "10GiB; 0: no quota", "403 DENIED"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not say %q", want)
		}
	}
	for _, tt := range []struct {
		args     []string
		maxConns int
		quota    int64
	}{
		{nil, 256, 10 << 30},
		{[]string{"-registry-max-conns", "0", "-registry-quota", "0"}, 0, 0},
		{[]string{"-registry-quota", "500MB"}, 256, 500e6},
		{[]string{"-registry-quota", "3gib"}, 256, 3 << 30},
		{[]string{"-registry-quota", "1048576"}, 256, 1 << 20},
	} {
		c, err := parseFlags(tt.args, func(string) string { return "" }, io.Discard)
		if err != nil || c.registry.maxConns != tt.maxConns || c.registry.quota != tt.quota {
			t.Errorf("%v: %v, max conns %d, quota %d; want %d, %d", tt.args, err, c.registry.maxConns, c.registry.quota, tt.maxConns, tt.quota)
		}
	}
	for _, args := range [][]string{
		{"-registry-max-conns", "-1"},
		{"-registry-quota", "-1"},
		{"-registry-quota", "10XB"},
		{"-registry-quota", "GiB"},
		{"-registry-quota", "99999999TiB"},
		{"-registry-external-url", "https://r.example.com", "-registry-quota", "1GiB"},
		{"-registry-external-url", "https://r.example.com", "-registry-max-conns", "10"},
	} {
		if _, err := parseFlags(args, func(string) string { return "" }, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestRegistryConnsSpareTheAPI: connections to the registry's port beyond
// -registry-max-conns wait in the kernel's accept queue, so that idle
// registry clients cannot take the descriptors the API needs. The server
// runs as its own process (the command, built) allowed 128 descriptors;
// 300 registry clients each send a request and keep their connection
// open. The API and /healthz still answer, and the registry answers again
// once those clients leave.
func TestRegistryConnsSpareTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to run the server under ulimit -n:", err)
	}
	bin := binary(t)
	cmd := exec.Command(sh, "-c", `ulimit -n 128 && exec "$0" "$@"`, bin, "-addr", "127.0.0.1:0", "-db", ":memory:",
		"-registry-addr", "127.0.0.1:0", "-registry-storage", t.TempDir(), "-registry-max-conns", "50")
	cmd.Env = append(os.Environ(), "DEPLOYPLANE_API_KEY=k")
	stderr := newWatcher()
	cmd.Stderr, cmd.Stdout = stderr, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := stderr.wait(t)
	regHost := regexp.MustCompile(`registry=(\S+)`).FindStringSubmatch(stderr.String())
	if regHost == nil {
		t.Fatalf("no registry in the log:\n%s", stderr)
	}
	// Requests wait at most until shortly before the test's deadline.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-nearDeadline(t):
			cancel()
		case <-ctx.Done():
		}
	}()
	get := func(url string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("X-Api-Key", "k")
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v\n%s", url, err, tail(stderr.String(), 2000))
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	idle := make([]net.Conn, 0, 300)
	for range cap(idle) {
		conn, err := net.Dial("tcp", regHost[1])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /v2/ HTTP/1.1\r\nHost: "+regHost[1]+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		idle = append(idle, conn)
	}
	// The first 50 are answered (401: no credentials) and kept open.
	br := bufio.NewReader(idle[49])
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the 50th registry client: %v %v", resp, err)
	}
	if status := get(url + "/healthz"); status != http.StatusOK {
		t.Errorf("/healthz beside 300 registry clients: %d", status)
	}
	if status := get(url + "/v2/deployments"); status != http.StatusOK {
		t.Errorf("the API beside 300 registry clients: %d", status)
	}
	for _, conn := range idle {
		conn.Close()
	}
	if status := get("http://" + regHost[1] + "/v2/"); status != http.StatusUnauthorized {
		t.Errorf("the registry once its clients left: %d", status)
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// TestRegistryGCFlags: -h documents the registry's collector, its period
// and grace reach the registry's flags, and nonsensical ones are usage
// errors.
func TestRegistryGCFlags(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h: %v", err)
	}
	for _, want := range []string{"-registry-gc-every DURATION", "(default 15m; 0: never)", "-registry-gc-grace DURATION", "(default 1h)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not say %q", want)
		}
	}
	for _, tt := range []struct {
		args         []string
		every, grace time.Duration
	}{
		{nil, 15 * time.Minute, time.Hour},
		{[]string{"-registry-gc-every", "0"}, 0, time.Hour},
		{[]string{"-registry-gc-every", "1h", "-registry-gc-grace", "30m"}, time.Hour, 30 * time.Minute},
	} {
		c, err := parseFlags(tt.args, func(string) string { return "" }, io.Discard)
		if err != nil || c.registry.gcEvery != tt.every || c.registry.gcGrace != tt.grace {
			t.Errorf("%v: %v, every %v, grace %v; want %v, %v", tt.args, err, c.registry.gcEvery, c.registry.gcGrace, tt.every, tt.grace)
		}
	}
	for _, args := range [][]string{
		{"-registry-gc-every", "-1m"},
		{"-registry-gc-every", "often"},
		{"-registry-gc-grace", "0"},
		{"-registry-external-url", "https://r.example.com", "-registry-gc-every", "1h"},
	} {
		if _, err := parseFlags(args, func(string) string { return "" }, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
