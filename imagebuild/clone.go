package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// ErrClone is matched (errors.Is) by the errors of a clone that failed:
// the repository or the ref cannot be reached or does not exist, the
// credentials were refused, or the repository breaks a limit.
var ErrClone = errors.New("clone failed")

// ErrTooLarge is matched (errors.Is) when a repository, a tarball or a
// build context breaks a limit of Options (bytes, entries, depth, path
// length).
var ErrTooLarge = errors.New("too large")

// source is what to clone.
type source struct {
	url    string
	ref    string // branch, tag, full ref name or commit; "" for HEAD
	commit string // a commit to build instead of ref's head (a push); "" for none
	auth   transport.AuthMethod
}

// cloned is a checked-out commit.
type cloned struct {
	dir    string // the worktree
	commit string // its sha
	files  int
	bytes  int64
}

// repoName is the directory name `git clone` would give repoURL.
func repoName(repoURL string) string {
	u := strings.TrimRight(repoURL, "/")
	if i := strings.LastIndexAny(u, "/:"); i >= 0 {
		u = u[i+1:]
	}
	u = strings.TrimSuffix(u, ".git")
	if u == "" || u == "." || u == ".." {
		return "repo"
	}
	return u
}

// transportFor checks repoURL against the options and returns the
// transport and endpoint to fetch it with.
func (b *Builder) transportFor(repoURL string) (transport.Transport, *transport.Endpoint, error) {
	if b.o.AllowLocalRepositories && (strings.HasPrefix(repoURL, "file://") || filepath.IsAbs(repoURL)) {
		ep, err := transport.NewEndpoint(repoURL)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: repo_url %q: %v", ErrClone, repoURL, err)
		}
		return server.NewServer(localLoader{}), ep, nil
	}
	u, err := url.Parse(repoURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, nil, fmt.Errorf("%w: repo_url %q is not an https URL of a git repository", ErrClone, repoURL)
	}
	if err := b.egress.CheckURL(u); err != nil {
		return nil, nil, fmt.Errorf("%w: repo_url %q: %v", ErrClone, repoURL, err)
	}
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: repo_url %q: %v", ErrClone, repoURL, err)
	}
	// No Timeout: the clone's context bounds it (Options.CloneTimeout).
	return githttp.NewClient(&http.Client{Transport: b.egress.Transport()}), ep, nil
}

// localLoader serves local repositories (a worktree with .git, or a bare
// one) to the in-process upload-pack of go-git's server package.
type localLoader struct{}

func (localLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	dir := ep.Path
	if st, err := os.Stat(filepath.Join(dir, ".git")); err == nil && st.IsDir() {
		dir = filepath.Join(dir, ".git")
	}
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil {
		return nil, transport.ErrRepositoryNotFound
	}
	return filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRUDefault()), nil
}

// cloneErr turns a transport error into a message for status_message.
func cloneErr(src *source, err error) error {
	what := src.url
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		return fmt.Errorf("%w: %s: authentication required (a private repository needs the GitHub App installed on it)", ErrClone, what)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("%w: %s: access denied", ErrClone, what)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("%w: %s: repository not found", ErrClone, what)
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fmt.Errorf("%w: %s: the repository is empty", ErrClone, what)
	case errors.Is(err, ErrClone):
		return err
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%w: %s: %w", ErrClone, what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: timed out", ErrClone, what)
	}
	return fmt.Errorf("%w: %s: %v", ErrClone, what, err)
}

// limitedReader fails with ErrTooLarge after max bytes.
type limitedReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		return n, fmt.Errorf("%w: the repository's pack is over %d bytes", ErrTooLarge, l.max)
	}
	return n, err
}

// fetch fetches wants (with depth 1 when shallow) into st and returns the
// pack's size.
func (b *Builder) fetch(ctx context.Context, tr transport.Transport, ep *transport.Endpoint, src *source,
	st *filesystem.Storage, wants []plumbing.Hash, shallow bool) (int64, error) {
	sess, err := tr.NewUploadPackSession(ep, src.auth)
	if err != nil {
		return 0, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return 0, err
	}
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	req.Wants = wants
	if shallow && ar.Capabilities.Supports(capability.Shallow) {
		req.Depth = packp.DepthCommits(1)
		if err := req.Capabilities.Set(capability.Shallow); err != nil {
			return 0, err
		}
	}
	if ar.Capabilities.Supports(capability.NoProgress) {
		if err := req.Capabilities.Set(capability.NoProgress); err != nil {
			return 0, err
		}
	}
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return 0, err
	}
	defer resp.Close()
	if len(resp.Shallows) > 0 {
		if err := st.SetShallow(resp.Shallows); err != nil {
			return 0, err
		}
	}
	var r io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		r = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		r = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	lr := &limitedReader{r: r, max: b.o.MaxRepoBytes}
	if err := packfile.UpdateObjectStorage(st, lr); err != nil {
		if ctx.Err() != nil {
			return lr.n, context.Cause(ctx)
		}
		return lr.n, err
	}
	return lr.n, nil
}

// isSHA reports whether s is a full hexadecimal SHA-1.
func isSHA(s string) bool {
	return len(s) == 40 && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// resolve picks what to fetch for src from the advertised references:
// the pushed commit, the ref (branch, tag, full name), or a commit sha.
func resolve(src *source, refs map[plumbing.ReferenceName]plumbing.Hash, head plumbing.Hash) (plumbing.Hash, string, error) {
	if src.commit != "" {
		if !isSHA(src.commit) {
			return plumbing.ZeroHash, "", fmt.Errorf("%w: repo_commit_sha %q is not a full commit sha", ErrClone, src.commit)
		}
		return plumbing.NewHash(strings.ToLower(src.commit)), "commit " + src.commit, nil
	}
	if src.ref == "" {
		if head.IsZero() {
			return plumbing.ZeroHash, "", fmt.Errorf("%w: %s has no HEAD: set repo_ref", ErrClone, src.url)
		}
		return head, "HEAD", nil
	}
	for _, n := range []plumbing.ReferenceName{plumbing.ReferenceName(src.ref), plumbing.NewBranchReferenceName(src.ref),
		plumbing.NewTagReferenceName(src.ref)} {
		if h, ok := refs[n]; ok && strings.HasPrefix(string(n), "refs/") {
			return h, string(n), nil
		}
	}
	if isSHA(src.ref) {
		return plumbing.NewHash(strings.ToLower(src.ref)), "commit " + src.ref, nil
	}
	return plumbing.ZeroHash, "", fmt.Errorf("%w: repo_ref %q is not a branch, tag or full commit sha of %s", ErrClone, src.ref, src.url)
}

// clone fetches src's commit into gitDir and checks it out into dir.
func (b *Builder) clone(ctx context.Context, src *source, gitDir, dir string, logf func(string, ...any)) (*cloned, error) {
	tr, ep, err := b.transportFor(src.url)
	if err != nil {
		return nil, err
	}
	// The references, once: to resolve the ref (sessions over HTTP are
	// stateless, so fetch opens its own).
	sess, err := tr.NewUploadPackSession(ep, src.auth)
	if err != nil {
		return nil, cloneErr(src, err)
	}
	ar, err := sess.AdvertisedReferencesContext(ctx)
	sess.Close()
	if err != nil {
		return nil, cloneErr(src, err)
	}
	refs := map[plumbing.ReferenceName]plumbing.Hash{}
	for n, h := range ar.References {
		refs[plumbing.ReferenceName(n)] = h
	}
	var head plumbing.Hash
	if ar.Head != nil {
		head = *ar.Head
	}
	want, label, err := resolve(src, refs, head)
	if err != nil {
		return nil, err
	}
	logf("Cloning %s at %s", src.url, label)
	if err := os.MkdirAll(gitDir, 0o700); err != nil {
		return nil, err
	}
	st := filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault())
	n, err := b.fetch(ctx, tr, ep, src, st, []plumbing.Hash{want}, true)
	if err != nil && !errors.Is(err, ErrTooLarge) && ctx.Err() == nil && strings.HasPrefix(label, "commit ") {
		// A server that refuses a commit it does not advertise: fetch
		// every branch and tag (whole history) and look for it there.
		logf("The server refused to send commit %s alone (%v); fetching all branches and tags", want, err)
		var all []plumbing.Hash
		seen := map[plumbing.Hash]bool{}
		for n, h := range refs {
			if (n.IsBranch() || n.IsTag()) && !seen[h] {
				seen[h] = true
				all = append(all, h)
			}
		}
		n, err = b.fetch(ctx, tr, ep, src, st, all, false)
	}
	if err != nil {
		return nil, cloneErr(src, err)
	}
	commit, err := peel(st, want)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %s: %v", ErrClone, src.url, label, err)
	}
	logf("Fetched %s (%d bytes); checking out commit %s", label, n, commit.Hash)
	c, err := b.checkout(ctx, st, commit, dir, logf)
	if err != nil {
		return nil, err
	}
	c.commit = commit.Hash.String()
	return c, nil
}

// peel follows tags to a commit.
func peel(st storer.EncodedObjectStorer, h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		obj, err := object.GetObject(st, h)
		if err != nil {
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				return nil, fmt.Errorf("commit %s not found in the repository", h)
			}
			return nil, err
		}
		switch o := obj.(type) {
		case *object.Commit:
			return o, nil
		case *object.Tag:
			h = o.Target
		default:
			return nil, fmt.Errorf("%s is a %s, not a commit", h, obj.Type())
		}
	}
	return nil, fmt.Errorf("tag %s: too many levels of tags", h)
}

// checkout writes commit's tree into dir, within the limits, through an
// os.Root so that no path or symbolic link of the repository writes
// outside it. The tree is checked first, from the git objects (inspect),
// so that a tree over a limit writes nothing; should writing fail
// midway, what was written is removed. Submodules are left out.
func (b *Builder) checkout(ctx context.Context, st storer.EncodedObjectStorer, commit *object.Commit, dir string, logf func(string, ...any)) (c *cloned, err error) {
	tree, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("%w: commit %s: %v", ErrClone, commit.Hash, err)
	}
	entries, err := b.inspect(ctx, st, tree)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Lstat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	defer func() {
		if err == nil {
			return
		}
		var rmErr error
		if errors.Is(statErr, fs.ErrNotExist) {
			rmErr = os.RemoveAll(dir)
		} else {
			rmErr = removeTops(root, entries)
		}
		if rmErr != nil {
			err = fmt.Errorf("%w (and removing what was checked out: %v)", err, rmErr)
		}
	}()
	c = &cloned{dir: dir, files: len(entries)}
	// The entries come each directory before what it holds: dirs[d] is
	// the path of the directory d levels deep being written ("" for the
	// root).
	dirs := []string{""}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		dirs = dirs[:e.depth]
		e.path = e.Name
		if parent := dirs[e.depth-1]; parent != "" {
			e.path = parent + "/" + e.Name
		}
		switch e.Mode {
		case filemode.Dir:
			err = root.Mkdir(e.path, 0o755)
			dirs = append(dirs, e.path)
		case filemode.Submodule:
			logf("Skipping submodule %s (submodules are not cloned)", e.path)
		case filemode.Symlink:
			err = root.Symlink(e.target, e.path)
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			err = b.writeFile(root, st, e, c)
		default:
			logf("Skipping %s (mode %s)", e.path, e.Mode)
		}
		if err != nil {
			if errors.Is(err, ErrTooLarge) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: checking out %s: %v", ErrClone, quote(e.path), err)
		}
	}
	return c, nil
}

// removeTops removes the entries of the tree's root from root, and so
// everything below them.
func removeTops(root *os.Root, entries []treeEntry) error {
	var errs []error
	for _, e := range entries {
		if e.depth == 1 {
			if err := root.RemoveAll(e.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// treeEntry is an entry of a commit's tree, as checkout writes it. Its
// path is made again as it is written rather than kept: a tree of
// MaxFiles paths of MaxPathBytes each would hold hundreds of megabytes
// of them.
type treeEntry struct {
	object.TreeEntry
	depth  int    // its levels: 1 for an entry of the root
	path   string // below the root, while it is looked at or written
	target string // a symbolic link's target
}

// cloneTooLarge is a clone's refusal for a limit.
func cloneTooLarge(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrClone, ErrTooLarge, fmt.Sprintf(format, args...))
}

// inspect walks tree in the git objects, before anything is written, and
// checks it against the limits, as Unpack does a tarball's: every entry
// (directories, files, links, submodules) counts against MaxFiles, a path
// may be MaxDepth levels deep and MaxPathBytes long, the files together
// hold at most MaxCheckoutBytes, and a symbolic link's target, resolved on
// the tree (through the links it passes), stays inside it. A directory
// is looked into only once its own path has passed, so a tree thousands
// of levels deep costs MaxDepth steps. It refuses, too, paths that are not
// clean or name .git, and a tree that names one entry twice. It returns
// the entries in the tree's order, each directory before what it holds.
func (b *Builder) inspect(ctx context.Context, st storer.EncodedObjectStorer, tree *object.Tree) ([]treeEntry, error) {
	type frame struct {
		tree  *object.Tree
		next  int    // the index of the next entry
		base  string // the tree's path, "" for the root
		depth int    // its levels
	}
	var (
		out   []treeEntry
		bytes int64
		links linkSet
	)
	if name, ok := dupName(tree); ok {
		return nil, fmt.Errorf("%w: the repository's tree names %s twice", ErrClone, quote(name))
	}
	stack := []frame{{tree: tree}}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		f := &stack[len(stack)-1]
		if f.next == len(f.tree.Entries) {
			stack = stack[:len(stack)-1]
			continue
		}
		e := treeEntry{TreeEntry: f.tree.Entries[f.next], path: f.tree.Entries[f.next].Name}
		f.next++
		depth := f.depth + 1
		if f.base != "" {
			e.path = f.base + "/" + e.Name
		}
		switch {
		case len(out) >= b.o.MaxFiles:
			return nil, cloneTooLarge("the repository has more than %d files and directories", b.o.MaxFiles)
		case depth > b.o.MaxDepth:
			return nil, cloneTooLarge("the repository holds a path more than %d levels deep: %s", b.o.MaxDepth, quote(e.path))
		case len(e.path) > b.o.MaxPathBytes:
			return nil, cloneTooLarge("the repository holds a path of %d bytes, more than %d: %s", len(e.path), b.o.MaxPathBytes, quote(e.path))
		case !safeName(e.Name) || !safePath(e.path):
			return nil, fmt.Errorf("%w: the repository holds an unsafe path %s", ErrClone, quote(e.path))
		}
		e.depth = depth
		switch e.Mode {
		case filemode.Dir:
			sub, err := object.GetTree(st, e.Hash)
			if err != nil {
				return nil, fmt.Errorf("%w: reading the tree %s: %v", ErrClone, quote(e.path), err)
			}
			if name, ok := dupName(sub); ok {
				return nil, fmt.Errorf("%w: the repository's tree names %s twice", ErrClone, quote(e.path+"/"+name))
			}
			stack = append(stack, frame{tree: sub, base: e.path, depth: depth})
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			n, err := st.EncodedObjectSize(e.Hash)
			if err != nil {
				return nil, fmt.Errorf("%w: reading %s: %v", ErrClone, quote(e.path), err)
			}
			if bytes += n; bytes > b.o.MaxCheckoutBytes {
				return nil, cloneTooLarge("the checkout is over %d bytes (at %s)", b.o.MaxCheckoutBytes, quote(e.path))
			}
		case filemode.Symlink:
			target, err := b.linkTarget(st, e)
			if err != nil {
				return nil, err
			}
			e.target = target
			links.add(e.path, target)
		}
		e.path = "" // made again when written
		out = append(out, e)
	}
	if p, ok := links.escaping(); ok {
		return nil, fmt.Errorf("%w: the symbolic link %s points outside the repository (%s)", ErrClone, quote(p), quote(links.targets[p]))
	}
	return out, nil
}

// dupName returns a name t's entries hold twice, if any (git's fsck
// refuses such a tree; a checkout would write one entry below the
// other, a file below a link).
func dupName(t *object.Tree) (string, bool) {
	seen := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		if seen[e.Name] {
			return e.Name, true
		}
		seen[e.Name] = true
	}
	return "", false
}

// linkTarget reads the target of the symbolic link e, within
// MaxPathBytes.
func (b *Builder) linkTarget(st storer.EncodedObjectStorer, e treeEntry) (string, error) {
	blob, err := object.GetBlob(st, e.Hash)
	if err != nil {
		return "", fmt.Errorf("%w: reading %s: %v", ErrClone, quote(e.path), err)
	}
	if blob.Size > int64(b.o.MaxPathBytes) {
		return "", cloneTooLarge("the symbolic link %s has a target of %d bytes, more than %d", quote(e.path), blob.Size, b.o.MaxPathBytes)
	}
	r, err := blob.Reader()
	if err != nil {
		return "", fmt.Errorf("%w: reading %s: %v", ErrClone, quote(e.path), err)
	}
	defer r.Close()
	target, err := io.ReadAll(io.LimitReader(r, int64(b.o.MaxPathBytes)))
	if err != nil {
		return "", fmt.Errorf("%w: reading %s: %v", ErrClone, quote(e.path), err)
	}
	return string(target), nil
}

// safeName reports whether a tree entry's name is one name: not empty,
// without a slash, and without control characters.
func safeName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		if c := name[i]; c < 0x20 || c == 0x7f || c == '/' {
			return false
		}
	}
	return true
}

// safePath reports whether a tree path is relative, clean and outside
// .git.
func safePath(name string) bool {
	if name == "" || strings.ContainsRune(name, 0) || path.IsAbs(name) || path.Clean(name) != name {
		return false
	}
	for p := range strings.SplitSeq(name, "/") {
		if p == ".." || p == "." || strings.EqualFold(p, ".git") {
			return false
		}
	}
	return true
}

// writeFile writes the file e into root; its directory is written.
func (b *Builder) writeFile(root *os.Root, st storer.EncodedObjectStorer, e treeEntry, c *cloned) error {
	blob, err := object.GetBlob(st, e.Hash)
	if err != nil {
		return err
	}
	c.bytes += blob.Size
	if c.bytes > b.o.MaxCheckoutBytes {
		return cloneTooLarge("the checkout is over %d bytes (at %s)", b.o.MaxCheckoutBytes, quote(e.path))
	}
	perm := os.FileMode(0o644)
	if e.Mode == filemode.Executable {
		perm = 0o755
	}
	r, err := blob.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := root.OpenFile(e.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(r, blob.Size)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
