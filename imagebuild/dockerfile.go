package imagebuild

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// The defaults of the langgraph CLI (langgraph_cli/config.py) that
// GenerateDockerfile follows.
const (
	DefaultPythonVersion = "3.11"
	DefaultNodeVersion   = "20"
	defaultImageDistro   = "debian"
)

// DockerfileOptions are the settings of GenerateDockerfile that do not come
// from langgraph.json. Nil means none.
type DockerfileOptions struct {
	// BaseImage replaces the base image (the CLI's --base-image): the
	// image FROM names is BaseImage:<tag>, the tag made from the config's
	// python_version or node_version as the CLI makes it. Empty: the
	// config's base_image, else langchain/langgraph-api (or
	// langchain/langgraphjs-api for JavaScript projects).
	BaseImage string
	// InstallCommand and BuildCommand are the deployment's
	// install_command and build_command, for JavaScript projects: when
	// either is set the build context is the repository root (the CLI's
	// monorepo build: install at the root, build in the config's
	// directory), as `langgraph build --install-command ...` run at the
	// root does. They may not hold the characters the CLI refuses
	// (" ` \ | ; $ < > and control characters) nor a single '&'.
	InstallCommand, BuildCommand string
}

// Dockerfile is a generated Dockerfile and the build context it is meant
// for.
type Dockerfile struct {
	// Text is the Dockerfile.
	Text string
	// Context is the directory of the build context: slash-separated,
	// relative to the root of the file system given to
	// GenerateDockerfile, "." for the root itself.
	Context string
}

// ErrConfig is matched (errors.Is) by every error of GenerateDockerfile
// that is the project's fault: a langgraph.json the CLI would refuse, or
// one that needs what this builder does not do.
var ErrConfig = errors.New("langgraph config")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// disallowedCommandChars are the characters the CLI refuses in
// install_command and build_command.
const disallowedCommandChars = "\"`\\\n\r\x00\t|;$><"

// singleAmpersand matches a '&' that is not part of "&&" (the CLI's
// (?<!&)&(?:&&)*(?!&), without look-around: runs of '&' of odd length).
var ampRun = regexp.MustCompile(`&+`)

// CheckCommand reports whether cmd (an install_command or build_command)
// holds something the langgraph CLI refuses: one of " ` \ | ; $ < >, a
// control character, or a '&' that is not part of "&&".
func CheckCommand(cmd string) error {
	if i := strings.IndexAny(cmd, disallowedCommandChars); i >= 0 {
		return fmt.Errorf("%q is not allowed in a build command", cmd[i:i+1])
	}
	for _, run := range ampRun.FindAllString(cmd, -1) {
		if len(run)%2 == 1 {
			return errors.New(`a single "&" is not allowed in a build command (use "&&")`)
		}
	}
	return nil
}

// reservedNames are the package names a faux local dependency may not
// use (the CLI's list).
var reservedNames = []string{"src", "langgraph-api", "langgraph_api", "langgraph", "langchain-core",
	"langchain_core", "pydantic", "orjson", "fastapi", "uvicorn", "psycopg", "httpx", "langsmith"}

// GenerateDockerfile writes the Dockerfile that `langgraph dockerfile`
// (langgraph-cli) writes for the langgraph.json at configPath (slash-
// separated, relative to the root of fsys), for a checkout whose root
// directory is called rootName (the CLI names paths in the image after
// directories). Python projects and JavaScript projects are supported;
// errors matching ErrConfig name what the CLI would refuse and what this
// generator does not support: dependencies outside the config's
// directory (the CLI needs BuildKit's extra build contexts for them),
// "source": {"kind": "uv"} projects, and api_version pins that the CLI
// resolves against PyPI (an api_version is used as given).
func GenerateDockerfile(fsys fs.FS, rootName, configPath string, o *DockerfileOptions) (*Dockerfile, error) {
	if o == nil {
		o = &DockerfileOptions{}
	}
	configPath = path.Clean(configPath)
	if !fs.ValidPath(configPath) {
		return nil, configErr("config path %q is not a path inside the repository", configPath)
	}
	data, err := fs.ReadFile(fsys, configPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, configErr("%s not found in the repository", configPath)
		}
		return nil, fmt.Errorf("reading %s: %w", configPath, err)
	}
	raw, err := parseJSON(data)
	if err != nil {
		return nil, configErr("%s: %v", configPath, err)
	}
	if raw.kind != 'o' {
		return nil, configErr("%s: not a JSON object", configPath)
	}
	g := &generator{fsys: fsys, root: rootName, cfgDir: path.Dir(configPath), cfg: raw, o: o}
	if err := g.validate(); err != nil {
		return nil, err
	}
	if g.isNode() {
		return g.node()
	}
	return g.python()
}

type generator struct {
	fsys   fs.FS
	root   string
	cfgDir string // "." or a slash path
	cfg    *jvalue
	o      *DockerfileOptions

	nodeVersion, pythonVersion string
	distro                     string
	deps                       []string
	dockerfileLines            []string
}

// dirName is the name the CLI gives the directory p (relative to the
// root): its base name, or the root's name.
func (g *generator) dirName(p string) string {
	if p == "." {
		return g.root
	}
	return path.Base(p)
}

func isNodeGraph(spec *jvalue) bool {
	s := spec.stringOr("")
	if spec != nil && spec.kind == 'o' {
		s = spec.get("path").stringOr("")
	}
	file, _, _ := strings.Cut(s, ":")
	switch path.Ext(file) {
	case ".ts", ".mts", ".cts", ".js", ".mjs", ".cjs":
		return true
	}
	return false
}

// validate applies the CLI's validate_config: defaults and the checks
// that matter for the Dockerfile.
func (g *generator) validate() error {
	graphs := g.cfg.get("graphs")
	if graphs == nil || graphs.kind != 'o' || len(graphs.obj) == 0 {
		return configErr(`no graphs found in config: add at least one graph, e.g. "graphs": {"agent": "./my_agent/graph.py:graph"}`)
	}
	someNode, somePython := false, false
	for _, m := range graphs.obj {
		if isNodeGraph(m.val) {
			someNode = true
		} else {
			somePython = true
		}
	}
	g.nodeVersion = g.cfg.get("node_version").stringOr("")
	if g.nodeVersion == "" && g.cfg.get("node_version").isNone() && someNode {
		g.nodeVersion = DefaultNodeVersion
	}
	g.pythonVersion = g.cfg.get("python_version").stringOr("")
	if g.pythonVersion == "" && g.cfg.get("python_version").isNone() && somePython {
		g.pythonVersion = DefaultPythonVersion
	}
	g.distro = g.cfg.get("image_distro").stringOr(defaultImageDistro)
	if g.distro == "bullseye" {
		return configErr("bullseye images were deprecated in version 0.4.13: use 'bookworm' or 'debian'")
	}
	if !slices.Contains([]string{"debian", "wolfi", "bookworm"}, g.distro) {
		return configErr("invalid image_distro %q: must be one of 'debian', 'wolfi', 'bookworm'", g.distro)
	}
	if src := g.cfg.get("source"); !src.isNone() {
		return configErr(`"source" (uv-managed projects) is not supported by this builder; list dependencies instead`)
	}
	if g.cfg.get("_INTERNAL_docker_tag").truthy() && g.cfg.get("api_version").truthy() {
		return configErr("cannot specify both _INTERNAL_docker_tag and api_version")
	}
	for _, k := range []string{"dependencies", "dockerfile_lines"} {
		v := g.cfg.get(k)
		if v.isNone() {
			continue
		}
		if v.kind != 'a' {
			return configErr("%s must be a list of strings", k)
		}
		for _, e := range v.arr {
			if e.kind != 's' {
				return configErr("%s must be a list of strings", k)
			}
			if k == "dependencies" {
				g.deps = append(g.deps, e.str)
			} else {
				g.dockerfileLines = append(g.dockerfileLines, e.str)
			}
		}
	}
	if g.pythonVersion != "" {
		parts := strings.Split(strings.SplitN(g.pythonVersion, "-", 2)[0], ".")
		if len(parts) != 2 || !digits(parts[0]) || !digits(parts[1]) {
			return configErr("invalid python_version %q: use 'major.minor'", g.pythonVersion)
		}
		if versionLess(parts, []string{"3", "11"}) {
			return configErr("python_version %s is not supported: the minimum is 3.11", g.pythonVersion)
		}
		if len(g.deps) == 0 {
			return configErr("no dependencies found in config: add at least one, e.g. \"dependencies\": [\".\"]")
		}
	}
	if g.nodeVersion != "" {
		major, _, _ := strings.Cut(g.nodeVersion, ".")
		if !digits(major) || versionLess([]string{major}, []string{"20"}) {
			return configErr("node_version %s is not supported: the minimum is 20", g.nodeVersion)
		}
	}
	if pi := g.cfg.get("pip_installer").stringOr("auto"); pi != "auto" && pi != "pip" && pi != "uv" {
		return configErr("invalid pip_installer %q", pi)
	}
	for _, c := range []string{g.o.InstallCommand, g.o.BuildCommand} {
		if err := CheckCommand(c); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	return nil
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// versionLess compares dotted numeric versions.
func versionLess(a, b []string) bool {
	for i := range min(len(a), len(b)) {
		x, y := strings.TrimLeft(a[i], "0"), strings.TrimLeft(b[i], "0")
		if len(x) != len(y) {
			return len(x) < len(y)
		}
		if x != y {
			return x < y
		}
	}
	return len(a) < len(b)
}

func (g *generator) isNode() bool { return g.nodeVersion != "" && g.pythonVersion == "" }

// baseImage is the CLI's default_base_image, with the option first.
func (g *generator) baseImage() string {
	if g.o.BaseImage != "" {
		return g.o.BaseImage
	}
	if b := g.cfg.get("base_image").stringOr(""); b != "" {
		return b
	}
	if g.isNode() {
		return "langchain/langgraphjs-api"
	}
	return "langchain/langgraph-api"
}

// imageTag is the CLI's docker_tag.
func (g *generator) imageTag(base string) string {
	distroTag := ""
	if g.distro != defaultImageDistro {
		distroTag = "-" + g.distro
	}
	if t := g.cfg.get("_INTERNAL_docker_tag").stringOr(""); t != "" {
		return base + ":" + t
	}
	lang, version := "py", g.pythonVersion
	if g.isNode() {
		lang, version = "node", g.nodeVersion
	}
	vdt := version + distroTag
	if api := g.cfg.get("api_version").stringOr(""); api != "" {
		return base + ":" + api + "-" + lang + vdt
	}
	if strings.Contains(base, "/langgraph-server") && !strings.Contains(base, vdt) {
		return base + "-" + lang + vdt
	}
	return base + ":" + vdt
}

// envLines is the CLI's _build_runtime_env_vars.
func (g *generator) envLines() []string {
	var out []string
	for _, k := range []struct{ key, env string }{{"store", "LANGGRAPH_STORE"}, {"auth", "LANGGRAPH_AUTH"},
		{"encryption", "LANGGRAPH_ENCRYPTION"}, {"http", "LANGGRAPH_HTTP"}, {"webhooks", "LANGGRAPH_WEBHOOKS"},
		{"checkpointer", "LANGGRAPH_CHECKPOINTER"}, {"ui", "LANGGRAPH_UI"}, {"ui_config", "LANGGRAPH_UI_CONFIG"}} {
		if v := g.cfg.get(k.key); !v.isNone() {
			out = append(out, "ENV "+k.env+"='"+v.dumps()+"'")
		}
	}
	return append(out, "ENV LANGSERVE_GRAPHS='"+g.cfg.get("graphs").dumps()+"'")
}

// nodeInstallCommand is the CLI's _get_node_pm_install_cmd for the
// directory dir.
func (g *generator) nodeInstallCommand(dir string) string {
	has := func(name string) bool {
		st, err := fs.Stat(g.fsys, path.Join(dir, name))
		return err == nil && st.Mode().IsRegular()
	}
	switch {
	case has("yarn.lock"):
		return "yarn install --frozen-lockfile"
	case has("pnpm-lock.yaml"):
		return "pnpm i --frozen-lockfile"
	case has("package-lock.json"):
		return "npm ci"
	case has("bun.lockb"):
		return "bun i"
	}
	var pkg struct {
		PackageManager any `json:"packageManager"`
		DevEngines     struct {
			PackageManager struct {
				Name any `json:"name"`
			} `json:"packageManager"`
		} `json:"devEngines"`
	}
	name := ""
	if data, err := fs.ReadFile(g.fsys, path.Join(dir, "package.json")); err == nil && json.Unmarshal(data, &pkg) == nil {
		if s, ok := pkg.PackageManager.(string); ok && s != "" {
			name, _, _ = strings.Cut(strings.TrimLeft(s, "^"), "@")
		} else if s, ok := pkg.DevEngines.PackageManager.Name.(string); ok {
			name = s
		}
	}
	switch name {
	case "yarn":
		return "yarn install"
	case "pnpm":
		return "pnpm i"
	case "bun":
		return "bun i"
	}
	return "npm i"
}

const jsPrebuild = `RUN (test ! -f /api/langgraph_api/js/build.mts && echo "Prebuild script not found, skipping") || tsx /api/langgraph_api/js/build.mts`

// node is the CLI's node_config_to_docker; with an install or build
// command the build context is the root (the CLI's build_context).
func (g *generator) node() (*Dockerfile, error) {
	image := g.imageTag(g.baseImage())
	monorepo := g.o.InstallCommand != "" || g.o.BuildCommand != ""
	installRoot, ctx := g.cfgDir, g.cfgDir
	if monorepo {
		installRoot, ctx = ".", "."
	}
	install := g.o.InstallCommand
	if install == "" {
		install = g.nodeInstallCommand(installRoot)
	}
	fauxPath := "/deps/" + g.dirName(g.cfgDir)
	addTo, installDir, build := fauxPath, fauxPath, jsPrebuild
	if monorepo {
		addTo = "/deps/" + g.root
		installDir = addTo
		fauxPath = addTo
		if g.cfgDir != "." {
			fauxPath = addTo + "/" + g.cfgDir
		}
		if g.o.BuildCommand != "" {
			build = "RUN " + g.o.BuildCommand
		}
	}
	lines := []string{
		"FROM " + image, "",
		strings.Join(g.dockerfileLines, "\n"), "",
		"ADD . " + addTo, "",
		"WORKDIR " + installDir, "",
		"RUN " + install, "",
		strings.Join(g.envLines(), "\n"), "",
		"WORKDIR " + fauxPath, "",
		build,
	}
	return &Dockerfile{Text: strings.Join(lines, "\n"), Context: ctx}, nil
}

// localDep is a local dependency of a Python project.
type localDep struct {
	dir  string // relative to the root
	ref  string // as written in the config
	name string // the directory's name
	dest string // real: the container name; faux: the container path
}

type localDeps struct {
	pipReqs    [][2]string // source path relative to the config dir, destination
	real, faux []localDep
	workingDir string
}

func (g *generator) isDir(p string) bool {
	st, err := fs.Stat(g.fsys, p)
	return err == nil && st.IsDir()
}

func (g *generator) isFile(p string) bool {
	st, err := fs.Stat(g.fsys, p)
	return err == nil && !st.IsDir()
}

// under reports whether p is dir or inside it (both relative to the root).
func under(p, dir string) (string, bool) {
	if dir == "." {
		return p, true
	}
	if p == dir {
		return ".", true
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	return rest, ok
}

// resolve joins a path of the config to the config's directory; ok is
// false when it leaves the root.
func (g *generator) resolve(p string) (string, bool) {
	r := path.Join(g.cfgDir, p)
	return r, fs.ValidPath(r)
}

// assembleLocalDeps is the CLI's _assemble_local_deps.
func (g *generator) assembleLocalDeps() (*localDeps, error) {
	ld := &localDeps{}
	reserved := map[string]bool{}
	for _, n := range reservedNames {
		reserved[n] = true
	}
	checkReserved := func(name, ref string) error {
		if reserved[name] {
			return configErr("package name '%s' used in local dep '%s' is reserved: rename the directory", name, ref)
		}
		reserved[name] = true
		return nil
	}
	counter := map[string]int{}
	for _, dep := range g.deps {
		if !strings.HasPrefix(dep, ".") {
			continue
		}
		dir, ok := g.resolve(dep)
		if !ok {
			return nil, configErr("local dependency %q is outside the repository", dep)
		}
		if !g.isDir(dir) {
			if g.isFile(dir) {
				return nil, configErr("local dependency must be a directory: %s", dep)
			}
			return nil, configErr("could not find local dependency: %s", dep)
		}
		if _, in := under(dir, g.cfgDir); !in {
			return nil, configErr("local dependency %q is outside the directory of the config: the CLI builds it with an extra BuildKit context, which this builder does not support", dep)
		}
		entries, err := fs.ReadDir(g.fsys, dir)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", dir, err)
		}
		files := map[string]bool{}
		for _, e := range entries {
			files[e.Name()] = true
		}
		name := g.dirName(dir)
		if files["pyproject.toml"] || files["setup.py"] {
			cname := name
			if counter[cname] > 0 {
				cname = fmt.Sprintf("%s_%d", cname, counter[cname])
			}
			counter[cname]++
			ld.real = append(ld.real, localDep{dir: dir, ref: dep, name: name, dest: cname})
			if dep == "." {
				ld.workingDir = "/deps/" + cname
			}
			continue
		}
		var cpath string
		if files["__init__.py"] {
			if strings.Contains(name, "-") {
				return nil, configErr("package name '%s' contains a hyphen: rename the directory to use it as a flat-layout package", name)
			}
			if err := checkReserved(name, dep); err != nil {
				return nil, err
			}
			cpath = "/deps/outer-" + name + "/" + name
		} else {
			cpath = "/deps/outer-" + name + "/src"
			for _, e := range entries {
				if !e.IsDir() || e.Name() == "__pycache__" || strings.HasPrefix(e.Name(), ".") {
					continue
				}
				sub, err := fs.ReadDir(g.fsys, path.Join(dir, e.Name()))
				if err != nil {
					continue
				}
				for _, s := range sub {
					if strings.HasSuffix(s.Name(), ".py") {
						if err := checkReserved(e.Name(), dep); err != nil {
							return nil, err
						}
						break
					}
				}
			}
		}
		ld.faux = append(ld.faux, localDep{dir: dir, ref: dep, name: name, dest: cpath})
		if dep == "." {
			ld.workingDir = cpath
		}
		if files["requirements.txt"] {
			rel, _ := under(path.Join(dir, "requirements.txt"), g.cfgDir)
			ld.pipReqs = append(ld.pipReqs, [2]string{rel, cpath + "/requirements.txt"})
		}
	}
	return ld, nil
}

// containerPath maps a file of the project (relative to the root) into the
// image: real packages first unless fauxFirst, as the CLI's different
// _update_*_path functions do.
func (ld *localDeps) containerPath(file string, fauxFirst bool) (string, bool) {
	real := func() (string, bool) {
		for _, d := range ld.real {
			if rest, ok := under(file, d.dir); ok {
				return "/deps/" + d.name + "/" + rest, true
			}
		}
		return "", false
	}
	faux := func() (string, bool) {
		for _, d := range ld.faux {
			if rest, ok := under(file, d.dir); ok {
				return d.dest + "/" + rest, true
			}
		}
		return "", false
	}
	if fauxFirst {
		if p, ok := faux(); ok {
			return p, true
		}
		return real()
	}
	if p, ok := real(); ok {
		return p, true
	}
	return faux()
}

// rewriteImport maps "<file path>:<attr>" to its path in the image, the
// way the CLI's _update_graph_paths and _update_http_app_path do.
func (g *generator) rewriteImport(what, spec string, ld *localDeps) (string, error) {
	module, attr, _ := strings.Cut(spec, ":")
	if module == "" || attr == "" {
		return "", configErr("import string %q must be in format \"<module>:<attribute>\"", spec)
	}
	if !strings.ContainsAny(module, `/\`) {
		return spec, nil
	}
	file, ok := g.resolve(strings.ReplaceAll(module, `\`, "/"))
	if !ok || !g.isFile(file) {
		if ok && g.isDir(file) {
			return "", configErr("%s module must be a file: %s", what, module)
		}
		return "", configErr("could not find %s module: %s", what, module)
	}
	p, found := ld.containerPath(file, false)
	if !found {
		return "", configErr("module '%s' not found in 'dependencies' list: add its containing package to 'dependencies'", spec)
	}
	return p + ":" + attr, nil
}

// rewriteRelative maps the "./file.py:attr" paths of auth, encryption and
// checkpointer, as the CLI's _update_auth_path does (faux packages first).
func (g *generator) rewriteRelative(what string, conf *jvalue, key string, ld *localDeps) error {
	if !conf.truthy() || conf.kind != 'o' {
		return nil
	}
	spec := conf.get(key).stringOr("")
	if spec == "" {
		return nil
	}
	module, attr, sep := strings.Cut(spec, ":")
	if !sep || !strings.HasPrefix(module, ".") {
		return nil
	}
	file, ok := g.resolve(module)
	if !ok || !g.isFile(file) {
		if ok && g.isDir(file) {
			return configErr("%s path must be a file: %s", what, module)
		}
		return configErr("%s file not found: %s (from %s)", what, module, spec)
	}
	p, found := ld.containerPath(file, true)
	if !found {
		return configErr("%s file '%s' not covered by dependencies: add its parent directory to 'dependencies'", what, module)
	}
	conf.set(key, &jvalue{kind: 's', str: p + ":" + attr})
	return nil
}

// imageSupportsUV is the CLI's _image_supports_uv.
var semverTag = regexp.MustCompile(`:(\d+(?:\.\d+)?(?:\.\d+)?)(?:-|$)`)

func imageSupportsUV(base string) bool {
	if base == "langchain/langgraph-trial" {
		return false
	}
	m := semverTag.FindStringSubmatch(base)
	if m == nil {
		return true
	}
	parts := strings.Split(m[1], ".")
	return !versionLess(parts, []string{"0", "2", "47"})
}

var buildTools = []string{"pip", "setuptools", "wheel"}

// toolsToUninstall is the CLI's get_build_tools_to_uninstall.
func (g *generator) toolsToUninstall() ([]string, error) {
	keep := g.cfg.get("keep_pkg_tools")
	if !keep.truthy() {
		return buildTools, nil
	}
	if keep.kind == 'b' {
		return nil, nil
	}
	if keep.kind != 'a' {
		return nil, configErr("invalid value for keep_pkg_tools: expected true or a list of pip, setuptools, wheel")
	}
	kept := map[string]bool{}
	for _, e := range keep.arr {
		if e.kind != 's' || !slices.Contains(buildTools, e.str) {
			return nil, configErr("invalid build tool in keep_pkg_tools: expected pip, setuptools or wheel")
		}
		kept[e.str] = true
	}
	var out []string
	for _, t := range buildTools {
		if !kept[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// cleanupLines is the CLI's _get_pip_cleanup_lines.
func cleanupLines(installCmd string, uninstall []string, installer string) string {
	cmds := []string{`# -- Ensure user deps didn't inadvertently overwrite langgraph-api
RUN mkdir -p /api/langgraph_api /api/langgraph_runtime /api/langgraph_license && touch /api/langgraph_api/__init__.py /api/langgraph_runtime/__init__.py /api/langgraph_license/__init__.py
RUN PYTHONDONTWRITEBYTECODE=1 ` + installCmd + ` --no-cache-dir --no-deps -e /api
# -- End of ensuring user deps didn't inadvertently overwrite langgraph-api --
# -- Removing build deps from the final image ~<:===~~~ --`}
	if len(uninstall) > 0 {
		sorted := slices.Sorted(slices.Values(uninstall))
		packs := strings.Join(sorted, " ")
		cmds = append(cmds, "RUN pip uninstall -y "+packs)
		var rm, wolfi []string
		for _, p := range uninstall {
			rm = append(rm, "/usr/local/lib/python*/site-packages/"+p+"*")
			wolfi = append(wolfi, "/usr/lib/python*/site-packages/"+p+"*")
		}
		rms, wolfis := strings.Join(rm, " "), strings.Join(wolfi, " ")
		if slices.Contains(uninstall, "pip") {
			rms += ` && find /usr/local/bin -name "pip*" -delete || true`
			wolfis += ` && find /usr/bin -name "pip*" -delete || true`
		}
		cmds = append(cmds, "RUN rm -rf "+rms, "RUN rm -rf "+wolfis)
		if installer == "uv" {
			cmds = append(cmds, "RUN uv pip uninstall --system "+packs+" && rm /usr/bin/uv /usr/bin/uvx")
		}
	} else if installer == "uv" {
		cmds = append(cmds, "RUN rm /usr/bin/uv /usr/bin/uvx\n# -- End of build deps removal --")
	}
	return strings.Join(cmds, "\n")
}

// shellQuote is Python's shlex.quote.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// python is the CLI's python_config_to_docker.
func (g *generator) python() (*Dockerfile, error) {
	base := g.baseImage()
	uninstall, err := g.toolsToUninstall()
	if err != nil {
		return nil, err
	}
	installer := g.cfg.get("pip_installer").stringOr("auto")
	if installer == "auto" {
		installer = "pip"
		if imageSupportsUV(base) {
			installer = "uv"
		}
	}
	installCmd := "pip install"
	if installer == "uv" {
		installCmd = "uv pip install --system"
	}
	baseInstall := "PYTHONDONTWRITEBYTECODE=1 " + installCmd + " --no-cache-dir -c /api/constraints.txt"
	localInstall, globalInstall, pipConfig := baseInstall, baseInstall, ""
	if pc := g.cfg.get("pip_config_file"); pc.truthy() {
		localInstall = "PIP_CONFIG_FILE=/pipconfig.txt " + localInstall
		globalInstall = "PIP_CONFIG_FILE=/pipconfig.txt " + globalInstall
		pipConfig = "ADD " + pc.stringOr("") + " /pipconfig.txt"
	}
	var pypi []string
	for _, d := range g.deps {
		if !strings.HasPrefix(d, ".") {
			pypi = append(pypi, d)
		}
	}
	ld, err := g.assembleLocalDeps()
	if err != nil {
		return nil, err
	}
	graphs := g.cfg.get("graphs")
	for _, m := range graphs.obj {
		spec := m.val.stringOr("")
		switch {
		case m.val.kind == 'o':
			p := m.val.get("path")
			if p == nil {
				return nil, configErr("graph '%s' must contain a 'path' key if it is a dictionary", m.key)
			}
			spec = p.stringOr("")
		case m.val.kind != 's':
			return nil, configErr("graph '%s' must be a string or a dictionary with a 'path' key", m.key)
		}
		ns, err := g.rewriteImport("local", spec, ld)
		if err != nil {
			return nil, err
		}
		if ns != spec {
			if m.val.kind == 'o' {
				m.val.set("path", &jvalue{kind: 's', str: ns})
			} else {
				m.val.str = ns
			}
		}
	}
	for _, r := range []struct{ what, key string }{{"auth", "auth"}, {"encryption", "encryption"}, {"checkpointer", "checkpointer"}} {
		if err := g.rewriteRelative(r.what, g.cfg.get(r.key), "path", ld); err != nil {
			return nil, err
		}
	}
	if h := g.cfg.get("http"); h.truthy() && h.kind == 'o' {
		if app := h.get("app").stringOr(""); app != "" {
			ns, err := g.rewriteImport("HTTP app", app, ld)
			if err != nil {
				return nil, err
			}
			h.set("app", &jvalue{kind: 's', str: ns})
		}
	}

	pipPkgs := ""
	if len(pypi) > 0 {
		pipPkgs = "RUN " + localInstall + " " + strings.Join(pypi, " ")
	}
	pipReqs := ""
	if len(ld.pipReqs) > 0 {
		var adds, rs []string
		for _, r := range ld.pipReqs {
			adds = append(adds, "ADD "+r[0]+" "+r[1])
			rs = append(rs, "-r "+r[1])
		}
		pipReqs = "# -- Installing local requirements --\n" + strings.Join(adds, "\n") +
			"\nRUN " + localInstall + " " + strings.Join(rs, " ") + "\n# -- End of local requirements install --"
	}
	var faux []string
	for _, d := range ld.faux {
		name := d.name
		faux = append(faux, "# -- Adding non-package dependency "+name+" --\nADD "+d.ref+" "+d.dest+`
RUN set -ex && \
    for line in '[project]' \
                'name = "`+name+`"' \
                'version = "0.1"' \
                '[tool.setuptools.package-data]' \
                '"*" = ["**/*"]' \
                '[build-system]' \
                'requires = ["setuptools>=61"]' \
                'build-backend = "setuptools.build_meta"'; do \
        echo "$line" >> `+shellQuote("/deps/outer-"+name+"/pyproject.toml")+`; \
    done
# -- End of non-package dependency `+name+" --")
	}
	var real []string
	for _, d := range ld.real {
		real = append(real, "# -- Adding local package "+d.ref+" --\nADD "+d.ref+" /deps/"+d.dest+"\n# -- End of local package "+d.ref+" --")
	}
	js := (g.cfg.get("ui").truthy() || g.cfg.get("node_version").truthy()) && ld.workingDir != ""
	installNode := ""
	if js {
		installNode = "RUN /storage/install-node.sh"
	}
	var installs []string
	for _, s := range []string{installNode, pipConfig, pipPkgs, pipReqs, strings.Join(real, "\n"), strings.Join(faux, "\n\n")} {
		if s != "" {
			installs = append(installs, s)
		}
	}
	jsInst := ""
	if js {
		nv := g.cfg.get("node_version").stringOr("")
		if nv == "" {
			nv = DefaultNodeVersion
		}
		jsInst = strings.Join([]string{"# -- Installing JS dependencies --", "ENV NODE_VERSION=" + nv,
			"WORKDIR " + ld.workingDir, "RUN " + g.nodeInstallCommand(g.cfgDir) + " && tsx /api/langgraph_api/js/build.mts",
			"# -- End of JS dependencies install --"}, "\n")
	}
	workdir := ""
	if ld.workingDir != "" {
		workdir = "WORKDIR " + ld.workingDir
	}
	lines := []string{
		"FROM " + g.imageTag(base), "",
		strings.Join(g.dockerfileLines, "\n"), "",
		strings.Join(installs, "\n\n"), "",
		"# -- Installing all local dependencies --",
		`RUN for dep in /deps/*; do             echo "Installing $dep";             if [ -d "$dep" ]; then                 echo "Installing $dep";                 (cd "$dep" && ` + globalInstall + ` -e .);             fi;         done`,
		"# -- End of local dependencies install --",
		strings.Join(g.envLines(), "\n"), "",
		jsInst, "",
		cleanupLines(installCmd, uninstall, installer), "",
		workdir,
	}
	return &Dockerfile{Text: strings.Join(lines, "\n"), Context: g.cfgDir}, nil
}
