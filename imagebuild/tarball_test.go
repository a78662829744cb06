package imagebuild_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/imagebuild"
)

// ent is one entry of a test tarball.
type ent struct {
	name string
	typ  byte
	body string
	link string
	mode int64
	size int64 // when not len(body): a header that claims more
}

// tarball writes entries as a tar archive, gzip-compressed when gz.
func tarball(t testing.TB, gz bool, entries ...ent) []byte {
	t.Helper()
	b, err := writeTarball(gz, entries...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeTarball is tarball's archive, or the error of an entry tar cannot
// write.
func writeTarball(gz bool, entries ...ent) ([]byte, error) {
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// unpackDir is a directory to unpack into, inside a parent that holds
// nothing else, so that a test can tell that nothing was written beside
// it.
func unpackDir(t testing.TB) (parent, dir string) {
	parent = t.TempDir()
	dir = filepath.Join(parent, "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return parent, dir
}

// onlyRoot fails unless parent holds nothing but root (and what is below
// it), and no symbolic link below root resolves outside it (resolved on
// disk, through the links it passes, as the kernel would).
func onlyRoot(t testing.TB, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "root" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("written beside the build directory: %v", names)
	}
	root := filepath.Join(parent, "root")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if escapesOnDisk(root, rel) {
			target, _ := os.Readlink(p)
			t.Errorf("the symbolic link %s points outside the root: %s", p, target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// escapesOnDisk reports whether the symbolic link at rel (a path below
// root) resolves, step by step on disk, to a place outside root at any
// step. Names that do not exist count as directories (a later write could
// make them); a chain of more than 255 links counts as not resolving.
func escapesOnDisk(root, rel string) bool {
	var stack []string // the directory resolved so far, below root
	hops := 0
	var walk func(dir []string, target string) ([]string, bool)
	walk = func(dir []string, target string) ([]string, bool) {
		if filepath.IsAbs(target) {
			return nil, true
		}
		stack := slices.Clone(dir)
		for _, name := range strings.Split(target, "/") {
			switch name {
			case "", ".":
				continue
			case "..":
				if len(stack) == 0 {
					return nil, true
				}
				stack = stack[:len(stack)-1]
				continue
			}
			stack = append(stack, name)
			full := filepath.Join(append([]string{root}, stack...)...)
			st, err := os.Lstat(full)
			if err != nil || st.Mode()&fs.ModeSymlink == 0 {
				continue
			}
			if hops++; hops > 255 {
				return nil, false
			}
			next, err := os.Readlink(full)
			if err != nil {
				return nil, false
			}
			resolved, out := walk(stack[:len(stack)-1], next)
			if out {
				return nil, true
			}
			if resolved == nil {
				return nil, false
			}
			stack = resolved
		}
		if stack == nil {
			stack = []string{}
		}
		return stack, false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	stack = parts[:len(parts)-1]
	target, err := os.Readlink(filepath.Join(root, rel))
	if err != nil {
		return false
	}
	_, out := walk(stack, target)
	return out
}

func TestUnpack(t *testing.T) {
	for _, gz := range []bool{true, false} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			parent, dir := unpackDir(t)
			data := tarball(t, gz,
				ent{name: "./", typ: tar.TypeDir},
				ent{name: "langgraph.json", body: `{"graphs": {}}`},
				ent{name: "src/agent/app.py", body: "graph = 1\n"},
				ent{name: "bin/", typ: tar.TypeDir},
				ent{name: "bin/run.sh", body: "#!/bin/sh\n", mode: 0o755},
				ent{name: "current", typ: tar.TypeSymlink, link: "src/agent/app.py"},
				ent{name: "src/agent/same.py", typ: tar.TypeLink, link: "src/agent/app.py"},
				ent{name: "src/up", typ: tar.TypeSymlink, link: "../langgraph.json"},
				// Links through links that stay inside.
				ent{name: "self", typ: tar.TypeSymlink, link: "."},
				ent{name: "via", typ: tar.TypeSymlink, link: "self/src/agent/app.py"},
				ent{name: "src/agent/up2", typ: tar.TypeSymlink, link: "../../self/src/../langgraph.json"},
				ent{name: "bin/current", typ: tar.TypeSymlink, link: "../current"},
			)
			got, err := imagebuild.Unpack(bytes.NewReader(data), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			// src and src/agent are directories no entry names.
			if got.Entries != 12 || got.Directories != 2 || got.Bytes != int64(len(`{"graphs": {}}`)+len("graph = 1\n")+len("#!/bin/sh\n")) {
				t.Errorf("Unpacked = %+v", got)
			}
			for name, want := range map[string]string{"langgraph.json": `{"graphs": {}}`, "src/agent/app.py": "graph = 1\n",
				"current": "graph = 1\n", "src/agent/same.py": "graph = 1\n", "src/up": `{"graphs": {}}`,
				"via": "graph = 1\n", "src/agent/up2": `{"graphs": {}}`, "bin/current": "graph = 1\n"} {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(b) != want {
					t.Errorf("%s = %q, %v; want %q", name, b, err, want)
				}
			}
			if st, err := os.Stat(filepath.Join(dir, "bin", "run.sh")); err != nil || st.Mode().Perm()&0o100 == 0 {
				t.Errorf("bin/run.sh is not executable: %v %v", st, err)
			}
			onlyRoot(t, parent)
		})
	}
}

// badTarballs are archives Unpack refuses, with what its error says.
var badTarballs = []struct {
	name    string
	entries []ent
	want    string
}{
	{"absolute path", []ent{{name: "/etc/deployplane-test", body: "x"}}, "absolute path"},
	{"dot dot", []ent{{name: "../outside", body: "x"}}, `".."`},
	{"dot dot inside", []ent{{name: "a/../../outside", body: "x"}}, `".."`},
	{"symlink out of the root", []ent{{name: "escape", typ: tar.TypeSymlink, link: "../../etc"}}, "points outside"},
	{"absolute symlink", []ent{{name: "escape", typ: tar.TypeSymlink, link: "/etc"}}, "points outside"},
	{"write through a symlink", []ent{{name: "l", typ: tar.TypeSymlink, link: "."}, {name: "l/x", body: "x"}}, "below the symbolic link"},
	{"hard link out of the root", []ent{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}, "points outside"},
	{"character device", []ent{{name: "null", typ: tar.TypeChar}}, "is a device"},
	{"block device", []ent{{name: "sda", typ: tar.TypeBlock}}, "is a device"},
	{"fifo", []ent{{name: "pipe", typ: tar.TypeFifo}}, "is a FIFO"},
	// Links resolved through the links written before them: x/y is x, so
	// x/y/../.. is the root's parent (as text it is the root).
	{"through a link to its directory", []ent{{name: "x/", typ: tar.TypeDir}, {name: "x/y", typ: tar.TypeSymlink, link: "."},
		{name: "l", typ: tar.TypeSymlink, link: "x/y/../../etc/passwd"}}, `"l" points outside`},
	{"through a link to the root", []ent{{name: "r", typ: tar.TypeSymlink, link: "."},
		{name: "l", typ: tar.TypeSymlink, link: "r/../etc/passwd"}}, `"l" points outside`},
	{"through a chain of links", []ent{{name: "x/y", typ: tar.TypeSymlink, link: "."}, {name: "p", typ: tar.TypeSymlink, link: "x/y/.."},
		{name: "q", typ: tar.TypeSymlink, link: "p/../etc/passwd"}}, `"q" points outside`},
	{"made to escape by a later link", []ent{{name: "l", typ: tar.TypeSymlink, link: "b/c/../../etc/passwd"},
		{name: "b/c", typ: tar.TypeSymlink, link: "."}}, `"l" points outside`},
	{"hard link through a link", []ent{{name: "x/y", typ: tar.TypeSymlink, link: "."}, {name: "x/f", body: "x"},
		{name: "h", typ: tar.TypeLink, link: "x/y/f"}}, "does not name a file"},
	{"directory over a link", []ent{{name: "l", typ: tar.TypeSymlink, link: "."}, {name: "l/", typ: tar.TypeDir}}, "symbolic link"},
	// One 40 kB name, 196 bytes compressed: refused before a directory
	// is made.
	{"20000 levels deep", []ent{{name: strings.Repeat("d/", 20_000) + "f", body: "x"}}, "is 20001 levels deep, more than 64"},
	{"path too long", []ent{{name: strings.Repeat(strings.Repeat("n", 120)+"/", 40) + "f", body: "x"}}, "a path of 4841 bytes, more than 4096"},
	{"link target too long", []ent{{name: "l", typ: tar.TypeSymlink, link: strings.Repeat("./", 2049)}}, "a target of 4098 bytes, more than 4096"},
}

func TestUnpackRefuses(t *testing.T) {
	for _, tc := range badTarballs {
		t.Run(tc.name, func(t *testing.T) {
			parent, dir := unpackDir(t)
			_, err := imagebuild.Unpack(bytes.NewReader(tarball(t, true, tc.entries...)), dir, nil)
			if !errors.Is(err, imagebuild.ErrTarball) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrTarball saying %q", err, tc.want)
			}
			if len(err.Error()) > 512 {
				t.Errorf("a message of %d bytes: %.600s", len(err.Error()), err)
			}
			onlyRoot(t, parent)
			// What was written before the refusal is gone.
			if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
				t.Errorf("left in the directory: %v %v", ents, err)
			}
		})
	}
}

// bombReader streams a gzip-compressed tar whose one file claims size
// bytes of zeros, generated as it is read (never held whole).
func bombReader(t testing.TB, size int64) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		tw := tar.NewWriter(zw)
		err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: size})
		zero := make([]byte, 1<<20)
		for left := size; err == nil && left > 0; left -= int64(len(zero)) {
			_, err = tw.Write(zero[:min(left, int64(len(zero)))])
		}
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	t.Cleanup(func() { pr.CloseWithError(errors.New("test over")) })
	return pr
}

// manyReader streams a tar of n directory entries (not compressed: under
// -race, compressing 50 MB costs a minute).
func manyReader(t testing.TB, n int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		tw := tar.NewWriter(bw)
		var err error
		for i := 0; err == nil && i < n; i++ {
			err = tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755})
		}
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	t.Cleanup(func() { pr.CloseWithError(errors.New("test over")) })
	return pr
}

func TestUnpackLimits(t *testing.T) {
	t.Run("decompression bomb", func(t *testing.T) {
		parent, dir := unpackDir(t)
		_, err := imagebuild.Unpack(bombReader(t, 1<<30+1), dir, nil)
		if !errors.Is(err, imagebuild.ErrTarball) || !errors.Is(err, imagebuild.ErrTooLarge) ||
			!strings.Contains(err.Error(), "more than 1073741824 bytes") {
			t.Fatalf("err = %v, want ErrTarball and ErrTooLarge over 1073741824 bytes", err)
		}
		onlyRoot(t, parent)
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("the bomb wrote %d entries", len(ents))
		}
	})
	t.Run("bytes summed over files", func(t *testing.T) {
		_, dir := unpackDir(t)
		data := tarball(t, true, ent{name: "a", body: strings.Repeat("a", 600)}, ent{name: "b", body: strings.Repeat("b", 600)})
		_, err := imagebuild.Unpack(bytes.NewReader(data), dir, &imagebuild.UnpackLimits{MaxBytes: 1000})
		if !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), `more than 1000 bytes (at "b")`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("too many entries", func(t *testing.T) {
		parent, dir := unpackDir(t)
		got, err := imagebuild.Unpack(manyReader(t, 100_001), dir, nil)
		if !errors.Is(err, imagebuild.ErrTarball) || !errors.Is(err, imagebuild.ErrTooLarge) ||
			!strings.Contains(err.Error(), "more than 100000 entries") {
			t.Fatalf("err = %v, want ErrTarball and ErrTooLarge over 100000 entries", err)
		}
		if got.Entries != 100_001 {
			t.Errorf("stopped after %d entries", got.Entries)
		}
		onlyRoot(t, parent)
	})
	t.Run("exactly the entries allowed", func(t *testing.T) {
		_, dir := unpackDir(t)
		if _, err := imagebuild.Unpack(manyReader(t, 100), dir, &imagebuild.UnpackLimits{MaxEntries: 100}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("directories a path implies", func(t *testing.T) {
		// 51 files, each in a directory of its own that no entry names:
		// 102 entries written.
		var entries []ent
		for i := range 51 {
			entries = append(entries, ent{name: fmt.Sprintf("d%d/f", i), body: "x"})
		}
		parent, dir := unpackDir(t)
		_, err := imagebuild.Unpack(bytes.NewReader(tarball(t, true, entries...)), dir, &imagebuild.UnpackLimits{MaxEntries: 100})
		if !errors.Is(err, imagebuild.ErrTarball) || !errors.Is(err, imagebuild.ErrTooLarge) ||
			!strings.Contains(err.Error(), "more than 100 entries") {
			t.Fatalf("err = %v, want ErrTarball and ErrTooLarge over 100 entries", err)
		}
		onlyRoot(t, parent)
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%d entries left", len(ents))
		}
	})
	t.Run("directories of one entry", func(t *testing.T) {
		deep := ent{name: "a/b/c/d/e/f/g/h/i/j/file", body: "x"} // 10 directories and a file
		_, dir := unpackDir(t)
		_, err := imagebuild.Unpack(bytes.NewReader(tarball(t, false, deep)), dir, &imagebuild.UnpackLimits{MaxEntries: 10})
		if !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), "more than 10 entries") {
			t.Fatalf("err = %v, want ErrTooLarge over 10 entries", err)
		}
		_, dir = unpackDir(t)
		got, err := imagebuild.Unpack(bytes.NewReader(tarball(t, false, deep)), dir, &imagebuild.UnpackLimits{MaxEntries: 11})
		if err != nil || got.Entries != 1 || got.Directories != 10 {
			t.Fatalf("Unpack = %+v, %v; want 1 entry and 10 directories", got, err)
		}
	})
	t.Run("depth", func(t *testing.T) {
		parent, dir := unpackDir(t)
		lim := &imagebuild.UnpackLimits{MaxDepth: 3}
		_, err := imagebuild.Unpack(bytes.NewReader(tarball(t, false, ent{name: "a/b/c/d", body: "x"})), dir, lim)
		if !errors.Is(err, imagebuild.ErrTarball) || !errors.Is(err, imagebuild.ErrTooLarge) ||
			!strings.Contains(err.Error(), `entry "a/b/c/d" is 4 levels deep, more than 3`) {
			t.Fatalf("err = %v", err)
		}
		onlyRoot(t, parent)
		if _, err := imagebuild.Unpack(bytes.NewReader(tarball(t, false, ent{name: "./a//b/c", body: "x"})), dir, lim); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("path bytes", func(t *testing.T) {
		_, dir := unpackDir(t)
		lim := &imagebuild.UnpackLimits{MaxPathBytes: 10}
		_, err := imagebuild.Unpack(bytes.NewReader(tarball(t, false, ent{name: "abcde/ghijk", body: "x"})), dir, lim)
		if !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), "path of 11 bytes, more than 10") {
			t.Fatalf("err = %v", err)
		}
		_, err = imagebuild.Unpack(bytes.NewReader(tarball(t, false, ent{name: "l", typ: tar.TypeSymlink, link: "abcde/ghijk"})), dir, lim)
		if !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), "target of 11 bytes, more than 10") {
			t.Fatalf("err = %v", err)
		}
		if _, err := imagebuild.Unpack(bytes.NewReader(tarball(t, false, ent{name: "abcde/ghij", body: "x"})), dir, lim); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not a tarball", func(t *testing.T) {
		_, dir := unpackDir(t)
		_, err := imagebuild.Unpack(strings.NewReader("this is not a tar archive, not at all, not even close to one..."), dir, nil)
		if !errors.Is(err, imagebuild.ErrTarball) {
			t.Fatalf("err = %v", err)
		}
	})
}

// FuzzUnpack: any bytes unpack or are refused with ErrTarball; nothing is
// ever written beside the directory, and no link left inside points out.
func FuzzUnpack(f *testing.F) {
	f.Add(tarball(f, false, ent{name: "a/b.txt", body: "x"}, ent{name: "l", typ: tar.TypeSymlink, link: "a/b.txt"}))
	f.Add(tarball(f, true, ent{name: "a/", typ: tar.TypeDir}, ent{name: "a/h", typ: tar.TypeLink, link: "a"}))
	for _, tc := range badTarballs {
		f.Add(tarball(f, false, tc.entries...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent, dir := unpackDir(t)
		_, err := imagebuild.Unpack(bytes.NewReader(data), dir, &imagebuild.UnpackLimits{MaxBytes: 1 << 20, MaxEntries: 1000})
		if err != nil && !errors.Is(err, imagebuild.ErrTarball) {
			t.Fatalf("error not ErrTarball: %v", err)
		}
		onlyRoot(t, parent)
	})
}

// FuzzUnpackLinks: archives of files, directories, symbolic and hard
// links over a few short names, described as "TYPE NAME [TARGET]" lines
// (TYPE f, d, l or h): whatever Unpack accepts has no link that resolves
// outside the root on disk, and what it refuses leaves nothing behind.
func FuzzUnpackLinks(f *testing.F) {
	for _, seed := range []string{
		"d x\nl x/y .\nl l x/y/../../etc/passwd",
		"l r .\nl l r/../etc/passwd",
		"l x/y .\nl p x/y/..\nl q p/../etc/passwd",
		"l l b/c/../../etc/passwd\nl b/c .",
		"l a b\nl b a\nf a/x",
		"f a/b\nl c a/b\nh d a/b\nl e c\nf c",
		"l s .\nl t s/s/s/s/..\nl u t/../x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		var entries []ent
		for line := range strings.SplitSeq(spec, "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || len(entries) == 20 {
				continue
			}
			e := ent{name: fields[1]}
			if len(fields) > 2 {
				e.link = fields[2]
			}
			switch fields[0] {
			case "f":
				e.body = "x"
			case "d":
				e.typ = tar.TypeDir
			case "l":
				e.typ = tar.TypeSymlink
			case "h":
				e.typ = tar.TypeLink
			default:
				continue
			}
			entries = append(entries, e)
		}
		data, err := writeTarball(false, entries...)
		if err != nil {
			t.Skip(err) // a name tar cannot write
		}
		parent, dir := unpackDir(t)
		_, err = imagebuild.Unpack(bytes.NewReader(data), dir, nil)
		if err != nil && !errors.Is(err, imagebuild.ErrTarball) {
			t.Fatalf("error not ErrTarball: %v", err)
		}
		onlyRoot(t, parent)
		if err != nil {
			if ents, rerr := os.ReadDir(dir); rerr != nil || len(ents) != 0 {
				t.Fatalf("refused (%v) and left %v %v", err, ents, rerr)
			}
		}
	})
}

// tarballStore is a Tarballs of tarballs in memory, by object path.
type tarballStore map[string][]byte

func (s tarballStore) OpenTarball(_ context.Context, tenant, deploymentID, objectPath string) (io.ReadCloser, error) {
	b, ok := s[tenant+"/"+deploymentID+"/"+objectPath]
	if !ok {
		return nil, fmt.Errorf("%s: no such tarball", objectPath)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// tarballWork is the Work of an internal_source revision of objectPath.
func tarballWork(objectPath string) *controlplane.Work {
	return &controlplane.Work{
		Tenant: "tenant-1",
		Deployment: controlplane.Deployment{ID: "0190f0a0-0000-7000-8000-000000000002", Name: "agent",
			Source: controlplane.SourceInternalSource},
		Revision: controlplane.Revision{ID: "0190f0a0-0000-7000-8000-0000000000bb", Source: controlplane.SourceInternalSource,
			Status:               controlplane.RevisionBuilding,
			SourceRevisionConfig: controlplane.SourceRevisionConfig{SourceTarballPath: &objectPath}},
	}
}

// TestBuildRefusesTarballs: every refused tarball fails Build with an
// error whose text (the revision's status_message) says why, before the
// daemon is asked anything (the client points at no daemon).
func TestBuildRefusesTarballs(t *testing.T) {
	cli, err := client.New(client.WithHost("tcp://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	store := tarballStore{}
	tmp := t.TempDir()
	b, err := imagebuild.New(cli, &imagebuild.Options{Tarballs: store, TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	cases := slices.Clone(badTarballs)
	cases = append(cases, struct {
		name    string
		entries []ent
		want    string
	}{"no such tarball", nil, "no such tarball"})
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fmt.Sprintf("uploads/x/%d.tar.gz", i)
			w := tarballWork(p)
			if tc.entries != nil {
				store[w.Tenant+"/"+w.Deployment.ID+"/"+p] = tarball(t, true, tc.entries...)
			}
			var l lines
			_, _, err := b.Build(context.Background(), w, l.log)
			if !errors.Is(err, imagebuild.ErrTarball) || !strings.HasPrefix(err.Error(), "source tarball refused: ") ||
				!strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrTarball saying %q", err, tc.want)
			}
			if ents, err := os.ReadDir(tmp); err != nil || len(ents) != 0 {
				t.Errorf("left in Options.TempDir: %v %v", ents, err)
			}
		})
	}
	t.Run("no Tarballs", func(t *testing.T) {
		b, err := imagebuild.New(cli, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = b.Build(context.Background(), tarballWork("uploads/x/y.tar.gz"), nil)
		if !errors.Is(err, imagebuild.ErrTarball) || !strings.Contains(err.Error(), "keeps no source tarballs") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestBuildTarballLimitsFromOptions: the Builder unpacks a tarball
// within its Options' MaxDepth and MaxPathBytes (as it does within
// MaxCheckoutBytes and MaxFiles), not only Unpack's defaults.
func TestBuildTarballLimitsFromOptions(t *testing.T) {
	cli, err := client.New(client.WithHost("tcp://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, tc := range []struct {
		name string
		o    imagebuild.Options
		ent  ent
		want string
	}{
		{"MaxDepth", imagebuild.Options{MaxDepth: 3}, ent{name: "a/b/c/d", body: "x"}, `entry "a/b/c/d" is 4 levels deep, more than 3`},
		{"MaxPathBytes", imagebuild.Options{MaxPathBytes: 10}, ent{name: "abcde/fghij", body: "x"}, `entry "abcde/fghij" has a path of 11 bytes, more than 10`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tarballStore{}
			w := tarballWork("uploads/x/1.tar.gz")
			store[w.Tenant+"/"+w.Deployment.ID+"/uploads/x/1.tar.gz"] = tarball(t, true, ent{name: "g.json", body: "{}"}, tc.ent)
			o := tc.o
			o.Tarballs, o.TempDir = store, t.TempDir()
			b, err := imagebuild.New(cli, &o)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = b.Build(context.Background(), w, nil)
			if !errors.Is(err, imagebuild.ErrTarball) || !errors.Is(err, imagebuild.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrTarball and ErrTooLarge saying %q", err, tc.want)
			}
		})
	}
}
