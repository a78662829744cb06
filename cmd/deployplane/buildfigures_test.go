package main

import (
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"
)

// TestBuildFigures measures the server's binary beside its baselines in
// the same run (BENCHMARKS.md, "The server's binary and its build"):
// sizes (go build as go run builds it, and stripped as the image builds
// it), module counts and a profile of the default binary by module; with
// DEPLOYPLANE_BUILDFIGURES=cold also the build from an empty build cache
// (the module cache must hold every module: GOPROXY=off). It needs Linux
// (ELF) and runs only when DEPLOYPLANE_BUILDFIGURES is set:
//
//	DEPLOYPLANE_BUILDFIGURES=size go test -run TestBuildFigures -v -count 1 ./cmd/deployplane/
//	DEPLOYPLANE_BUILDFIGURES=cold go test -run TestBuildFigures -v -count 1 -timeout 90m ./cmd/deployplane/
func TestBuildFigures(t *testing.T) {
	mode := os.Getenv("DEPLOYPLANE_BUILDFIGURES")
	if mode == "" {
		t.Skip("DEPLOYPLANE_BUILDFIGURES=size or cold measures the binary and its build")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads ELF binaries: Linux only")
	}
	dir := t.TempDir()
	hello := filepath.Join(dir, "hello")
	if err := os.MkdirAll(hello, 0o755); err != nil {
		t.Fatal(err)
	}
	// The baseline of the size: a bare net/http server, the standard
	// library any Go server links.
	for name, text := range map[string]string{
		"go.mod":  "module hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"net/http\"\n\nfunc main() {\n\t_ = http.ListenAndServe(\"127.0.0.1:0\", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(\"ok\")) }))\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(hello, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	builds := []figureBuild{
		{name: "all tags (" + storageTags + ")", dir: here, args: []string{"-tags", storageTags}},
		{name: "default", dir: here},
		{name: "net/http hello", dir: hello},
	}
	if o := methodDCEOverlay(t, dir); o != "" {
		builds = append(builds, figureBuild{name: "default, method dead-code elimination (experiment)", dir: here,
			args: []string{"-overlay", o, "-tags", "validator_novalidatefn"}})
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "binary\tbytes\tstripped (-s -w)\tmodules\tx-baseline (all tags' bytes over these)\t")
	var all int64
	for i := range builds {
		b := &builds[i]
		b.path = filepath.Join(dir, fmt.Sprintf("bin%d", i))
		b.size, b.modules = buildFigure(t, b.dir, nil, append(slices.Clone(b.args), "-o", b.path))
		b.stripped, _ = buildFigure(t, b.dir, nil, append(slices.Clone(b.args), "-trimpath", "-ldflags=-s -w", "-o", b.path+"-stripped"))
		all = cmp.Or(all, b.size)
		fmt.Fprintf(w, "%s\t%.1f MB\t%.1f MB\t%d\t%.2f\t\n", b.name, mb(b.size), mb(b.stripped), b.modules, float64(all)/float64(b.size))
	}
	w.Flush()
	profile(t, builds[1].path)

	if mode != "cold" {
		return
	}
	// Cold: each build from an empty build cache, the module cache warm
	// and no download (GOPROXY=off); the figures are the go command's
	// and its children's (wait4's rusage: CPU time, and the peak resident
	// memory of the largest process, the linker or a compile). The
	// default build and its baseline run twice, in both orders, so that
	// the load of a shared machine drifting weighs on both alike; the
	// bare server once.
	trace := filepath.Join(dir, "trace.json")
	var cold [3]struct {
		walls    []string
		wall     time.Duration // summed over the rounds
		cpu, rss []string
		cpuSum   time.Duration
	}
	for n, i := range []int{0, 1, 1, 0, 2} {
		b := builds[i]
		cache := filepath.Join(dir, fmt.Sprintf("gocache-%d", n))
		env := []string{"GOCACHE=" + cache, "GOPROXY=off", "GOTOOLCHAIN=local"}
		args := append(append([]string{"build"}, b.args...), "-o", filepath.Join(dir, "cold"))
		if n == 1 { // the default build's actions, for its profile below
			args = append(args, "-debug-trace="+trace)
		}
		start := time.Now()
		ps := runGo(t, b.dir, env, append(args, "."))
		wall, cpu := time.Since(start), ps.UserTime()+ps.SystemTime()
		var rss int64
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss << 10
		}
		c := &cold[i]
		c.walls, c.cpu, c.rss = append(c.walls, wall.Round(time.Second).String()), append(c.cpu, cpu.Round(time.Second).String()),
			append(c.rss, fmt.Sprintf("%.2f", float64(rss)/1e9))
		c.wall, c.cpuSum = c.wall+wall, c.cpuSum+cpu
		if err := os.RemoveAll(cache); err != nil {
			t.Log(err)
		}
	}
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "cold build\twall\tCPU (user+sys)\tpeak RSS, GB\tx-baseline: wall\tCPU\t")
	for i, c := range cold {
		rounds := time.Duration(len(c.walls))
		base, baseRounds := cold[0], time.Duration(len(cold[0].walls))
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.2f\t%.2f\t\n", builds[i].name, strings.Join(c.walls, ", "), strings.Join(c.cpu, ", "), strings.Join(c.rss, ", "),
			float64(base.wall/baseRounds)/float64(c.wall/rounds), float64(base.cpuSum/baseRounds)/float64(c.cpuSum/rounds))
	}
	w.Flush()
	buildProfile(t, here, trace)
}

// buildProfile logs where the time of the cold build traced in trace
// (go build -debug-trace) went: its actions' (compiles', the link's)
// time by module, the shares of their sum (each action's wall time, two
// at a time on two cores).
func buildProfile(t *testing.T, dir, trace string) {
	t.Helper()
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	var events []struct {
		Name string  `json:"name"`
		Ph   string  `json:"ph"`
		Ts   float64 `json:"ts"` // µs
		Tid  int     `json:"tid"`
	}
	if err := json.Unmarshal(b, &events); err != nil {
		t.Fatalf("%s: %v", trace, err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	module := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, mod, _ := strings.Cut(line, " ")
		module[pkg] = cmp.Or(mod, "std")
	}
	type key struct {
		name string
		tid  int
	}
	began := map[key]float64{}
	by := map[string]float64{}
	var total float64
	for _, e := range events {
		action, ok := strings.CutPrefix(e.Name, "Executing action (")
		if !ok || strings.Contains(action, "->") {
			continue
		}
		action = strings.TrimSuffix(action, ")")
		var what string
		switch {
		case strings.HasPrefix(action, "link "):
			what = "(link)"
		case strings.HasPrefix(action, "build ") && !strings.HasPrefix(action, "build check cache "):
			what = cmp.Or(module[strings.TrimPrefix(action, "build ")], "std")
		default:
			continue
		}
		k := key{e.Name, e.Tid}
		switch e.Ph {
		case "B":
			began[k] = e.Ts
		case "E":
			if ts, ok := began[k]; ok {
				by[what] += (e.Ts - ts) / 1e6
				total += (e.Ts - ts) / 1e6
				delete(began, k)
			}
		}
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(by[b], by[a]) })
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "the default cold build's actions by module (%.0f s in all)\tseconds\tshare\t\n", total)
	for _, k := range keys[:min(len(keys), 20)] {
		fmt.Fprintf(w, "%s\t%.1f\t%.1f%%\t\n", k, by[k], 100*by[k]/total)
	}
	w.Flush()
}

// figureBuild is one build TestBuildFigures measures.
type figureBuild struct {
	name, dir string
	args      []string // go build's flags
	path      string
	size      int64 // go build's
	stripped  int64 // -trimpath -ldflags=-s -w, as the image
	modules   int
}

// buildFigure runs go build args (the output's -o last) in dir and
// answers the binary's size and its count of modules.
func buildFigure(t *testing.T, dir string, env, args []string) (size int64, modules int) {
	t.Helper()
	runGo(t, dir, env, append([]string{"build"}, append(args, ".")...))
	out := args[len(args)-1]
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size(), len(bi.Deps)
}

// runGo runs the go command in dir with env added and answers its state.
func runGo(t *testing.T, dir string, env, args []string) *os.ProcessState {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return cmd.ProcessState
}

// methodDCEOverlay writes an overlay (go build -overlay) under which
// text/template calls no method by a computed name, and answers its path;
// "" when this toolchain's text/template is not the one it knows. Such a
// call (reflect.Value.MethodByName with a name not known at link time)
// makes the linker keep every exported method of every type that reaches
// an interface; the experiment measures what that costs. The server
// would not run right with it (templates could not call methods), and
// github.com/go-playground/validator/v10 makes the same call unless built
// with its tag validator_novalidatefn.
func methodDCEOverlay(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(runtime.GOROOT(), "src", "text", "template", "exec.go")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Log("the method dead-code elimination experiment:", err)
		return ""
	}
	const call = "ptr.MethodByName(fieldName)"
	if strings.Count(string(b), call) != 1 {
		t.Logf("the method dead-code elimination experiment: %s does not call %s once", src, call)
		return ""
	}
	exec := filepath.Join(dir, "exec.go")
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(exec, []byte(strings.Replace(string(b), call, `ptr.MethodByName("")`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(overlay, fmt.Appendf(nil, `{"Replace": {%q: %q}}`, src, exec), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// profile logs where the bytes of the binary at path go: its sections,
// and the symbols that take file space (code and read-only data, not the
// zeroed memory the file does not hold) by module, the largest first.
func profile(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fileSize int64
	if fi, err := os.Stat(path); err == nil {
		fileSize = fi.Size()
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "section of the default binary\tbytes\tshare\t")
	debug := int64(0)
	for _, s := range f.Sections {
		size := int64(s.FileSize) // compressed, for the DWARF sections
		if s.Type == elf.SHT_NOBITS || size == 0 {
			continue
		}
		if strings.HasPrefix(s.Name, ".debug_") {
			debug += size
			continue
		}
		if size >= 1<<20 {
			fmt.Fprintf(w, "%s\t%.1f MB\t%.0f%%\t\n", s.Name, mb(size), 100*float64(size)/float64(fileSize))
		}
	}
	fmt.Fprintf(w, ".debug_* (DWARF; -ldflags=-w drops it, -s the symbol table)\t%.1f MB\t%.0f%%\t\n", mb(debug), 100*float64(debug)/float64(fileSize))
	w.Flush()

	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var mods []string
	for _, d := range bi.Deps {
		mods = append(mods, d.Path)
	}
	slices.SortFunc(mods, func(a, b string) int { return len(b) - len(a) }) // the longest prefix first
	mods = append(mods, bi.Main.Path)
	by := map[string]int64{}
	var total int64
	for _, s := range syms {
		if int(s.Section) >= len(f.Sections) || s.Section == elf.SHN_UNDEF || f.Sections[s.Section].Type == elf.SHT_NOBITS || s.Size == 0 {
			continue
		}
		total += int64(s.Size)
		by[symbolModule(s.Name, mods)] += int64(s.Size)
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(by[b], by[a]) })
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "module (symbols: %.1f MB)\tbytes\tshare\t\n", mb(total))
	for _, k := range keys[:min(len(keys), 25)] {
		fmt.Fprintf(w, "%s\t%.2f MB\t%.1f%%\t\n", k, mb(by[k]), 100*float64(by[k])/float64(total))
	}
	w.Flush()
}

// symbolModule answers the module of a symbol's package: the longest of
// mods that prefixes the package path, mods[len(mods)-1] for package main,
// "(linker)" for the linker's own symbols (go:...), "std" for the rest.
func symbolModule(name string, mods []string) string {
	for _, p := range []string{"type:.eq.", "type:.hash.", "type:", "go:itab.", "*", "[]"} {
		name = strings.TrimPrefix(name, p)
	}
	switch {
	case strings.HasPrefix(name, "go:"):
		return "(linker)"
	case strings.HasPrefix(name, "main."):
		return mods[len(mods)-1]
	}
	for _, m := range mods {
		if strings.HasPrefix(name, m) && len(name) > len(m) && (name[len(m)] == '.' || name[len(m)] == '/') {
			return m
		}
	}
	return "std"
}

func mb(n int64) float64 { return float64(n) / 1e6 }
