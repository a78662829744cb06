package deploydocker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/storebolt"
)

// The test images live in an in-process registry on 127.0.0.1 (so that
// pulls are real), pushed once per test binary by TestMain. A second
// registry (privHost) answers only with the credentials regUser/regPass
// (the daemon asks /v2/ first, so the whole registry is private).
const (
	regUser = "puller"
	regPass = "pull-secret"
)

var (
	dockerHost string // DEPLOYPLANE_TEST_DOCKER
	regHost    string // host:port of the registry
	privHost   string // host:port of the private registry
	serverBin  string // the test server, a static binary (testdata/server)
)

// image names a test image in the registry: "server:v1" (VERSION=v1),
// "server:v2", "crash:1" (exits at once), "unhealthy:1" (/ok is 503),
// "gated:1" (/ok is 503 until POST /ready), "noentry:1" (its entrypoint
// does not exist).
func image(ref string) string { return regHost + "/" + ref }

// privateImage is "server:v1" with VERSION=private, in the private
// registry.
func privateImage() string { return privHost + "/private/server:v1" }

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // the kill -9 test's control plane; never returns
		return
	}
	dockerHost = os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if dockerHost == "" {
		os.Exit(m.Run()) // every test skips and says why
	}
	stop, err := setupImages()
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploydocker tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	removeDBImage()
	stop()
	os.Exit(code)
}

// needDocker skips a test without a test daemon.
func needDocker(t testing.TB) {
	t.Helper()
	if dockerHost == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: these tests need a Docker daemon (.ci/run starts one; see .ci/docker.sh)")
	}
}

// setupImages builds the test server (a static binary), starts the
// registry and pushes the test images into it.
func setupImages() (stop func(), err error) {
	dir, err := os.MkdirTemp("", "deploydocker-test")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "server")
	serverBin = bin
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/server")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("building the test server: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: registry.New(registry.Logger(nopLogger()))}}
	srv.Start()
	regHost = l.Addr().String()
	priv := httptest.NewServer(basicAuth(registry.New(registry.Logger(nopLogger()))))
	privHost = strings.TrimPrefix(priv.URL, "http://")
	stop = func() { srv.Close(); priv.Close(); os.RemoveAll(dir) }

	layer, err := binaryLayer(bin)
	if err != nil {
		stop()
		return nil, err
	}
	for ref, env := range map[string][]string{
		"server:v1":         {"VERSION=v1"},
		"server:v2":         {"VERSION=v2"},
		"crash:1":           {"MODE=crash"},
		"unhealthy:1":       {"MODE=unhealthy"},
		"gated:1":           {"MODE=gated", "VERSION=gated"},
		"noentry:1":         nil, // its entrypoint does not exist
		"private/server:v1": {"VERSION=private"},
	} {
		to := image(ref)
		if strings.HasPrefix(ref, "private/") {
			to = privHost + "/" + ref
		}
		var entry []string
		if ref == "noentry:1" {
			entry = []string{"/no/such/entrypoint"}
		}
		if err := push(layer, to, env, entry...); err != nil {
			stop()
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
	}
	return stop, nil
}

// binaryLayer is a layer holding the server at /server.
func binaryLayer(bin string) (v1.Layer, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "server", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	tw.Write(b)
	tw.Close()
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// push writes a FROM scratch image of the layer with env to ref. Its
// entrypoint is /server unless one is given.
func push(layer v1.Layer, ref string, env []string, entrypoint ...string) error {
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/server"}
	if len(entrypoint) > 0 {
		cf.Config.Entrypoint = entrypoint
	}
	cf.Config.Env = env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(r, img, remote.WithAuth(&authn.Basic{Username: regUser, Password: regPass}))
}

// basicAuth makes a registry answer only with the test credentials.
func basicAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != regUser || p != regPass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"credentials needed"}]}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func nopLogger() *log.Logger { return log.New(io.Discard, "", 0) }

const tenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

// uniq is a name no other test (or other user of the daemon) has.
func uniq(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// fixture is a control plane over a bbolt file, a Deployer on the test
// daemon with its own instance label, and the proxy on a loopback server.
type fixture struct {
	t        testing.TB
	cp       *controlplane.ControlPlane
	d        *deploydocker.Deployer
	cli      *client.Client
	instance string
	proxyURL string
	stopRun  func()
}

// newFixture starts the control plane's Run with a Deployer; tweak may
// change the Deployer's options.
func newFixture(t testing.TB, tweak func(*deploydocker.Options)) *fixture {
	t.Helper()
	return newFixtureOf(t, tweak, nil)
}

// wrapping changes what a fixture's Deployer reads (state) and what the
// control plane's Run drives (run); nil leaves either as it is.
type wrapping struct {
	state func(*controlplane.ControlPlane) deploydocker.State
	run   func(*deploydocker.Deployer) controlplane.Deployer
}

// newFixtureOf is newFixture with the wrapping w (nil: none).
func newFixtureOf(t testing.TB, tweak func(*deploydocker.Options), w *wrapping) *fixture {
	t.Helper()
	needDocker(t)
	cli, err := client.New(client.WithHost(dockerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f := &fixture{t: t, cli: cli, instance: uniq("t")}
	t.Cleanup(f.removeInstance)
	st, err := storebolt.Open(filepath.Join(t.TempDir(), "db.bolt"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// github deployments get their custom_url (their url) from the
	// template: where the proxy serves them, as cmd/deployplane sets it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.cp = controlplane.New(st, &controlplane.Options{PollInterval: 100 * time.Millisecond, Logger: quiet(),
		CustomURLTemplate: "http://" + l.Addr().String() + "/{id}"})
	var state deploydocker.State = f.cp
	if w != nil && w.state != nil {
		state = w.state(f.cp)
	}
	f.d, f.proxyURL = newDeployer(t, state, f.instance, l, tweak)
	var run controlplane.Deployer = f.d
	if w != nil && w.run != nil {
		run = w.run(f.d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.cp.Run(ctx, run) }()
	f.stopRun = func() { cancel(); <-done }
	t.Cleanup(f.stopRun)
	return f
}

// newDeployer makes a Deployer of the instance with its proxy served on l
// (a new loopback listener when nil).
func newDeployer(t testing.TB, st deploydocker.State, instance string, l net.Listener, tweak func(*deploydocker.Options)) (*deploydocker.Deployer, string) {
	t.Helper()
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	var h http.Handler = http.NotFoundHandler()
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) })}}
	srv.Start()
	t.Cleanup(srv.Close)
	o := &deploydocker.Options{
		Host:           dockerHost,
		Network:        "host", // the test daemon has no bridge network
		Instance:       instance,
		ProxyURL:       srv.URL,
		State:          st,
		HealthInterval: 50 * time.Millisecond,
		HealthTimeout:  2 * time.Minute, // generous: fails only on a real hang
		StopTimeout:    time.Second,
		Logger:         quiet(),
	}
	if tweak != nil {
		tweak(o)
	}
	d, err := deploydocker.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h = d.Proxy()
	return d, srv.URL
}

func quiet() *slog.Logger {
	if testing.Verbose() {
		return slog.Default()
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// containers lists the instance's containers (any state) with extra
// label filters.
func (f *fixture) containers(labels ...string) []string {
	return listContainers(f.t, f.cli, f.instance, labels...)
}

func listContainers(t testing.TB, cli *client.Client, instance string, labels ...string) []string {
	t.Helper()
	fl := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance)
	for _, l := range labels {
		fl.Add("label", l)
	}
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: fl})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// removeInstance removes whatever the test left on the daemon.
func (f *fixture) removeInstance() {
	removeInstance(f.t, f.cli, f.instance)
}

func removeInstance(t testing.TB, cli *client.Client, instance string) {
	for _, id := range listContainers(t, cli, instance) {
		cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
	}
	// The data volumes of deployments the test did not delete.
	fl := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+instance)
	if res, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: fl}); err == nil {
		for _, v := range res.Items {
			cli.VolumeRemove(context.Background(), v.Name, client.VolumeRemoveOptions{Force: true})
		}
	}
}

// create makes an external_docker deployment.
func (f *fixture) create(name, img string, spec *controlplane.ResourceSpec, secrets ...controlplane.SecretInput) *controlplane.Deployment {
	f.t.Helper()
	return createIn(f.t, f.cp, name, img, spec, secrets...)
}

func createIn(t testing.TB, cp *controlplane.ControlPlane, name, img string, spec *controlplane.ResourceSpec, secrets ...controlplane.SecretInput) *controlplane.Deployment {
	t.Helper()
	src := controlplane.SourceExternalDocker
	d, err := cp.CreateDeployment(context.Background(), tenant, &controlplane.CreateDeploymentRequest{
		Name: &name, Source: &src,
		SourceConfig:         &controlplane.SourceConfig{ResourceSpec: spec},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img},
		Secrets:              secrets,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wait polls the revision until it is terminal (a generous deadline: only
// a real hang fails) and returns it.
func (f *fixture) wait(depID, revID string) *controlplane.Revision {
	f.t.Helper()
	return waitTerminal(f.t, f.cp, depID, revID)
}

func waitTerminal(t testing.TB, cp *controlplane.ControlPlane, depID, revID string) *controlplane.Revision {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rev, err := cp.GetRevision(context.Background(), tenant, depID, revID)
		if err != nil {
			t.Fatal(err)
		}
		if controlplane.IsTerminal(rev.Status) {
			return rev
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %s still %s after 3 minutes", revID, rev.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventually polls cond until it holds (generous deadline).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after 2 minutes: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get answers the body of GET url, or an error for a non-200 answer.
func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), nil
}

func isNotFound(err error) bool { return errors.Is(err, apierr.ErrNotFound) }
