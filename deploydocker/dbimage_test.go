package deploydocker_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"
)

// The deployments' databases in these tests are the real thing: Debian's
// own postgres and redis-server (the packages .ci/run installs), copied
// with the libraries they load into an image FROM scratch whose entrypoint
// (testdata/dbimage) starts them the way the official postgres and redis
// images do. Nothing is pulled from the internet; the image is built once
// per test binary, when a test first asks for it, and pushed to the
// in-process registry.
var dbImageOnce struct {
	sync.Once
	ref  string
	skip string
	err  error
}

// dbImage answers the reference of the database image, or skips the test
// (saying why) when PostgreSQL or redis-server is not installed.
func dbImage(t testing.TB) string {
	t.Helper()
	needDocker(t)
	o := &dbImageOnce
	o.Do(func() { o.ref, o.skip, o.err = buildDBImage() })
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.skip != "" {
		t.Skip(o.skip)
	}
	return o.ref
}

// buildDBImage builds and pushes the image; skip says what is missing.
func buildDBImage() (ref, skip string, err error) {
	pgbin := ""
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if isFile(filepath.Join(d, "postgres")) && isFile(filepath.Join(d, "initdb")) {
			pgbin = d
			break
		}
	}
	if pgbin == "" {
		return "", "Debian's PostgreSQL (/usr/lib/postgresql/*/bin) is not installed: the database image of these tests copies it (.ci/run installs it)", nil
	}
	if !isFile("/usr/bin/redis-server") {
		return "", "redis-server is not installed: the database image of these tests copies it (apt-get install redis-server; .ci/run does)", nil
	}
	dir, err := os.MkdirTemp("", "deploydocker-dbimage")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	entry := filepath.Join(dir, "dbimage")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", entry, "./testdata/dbimage")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building the database image's entrypoint: %v\n%s", err, out)
	}
	version := filepath.Base(filepath.Dir(pgbin))
	b := &rootfs{files: map[string]bool{}}
	b.tw = tar.NewWriter(&b.buf)
	for _, d := range []struct {
		path string
		uid  int
		mode int64
	}{{"tmp", 0, 0o1777}, {"var/run/postgresql", 999, 0o775}, {"var/lib/postgresql", 999, 0o755}, {"data", 0, 0o777}} {
		b.dir(d.path, d.uid, d.mode)
	}
	b.text("etc/passwd", "root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999:postgres:/var/lib/postgresql:/bin/sh\n")
	b.text("etc/group", "root:x:0:\npostgres:x:999:\n")
	b.text("etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n")
	b.copy(entry, "dbimage")
	// initdb runs postgres through /bin/sh.
	for _, bin := range [][2]string{{filepath.Join(pgbin, "postgres"), ""}, {filepath.Join(pgbin, "initdb"), ""},
		{"/usr/bin/redis-server", ""}, {"/bin/sh", "/bin/sh"}} {
		b.binary(bin[0], bin[1])
	}
	// The server's modules (initdb loads plpgsql and dict_snowball), minus
	// the JIT, and its share directory; the time zones.
	libdir := filepath.Join("/usr/lib/postgresql", version, "lib")
	b.tree(libdir, func(p string) bool {
		return !strings.Contains(p, "/bitcode") && !strings.Contains(filepath.Base(p), "llvmjit")
	}, true)
	b.tree(filepath.Join("/usr/share/postgresql", version), nil, false)
	b.tree("/usr/share/zoneinfo", nil, false)
	if b.err != nil {
		return "", "", fmt.Errorf("the database image: %w", b.err)
	}
	if err := b.tw.Close(); err != nil {
		return "", "", err
	}
	data := b.buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return "", "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", "", err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/dbimage"}
	cf.Config.Env = []string{"PGBIN=" + pgbin, "PGDATA=/var/lib/postgresql/data", "TZ=UTC", "PATH=" + pgbin + ":/usr/bin:/bin"}
	cf.Config.Volumes = map[string]struct{}{"/var/lib/postgresql/data": {}, "/data": {}}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", "", err
	}
	ref = image("db:" + version)
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", "", err
	}
	if err := remote.Write(r, img, remote.WithAuth(authn.Anonymous)); err != nil {
		return "", "", fmt.Errorf("pushing the database image: %w", err)
	}
	return ref, "", nil
}

// removeDBImage removes the database image from the daemon, if a test
// built it (TestMain, at the end): its tag names a registry that is gone.
func removeDBImage() {
	if dbImageOnce.ref == "" {
		return
	}
	cli, err := client.New(client.WithHost(dockerHost))
	if err != nil {
		return
	}
	defer cli.Close()
	cli.ImageRemove(context.Background(), dbImageOnce.ref, client.ImageRemoveOptions{})
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// rootfs writes an image's only layer.
type rootfs struct {
	buf   bytes.Buffer
	tw    *tar.Writer
	files map[string]bool // written, without the leading /
	err   error
}

func (b *rootfs) dir(p string, uid int, mode int64) {
	if b.err != nil || b.files[p] {
		return
	}
	if parent := filepath.Dir(p); parent != "." {
		b.dir(parent, 0, 0o755)
	}
	b.files[p] = true
	b.err = b.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: uid})
}

func (b *rootfs) text(p, s string) { b.write(p, []byte(s), 0o644) }

func (b *rootfs) write(p string, data []byte, mode int64) {
	p = strings.TrimPrefix(p, "/")
	if b.err != nil || b.files[p] {
		return
	}
	b.dir(filepath.Dir(p), 0, 0o755)
	b.files[p] = true
	if b.err = b.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data))}); b.err == nil {
		_, b.err = b.tw.Write(data)
	}
}

// copy writes the file at src (symbolic links followed) at dst.
func (b *rootfs) copy(src, dst string) {
	if b.err != nil {
		return
	}
	data, err := os.ReadFile(src)
	if err != nil {
		b.err = err
		return
	}
	fi, err := os.Stat(src)
	if err != nil {
		b.err = err
		return
	}
	b.write(dst, data, int64(fi.Mode().Perm()))
}

// binary copies an ELF program (at dst, else at its own path) with its
// interpreter and every library it needs, found as the dynamic linker
// finds them.
func (b *rootfs) binary(src, dst string) {
	if dst == "" {
		dst = src
	}
	b.copy(src, dst)
	b.libs(src, true)
}

// libs copies the libraries an ELF file needs (each at the path the
// loader looks in), and theirs. A library not found is an error for a
// program (must) and ignored for a module that may never be loaded.
func (b *rootfs) libs(path string, must bool) {
	if b.err != nil {
		return
	}
	f, err := elf.Open(path)
	if err != nil {
		if must {
			b.err = err
		}
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp := make([]byte, p.Filesz)
			if _, err := p.ReadAt(interp, 0); err == nil {
				ip := strings.TrimRight(string(interp), "\x00")
				b.copy(ip, ip)
			}
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		if must {
			b.err = err
		}
		return
	}
	for _, lib := range needed {
		found := ""
		for _, d := range libDirs() {
			if isFile(filepath.Join(d, lib)) {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			if must {
				b.err = fmt.Errorf("%s needs %s, which is not found", path, lib)
			}
			continue
		}
		if b.files[strings.TrimPrefix(found, "/")] {
			continue
		}
		b.copy(found, found)
		b.libs(found, must)
	}
}

// libDirs are where the dynamic linker looks (Debian's multiarch
// directories first).
func libDirs() []string {
	var ds []string
	for _, g := range []string{"/lib/*-linux-gnu", "/usr/lib/*-linux-gnu"} {
		m, _ := filepath.Glob(g)
		ds = append(ds, m...)
	}
	return append(ds, "/lib64", "/lib", "/usr/lib")
}

// tree copies a directory (keep chooses the files); the ELF modules of a
// library directory bring the libraries they need when found.
func (b *rootfs) tree(root string, keep func(string) bool, modules bool) {
	if b.err != nil {
		return
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if keep != nil && !keep(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			b.dir(strings.TrimPrefix(p, "/"), 0, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel := strings.TrimPrefix(p, "/")
			if !b.files[rel] {
				b.dir(filepath.Dir(rel), 0, 0o755)
				b.files[rel] = true
				b.err = b.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: rel, Linkname: target, Mode: 0o777})
			}
		case d.Type().IsRegular():
			b.copy(p, p)
			if modules && strings.HasSuffix(p, ".so") {
				b.libs(p, false)
			}
		}
		return b.err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.err = err
	}
}
