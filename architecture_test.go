package deployplane_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/deployplane/deployplane"

// TestArchitectureNamesEveryPackage keeps docs/architecture.md true: its
// table names every package of the module, and no other, each with the
// packages of this module that its non-test files import.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	documented := architectureTable(t)
	actual := modulePackages(t)
	if diff := cmp.Diff(documented, actual); diff != "" {
		t.Errorf("docs/architecture.md's package table (-documented +actual imports of each package):\n%s", diff)
	}
}

// architectureTable reads the package table of docs/architecture.md: each
// row's package and the imports its third column lists.
func architectureTable(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := regexp.MustCompile("`([^`]+)`")
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) != 5 {
			t.Fatalf("docs/architecture.md: a row of %d columns, want 3: %s", len(cols)-2, line)
		}
		name := code.FindStringSubmatch(cols[1])[1]
		imports := []string{}
		for _, m := range code.FindAllStringSubmatch(cols[3], -1) {
			imports = append(imports, m[1])
		}
		slices.Sort(imports)
		if _, dup := out[name]; dup {
			t.Errorf("docs/architecture.md names %s twice", name)
		}
		out[name] = imports
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// modulePackages lists the module's packages (directories with non-test
// Go files, outside testdata, vendor and nested modules) and the packages of this
// module each imports.
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		base := d.Name()
		if path != "." && (base == "testdata" || strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_")) {
			return filepath.SkipDir
		}
		if path == "vendor" {
			return filepath.SkipDir // other modules' packages (an offline image build's; see Dockerfile)
		}
		if path != "." {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		imports, found := map[string]bool{}, false
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			found = true
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p := strings.Trim(imp.Path.Value, `"`)
				if rest, ok := strings.CutPrefix(p, module+"/"); ok {
					imports[rest] = true
				}
			}
		}
		if found {
			name := filepath.ToSlash(path)
			list := []string{}
			for p := range imports {
				list = append(list, p)
			}
			slices.Sort(list)
			out[name] = list
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
