package deployplane_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// caBundle is where Debian keeps the CA certificates, in the host and in
// the golang images alike; the Dockerfile copies it from there.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// TestServerImage builds the server's image from Dockerfile on the daemon
// DEPLOYPLANE_TEST_DOCKER names, offline as the Dockerfile's comment says:
// GO_IMAGE is an image imported from this machine's Go toolchain (nothing
// is pulled), the modules are a vendor/ directory made from the module
// cache, and the build has no network. The image must run as a non-root
// user and hold the binary, the CA certificates, the data directory and
// /tmp, nothing else. It then runs the image with host networking: /readyz
// answers 200, a deployment is created with the key the server printed,
// and a second container on the same data volume reads it back; a third
// runs with -db :memory:, which keeps its uploads in /tmp.
func TestServerImage(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: building the server's image needs a Docker daemon (.ci/run starts one)")
	}
	if testing.Short() {
		t.Skip("compiles the server inside a build container, minutes; skipped with -short")
	}
	for _, tool := range []string{"go", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s command: the test makes the build context with it", tool)
		}
	}
	if _, err := os.Stat(caBundle); err != nil {
		t.Skipf("the Go image the test imports takes its CA certificates from this machine: %v", err)
	}
	c, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
	}
	t.Cleanup(cancel)

	start := time.Now()
	goImage := importGoImage(ctx, t, c)
	t.Logf("imported %s in %v", goImage, time.Since(start).Round(time.Second))
	start = time.Now()
	image := buildImage(ctx, t, c, goImage)
	t.Logf("built %s in %v", image, time.Since(start).Round(time.Second))

	inspect, err := c.ImageInspect(ctx, image)
	if err != nil {
		t.Fatal(err)
	}
	cfg := inspect.Config
	if cfg == nil {
		t.Fatalf("%s has no config", image)
	}
	if cfg.User != "65532:65532" {
		t.Errorf("the image runs as %q, want 65532:65532", cfg.User)
	}
	if _, ok := cfg.ExposedPorts["8124/tcp"]; !ok || len(cfg.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v, want 8124/tcp", cfg.ExposedPorts)
	}
	if len(cfg.Entrypoint) == 0 || cfg.Entrypoint[0] != "/deployplane" || len(cfg.Cmd) != 0 || cfg.WorkingDir != "/data" {
		t.Errorf("entrypoint %q, cmd %q, working directory %q; want /deployplane, none, /data", cfg.Entrypoint, cfg.Cmd, cfg.WorkingDir)
	}
	checkLayers(ctx, t, c, image)

	start = time.Now()
	runImage(ctx, t, c, image)
	t.Logf("ran %s in %v", image, time.Since(start).Round(time.Second))
}

// randomName is prefix followed by random hex digits.
func randomName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// removeImage removes ref, and the untagged images it was built on, when
// the test ends.
func removeImage(t *testing.T, c *client.Client, ref string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Logf("removing %s: %v", ref, err)
		}
	})
}

// importGoImage imports an image of this machine's Go toolchain, the
// GO_IMAGE of an offline build: GOROOT as /usr/local/go, the CA
// certificates, an empty /tmp for the build cache and nothing else (no
// shell). It is removed at the end of the test.
//
// Of GOROOT it takes what a build reads: the binaries, the standard
// library's sources and go.env, not the toolchain's own sources or the
// tests. On the vfs storage driver (.ci/docker.sh) every step of a build
// copies its image's files, so fewer files make each step shorter. For
// the same reason the build cache is a volume: the legacy builder leaves a
// RUN step's writes there out of the step's layer, so the build stage
// holds the binary but not the gigabytes of the cache.
func importGoImage(ctx context.Context, t *testing.T, c *client.Client) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	goroot, err := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeGoImage(pw, goroot)) }()
	defer pr.Close()
	ref := randomName(t, "deployplane-test-go-") + ":1"
	res, err := c.ImageImport(ctx, client.ImageImportSource{Source: pr, SourceName: "-"}, ref, client.ImageImportOptions{
		Changes: []string{"ENV PATH=/usr/local/go/bin GOROOT=/usr/local/go GOPATH=/tmp/go GOCACHE=/tmp/go-build GOTOOLCHAIN=local",
			"VOLUME /tmp/go-build"},
	})
	if err != nil {
		t.Fatalf("importing the Go image: %v", err)
	}
	defer res.Close()
	removeImage(t, c, ref)
	if log, err := daemonOutput(res, nil); err != nil {
		t.Fatalf("importing the Go image: %v\n%s", err, log)
	}
	return ref
}

// writeGoImage writes the file system of the Go image as a tar stream.
func writeGoImage(w io.Writer, goroot string) error {
	tw := tar.NewWriter(w)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode})
	}
	for _, d := range []string{"usr/", "usr/local/", "etc/", "etc/ssl/", "etc/ssl/certs/"} {
		if err := dir(d, 0o755); err != nil {
			return err
		}
	}
	if err := dir("tmp/", 0o1777); err != nil {
		return err
	}
	ca, err := os.ReadFile(caBundle)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(caBundle, "/"), Mode: 0o644, Size: int64(len(ca))}); err != nil {
		return err
	}
	if _, err := tw.Write(ca); err != nil {
		return err
	}
	err = filepath.WalkDir(goroot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(goroot, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !goBuildReads(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return addFile(tw, p, path.Join("usr/local/go", rel))
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// goBuildReads reports whether go build reads the file or directory rel
// of GOROOT.
func goBuildReads(rel string, d fs.DirEntry) bool {
	top, _, _ := strings.Cut(rel, "/")
	switch {
	case rel == "." || rel == "VERSION" || rel == "go.env":
		return true
	case top != "bin" && top != "pkg" && top != "src" && top != "lib":
		return false // tests, api, doc, misc
	case rel == "src/cmd" || d.Name() == "testdata" || strings.HasSuffix(rel, "_test.go"):
		return false
	}
	return true
}

// addFile writes the file, directory or link at p to tw as name, owned by
// root.
func addFile(tw *tar.Writer, p, name string) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	h.Name, h.Uid, h.Gid, h.Uname, h.Gname = name, 0, 0, "", ""
	if info.IsDir() {
		h.Name += "/"
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// buildImage builds Dockerfile offline: GO_IMAGE=goImage, the modules
// vendored from the module cache, no network. The image and the
// intermediate ones of its build stage are removed at the end of the test.
func buildImage(ctx context.Context, t *testing.T, c *client.Client, goImage string) string {
	t.Helper()
	vendor := filepath.Join(t.TempDir(), "vendor")
	cmd := exec.CommandContext(ctx, "go", "mod", "vendor", "-o", vendor)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor (from the module cache): %v\n%s", err, out)
	}
	out, err := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	pm := dockerignore(t)

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, files, vendor, pm)) }()
	defer pr.Close()
	image := randomName(t, "deployplane-test-image-") + ":1"
	res, err := c.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{image},
		Remove:      true,
		ForceRemove: true,
		NetworkMode: "none",
		Version:     build.BuilderV1,
		BuildArgs:   map[string]*string{"GO_IMAGE": &goImage, "GOFLAGS": new("-mod=vendor")},
	})
	if err != nil {
		t.Fatalf("building the image: %v", err)
	}
	defer res.Body.Close()
	var steps []string // each step's image, to remove
	began := time.Now()
	log, err := daemonOutput(res.Body, func(line string) {
		if strings.HasPrefix(line, "Step ") {
			t.Logf("build, at %v: %s", time.Since(began).Round(time.Second), line)
		}
		if m := stepImageRE.FindStringSubmatch(line); m != nil {
			steps = append(steps, m[1])
		}
	})
	// Cleanups run last first: the image, then the steps' images from the
	// last (the untagged ones before each go with it), then the Go image.
	removeImage(t, c, image)
	for _, id := range steps {
		removeImage(t, c, id)
	}
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("the build did not end before the test's deadline (it compiles the server and its modules: minutes; go test -timeout gives more): %v\n%s", err, log)
		}
		t.Fatalf("building the image: %v\n%s", err, log)
	}
	return image
}

// stepImageRE finds the image a build step made in the legacy builder's
// output.
var stepImageRE = regexp.MustCompile(`^ ---> ([0-9a-f]{12,64})$`)

// dockerignore is the matcher of the patterns of .dockerignore.
func dockerignore(t *testing.T) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	return pm
}

// writeContext writes the build context docker build . would send from a
// clean checkout with vendor/ in it: the files git knows, with the vendor
// directory, minus what .dockerignore leaves out.
func writeContext(w io.Writer, files []string, vendor string, pm *patternmatcher.PatternMatcher) error {
	tw := tar.NewWriter(w)
	add := func(p, name string) error {
		if skip, err := pm.MatchesOrParentMatches(name); err != nil || skip {
			return err
		}
		err := addFile(tw, p, name)
		if errors.Is(err, fs.ErrNotExist) && p == name {
			return nil // deleted in the working tree
		}
		return err
	}
	for _, f := range files {
		if f == "" || f == "vendor" || strings.HasPrefix(f, "vendor/") {
			continue
		}
		if err := add(f, f); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(vendor, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(vendor, p)
		if err != nil {
			return err
		}
		return add(p, path.Join("vendor", filepath.ToSlash(rel)))
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// daemonOutput reads the JSON messages of a build or an import, handing
// each line of their text to line (when not nil); it returns the text and
// the error the daemon reported.
func daemonOutput(r io.Reader, line func(string)) (string, error) {
	var text strings.Builder
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Stream, Status, Error string
			ErrorDetail           *struct{ Message string }
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return text.String(), nil
		} else if err != nil {
			return text.String(), err
		}
		if m.Error != "" {
			return text.String(), errors.New(m.Error)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return text.String(), errors.New(m.ErrorDetail.Message)
		}
		text.WriteString(m.Stream)
		if m.Status != "" {
			text.WriteString(m.Status + "\n")
		}
		if line != nil {
			for l := range strings.Lines(m.Stream) {
				line(strings.TrimRight(l, "\r\n"))
			}
		}
	}
}

// checkLayers reads the image's layers (docker save): together they hold
// the binary, the CA certificates, and the data directory and /tmp owned
// by the user the image runs as, and nothing else.
func checkLayers(ctx context.Context, t *testing.T, c *client.Client, image string) {
	t.Helper()
	res, err := c.ImageSave(ctx, []string{image})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	var manifest []struct{ Layers []string }
	entries := map[string][]*tar.Header{} // of each file of the archive that is a tar itself
	tr := tar.NewReader(res)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("docker save: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&manifest); err != nil {
				t.Fatalf("docker save: manifest.json: %v", err)
			}
			continue
		}
		layer := tar.NewReader(tr)
		var hs []*tar.Header
		for {
			lh, err := layer.Next()
			if err != nil {
				break // the end, or not a layer (configs and indexes are JSON)
			}
			hs = append(hs, lh)
		}
		entries[h.Name] = hs
	}
	if len(manifest) != 1 {
		t.Fatalf("docker save: manifest.json names %d images, want 1", len(manifest))
	}
	got := map[string]*tar.Header{}
	for _, l := range manifest[0].Layers {
		hs, ok := entries[l]
		if !ok {
			t.Fatalf("docker save: no layer %s", l)
		}
		for _, h := range hs {
			got[path.Clean(strings.TrimPrefix(h.Name, "./"))] = h
		}
	}
	want := map[string]func(h *tar.Header) bool{
		"etc":           isDir,
		"etc/ssl":       isDir,
		"etc/ssl/certs": isDir,
		"etc/ssl/certs/ca-certificates.crt": func(h *tar.Header) bool {
			return h.Typeflag == tar.TypeReg && h.Size > 0 && h.Mode&0o444 == 0o444
		},
		"deployplane": func(h *tar.Header) bool {
			return h.Typeflag == tar.TypeReg && h.Size > 0 && h.Mode&0o111 == 0o111 && h.Uid == 0
		},
		"data": ownDir,
		"tmp":  ownDir,
	}
	for name, h := range got {
		ok, known := want[name]
		switch {
		case !known:
			t.Errorf("the image holds %s, which it should not", name)
		case !ok(h):
			t.Errorf("the image's %s: type %c, mode %o, owner %d:%d, size %d", name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size)
		}
	}
	for _, name := range []string{"etc/ssl/certs/ca-certificates.crt", "deployplane", "data", "tmp"} {
		if got[name] == nil {
			t.Errorf("the image holds no %s", name)
		}
	}
	names := slices.Sorted(maps.Keys(got))
	t.Logf("the image's layers hold %s", strings.Join(names, " "))
}

func isDir(h *tar.Header) bool { return h.Typeflag == tar.TypeDir }

// ownDir reports whether h is a directory of the user the image runs as.
func ownDir(h *tar.Header) bool {
	return isDir(h) && h.Uid == 65532 && h.Gid == 65532 && h.Mode&0o700 == 0o700
}

// runImage runs the image twice on one data volume, with host networking
// on a free loopback port (-addr 127.0.0.1:0 after the image's own -addr):
// the first container prints a key, creates a deployment with it and
// stops on SIGTERM; the second reads the deployment back with that key.
// A third, with -db :memory: and no volume, starts and answers.
func runImage(ctx context.Context, t *testing.T, c *client.Client, image string) {
	t.Helper()
	vol := randomName(t, "deployplane-test-data-")
	if _, err := c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: vol}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.VolumeRemove(ctx, vol, client.VolumeRemoveOptions{Force: true}); err != nil {
			t.Logf("removing the volume %s: %v", vol, err)
		}
	})

	id, url, stdout, stderr := startContainer(ctx, t, c, image, vol, "-addr", "127.0.0.1:0")
	key := stdout.await(ctx, t, keyRE)[1]
	status, d := call(ctx, t, "POST", url+"/v2/deployments", key,
		`{"name": "image-test", "source": "external_docker", "source_revision_config": {"image_uri": "registry.example/agent:1"}}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	depURL := url + "/v2/deployments/" + d["id"].(string)
	if status, got := call(ctx, t, "GET", depURL, key, ""); status != 200 || got["name"] != "image-test" {
		t.Fatalf("GET the deployment: %d %v", status, got)
	}
	// The server, uid 65532, wrote its database in the data directory.
	res, err := c.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: "/data/deployplane.db"})
	if err != nil {
		t.Fatalf("the data directory holds no database: %v", err)
	}
	h, err := tar.NewReader(res.Content).Next()
	res.Content.Close()
	if err != nil {
		t.Fatalf("/data/deployplane.db: %v", err)
	}
	if h.Uid != 65532 {
		t.Errorf("/data/deployplane.db is owned by %d, want 65532", h.Uid)
	}
	// SIGTERM (docker stop) stops it cleanly as PID 1.
	timeout := 60
	if _, err := c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	ci, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code := ci.Container.State.ExitCode; code != 0 {
		t.Errorf("exit code %d after docker stop, want 0:\n%s", code, stderr)
	}

	_, url, stdout, _ = startContainer(ctx, t, c, image, vol, "-addr", "127.0.0.1:0")
	depURL = url + "/v2/deployments/" + d["id"].(string)
	if status, got := call(ctx, t, "GET", depURL, key, ""); status != 200 || got["name"] != "image-test" {
		t.Fatalf("GET the deployment from a second container on the volume: %d %v", status, got)
	}
	if s := stdout.String(); keyRE.MatchString(s) {
		t.Errorf("the second container printed a new key:\n%s", s)
	}

	_, url, _, _ = startContainer(ctx, t, c, image, "", "-addr", "127.0.0.1:0", "-db", ":memory:")
	if status, got := call(ctx, t, "GET", url+"/openapi.json", "", ""); status != 200 {
		t.Errorf("GET /openapi.json with -db :memory:: %d %v", status, got)
	}
}

// keyRE finds the key the server prints on its first start, listeningRE
// its address in the "listening" record.
var (
	keyRE       = regexp.MustCompile(`(?m)^    (dp_[A-Za-z0-9_-]{43})$`)
	listeningRE = regexp.MustCompile(`msg=listening addr=(http://[^\s"]+)`)
)

// startContainer runs the image with args, host networking and the volume
// vol (if not "") as /data, waits until it answers /readyz 200 and returns
// its id, URL and output. It is removed at the end of the test.
func startContainer(ctx context.Context, t *testing.T, c *client.Client, image, vol string, args ...string) (id, url string, stdout, stderr *output) {
	t.Helper()
	hc := &container.HostConfig{NetworkMode: "host"}
	if vol != "" {
		hc.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: "/data"}}
	}
	cr, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       randomName(t, "deployplane-test-server-"),
		Config:     &container.Config{Image: image, Cmd: args},
		HostConfig: hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.ContainerRemove(ctx, cr.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Logf("removing the container: %v", err)
		}
	})
	if _, err := c.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	logs, err := c.ContainerLogs(ctx, cr.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logs.Close() })
	stdout, stderr = newOutput(), newOutput()
	go func() {
		stdcopy.StdCopy(stdout, stderr, logs)
		stdout.end()
		stderr.end()
	}()
	url = stderr.await(ctx, t, listeningRE)[1]
	for {
		status, r := call(ctx, t, "GET", url+"/readyz", "", "")
		if status == 200 {
			return cr.ID, url, stdout, stderr
		}
		select {
		case <-time.After(50 * time.Millisecond): // a load balancer's probes, closer together
		case <-ctx.Done():
			t.Fatalf("GET /readyz: %d %v\n%s", status, r, stderr)
		}
	}
}

// output keeps what a container writes on one stream and says when it
// changes and when it ends.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed (and replaced) at each Write
	ended   bool
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

// end records that the stream ended (the container stopped).
func (o *output) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// await waits until what was written matches re and returns the match
// and its submatches; it fails the test when the stream ends first, or
// at ctx's end.
func (o *output) await(ctx context.Context, t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	for {
		o.mu.Lock()
		m, ended, changed := re.FindStringSubmatch(o.buf.String()), o.ended, o.changed
		o.mu.Unlock()
		switch {
		case m != nil:
			return m
		case ended:
			t.Fatalf("the container stopped before writing %s:\n%s", re, o)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("nothing matched %s:\n%s", re, o)
		}
	}
}

// call sends a request with a key (when not empty) and decodes the JSON
// answer.
func call(ctx context.Context, t *testing.T, method, url, key, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode, v
}
