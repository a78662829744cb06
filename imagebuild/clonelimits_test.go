package imagebuild_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/imagebuild"
)

// gitEntry is an entry of a tree newTreeRepo writes: a file (body), a
// symbolic link to body, or a submodule.
type gitEntry struct {
	path      string
	body      string
	link      bool
	submodule bool
}

// treeNode is a directory of newTreeRepo's tree, or an entry.
type treeNode struct {
	entry    *gitEntry
	children map[string]*treeNode
}

// newTreeRepo makes a bare repository at dir/name whose branch main (its
// HEAD) is one commit of the entries, written as git objects directly, so
// that its tree may be what no worktree could hold: thousands of levels
// deep, paths longer than the file system takes, a name twice (dup
// names an entry to repeat in its directory's tree).
func newTreeRepo(t testing.TB, dir, name string, dup string, entries ...gitEntry) string {
	t.Helper()
	p := filepath.Join(dir, name)
	r, err := git.PlainInitWithOptions(p, &git.PlainInitOptions{Bare: true,
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
	// The objects are made in memory and written as one pack: thousands
	// of loose objects take seconds.
	st := memory.NewStorage()
	root := &treeNode{children: map[string]*treeNode{}}
	for i := range entries {
		e := &entries[i]
		n := root
		parts := strings.Split(e.path, "/")
		for _, part := range parts[:len(parts)-1] {
			if n.children[part] == nil {
				n.children[part] = &treeNode{children: map[string]*treeNode{}}
			}
			n = n.children[part]
		}
		n.children[parts[len(parts)-1]] = &treeNode{entry: e}
	}
	save := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := func(body string) plumbing.Hash {
		obj := st.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
		w.Close()
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	var tree func(n *treeNode, base string) plumbing.Hash
	tree = func(n *treeNode, base string) plumbing.Hash {
		var tr object.Tree
		for name, c := range n.children {
			p := "" // only when dup is named: deep trees would make this quadratic
			if dup != "" {
				p = strings.TrimPrefix(base+"/"+name, "/")
			}
			var te object.TreeEntry
			switch {
			case c.entry == nil:
				te = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: tree(c, p)}
			case c.entry.submodule:
				te = object.TreeEntry{Name: name, Mode: filemode.Submodule, Hash: plumbing.NewHash(strings.Repeat("ab", 20))}
			case c.entry.link:
				te = object.TreeEntry{Name: name, Mode: filemode.Symlink, Hash: blob(c.entry.body)}
			default:
				te = object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: blob(c.entry.body)}
			}
			tr.Entries = append(tr.Entries, te)
			if dup != "" && p == dup {
				tr.Entries = append(tr.Entries, te)
			}
		}
		// git's order: by name, a directory's name as if it ended in "/".
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		slices.SortStableFunc(tr.Entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
		return save(&tr)
	}
	h := save(&object.Commit{Author: *sig, Committer: *sig, Message: "tree", TreeHash: tree(root, "")})
	pw, ok := r.Storer.(storer.PackfileWriter)
	if !ok {
		t.Fatal("the repository's storage writes no packs")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		t.Fatal(err)
	}
	var hashes []plumbing.Hash
	for hash := range st.Objects {
		hashes = append(hashes, hash)
	}
	if _, err := packfile.NewEncoder(w, st, false).Encode(hashes, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), h)); err != nil {
		t.Fatal(err)
	}
	return p
}

// deepPath is a path n levels deep: n-1 directories "d" and the file f.
func deepPath(n int) string { return strings.Repeat("d/", n-1) + "f" }

// longPath is a path of n bytes (n > 260): directories of 250 bytes
// (under NAME_MAX), then a file making up the rest.
func longPath(n int) string {
	var b strings.Builder
	for b.Len()+251+10 < n {
		b.WriteString(strings.Repeat("p", 250) + "/")
	}
	b.WriteString(strings.Repeat("f", n-b.Len()))
	return b.String()
}

// TestCheckoutTreeLimits: a repository's tree is held to the limits of a
// tarball, checked from the git objects before anything is written: a
// path deeper than MaxDepth (a thousand levels, or one past the limit),
// longer than MaxPathBytes, a link target longer than that, and more
// entries than MaxFiles, directories counted, are each refused with
// ErrClone and ErrTooLarge in a message that names the limit and the
// path (cut); nothing is left on disk. A tree right at the default
// limits is checked out whole. (TestBuildRefusesDeepRepository clones
// one 20,000 levels deep.)
func TestCheckoutTreeLimits(t *testing.T) {
	atLimits := []gitEntry{
		{path: deepPath(imagebuild.DefaultMaxDepth), body: "deep"},
		{path: longPath(imagebuild.DefaultMaxPathBytes), body: "long"},
		// The longest target symlink(2) takes: PATH_MAX less its NUL.
		{path: "l/up", body: strings.Repeat("./", imagebuild.DefaultMaxPathBytes/2-2) + "../", link: true},
		{path: "langgraph.json", body: "{}"},
	}
	// Every entry of the tree: the files and links, and the directories
	// their paths pass.
	count := func(entries []gitEntry) int {
		dirs := map[string]bool{}
		for _, e := range entries {
			for d := filepath.Dir(e.path); d != "."; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
		return len(entries) + len(dirs)
	}
	n := count(atLimits)
	repos := t.TempDir()
	good := newTreeRepo(t, repos, "good", "", atLimits...)

	dir := filepath.Join(t.TempDir(), "out")
	var l lines
	if _, err := localBuilder(t, &imagebuild.Options{MaxFiles: n}).Checkout(context.Background(), work(good, nil, nil), dir, l.log); err != nil {
		t.Fatalf("a tree at the limits (%d entries): %v", n, err)
	}
	for _, e := range atLimits {
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		if e.link {
			if got, err := root.Readlink(e.path); err != nil || got != e.body {
				t.Errorf("%.40s: link %.40q, %v", e.path, got, err)
			}
		} else if got, err := root.ReadFile(e.path); err != nil || string(got) != e.body {
			t.Errorf("%.40s: %q, %v; want %q", e.path, got, err, e.body)
		}
		root.Close()
	}

	for _, tc := range []struct {
		name    string
		o       *imagebuild.Options
		entries []gitEntry
		want    string
	}{
		{"a thousand levels deep", nil, []gitEntry{{path: deepPath(1000), body: "x"}},
			`the repository holds a path more than 64 levels deep: "d/d/d/d/d/`},
		{"one level past the limit", nil, []gitEntry{{path: deepPath(imagebuild.DefaultMaxDepth + 1), body: "x"}},
			"the repository holds a path more than 64 levels deep"},
		{"MaxDepth", &imagebuild.Options{MaxDepth: 3}, []gitEntry{{path: "a/b/c/d", body: "x"}},
			`the repository holds a path more than 3 levels deep: "a/b/c/d"`},
		{"a long path", nil, []gitEntry{{path: longPath(imagebuild.DefaultMaxPathBytes + 1), body: "x"}},
			`the repository holds a path of 4097 bytes, more than 4096: "pppp`},
		{"MaxPathBytes", &imagebuild.Options{MaxPathBytes: 10}, []gitEntry{{path: "abcde/fghij", body: "x"}},
			`the repository holds a path of 11 bytes, more than 10: "abcde/fghij"`},
		{"a long link target", nil, []gitEntry{{path: "l", body: strings.Repeat("a", 4097), link: true}},
			`the symbolic link "l" has a target of 4097 bytes, more than 4096`},
		{"directories count as entries", &imagebuild.Options{MaxFiles: n - 1}, atLimits,
			"the repository has more than " + strconv.Itoa(n-1) + " files and directories"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newTreeRepo(t, t.TempDir(), "repo", "", tc.entries...)
			dir := filepath.Join(t.TempDir(), "out")
			_, err := localBuilder(t, tc.o).Checkout(context.Background(), work(repo, nil, nil), dir, nil)
			if !errors.Is(err, imagebuild.ErrClone) || !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrClone and ErrTooLarge saying %q", err, tc.want)
			}
			if len(err.Error()) > 400 {
				t.Errorf("the message is %d bytes long; the path should be cut", len(err.Error()))
			}
			if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the checkout directory exists: %v", err)
			}
		})
	}
}

// serveDeep serves the bare repository at dir over smart HTTP with git's
// own upload-pack (newGitServer) and returns its URL.
func serveDeep(t *testing.T, dir string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Rename(dir, filepath.Join(root, "repo.git")); err != nil {
		t.Fatal(err)
	}
	return newGitServer(t, root, "", "").URL + "/repo.git"
}

// loopbackEgress is an egress policy that lets clones reach the test's
// servers on 127.0.0.1.
func loopbackEgress(t *testing.T) *egress.Policy {
	t.Helper()
	p, err := egress.New(&egress.Options{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckoutTreeLinks: a symbolic link of the repository is resolved
// on the tree as written, through the links it passes, and one that
// leads outside the repository is refused (nothing written), as a
// tarball's is; links that stay inside are checked out as they are. A
// tree that names a path twice, or an unsafe name, is refused.
func TestCheckoutTreeLinks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []gitEntry
		dup     string
		want    string // "" for accepted
	}{
		{"inside", []gitEntry{{path: "a/b", body: "..", link: true}, {path: "c", body: "a/b/x", link: true}, {path: "x", body: "x"},
			{path: "dangling", body: "no/such/file", link: true}}, "", ""},
		{"up and out", []gitEntry{{path: "a/up", body: "../../etc/passwd", link: true}}, "",
			`the symbolic link "a/up" points outside the repository ("../../etc/passwd")`},
		{"absolute", []gitEntry{{path: "abs", body: "/etc/passwd", link: true}}, "",
			`the symbolic link "abs" points outside the repository ("/etc/passwd")`},
		// As text a/b/.. is a; on the tree a/b is the root, and .. of it
		// is outside.
		{"out through a link", []gitEntry{{path: "a/b", body: "..", link: true}, {path: "c", body: "a/b/..", link: true}}, "",
			`the symbolic link "c" points outside the repository ("a/b/..")`},
		{"a loop of links", []gitEntry{{path: "x", body: "y", link: true}, {path: "y", body: "x", link: true}}, "", ""},
		{"a name twice", []gitEntry{{path: "a/f", body: "x"}}, "a/f", `the repository's tree names "a/f" twice`},
		{"a .git directory", []gitEntry{{path: "a/.git/config", body: "x"}}, "", `unsafe path "a/.git"`},
		{"a control character", []gitEntry{{path: "a\nb", body: "x"}}, "", `unsafe path "a\nb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := newTreeRepo(t, t.TempDir(), "repo", tc.dup, tc.entries...)
			dir := filepath.Join(t.TempDir(), "out")
			_, err := localBuilder(t, nil).Checkout(context.Background(), work(repo, nil, nil), dir, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range tc.entries {
					if got, err := os.Readlink(filepath.Join(dir, e.path)); e.link && (err != nil || got != e.body) {
						t.Errorf("%s -> %q, %v; want %q", e.path, got, err, e.body)
					}
				}
				return
			}
			if !errors.Is(err, imagebuild.ErrClone) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrClone saying %q", err, tc.want)
			}
			if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the checkout directory exists: %v", err)
			}
		})
	}
}

// TestCheckoutCutMidwayLeavesNothing: a checkout that stops while it
// writes (its ctx cancelled once the first entries are written) removes
// what it wrote, from a directory it made and from an empty one it was
// given.
func TestCheckoutCutMidwayLeavesNothing(t *testing.T) {
	repo := newTreeRepo(t, t.TempDir(), "repo", "",
		gitEntry{path: "a.txt", body: "a"}, gitEntry{path: "b/c/d.txt", body: "d"},
		gitEntry{path: "m", submodule: true}, gitEntry{path: "z.txt", body: "z"})
	for _, made := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "out")
		if !made {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var l lines
		_, err := localBuilder(t, nil).Checkout(ctx, work(repo, nil, nil), dir, func(line string) {
			l.log(line)
			if strings.HasPrefix(line, "Skipping submodule m") {
				cancel() // a.txt and b/c/d.txt are written by now
			}
		})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled (log %q)", err, l.all())
		}
		ents, err := os.ReadDir(dir)
		switch {
		case made && !errors.Is(err, os.ErrNotExist):
			t.Errorf("the directory the checkout made: %v %v, want it removed", ents, err)
		case !made && (err != nil || len(ents) > 0):
			t.Errorf("the directory given: %v %v, want it empty", ents, err)
		}
	}
}

// TestBuildRefusesDeepRepository: a repository whose tree is 20,000
// levels deep (served by git's own upload-pack over HTTP: go-git's
// serves no tree 1,024 levels deep) fails Build in the clone step,
// before the daemon is asked anything (the client points at no daemon),
// with the error that becomes the revision's status_message
// (BUILD_FAILED): the limit, and the path cut. Nothing is left in
// Options.TempDir.
func TestBuildRefusesDeepRepository(t *testing.T) {
	cli, err := client.New(client.WithHost("tcp://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	repo := newTreeRepo(t, t.TempDir(), "repo", "", gitEntry{path: "langgraph.json", body: "{}"},
		gitEntry{path: deepPath(20_000), body: "x"})
	url := serveDeep(t, repo)
	tmp := t.TempDir()
	b, err := imagebuild.New(cli, &imagebuild.Options{Egress: loopbackEgress(t), TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	var l lines
	_, _, err = b.Build(context.Background(), work(url, nil, nil), l.log)
	if !errors.Is(err, imagebuild.ErrClone) || !errors.Is(err, imagebuild.ErrTooLarge) ||
		!strings.HasPrefix(err.Error(), `clone failed: too large: the repository holds a path more than 64 levels deep: "d/d/d/`) ||
		!strings.HasSuffix(err.Error(), `"…`) {
		t.Fatalf("err = %v, want a clone refused for its depth, naming the path cut", err)
	}
	if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
		t.Errorf("left in Options.TempDir: %v %v", ents, err)
	}
}
