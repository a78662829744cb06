package deploydocker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/imagebuild"
)

// baseImage imports a FROM scratch image holding the test server at
// /server (nothing pulled), tagged <name>:1, removed when the test ends.
func baseImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	b, err := os.ReadFile(serverBin)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "server", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(b)
	tw.Close()
	ref := uniq("deploydocker-test-base") + ":1"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("importing the base image: %v", err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	t.Cleanup(func() {
		cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	})
	return ref
}

// gitRepo makes a repository with go-git: branch main holds a Dockerfile
// that runs the test server from base, branch broken one whose COPY
// fails. It returns the repository's path and main's commit.
func gitRepo(t *testing.T, base string) (dir, mainSHA string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "agent")
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "test", Email: "test@example.com", When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	commit := func(files map[string]string) string {
		t.Helper()
		for n, body := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := wt.Add("."); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit("commit", &git.CommitOptions{Author: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	mainSHA = commit(map[string]string{
		"langgraph.json": `{"dependencies": ["."], "graphs": {"agent": "./agent.py:graph"}}`,
		"Dockerfile":     "FROM " + base + "\nENV VERSION=built-from-git\nENTRYPOINT [\"/server\"]\n",
	})
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("broken"), Create: true}); err != nil {
		t.Fatal(err)
	}
	commit(map[string]string{"Dockerfile": "FROM " + base + "\nCOPY no-such-file.txt /app/\n"})
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	return dir, mainSHA
}

// logMessages reads a whole log of a revision.
func logMessages(t *testing.T, cp *controlplane.ControlPlane, depID, revID string, typ controlplane.LogType) []controlplane.LogEntry {
	t.Helper()
	var all []controlplane.LogEntry
	q := &controlplane.LogQuery{Type: typ, Limit: new(controlplane.MaxLogLimit)}
	for {
		page, err := cp.ListLogs(context.Background(), tenant, depID, revID, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Logs...)
		if len(page.Logs) < controlplane.MaxLogLimit {
			return all
		}
		q.Offset = *page.NextOffset
	}
}

// hasLine reports whether a line of the log contains s (at level, when
// level is not "").
func hasLine(logs []controlplane.LogEntry, level controlplane.LogLevel, s string) bool {
	for _, l := range logs {
		if strings.Contains(l.Message, s) && (level == "" || l.Level == level) {
			return true
		}
	}
	return false
}

func dump(logs []controlplane.LogEntry) string {
	var b strings.Builder
	for _, l := range logs {
		b.WriteString("  [" + string(l.Level) + "] " + l.Message + "\n")
	}
	return b.String()
}

// A github deployment on a local repository is cloned
// and built for real (imagebuild, on the test daemon, from a base image
// made here) and reaches DEPLOYED; its url answers from the built image,
// repo_commit_sha is the commit built, the build log holds the build's
// output and the deploy log the Deployer's steps and the container's own
// output, before and after DEPLOYED. A build that fails ends BUILD_FAILED
// with the builder's message, once, and its build log is read over HTTP.
// Deleting the deployment removes its containers and its images.
func TestGitHubRevisionBuildsAndDeploys(t *testing.T) {
	needDocker(t)
	ctx := context.Background()
	cli, err := client.New(client.WithHost(dockerHost))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	base := baseImage(t, cli)
	repo, mainSHA := gitRepo(t, base)
	b, err := imagebuild.New(cli, &imagebuild.Options{AllowLocalRepositories: true,
		Repository: uniq("deploydocker-test"), TempDir: t.TempDir(), NetworkMode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *deploydocker.Options) { o.Builder = b })
	in, err := f.cp.CreateIntegration(ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(7)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	create := func(t *testing.T, ref string) *controlplane.Deployment {
		t.Helper()
		src := controlplane.SourceGitHub
		d, err := f.cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{
			Name: new(uniq("gh")), Source: &src,
			SourceConfig:         &controlplane.SourceConfig{IntegrationID: &in.ID, RepoURL: new("file://" + repo)},
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: &ref, GraphConfigPath: new("langgraph.json")},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // what a failed test left: containers first, then their images
			f.removeInstance()
			b.RemoveImages(context.Background(), tenant, d.ID)
		})
		return d
	}

	t.Run("deployed", func(t *testing.T) {
		d := create(t, "main")
		rev := f.wait(d.ID, *d.LatestRevisionID)
		build := logMessages(t, f.cp, d.ID, rev.ID, controlplane.LogBuild)
		if rev.Status != controlplane.RevisionDeployed {
			t.Fatalf("revision %s: %s\nbuild log:\n%s", rev.Status, deref(rev.StatusMessage), dump(build))
		}
		if got := deref(rev.SourceRevisionConfig.RepoCommitSHA); got != mainSHA {
			t.Errorf("repo_commit_sha = %q, want the commit built, %s", got, mainSHA)
		}
		for _, want := range []string{"Checked out " + mainSHA, "Step 1/6 : FROM " + base, "Successfully tagged " + b.ImageRef(d.ID, rev.ID)} {
			if !hasLine(build, controlplane.LevelInfo, want) {
				t.Errorf("the build log has no INFO line with %q:\n%s", want, dump(build))
			}
		}
		got, err := f.cp.GetDeployment(ctx, tenant, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := b.ImageRef(d.ID, rev.ID); deref(got.ImageVersion) != want {
			t.Errorf("image_version = %q, want %s", deref(got.ImageVersion), want)
		}
		u := deref(got.URL)
		if u != f.proxyURL+"/"+d.ID {
			t.Fatalf("url = %q", u)
		}
		eventually(t, "url answers", func() bool { _, err := get(u + "/version"); return err == nil })
		if v, err := get(u + "/version"); err != nil || v != "built-from-git" {
			t.Errorf("GET url/version = %q, %v; want the built image's", v, err)
		}
		// The container's own output while deploying, and after.
		after := uniq("said-after-deployed")
		resp, err := http.Post(u+"/say?line="+url.QueryEscape(after)+"&stream=stderr", "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var deploy []controlplane.LogEntry
		eventually(t, "the deploy log holds the container's output", func() bool {
			deploy = logMessages(t, f.cp, d.ID, rev.ID, controlplane.LogDeploy)
			return hasLine(deploy, controlplane.LevelInfo, "server: listening on") && hasLine(deploy, controlplane.LevelError, after)
		})
		for _, want := range []string{"created container", "1 container(s) healthy", "active at " + u} {
			if !hasLine(deploy, controlplane.LevelInfo, want) {
				t.Errorf("the deploy log has no step %q:\n%s", want, dump(deploy))
			}
		}

		if err := f.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deployment's containers and images are removed", func() bool {
			res, err := cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", imagebuild.LabelDeployment+"="+d.ID)})
			return err == nil && len(res.Items) == 0 && len(f.containers(deploydocker.LabelDeployment+"="+d.ID)) == 0
		})
	})

	t.Run("build failed", func(t *testing.T) {
		d := create(t, "broken")
		rev := f.wait(d.ID, *d.LatestRevisionID)
		if rev.Status != controlplane.RevisionBuildFailed {
			t.Fatalf("status %s (%s), want BUILD_FAILED", rev.Status, deref(rev.StatusMessage))
		}
		msg := deref(rev.StatusMessage)
		if !strings.HasPrefix(msg, "build failed: ") || strings.Count(strings.ToLower(msg), "build failed") != 1 ||
			!strings.Contains(msg, "no-such-file.txt") {
			t.Errorf("status_message = %q, want the builder's message once", msg)
		}
		keys, err := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey("k"), Tenants: []string{tenant}}})
		if err != nil {
			t.Fatal(err)
		}
		h := httphandler.New(f.cp, &httphandler.Options{Authenticator: keys})
		srv := httptest.NewServer(h)
		t.Cleanup(func() { srv.Close(); h.Close() })
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v2/deployments/"+d.ID+"/revisions/"+rev.ID+"/logs?type=build&limit=1000", nil)
		req.Header.Set("X-Api-Key", "k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var page controlplane.LogPage
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET logs: %s, %v", resp.Status, err)
		}
		if len(page.Logs) == 0 {
			t.Fatal("the failed build's log is empty")
		}
		if last := page.Logs[len(page.Logs)-1]; last.Level != controlplane.LevelError || last.Message != msg {
			t.Errorf("the build log's last line = [%s] %q, want [ERROR] %q", last.Level, last.Message, msg)
		}
		if !hasLine(page.Logs, controlplane.LevelInfo, "Step 2/5 : COPY no-such-file.txt") ||
			!hasLine(page.Logs, controlplane.LevelError, "ERROR: COPY failed") {
			t.Errorf("the build log has no line of the failing step:\n%s", dump(page.Logs))
		}
	})
}

// A DEPLOYED revision's container output keeps reaching its deploy log
// (through State, no lease): across a crash and the restart Docker makes,
// the output of both runs is there, and nothing twice.
func TestContainerOutputFollowedAcrossRestart(t *testing.T) {
	f := newFixture(t, nil)
	d := f.create(uniq("follow"), image("server:v1"), nil)
	rev := f.wait(d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	u := f.proxyURL + "/" + d.ID
	eventually(t, "url answers", func() bool { _, err := get(u + "/version"); return err == nil })
	say := func(line string) {
		t.Helper()
		resp, err := http.Post(u+"/say?line="+url.QueryEscape(line), "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	before := uniq("before-the-crash")
	say(before)
	resp, err := http.Post(u+"/exit", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Docker restarts it (unless-stopped) on the same port.
	ids := f.containers(deploydocker.LabelRevision + "=" + rev.ID)
	if len(ids) != 1 {
		t.Fatalf("%d containers", len(ids))
	}
	eventually(t, "the container is restarted", func() bool {
		res, err := f.cli.ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
		return err == nil && res.Container.RestartCount > 0 && res.Container.State != nil && res.Container.State.Running
	})
	after := uniq("after-the-restart")
	eventually(t, "the restarted container answers", func() bool {
		resp, err := http.Post(u+"/say?line="+url.QueryEscape(after), "text/plain", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	var logs []controlplane.LogEntry
	eventually(t, "the deploy log holds both runs' output", func() bool {
		logs = logMessages(t, f.cp, d.ID, rev.ID, controlplane.LogDeploy)
		return hasLine(logs, controlplane.LevelInfo, before) && hasLine(logs, controlplane.LevelInfo, "server: exiting on request") &&
			hasLine(logs, controlplane.LevelInfo, after)
	})
	count := func(s string) int {
		n := 0
		for _, l := range logs {
			if strings.Contains(l.Message, s) {
				n++
			}
		}
		return n
	}
	if n := count("server: listening on"); n != 2 {
		t.Errorf("%d lines of the server starting, want 2 (a start and a restart):\n%s", n, dump(logs))
	}
	if n := count(before); n != 1 {
		t.Errorf("the line said before the crash is in the log %d times, want once:\n%s", n, dump(logs))
	}
}
