package imagebuild_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/imagebuild"
)

// localBuilder checks out local repositories, with its temporary
// directories in a directory checked to be empty at the end of the test.
func localBuilder(t *testing.T, o *imagebuild.Options) *imagebuild.Builder {
	t.Helper()
	if o == nil {
		o = &imagebuild.Options{}
	}
	o.AllowLocalRepositories = true
	o.TempDir = t.TempDir()
	t.Cleanup(func() {
		if ents, err := os.ReadDir(o.TempDir); err != nil || len(ents) > 0 {
			t.Errorf("temporary directories left behind: %v %v", ents, err)
		}
	})
	b, err := imagebuild.New(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckoutLocal(t *testing.T) {
	repo := newTestRepo(t, t.TempDir(), "app", map[string]string{"langgraph.json": "{}"})
	b := localBuilder(t, nil)
	for _, tc := range []struct {
		name           string
		url            string
		ref, commit    *string
		wantSHA, wantV string
	}{
		{"HEAD", repo.dir, nil, nil, repo.c2, "two"},
		{"branch", "file://" + repo.dir, ptr("main"), nil, repo.c2, "two"},
		{"other branch", repo.dir, ptr("feature"), nil, repo.c3, "feature"},
		{"full ref name", repo.dir, ptr("refs/heads/feature"), nil, repo.c3, "feature"},
		{"annotated tag", repo.dir, ptr("v1"), nil, repo.c1, "one"},
		{"lightweight tag", repo.dir, ptr("light"), nil, repo.c1, "one"},
		{"sha", repo.dir, ptr(repo.c1), nil, repo.c1, "one"},
		{"sha of no tip", repo.dir, ptr(repo.c0), nil, repo.c0, "zero"},
		{"pushed commit wins over the ref", repo.dir, ptr("main"), ptr(repo.c3), repo.c3, "feature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // one Builder, used concurrently
			dir := filepath.Join(t.TempDir(), "out")
			var l lines
			sha, err := b.Checkout(context.Background(), work(tc.url, tc.ref, tc.commit), dir, l.log)
			if err != nil {
				t.Fatal(err)
			}
			if sha != tc.wantSHA {
				t.Errorf("sha = %s, want %s", sha, tc.wantSHA)
			}
			got, err := os.ReadFile(filepath.Join(dir, "version.txt"))
			if err != nil || string(got) != tc.wantV {
				t.Errorf("version.txt = %q, %v; want %q", got, err, tc.wantV)
			}
			if st, err := os.Stat(filepath.Join(dir, "bin", "run.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
				t.Errorf("bin/run.sh: %v, %v; want executable", st, err)
			}
			if target, err := os.Readlink(filepath.Join(dir, "current")); err != nil || target != "version.txt" {
				t.Errorf("current -> %q, %v; want a link to version.txt", target, err)
			}
			if _, err := os.Stat(filepath.Join(dir, ".git")); !os.IsNotExist(err) {
				t.Errorf(".git in the checkout: %v", err)
			}
			if !l.contains("Cloning ") || !l.contains(tc.wantSHA) {
				t.Errorf("log %q: want the clone and the commit", l.all())
			}
		})
	}
}

func TestCheckoutErrors(t *testing.T) {
	repo := newTestRepo(t, t.TempDir(), "app", nil)
	policy, err := egress.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := imagebuild.New(nil, &imagebuild.Options{Egress: policy, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	local := localBuilder(t, nil)
	for _, tc := range []struct {
		name    string
		b       *imagebuild.Builder
		url     string
		ref     *string
		commit  *string
		is      error
		message string
	}{
		{"unknown branch", local, repo.dir, ptr("nope"), nil, imagebuild.ErrClone, `repo_ref "nope" is not a branch, tag or full commit sha`},
		{"unknown commit", local, repo.dir, ptr(strings.Repeat("ab", 20)), nil, imagebuild.ErrClone, "not found"},
		{"short sha", local, repo.dir, ptr(repo.c1[:7]), nil, imagebuild.ErrClone, "is not a branch, tag or full commit sha"},
		{"bad pushed sha", local, repo.dir, nil, ptr("xyz"), imagebuild.ErrClone, "not a full commit sha"},
		{"no repository", local, filepath.Join(t.TempDir(), "missing"), nil, nil, imagebuild.ErrClone, "repository not found"},
		{"local paths not allowed", strict, repo.dir, nil, nil, imagebuild.ErrClone, "is not an https URL"},
		{"ssh not allowed", local, "git@github.com:org/repo.git", nil, nil, imagebuild.ErrClone, "is not an https URL"},
		{"plain http refused", strict, "http://example.com/org/repo", nil, nil, imagebuild.ErrClone, "example.com"},
		{"loopback refused", strict, "https://127.0.0.1/org/repo", nil, nil, imagebuild.ErrClone, "127.0.0.1"},
		{"empty url", local, "", nil, nil, imagebuild.ErrClone, "no repo_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Checkout(context.Background(), work(tc.url, tc.ref, tc.commit), filepath.Join(t.TempDir(), "out"), nil)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err = %v, want %v with %q", err, tc.is, tc.message)
			}
		})
	}
}

func TestCheckoutLimits(t *testing.T) {
	repo := newTestRepo(t, t.TempDir(), "app", map[string]string{"big.txt": strings.Repeat("x", 64<<10)})
	for _, tc := range []struct {
		name string
		o    *imagebuild.Options
		msg  string
	}{
		{"files", &imagebuild.Options{MaxFiles: 2}, "more than 2 files"},
		{"checkout bytes", &imagebuild.Options{MaxCheckoutBytes: 32 << 10}, "over 32768 bytes"},
		{"pack bytes", &imagebuild.Options{MaxRepoBytes: 100}, "pack is over 100 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := localBuilder(t, tc.o).Checkout(context.Background(), work(repo.dir, nil, nil), filepath.Join(t.TempDir(), "out"), nil)
			if !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want ErrTooLarge with %q", err, tc.msg)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := localBuilder(t, nil).Checkout(ctx, work(repo.dir, nil, nil), filepath.Join(t.TempDir(), "out"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}

func TestCheckoutHTTPWithInstallationToken(t *testing.T) {
	repo := newTestRepo(t, t.TempDir(), "app", nil)
	root := t.TempDir()
	bareCopy(t, repo.dir, filepath.Join(root, "org", "app.git"))
	srv := newGitServer(t, root, "x-access-token", "s3cret")
	policy, err := egress.New(&egress.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	var asked []int64
	newBuilder := func(token string) *imagebuild.Builder {
		b, err := imagebuild.New(nil, &imagebuild.Options{Egress: policy, TempDir: t.TempDir(),
			InstallationID: func(_ context.Context, tenant, integrationID string) (int64, error) {
				if tenant != "tenant-1" || integrationID != "0190f0a0-0000-7000-8000-0000000000ff" {
					return 0, errors.New("unknown integration")
				}
				return 42, nil
			},
			InstallationToken: func(_ context.Context, id int64) (string, error) {
				asked = append(asked, id)
				return token, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	url := srv.URL + "/org/app.git"
	private := func(ref, commit *string) *controlplane.Work {
		w := work(url, ref, commit)
		w.Deployment.SourceConfig.IntegrationID = ptr("0190f0a0-0000-7000-8000-0000000000ff")
		return w
	}
	good := newBuilder("s3cret")
	for _, tc := range []struct {
		name    string
		ref     *string
		wantSHA string
	}{
		{"branch", ptr("feature"), repo.c3},
		{"tag", ptr("v1"), repo.c1},
		{"sha", ptr(repo.c1), repo.c1},
		{"sha of no tip", ptr(repo.c0), repo.c0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lines
			sha, err := good.Checkout(context.Background(), private(tc.ref, nil), filepath.Join(t.TempDir(), "out"), l.log)
			if err != nil {
				t.Fatal(err)
			}
			if l.contains("fetching all branches") || !l.contains("GitHub App installation 42") {
				t.Errorf("log %q: want the installation named and one shallow fetch", l.all())
			}
			if sha != tc.wantSHA {
				t.Errorf("sha = %s, want %s", sha, tc.wantSHA)
			}
		})
	}
	if !srv.shallow() {
		t.Error("no fetch asked the server for depth 1")
	}
	if len(asked) == 0 || asked[0] != 42 {
		t.Errorf("InstallationToken asked for %v, want installation 42", asked)
	}
	// A server that will not send a commit by name: every branch and tag
	// is fetched instead, and the commit found among them.
	srv.refuseWant(repo.c0)
	var l lines
	sha, err := good.Checkout(context.Background(), private(ptr(repo.c0), nil), filepath.Join(t.TempDir(), "out"), l.log)
	if err != nil || sha != repo.c0 {
		t.Errorf("refused sha: %s, %v; want %s", sha, err, repo.c0)
	}
	if !l.contains("fetching all branches and tags") {
		t.Errorf("log %q: want the fallback named", l.all())
	}
	// Neither way finds a commit the repository does not have.
	_, err = good.Checkout(context.Background(), private(ptr(strings.Repeat("cd", 20)), nil), filepath.Join(t.TempDir(), "out"), nil)
	if !errors.Is(err, imagebuild.ErrClone) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown sha: err = %v, want ErrClone: not found", err)
	}
	srv.refuseWant("")

	_, err = newBuilder("wrong").Checkout(context.Background(), private(nil, nil), filepath.Join(t.TempDir(), "out"), nil)
	if !errors.Is(err, imagebuild.ErrClone) || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("wrong token: err = %v, want ErrClone: authentication required", err)
	}
	_, err = good.Checkout(context.Background(), work(url, nil, nil), filepath.Join(t.TempDir(), "out"), nil)
	if !errors.Is(err, imagebuild.ErrClone) || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("no integration: err = %v, want ErrClone: authentication required", err)
	}
}

// A server that never answers: the clone ends at CloneTimeout with a
// message that says so.
func TestCheckoutTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	policy, err := egress.New(&egress.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := imagebuild.New(nil, &imagebuild.Options{Egress: policy, CloneTimeout: 50 * time.Millisecond, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Checkout(context.Background(), work(srv.URL+"/org/app.git", nil, nil), filepath.Join(t.TempDir(), "out"), nil)
	if !errors.Is(err, imagebuild.ErrClone) || !strings.Contains(err.Error(), "timed out after 50ms") {
		t.Errorf("err = %v, want ErrClone: timed out after 50ms", err)
	}
}
