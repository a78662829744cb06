package imagebuild_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/imagebuild"
	"github.com/deployplane/deployplane/internal/benchcmp"
)

// BenchmarkCheckoutHTTP clones a repository of 500 files (1 MiB) over
// smart HTTP from git http-backend on 127.0.0.1: the git CLI's
// `git clone --depth 1` (baseline) against Checkout (candidate), both at
// the head of main, each into a fresh directory.
func BenchmarkCheckoutHTTP(b *testing.B) {
	files := map[string]string{}
	for i := range 500 {
		files[fmt.Sprintf("pkg%02d/file%03d.py", i%20, i)] = strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 100)
	}
	repo := newTestRepo(b, b.TempDir(), "app", files)
	root := b.TempDir()
	bareCopy(b, repo.dir, filepath.Join(root, "app.git"))
	url := newGitServer(b, root, "", "").URL + "/app.git"
	policy, err := egress.New(&egress.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		b.Fatal(err)
	}
	builder, err := imagebuild.New(nil, &imagebuild.Options{Egress: policy, TempDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	benchcmp.CompareNamed(b, "git-clone-depth1", func(b *testing.B) {
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "out")
			if out, err := exec.Command("git", "clone", "-q", "--depth", "1", "--branch", "main", url, dir).CombinedOutput(); err != nil {
				b.Fatalf("git clone: %v\n%s", err, out)
			}
			os.RemoveAll(dir)
		}
	}, "Checkout", func(b *testing.B) {
		w := work(url, ptr("main"), nil)
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "out")
			if _, err := builder.Checkout(context.Background(), w, dir, nil); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(dir)
		}
	})
}
