package imagebuild

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

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

// UnpackLimits bound what Unpack writes. Zero fields take the defaults
// (DefaultMaxCheckoutBytes, DefaultMaxFiles), the limits of wire contract
// section 10: 1 GiB and 100,000 entries.
type UnpackLimits struct {
	// MaxBytes bounds the bytes of the files written (uncompressed).
	MaxBytes int64
	// MaxEntries bounds the entries of the archive (files, directories,
	// links), counted as they are read.
	MaxEntries int
}

// Unpacked says what Unpack wrote.
type Unpacked struct {
	Entries int
	Bytes   int64
}

// Unpack writes the tar archive read from r (gzip-compressed or not, as
// its first bytes say) into dir, an existing directory, through an
// os.Root, so that nothing is written outside dir. It refuses, with an
// error matching ErrTarball that names the entry, an absolute path, a
// path with "..", a symbolic or hard link whose target leaves dir (or an
// entry below a symbolic link), a device, a FIFO or another special
// file, more than lim.MaxEntries entries, and more than lim.MaxBytes
// bytes of files (those two match ErrTooLarge too), the last checked
// against each header before its data is read, so that a decompression
// bomb stops at its first oversized entry. What was written before a
// refusal stays in dir: callers unpack into a directory they remove. A
// nil lim means the defaults.
func Unpack(r io.Reader, dir string, lim *UnpackLimits) (*Unpacked, error) {
	l := UnpackLimits{MaxBytes: DefaultMaxCheckoutBytes, MaxEntries: DefaultMaxFiles}
	if lim != nil {
		if lim.MaxBytes > 0 {
			l.MaxBytes = lim.MaxBytes
		}
		if lim.MaxEntries > 0 {
			l.MaxEntries = lim.MaxEntries
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
	u := &unpacker{root: root, lim: l, links: map[string]bool{}, dirs: map[string]bool{}}
	tr := tar.NewReader(src)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &u.out, fmt.Errorf("%w: not a readable tar archive: %v", ErrTarball, err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return &u.out, err
		}
	}
	return &u.out, nil
}

type unpacker struct {
	root  *os.Root
	lim   UnpackLimits
	out   Unpacked
	links map[string]bool // symbolic links written, by clean path
	dirs  map[string]bool // directories made by directory entries
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrTarball, fmt.Sprintf(format, args...))
}

// cleanName checks an entry's name and returns it relative to the root,
// clean, without a trailing slash; "" is the root itself.
func (u *unpacker) cleanName(name string) (string, error) {
	switch {
	case strings.ContainsRune(name, 0):
		return "", refuse("entry %q has a NUL byte in its path", name)
	case strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) || (len(name) > 1 && name[1] == ':'):
		return "", refuse("entry %q has an absolute path", name)
	}
	for p := range strings.SplitSeq(strings.ReplaceAll(name, `\`, "/"), "/") {
		if p == ".." {
			return "", refuse("entry %q has a \"..\" in its path", name)
		}
	}
	p := path.Clean(name)
	if p == "." {
		return "", nil
	}
	// No entry may sit below a symbolic link: its real place would not
	// be its path, and links are checked against their path.
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if u.links[d] {
			return "", refuse("entry %q is below the symbolic link %q", name, d)
		}
	}
	return p, nil
}

// inside reports whether target, a link's target relative to the
// directory of the link at p, stays inside the root.
func inside(p, target string) bool {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return false
	}
	t := path.Join(path.Dir(p), target)
	return t != ".." && !strings.HasPrefix(t, "../")
}

func (u *unpacker) entry(hdr *tar.Header, data io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil // metadata only (a pax global header)
	}
	u.out.Entries++
	if u.out.Entries > u.lim.MaxEntries {
		return fmt.Errorf("%w: %w: more than %d entries", ErrTarball, ErrTooLarge, u.lim.MaxEntries)
	}
	p, err := u.cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if p == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil
		}
		return refuse("entry %q is not a file", hdr.Name)
	}
	mkParent := func() error {
		if d := path.Dir(p); d != "." {
			return u.root.MkdirAll(d, 0o755)
		}
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if u.dirs[p] {
			return nil
		}
		if err := u.root.MkdirAll(p, 0o755); err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		u.dirs[p] = true
		return nil
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		if hdr.Typeflag == tar.TypeGNUSparse {
			return refuse("entry %q is a sparse file", hdr.Name)
		}
		if hdr.Size < 0 || u.out.Bytes+hdr.Size > u.lim.MaxBytes {
			return fmt.Errorf("%w: %w: the files unpack to more than %d bytes (at %q)", ErrTarball, ErrTooLarge, u.lim.MaxBytes, hdr.Name)
		}
		if err := mkParent(); err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		perm := os.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			perm = 0o755
		}
		// A file of the same name written before is replaced, not
		// written through (it could be a link).
		if st, err := u.root.Lstat(p); err == nil && !st.IsDir() {
			if err := u.root.Remove(p); err != nil {
				return refuse("entry %q: %v", hdr.Name, err)
			}
			delete(u.links, p)
		}
		f, err := u.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		n, err := io.Copy(f, io.LimitReader(data, hdr.Size))
		u.out.Bytes += n
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		if n != hdr.Size {
			return refuse("entry %q is cut off", hdr.Name)
		}
		return nil
	case tar.TypeSymlink:
		if !inside(p, hdr.Linkname) {
			return refuse("the symbolic link %q points outside the archive's root (%q)", hdr.Name, hdr.Linkname)
		}
		if err := mkParent(); err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		if err := u.root.Symlink(hdr.Linkname, p); err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		u.links[p] = true
		return nil
	case tar.TypeLink:
		target := hdr.Linkname
		if !inside(".", target) {
			return refuse("the hard link %q points outside the archive's root (%q)", hdr.Name, target)
		}
		t, err := u.cleanName(target)
		if err != nil || t == "" || u.links[t] {
			return refuse("the hard link %q does not name a file of the archive (%q)", hdr.Name, target)
		}
		if st, err := u.root.Lstat(t); err != nil || !st.Mode().IsRegular() {
			return refuse("the hard link %q does not name a file of the archive (%q)", hdr.Name, target)
		}
		if err := mkParent(); err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		if err := u.root.Link(t, p); err != nil {
			return refuse("entry %q: %v", hdr.Name, err)
		}
		return nil
	case tar.TypeChar, tar.TypeBlock:
		return refuse("entry %q is a device", hdr.Name)
	case tar.TypeFifo:
		return refuse("entry %q is a FIFO", hdr.Name)
	}
	return refuse("entry %q has an unsupported type %q", hdr.Name, hdr.Typeflag)
}

// unpackWork opens the tarball of an internal_source revision and unpacks
// it into dir within the checkout limits (MaxCheckoutBytes, MaxFiles).
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
	got, err := Unpack(&ctxReader{ctx: ctx, r: rc}, dir, &UnpackLimits{MaxBytes: b.o.MaxCheckoutBytes, MaxEntries: b.o.MaxFiles})
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
