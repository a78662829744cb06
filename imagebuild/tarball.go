package imagebuild

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/deployplane/deployplane/controlplane"
)

// Tarballs opens the source tarballs of internal_source revisions (their
// source_revision_config.source_tarball_path); package uploads' Service
// implements it, cmd/deployplane wires it in (Options.Tarballs).
type Tarballs interface {
	OpenTarball(ctx context.Context, tenant, deploymentID, objectPath string) (io.ReadCloser, error)
}

// ErrTarball is matched (errors.Is) by the errors of a source tarball
// that cannot be built: it is missing, unreadable, or breaks a rule of
// Unpack (an absolute path, "..", a link leaving the root, a device, or
// a limit, which matches ErrTooLarge too).
var ErrTarball = errors.New("source tarball refused")

// UnpackLimits bound what Unpack writes. Zero fields take their defaults;
// MaxBytes and MaxEntries are the limits of wire contract section 10.
type UnpackLimits struct {
	// MaxBytes bounds the bytes of the files written (uncompressed).
	// Default DefaultMaxCheckoutBytes (1 GiB).
	MaxBytes int64
	// MaxEntries bounds what is written: the archive's entries (files,
	// directories, links) and the directories their paths imply without
	// an entry of their own ("a/b/f" alone writes 3), counted as they are
	// read. Default DefaultMaxFiles (100,000).
	MaxEntries int
	// MaxDepth bounds the levels of an entry's path ("a/b/f" is 3 deep).
	// Default DefaultMaxDepth (64).
	MaxDepth int
	// MaxPathBytes bounds the bytes of an entry's path (cleaned) and of a
	// link's target. Default DefaultMaxPathBytes (4096).
	MaxPathBytes int
}

// Unpacked says what Unpack wrote.
type Unpacked struct {
	// Entries are the archive's entries read (a pax global header is not
	// one).
	Entries int
	// Directories are the directories made for entries' paths that no
	// entry of the archive names.
	Directories int
	// Bytes are the bytes of the files written.
	Bytes int64
}

// Unpack writes the tar archive read from r (gzip-compressed or not, as
// its first bytes say) into dir, an existing directory, through an
// os.Root, so that nothing is written outside dir. It refuses, with an
// error matching ErrTarball that names the entry:
//
//   - an absolute path, a path with "..", a path deeper than
//     lim.MaxDepth or longer than lim.MaxPathBytes (checked on the
//     header, before anything is made for it);
//   - an entry below a symbolic link written before, a hard link to
//     anything but a regular file written before, and a symbolic link
//     whose target, resolved on the tree as written (through the links it
//     passes, as the kernel would), leaves dir; links are resolved once
//     the archive is read, so that a link written later cannot redirect
//     one written earlier;
//   - a device, a FIFO or another special file;
//   - more than lim.MaxEntries entries and implied directories, and more
//     than lim.MaxBytes bytes of files, the last checked against each
//     header before its data is read, so that a decompression bomb stops
//     at its first oversized entry.
//
// The limits match ErrTooLarge too. On a refusal Unpack removes what it
// wrote (everything under the names it created in dir), so that a
// refused archive leaves nothing behind. A nil lim means the defaults.
func Unpack(r io.Reader, dir string, lim *UnpackLimits) (*Unpacked, error) {
	l := UnpackLimits{MaxBytes: DefaultMaxCheckoutBytes, MaxEntries: DefaultMaxFiles, MaxDepth: DefaultMaxDepth,
		MaxPathBytes: DefaultMaxPathBytes}
	if lim != nil {
		if lim.MaxBytes > 0 {
			l.MaxBytes = lim.MaxBytes
		}
		if lim.MaxEntries > 0 {
			l.MaxEntries = lim.MaxEntries
		}
		if lim.MaxDepth > 0 {
			l.MaxDepth = lim.MaxDepth
		}
		if lim.MaxPathBytes > 0 {
			l.MaxPathBytes = lim.MaxPathBytes
		}
	}
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: not a gzip file: %v", ErrTarball, err)
		}
		defer zr.Close()
		src = zr
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("imagebuild: %w", err)
	}
	defer root.Close()
	u := &unpacker{root: root, lim: l, dirs: map[string]bool{}, named: map[string]bool{},
		tops: map[string]bool{}}
	if err := u.unpack(tar.NewReader(src)); err != nil {
		if rmErr := u.removeWritten(); rmErr != nil {
			err = fmt.Errorf("%w (and removing what was unpacked: %v)", err, rmErr)
		}
		return &u.out, err
	}
	return &u.out, nil
}

type unpacker struct {
	root  *os.Root
	lim   UnpackLimits
	out   Unpacked
	links linkSet         // the symbolic links written
	dirs  map[string]bool // directories made, by clean path
	named map[string]bool // directories made by directory entries
	// tops are the first names of the paths written: true when Unpack
	// made them (dir did not hold them), so removeWritten removes them.
	tops map[string]bool
}

func (u *unpacker) unpack(tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: not a readable tar archive: %v", ErrTarball, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return err
		}
	}
	return u.checkLinks()
}

// removeWritten removes what Unpack made in dir.
func (u *unpacker) removeWritten() error {
	var errs []error
	for _, top := range slices.Sorted(maps.Keys(u.tops)) {
		if u.tops[top] {
			if err := u.root.RemoveAll(top); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTarball, fmt.Sprintf(format, args...))
}

// tooLarge is a refusal for a limit.
func tooLarge(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrTarball, ErrTooLarge, fmt.Sprintf(format, args...))
}

// maxQuoted bounds the bytes of a path quoted in an error.
const maxQuoted = 100

// quote is name quoted for an error, cut to maxQuoted bytes.
func quote(name string) string {
	if len(name) <= maxQuoted {
		return strconv.Quote(name)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return strconv.Quote(name[:n]) + "…"
}

// cleanName checks an entry's name (or a hard link's target) and returns
// it relative to the root, clean, without a trailing slash; "" is the
// root itself. The depth and length are checked before anything else
// looks at the name's parts.
func (u *unpacker) cleanName(name string) (string, error) {
	switch {
	case strings.ContainsRune(name, 0):
		return "", refuse("entry %s has a NUL byte in its path", quote(name))
	case strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) || (len(name) > 1 && name[1] == ':'):
		return "", refuse("entry %s has an absolute path", quote(name))
	}
	p := path.Clean(strings.ReplaceAll(name, `\`, "/"))
	if p == "." {
		return "", nil
	}
	if n := strings.Count(p, "/") + 1; n > u.lim.MaxDepth {
		return "", tooLarge("entry %s is %d levels deep, more than %d", quote(name), n, u.lim.MaxDepth)
	}
	if len(p) > u.lim.MaxPathBytes {
		return "", tooLarge("entry %s has a path of %d bytes, more than %d", quote(name), len(p), u.lim.MaxPathBytes)
	}
	for part := range strings.SplitSeq(strings.ReplaceAll(name, `\`, "/"), "/") {
		if part == ".." {
			return "", refuse("entry %s has a \"..\" in its path", quote(name))
		}
	}
	// No entry may sit below a symbolic link: its real place would not
	// be its path.
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if _, ok := u.links.targets[d]; ok {
			return "", refuse("entry %s is below the symbolic link %s", quote(name), quote(d))
		}
	}
	return p, nil
}

// made records that p is about to be written: the first name of its
// path is Unpack's to remove on a refusal unless dir held it before.
func (u *unpacker) made(p string) {
	top, _, _ := strings.Cut(p, "/")
	if _, seen := u.tops[top]; seen {
		return
	}
	_, err := u.root.Lstat(top)
	u.tops[top] = errors.Is(err, fs.ErrNotExist)
}

// parents makes the directories above p, counting those not made before
// against MaxEntries.
func (u *unpacker) parents(name, p string) error {
	d := path.Dir(p)
	if d == "." || u.dirs[d] {
		return nil
	}
	n := 0
	for a := d; a != "." && !u.dirs[a]; a = path.Dir(a) {
		n++
	}
	if u.out.Entries+u.out.Directories+n > u.lim.MaxEntries {
		return u.tooMany()
	}
	u.made(p)
	if err := u.root.MkdirAll(d, 0o755); err != nil {
		return refuse("entry %s: %v", quote(name), err)
	}
	u.out.Directories += n
	for a := d; a != "." && !u.dirs[a]; a = path.Dir(a) {
		u.dirs[a] = true
	}
	return nil
}

func (u *unpacker) tooMany() error {
	return tooLarge("more than %d entries (counting the directories their paths imply)", u.lim.MaxEntries)
}

func (u *unpacker) entry(hdr *tar.Header, data io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil // metadata only (a pax global header)
	}
	u.out.Entries++
	p, err := u.cleanName(hdr.Name)
	if err == nil && hdr.Typeflag == tar.TypeDir && u.dirs[p] && !u.named[p] {
		// Made for an earlier entry's path: now an entry names it.
		u.named[p] = true
		u.out.Directories--
	}
	if u.out.Entries+u.out.Directories > u.lim.MaxEntries {
		return u.tooMany()
	}
	if err != nil {
		return err
	}
	name := quote(hdr.Name)
	if p == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil
		}
		return refuse("entry %s is not a file", name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if _, ok := u.links.targets[p]; ok {
			return refuse("the directory %s has the path of a symbolic link written before it", name)
		}
		if u.dirs[p] {
			return nil
		}
		if err := u.parents(hdr.Name, p); err != nil {
			return err
		}
		u.made(p)
		if err := u.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return refuse("entry %s: %v", name, err)
		}
		if st, err := u.root.Lstat(p); err != nil || !st.IsDir() {
			return refuse("entry %s: a file of that name was written before it", name)
		}
		u.dirs[p], u.named[p] = true, true
		return nil
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		if hdr.Typeflag == tar.TypeGNUSparse {
			return refuse("entry %s is a sparse file", name)
		}
		if hdr.Size < 0 || u.out.Bytes+hdr.Size > u.lim.MaxBytes {
			return tooLarge("the files unpack to more than %d bytes (at %s)", u.lim.MaxBytes, name)
		}
		if err := u.parents(hdr.Name, p); err != nil {
			return err
		}
		u.made(p)
		perm := os.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			perm = 0o755
		}
		// A file of the same name written before is replaced, not
		// written through (it could be a link).
		if st, err := u.root.Lstat(p); err == nil && !st.IsDir() {
			if err := u.root.Remove(p); err != nil {
				return refuse("entry %s: %v", name, err)
			}
			u.unlink(p)
		}
		f, err := u.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return refuse("entry %s: %v", name, err)
		}
		n, err := io.Copy(f, io.LimitReader(data, hdr.Size))
		u.out.Bytes += n
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return refuse("entry %s: %v", name, err)
		}
		if n != hdr.Size {
			return refuse("entry %s is cut off", name)
		}
		return nil
	case tar.TypeSymlink:
		target := hdr.Linkname
		switch {
		case len(target) > u.lim.MaxPathBytes:
			return tooLarge("the symbolic link %s has a target of %d bytes, more than %d", name, len(target), u.lim.MaxPathBytes)
		case target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0):
			return refuse("the symbolic link %s points outside the archive's root (%s)", name, quote(target))
		}
		if err := u.parents(hdr.Name, p); err != nil {
			return err
		}
		u.made(p)
		if err := u.root.Symlink(target, p); err != nil {
			return refuse("entry %s: %v", name, err)
		}
		u.links.add(p, target)
		return nil
	case tar.TypeLink:
		// A hard link names an entry of the archive by its path.
		target := hdr.Linkname
		if strings.HasPrefix(target, "/") || slices.Contains(strings.Split(target, "/"), "..") {
			return refuse("the hard link %s points outside the archive's root (%s)", name, quote(target))
		}
		t, err := u.cleanName(target)
		if err != nil || t == "" {
			return refuse("the hard link %s does not name a file of the archive (%s)", name, quote(target))
		}
		if _, ok := u.links.targets[t]; ok {
			return refuse("the hard link %s does not name a file of the archive (%s)", name, quote(target))
		}
		if st, err := u.root.Lstat(t); err != nil || !st.Mode().IsRegular() {
			return refuse("the hard link %s does not name a file of the archive (%s)", name, quote(target))
		}
		if err := u.parents(hdr.Name, p); err != nil {
			return err
		}
		u.made(p)
		if err := u.root.Link(t, p); err != nil {
			return refuse("entry %s: %v", name, err)
		}
		return nil
	case tar.TypeChar, tar.TypeBlock:
		return refuse("entry %s is a device", name)
	case tar.TypeFifo:
		return refuse("entry %s is a FIFO", name)
	}
	return refuse("entry %s has an unsupported type %q", name, hdr.Typeflag)
}

// unlink forgets the symbolic link at p, replaced by a file.
func (u *unpacker) unlink(p string) { u.links.remove(p) }

// checkLinks refuses the first symbolic link (in the archive's order)
// that, resolved on the finished tree, leads outside the root.
func (u *unpacker) checkLinks() error {
	if p, ok := u.links.escaping(); ok {
		return refuse("the symbolic link %s points outside the archive's root (%s)", quote(p), quote(u.links.targets[p]))
	}
	return nil
}

// unpackWork opens the tarball of an internal_source revision and unpacks
// it into dir within the checkout limits (MaxCheckoutBytes, MaxFiles,
// MaxDepth, MaxPathBytes).
func (b *Builder) unpackWork(ctx context.Context, w *controlplane.Work, dir string, logf func(string, ...any)) (*cloned, error) {
	objectPath := deref(w.Revision.SourceRevisionConfig.SourceTarballPath)
	if objectPath == "" {
		return nil, fmt.Errorf("%w: the revision has no source_tarball_path", ErrTarball)
	}
	if b.o.Tarballs == nil {
		return nil, fmt.Errorf("%w: this server keeps no source tarballs (imagebuild.Options.Tarballs is not set)", ErrTarball)
	}
	rc, err := b.o.Tarballs.OpenTarball(ctx, w.Tenant, w.Deployment.ID, objectPath)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, fmt.Errorf("%w: %v", ErrTarball, err)
	}
	defer rc.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("imagebuild: %w", err)
	}
	logf("Unpacking the source tarball %s", objectPath)
	got, err := Unpack(&ctxReader{ctx: ctx, r: rc}, dir, &UnpackLimits{MaxBytes: b.o.MaxCheckoutBytes, MaxEntries: b.o.MaxFiles,
		MaxDepth: b.o.MaxDepth, MaxPathBytes: b.o.MaxPathBytes})
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	logf("Unpacked %s: %d entries, %d bytes", objectPath, got.Entries, got.Bytes)
	return &cloned{dir: dir, files: got.Entries, bytes: got.Bytes}, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, context.Cause(c.ctx)
	}
	return c.r.Read(p)
}
