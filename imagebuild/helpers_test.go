package imagebuild_test

import (
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/deployplane/deployplane/controlplane"
)

// testRepo is a local git repository made with go-git:
//
//	c0 <- c1 (tags v1, annotated, and light)  <- c2 (main, HEAD)  <- c3 (feature)
//
// version.txt says "zero", "one", "two" and "feature" in them; c0 is no
// ref's tip.
type testRepo struct {
	dir            string
	c0, c1, c2, c3 string
}

var sig = &object.Signature{Name: "test", Email: "test@example.com", When: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}

// newTestRepo makes the repository at dir/name; files are added to every
// commit.
func newTestRepo(t testing.TB, dir, name string, files map[string]string) *testRepo {
	t.Helper()
	p := filepath.Join(dir, name)
	r, err := git.PlainInitWithOptions(p, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		t.Helper()
		f := filepath.Join(p, name)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(version string) string {
		t.Helper()
		write("version.txt", version)
		if _, err := wt.Add("."); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit("version "+version, &git.CommitOptions{Author: sig})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	for n, body := range files {
		write(n, body)
	}
	if err := os.MkdirAll(filepath.Join(p, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "bin", "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("version.txt", filepath.Join(p, "current")); err != nil {
		t.Fatal(err)
	}
	tr := &testRepo{dir: p}
	tr.c0 = commit("zero")
	tr.c1 = commit("one")
	if _, err := r.CreateTag("v1", plumbing.NewHash(tr.c1), &git.CreateTagOptions{Tagger: sig, Message: "v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateTag("light", plumbing.NewHash(tr.c1), nil); err != nil {
		t.Fatal(err)
	}
	tr.c2 = commit("two")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	tr.c3 = commit("feature")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	return tr
}

// work is the Work of a github revision of repoURL.
func work(repoURL string, ref, commit *string) *controlplane.Work {
	return &controlplane.Work{
		Tenant: "tenant-1",
		Deployment: controlplane.Deployment{ID: "0190f0a0-0000-7000-8000-000000000001", Source: controlplane.SourceGitHub,
			SourceConfig: controlplane.SourceConfig{RepoURL: &repoURL}},
		Revision: controlplane.Revision{ID: "0190f0a0-0000-7000-8000-0000000000aa", Source: controlplane.SourceGitHub,
			Status:               controlplane.RevisionBuilding,
			SourceRevisionConfig: controlplane.SourceRevisionConfig{RepoRef: ref, RepoCommitSHA: commit}},
	}
}

func ptr[T any](v T) *T { return &v }

// lines collects log lines; safe for concurrent use.
type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) log(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.l = append(l.l, line)
}

func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.l...)
}

func (l *lines) contains(s string) bool {
	for _, x := range l.all() {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// gitServer serves bare copies of repositories over smart HTTP with `git
// http-backend` (CGI), requiring HTTP basic auth user:password when user
// is not empty. It records whether a fetch asked for a shallow pack.
type gitServer struct {
	*httptest.Server
	mu       sync.Mutex
	deepened bool
	refuse   string // a commit this server refuses to send when asked for it by name, as some servers do
}

// refuseWant makes the server refuse fetches that want sha.
func (gs *gitServer) refuseWant(sha string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.refuse = sha
}

func newGitServer(t testing.TB, root, user, password string) *gitServer {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("git is not installed (the smart-HTTP test server is git http-backend): %v", err)
	}
	out, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend is not installed: %v", err)
	}
	gs := &gitServer{}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, Stderr: io.Discard}
	gs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		if r.Method == http.MethodPost {
			body, err := readAllLimit(r, 1<<20)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			gs.mu.Lock()
			if strings.Contains(body, "deepen 1") {
				gs.deepened = true
			}
			refused := gs.refuse != "" && strings.Contains(body, "want "+gs.refuse)
			gs.mu.Unlock()
			if refused {
				http.Error(w, "not our ref", http.StatusBadRequest)
				return
			}
			r.Body = readCloser(body)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(gs.Close)
	return gs
}

func (gs *gitServer) shallow() bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.deepened
}

// bareCopy makes a bare clone of src at dst with git.
func bareCopy(t testing.TB, src, dst string) {
	t.Helper()
	if out, err := exec.Command("git", "clone", "-q", "--bare", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
}

func readAllLimit(r *http.Request, max int64) (string, error) {
	var b strings.Builder
	_, err := io.Copy(&b, io.LimitReader(r.Body, max))
	return b.String(), err
}

func readCloser(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }
