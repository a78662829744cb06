package imagebuild_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/imagebuild"
)

// dockerClient is the client of the daemon DEPLOYPLANE_TEST_DOCKER names.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is unset: set it to a Docker daemon's address (unix:///path/docker.sock) to run the image build tests")
	}
	c, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func randomName(t *testing.T, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// removeImage removes ref when the test ends.
func removeImage(t *testing.T, c *client.Client, ref string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil &&
			!strings.Contains(err.Error(), "No such image") {
			t.Logf("removing %s: %v", ref, err)
		}
	})
}

// baseImage imports an image built here, nothing pulled: /base.txt and,
// as /bin/sh, testdata/fakesh compiled statically (so RUN steps run). It
// is tagged <random name>:3.11, the tag generated Dockerfiles ask for,
// and removed at the end of the test. It returns the name.
func baseImage(t *testing.T, c *client.Client) string {
	t.Helper()
	sh := filepath.Join(t.TempDir(), "sh")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", sh, "./testdata/fakesh")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building fakesh: %v\n%s", err, out)
	}
	shBytes, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{{"bin/", 0o755, nil}, {"bin/sh", 0o755, shBytes}, {"base.txt", 0o644, []byte("base\n")}} {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	name := randomName(t, "imagebuild-test-base-")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, name+":3.11", client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("importing the base image: %v", err)
	}
	_, err = io.Copy(io.Discard, res)
	res.Close()
	if err != nil {
		t.Fatal(err)
	}
	removeImage(t, c, name+":3.11")
	return name
}

// imageFile reads a file of an image by creating (not starting) a
// container of it; ok is false when the image has no such file.
func imageFile(t *testing.T, c *client.Client, image, file string) (content string, ok bool) {
	t.Helper()
	ctx := context.Background()
	cr, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: randomName(t, "imagebuild-test-"),
		Config: &container.Config{Image: image, Cmd: []string{"/bin/sh"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.ContainerRemove(ctx, cr.ID, client.ContainerRemoveOptions{Force: true})
	res, err := c.CopyFromContainer(ctx, cr.ID, client.CopyFromContainerOptions{SourcePath: file})
	if err != nil {
		return "", false
	}
	defer res.Content.Close()
	tr := tar.NewReader(res.Content)
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// readFile is the content of a file the image must hold.
func readFile(t *testing.T, c *client.Client, image, file string) string {
	t.Helper()
	b, ok := imageFile(t, c, image, file)
	if !ok {
		t.Fatalf("%s holds no %s", image, file)
	}
	return b
}

// hasFile reports whether image holds file.
func hasFile(t *testing.T, c *client.Client, image, file string) bool {
	t.Helper()
	_, ok := imageFile(t, c, image, file)
	return ok
}

// dockerBuilder builds with a repository prefix of its own; every image
// it tags is removed at the end of the test.
func dockerBuilder(t *testing.T, c *client.Client, base string) *imagebuild.Builder {
	t.Helper()
	b, err := imagebuild.New(c, &imagebuild.Options{AllowLocalRepositories: true, BaseImage: base,
		Repository: randomName(t, "imagebuild-test-"), TempDir: t.TempDir(),
		NetworkMode: "host"}) // the test daemon has no bridge network
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildWithRepositoryDockerfile(t *testing.T) {
	c := dockerClient(t)
	t.Parallel() // each test has its own base image and repository prefix
	base := baseImage(t, c)
	repo := newTestRepo(t, t.TempDir(), "app", map[string]string{
		"agent/langgraph.json": `{"dependencies": ["."], "graphs": {"a": "./g.py:graph"}}`,
		"agent/Dockerfile":     "FROM " + base + ":3.11\nCOPY . /app/\nRUN echo built\n",
		"agent/g.py":           "graph = None\n",
		"agent/.dockerignore":  "Dockerfile\n.dockerignore\nsecret.txt\n",
		"agent/secret.txt":     "not for the image\n",
	})
	b := dockerBuilder(t, c, "")
	depID := randomName(t, "dep-") // RemoveImages below must not see the other tests' images
	parent := t
	for _, tc := range []struct {
		name, ref, sha string
	}{{"branch", "main", repo.c2}, {"tag", "v1", repo.c1}} {
		t.Run(tc.name, func(t *testing.T) {
			w := work(repo.dir, &tc.ref, nil)
			w.Revision.SourceRevisionConfig.GraphConfigPath = ptr("agent/langgraph.json")
			w.Revision.ID = randomName(t, "rev-")
			w.Deployment.ID = depID
			var l lines
			image, sha, err := b.Build(context.Background(), w, l.log)
			if image != "" {
				removeImage(parent, c, image) // at the end of the test, after RemoveImages
			}
			if err != nil {
				t.Fatalf("Build: %v\nlog:\n%s", err, strings.Join(l.all(), "\n"))
			}
			if sha != tc.sha {
				t.Errorf("sha = %s, want %s", sha, tc.sha)
			}
			if want := b.ImageRef(w.Deployment.ID, w.Revision.ID); image != want {
				t.Errorf("image = %s, want %s", image, want)
			}
			inspect, err := c.ImageInspect(context.Background(), image)
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := map[string]string{imagebuild.LabelTenant: w.Tenant, imagebuild.LabelDeployment: w.Deployment.ID,
				imagebuild.LabelRevision: w.Revision.ID}
			for k, v := range wantLabels {
				if got := inspect.Config.Labels[k]; got != v {
					t.Errorf("label %s = %q, want %q", k, got, v)
				}
			}
			// The context is the config's directory: version.txt (at the
			// root) is not in it, g.py is.
			if got := readFile(t, c, image, "/app/g.py"); got != "graph = None\n" {
				t.Errorf("/app/g.py = %q", got)
			}
			// .dockerignore applies, and may list the Dockerfile itself
			// (the daemon reads it, then leaves it out of COPY .).
			for _, f := range []string{"/app/secret.txt", "/app/Dockerfile", "/app/.dockerignore"} {
				if hasFile(t, c, image, f) {
					t.Errorf("%s is in the image", f)
				}
			}
			if got := readFile(t, c, image, "/fakesh.log"); got != "echo built\n" {
				t.Errorf("RUN steps ran %q, want echo built", got)
			}
			for _, want := range []string{"Building with the repository's agent/Dockerfile", "Step 1/6 : FROM " + base, "Step 3/6 : RUN echo built", "Built " + image} {
				if !l.contains(want) {
					t.Errorf("log lacks %q:\n%s", want, strings.Join(l.all(), "\n"))
				}
			}
		})
	}
	// RemoveImages removes what was built for the deployment, and only
	// for its tenant.
	if n := countImages(t, c, depID); n < 2 {
		t.Fatalf("%d images labelled with the deployment, want the 2 built", n)
	}
	if err := b.RemoveImages(context.Background(), "tenant-2", depID); err != nil {
		t.Fatal(err)
	}
	if n := countImages(t, c, depID); n < 2 {
		t.Errorf("another tenant's RemoveImages removed images: %d left", n)
	}
	if err := b.RemoveImages(context.Background(), "tenant-1", depID); err != nil {
		t.Fatal(err)
	}
	if n := countImages(t, c, depID); n != 0 {
		t.Errorf("%d images left after RemoveImages", n)
	}
}

// countImages counts the images labelled with the deployment.
func countImages(t *testing.T, c *client.Client, deploymentID string) int {
	t.Helper()
	res, err := c.ImageList(context.Background(), client.ImageListOptions{Filters: make(client.Filters).
		Add("label", imagebuild.LabelDeployment+"="+deploymentID)})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Items)
}

func TestBuildWithGeneratedDockerfile(t *testing.T) {
	c := dockerClient(t)
	t.Parallel() // each test has its own base image and repository prefix
	base := baseImage(t, c)
	repo := newTestRepo(t, t.TempDir(), "myagent", map[string]string{
		"langgraph.json":   `{"dependencies": ["."], "graphs": {"agent": "./agent/graph.py:graph"}}`,
		"agent/graph.py":   "graph = None\n",
		"requirements.txt": "langgraph\n",
		".dockerignore":    "secret.txt\n",
		"secret.txt":       "not for the image\n",
	})
	b := dockerBuilder(t, c, base)
	w := work(repo.dir, ptr("main"), nil)
	w.Deployment.ID = randomName(t, "dep-")
	var l lines
	image, sha, err := b.Build(context.Background(), w, l.log)
	if image != "" {
		removeImage(t, c, image)
	}
	if err != nil {
		t.Fatalf("Build: %v\nlog:\n%s", err, strings.Join(l.all(), "\n"))
	}
	if sha != repo.c2 {
		t.Errorf("sha = %s, want %s", sha, repo.c2)
	}
	inspect, err := c.ImageInspect(context.Background(), image)
	if err != nil {
		t.Fatal(err)
	}
	// What `langgraph dockerfile` would have written for this checkout.
	want, err := imagebuild.GenerateDockerfile(os.DirFS(repo.dir), "myagent", "langgraph.json", &imagebuild.DockerfileOptions{BaseImage: base})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want.Text, "FROM "+base+":3.11\n") {
		t.Errorf("generated Dockerfile does not start from the configured base:\n%s", want.Text)
	}
	if got := inspect.Config.WorkingDir; got != "/deps/outer-myagent/src" {
		t.Errorf("WORKDIR = %q, want /deps/outer-myagent/src", got)
	}
	wantEnv := `LANGSERVE_GRAPHS={"agent": "/deps/outer-myagent/src/agent/graph.py:graph"}`
	if !slices.Contains(inspect.Config.Env, wantEnv) {
		t.Errorf("Env = %q, want %q", inspect.Config.Env, wantEnv)
	}
	if got := readFile(t, c, image, "/deps/outer-myagent/src/agent/graph.py"); got != "graph = None\n" {
		t.Errorf("agent/graph.py in the image = %q", got)
	}
	ran := readFile(t, c, image, "/fakesh.log")
	for _, step := range []string{"uv pip install --system --no-cache-dir -c /api/constraints.txt -r /deps/outer-myagent/src/requirements.txt",
		`echo "Installing $dep"`, "rm /usr/bin/uv /usr/bin/uvx"} {
		if !strings.Contains(ran, step) {
			t.Errorf("RUN steps %q lack %q", ran, step)
		}
	}
	// .dockerignore applied; the generated Dockerfile and .dockerignore
	// are not copied by ADD . (the daemon drops them from the context).
	for _, f := range []string{"secret.txt", ".deployplane.Dockerfile", ".dockerignore"} {
		if hasFile(t, c, image, "/deps/outer-myagent/src/"+f) {
			t.Errorf("%s is in the image", f)
		}
	}
	if !l.contains("No Dockerfile beside langgraph.json") || !l.contains("Dockerfile: FROM "+base+":3.11") {
		t.Errorf("log lacks the generated Dockerfile:\n%s", strings.Join(l.all(), "\n"))
	}
}

func TestBuildFailures(t *testing.T) {
	c := dockerClient(t)
	t.Parallel() // each test has its own base image and repository prefix
	base := baseImage(t, c)
	for _, tc := range []struct {
		name  string
		files map[string]string
		ref   string
		is    error
		msg   string
	}{
		{"missing file", map[string]string{"Dockerfile": "FROM " + base + ":3.11\nCOPY missing.txt /\n"}, "main", imagebuild.ErrBuild, "missing.txt"},
		{"failing step", map[string]string{"Dockerfile": "FROM " + base + ":3.11\nRUN exit 3\n"}, "main", imagebuild.ErrBuild, "returned a non-zero code: 3"},
		{"bad config", map[string]string{"langgraph.json": `{"graphs": {}}`}, "main", imagebuild.ErrConfig, "no graphs"},
		{"clone", map[string]string{"Dockerfile": "FROM scratch\n"}, "no-such-branch", imagebuild.ErrClone, `repo_ref "no-such-branch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newTestRepo(t, t.TempDir(), "app", tc.files)
			b := dockerBuilder(t, c, base)
			var l lines
			image, _, err := b.Build(context.Background(), work(repo.dir, &tc.ref, nil), l.log)
			if image != "" {
				removeImage(t, c, image)
				t.Errorf("image = %q, want none", image)
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want %v with %q\nlog:\n%s", err, tc.is, tc.msg, strings.Join(l.all(), "\n"))
			}
			if tc.is == imagebuild.ErrBuild && !l.contains("ERROR: ") {
				t.Errorf("log lacks the daemon's error:\n%s", strings.Join(l.all(), "\n"))
			}
		})
	}
}

func TestBuildLogLinesBounded(t *testing.T) {
	c := dockerClient(t)
	t.Parallel() // each test has its own base image and repository prefix
	base := baseImage(t, c)
	long := strings.Repeat("é", 300)
	repo := newTestRepo(t, t.TempDir(), "app", map[string]string{"Dockerfile": "FROM " + base + ":3.11\nRUN echo " + long + "\n"})
	b, err := imagebuild.New(c, &imagebuild.Options{AllowLocalRepositories: true, MaxLogLine: 100,
		Repository: randomName(t, "imagebuild-test-"), TempDir: t.TempDir(), NetworkMode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	var l lines
	image, _, err := b.Build(context.Background(), work(repo.dir, nil, nil), l.log)
	if image != "" {
		removeImage(t, c, image)
	}
	if err != nil {
		t.Fatal(err)
	}
	cut := false
	for _, line := range l.all() {
		if len(line) > 100 {
			t.Errorf("line of %d bytes: %q", len(line), line)
		}
		if strings.HasSuffix(line, "…") && strings.Contains(line, "RUN echo é") {
			cut = true
		}
	}
	if !cut {
		t.Errorf("no cut line in the log:\n%s", strings.Join(l.all(), "\n"))
	}
}

// A JavaScript monorepo with install_command and build_command: the
// context is the repository root, the install runs there and the build in
// the config's directory, as `langgraph build` does.
func TestBuildJavaScriptWithCommands(t *testing.T) {
	c := dockerClient(t)
	t.Parallel()
	base := baseImage(t, c)
	if _, err := c.ImageTag(context.Background(), client.ImageTagOptions{Source: base + ":3.11", Target: base + ":20"}); err != nil {
		t.Fatal(err)
	}
	removeImage(t, c, base+":20")
	repo := newTestRepo(t, t.TempDir(), "mono", map[string]string{
		"package.json":              `{"name": "mono", "private": true}`,
		"apps/agent/langgraph.json": `{"node_version": "20", "graphs": {"agent": "./src/agent.ts:graph"}}`,
		"apps/agent/src/agent.ts":   "export const graph = 1;\n",
		"packages/shared/index.ts":  "export {};\n",
	})
	b := dockerBuilder(t, c, base)
	w := work(repo.dir, ptr("main"), nil)
	w.Deployment.ID = randomName(t, "dep-")
	w.Revision.SourceRevisionConfig.GraphConfigPath = ptr("apps/agent/langgraph.json")
	w.InstallCommand = ptr("npm ci && npm run prep")
	w.BuildCommand = ptr("npm run build")
	var l lines
	image, _, err := b.Build(context.Background(), w, l.log)
	if image != "" {
		removeImage(t, c, image)
	}
	if err != nil {
		t.Fatalf("Build: %v\nlog:\n%s", err, strings.Join(l.all(), "\n"))
	}
	if got, want := readFile(t, c, image, "/fakesh.log"), "npm ci && npm run prep\nnpm run build\n"; got != want {
		t.Errorf("RUN steps ran %q, want %q", got, want)
	}
	inspect, err := c.ImageInspect(context.Background(), image)
	if err != nil {
		t.Fatal(err)
	}
	if got := inspect.Config.WorkingDir; got != "/deps/mono/apps/agent" {
		t.Errorf("WORKDIR = %q, want /deps/mono/apps/agent", got)
	}
	if got := readFile(t, c, image, "/deps/mono/packages/shared/index.ts"); got != "export {};\n" {
		t.Errorf("the repository root is not the context: packages/shared/index.ts = %q", got)
	}
}

// A build's RUN steps reach what the network of Options.NetworkMode
// reaches. A step connects to a port listening on the daemon host's
// loopback, as the control plane's API, metrics and registry do: on
// "none" it fails, and the build log says why and which network the
// steps ran on; by default ("bridge") it does not reach the port either;
// only on "host", which the operator must ask for, does it connect.
func TestBuildNetwork(t *testing.T) {
	c := dockerClient(t)
	t.Parallel() // each test has its own base image and repository prefix
	base := baseImage(t, c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conn.Close()
		}
	}()
	addr := ln.Addr().String()
	repo := newTestRepo(t, t.TempDir(), "app", map[string]string{"Dockerfile": "FROM " + base + ":3.11\nRUN connect " + addr + "\n"})
	// host last: a step that succeeded is cached.
	for _, tc := range []struct {
		name, mode string
		connects   bool
		log        []string
	}{
		{"none", "none", false, []string{`Build steps run on Docker network "none": no network at all`, "connect: connection refused",
			"The command '/bin/sh -c connect " + addr + "' returned a non-zero code: 1"}},
		{"default", "", false, []string{`Build steps run on Docker network "bridge"`}},
		{"host", "host", true, []string{`Build steps run on Docker network "host": the daemon host's own network`,
			"fakesh: connected to " + addr}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := imagebuild.New(c, &imagebuild.Options{AllowLocalRepositories: true, NetworkMode: tc.mode,
				Repository: randomName(t, "imagebuild-test-"), TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			before := accepted.Load()
			var l lines
			image, _, err := b.Build(context.Background(), work(repo.dir, nil, nil), l.log)
			if image != "" {
				removeImage(t, c, image)
			}
			log := strings.Join(l.all(), "\n")
			if tc.connects {
				if err != nil {
					t.Fatalf("Build: %v\nlog:\n%s", err, log)
				}
				// The listener may count the connection a moment after the
				// step ended.
				deadline := time.Now().Add(10 * time.Second)
				for accepted.Load() == before && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if accepted.Load() == before {
					t.Error("the step said it connected, the listener saw no connection")
				}
			} else {
				if !errors.Is(err, imagebuild.ErrBuild) {
					t.Fatalf("err = %v, want ErrBuild\nlog:\n%s", err, log)
				}
				if n := accepted.Load() - before; n != 0 {
					t.Errorf("the step reached the host's loopback (%d connections)", n)
				}
			}
			for _, want := range tc.log {
				if !l.contains(want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
		})
	}
}
