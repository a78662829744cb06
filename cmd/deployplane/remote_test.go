package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// langgraphCLI is the real langgraph CLI of ../shared/clients (or the one
// DEPLOYPLANE_LANGGRAPH_CLI names, for a checkout elsewhere, such as a git
// worktree), or a skip saying why it cannot run here.
func langgraphCLI(t *testing.T) string {
	t.Helper()
	cli, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "clients", "langgraph"))
	if err != nil {
		t.Fatal(err)
	}
	if env := os.Getenv("DEPLOYPLANE_LANGGRAPH_CLI"); env != "" {
		cli = env
	}
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("the langgraph CLI is not at %s (../shared is absent outside the project's machines): %v", cli, err)
	}
	if out, err := exec.Command(cli, "--help").CombinedOutput(); err != nil {
		t.Skipf("the langgraph CLI does not run here (its wrapper installs its Python dependencies with apt): %v\n%s", err, out)
	}
	return cli
}

// remoteServer starts the server with the docker deployer, no database
// containers (nothing is pulled), and its uploads in a bbolt file's
// directory.
func remoteServer(t *testing.T, host string) string {
	t.Helper()
	url, _, _ := server(t, []string{"-db", filepath.Join(t.TempDir(), "db"), "-deployer", "docker", "-docker-host", host,
		"-docker-network", "host", "-build-network", "host",
		"-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0", "-docker-instance", "upload20-" + randHex(),
		"-docker-postgres-image", "", "-docker-redis-image", ""}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	return url
}

// TestLanggraphDeployRemote runs `langgraph deploy --remote` (the real
// CLI) against the server with the docker deployer: the CLI creates an
// internal_source deployment, asks for an upload URL, PUTs the project's
// tarball, PATCHes its object_path, and polls the revision while the
// server builds the project's Dockerfile (FROM a base image built here:
// nothing is pulled) and deploys it; the deployment's url then answers.
// A second run finds the deployment by name and deploys a new revision.
func TestLanggraphDeployRemote(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	cli := langgraphCLI(t)
	base := testBaseImage(t, host)
	url := remoteServer(t, host)

	project := t.TempDir()
	for name, body := range map[string]string{
		"langgraph.json": `{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`,
		"agent.py":       "graph = None\n",
		"Dockerfile":     "FROM " + base + "\nENV VERSION=remote-1\nENTRYPOINT [\"/server\"]\n",
	} {
		if err := os.WriteFile(filepath.Join(project, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	name := "remote-" + randHex()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, args...)
		cmd.Dir = project
		cmd.Env = append(os.Environ(), "LANGGRAPH_HOST_URL="+url, "LANGSMITH_API_KEY=k")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("langgraph %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	deploy := func() string {
		t.Helper()
		return run("deploy", "--remote", "--name", name, "--no-input", "--verbose", "-c", "langgraph.json")
	}
	out := deploy()
	status, page := call(t, "GET", url+"/v2/deployments?name_contains="+name, "k", "")
	res, _ := page["resources"].([]any)
	if status != 200 || len(res) != 1 {
		t.Fatalf("list: %d %v", status, page)
	}
	dep := res[0].(map[string]any)
	id := dep["id"].(string)
	t.Cleanup(func() { deleteDeployment(t, url, id) })
	rev, _ := dep["latest_revision_id"].(string)
	// (Which build log lines --verbose shows while it polls depends on
	// when it polls; `deploy logs --type build` below reads them all.)
	for _, want := range []string{"Deployment ID: " + id, "Requesting upload URL", "Uploading source", "Triggering remote build",
		"Deployment successful!"} {
		if !strings.Contains(out, want) {
			t.Errorf("the CLI's output does not show %q:\n%s", want, out)
		}
	}
	if dep["source"] != "internal_source" || dep["status"] != "READY" {
		t.Errorf("deployment %v", dep)
	}
	_, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
	src, _ := r["source_revision_config"].(map[string]any)
	if r["status"] != "DEPLOYED" || !strings.HasPrefix(src["source_tarball_path"].(string), "uploads/"+id+"/") {
		t.Errorf("revision %v", r)
	}
	waitBody(t, dep["url"], "/version", "remote-1")
	// The build log, through the CLI's route (POST /v1/projects/.../build_logs).
	logs := run("deploy", "logs", "--deployment-id", id, "--type", "build", "--limit", "1000")
	for _, want := range []string{"Unpacking the source tarball uploads/" + id + "/", "Building with the repository's Dockerfile",
		"Successfully built"} {
		if !strings.Contains(logs, want) {
			t.Errorf("langgraph deploy logs --type build does not show %q:\n%s", want, logs)
		}
	}

	// Again, with a changed project: the same deployment, a new revision.
	if err := os.WriteFile(filepath.Join(project, "Dockerfile"), []byte("FROM "+base+"\nENV VERSION=remote-2\nENTRYPOINT [\"/server\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = deploy()
	if !strings.Contains(out, "Found existing deployment (ID: "+id+")") || !strings.Contains(out, "Deployment successful!") {
		t.Errorf("second run:\n%s", out)
	}
	_, d2 := call(t, "GET", url+"/v2/deployments/"+id, "k", "")
	if d2["latest_revision_id"] == rev {
		t.Errorf("no new revision: %v", d2)
	}
	waitBody(t, d2["url"], "/version", "remote-2")
}

// waitBody waits until GET u+path answers want.
func waitBody(t *testing.T, u any, path, want string) {
	t.Helper()
	s, _ := u.(string)
	if !strings.HasPrefix(s, "http://127.0.0.1:") {
		t.Fatalf("url %v, want the proxy's", u)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		v, err := getBody(s + path)
		if err == nil && v == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s%s: %q, %v; want %q", s, path, v, err, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleteDeployment deletes a deployment and waits until it is gone (its
// containers and images with it), before the server stops.
func deleteDeployment(t *testing.T, url, id string) {
	call(t, "DELETE", url+"/v2/deployments/"+id, "k", "")
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if status, _ := call(t, "GET", url+"/v2/deployments/"+id, "k", ""); status == 404 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("deployment %s not deleted after 2 minutes", id)
}

// hostileTarball is a gzip-compressed tar of headers (and their data),
// written by fill.
func hostileTarball(t *testing.T, fill func(tw *tar.Writer) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := fill(tw); err != nil {
		t.Fatal(err)
	}
	tw.Flush()
	if err := zw.Close(); err != nil { // the tar may be left unfinished on purpose
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRemoteBuildRefusesHostileTarballs: tarballs that break the limits
// of wire contract section 10, uploaded through the API, end their
// revisions BUILD_FAILED with a status_message saying which, and the
// server writes nothing outside its build directory.
func TestRemoteBuildRefusesHostileTarballs(t *testing.T) {
	host := os.Getenv("DEPLOYPLANE_TEST_DOCKER")
	if host == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER is not set: this test needs a Docker daemon (.ci/run starts one)")
	}
	url := remoteServer(t, host)
	file := func(name string) func(tw *tar.Writer) error {
		return func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}); err != nil {
				return err
			}
			_, err := tw.Write([]byte("x"))
			return err
		}
	}
	header := func(h *tar.Header) func(tw *tar.Writer) error {
		return func(tw *tar.Writer) error { return tw.WriteHeader(h) }
	}
	cases := []struct {
		name string
		fill func(tw *tar.Writer) error
		want string
	}{
		{"absolute path", file("/tmp/upload20-escape"), "has an absolute path"},
		{"dot dot", file("../upload20-escape"), `has a ".." in its path`},
		{"symlink out of the root", header(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "../../.."}), "points outside"},
		// Inside as text, outside on the tree as written: x/y is x.
		{"symlink out through a symlink", func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&tar.Header{Name: "x/y", Typeflag: tar.TypeSymlink, Linkname: "."}); err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "x/y/../../etc/passwd"})
		}, `the symbolic link "l" points outside`},
		// One entry 20,000 levels deep: a few hundred bytes uploaded.
		{"deep path", file(strings.Repeat("d/", 20_000) + "f"), "is 20001 levels deep, more than 64"},
		{"device", header(&tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}), "is a device"},
		// 2 GiB of zeros announced; refused at the header, so the upload
		// carries only the header.
		{"decompression bomb", header(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2 << 30}),
			"more than 1073741824 bytes"},
		{"too many entries", func(tw *tar.Writer) error {
			for range 100_001 {
				if err := tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
					return err
				}
			}
			return nil
		}, "more than 100000 entries"},
	}
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "hostile-`+randHex()+`", "source": "internal_source",
		"source_config": {}, "source_revision_config": {}}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, d)
	}
	id := d["id"].(string)
	t.Cleanup(func() { deleteDeployment(t, url, id) })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, up := call(t, "POST", url+"/v2/deployments/"+id+"/upload-url", "k", "")
			if status != 200 {
				t.Fatalf("upload-url: %d %v", status, up)
			}
			body := hostileTarball(t, tc.fill)
			if status, r := call(t, "PUT", up["upload_url"].(string), "", string(body)); status != 200 {
				t.Fatalf("PUT: %d %v", status, r)
			}
			status, p := call(t, "PATCH", url+"/v2/deployments/"+id, "k",
				`{"source_revision_config": {"source_tarball_path": "`+up["object_path"].(string)+`"}}`)
			if status != 200 {
				t.Fatalf("PATCH: %d %v", status, p)
			}
			rev := p["latest_revision_id"].(string)
			waitStatus(t, url, "k", id, rev, "BUILD_FAILED")
			_, r := call(t, "GET", url+"/v2/deployments/"+id+"/revisions/"+rev, "k", "")
			msg, _ := r["status_message"].(string)
			if !strings.HasPrefix(msg, "source tarball refused: ") || !strings.Contains(msg, tc.want) {
				t.Errorf("status_message %q, want one saying %q", msg, tc.want)
			}
		})
	}
	if _, err := os.Lstat("/tmp/upload20-escape"); err == nil {
		t.Error("/tmp/upload20-escape was written")
	}
}
