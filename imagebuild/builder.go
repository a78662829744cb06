package imagebuild

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/egress"
)

// Labels put on every image a Builder builds: the keys package
// deploydocker puts on its containers (containers inherit an image's
// labels), so that what was built for a deployment can be found and
// removed with it.
const (
	LabelTenant     = "io.deployplane.tenant"
	LabelDeployment = "io.deployplane.deployment"
	LabelRevision   = "io.deployplane.revision"
)

// Defaults of Options (the checkout limits are those of UnpackLimits
// too).
const (
	DefaultRepository       = "deployplane"
	DefaultConfigPath       = "langgraph.json"
	DefaultCloneTimeout     = 5 * time.Minute
	DefaultBuildTimeout     = 30 * time.Minute
	DefaultMaxRepoBytes     = 1 << 30
	DefaultMaxCheckoutBytes = 1 << 30
	DefaultMaxFiles         = 100_000
	DefaultMaxLogLine       = 4096
	DefaultNetworkMode      = "bridge"
	// DefaultMaxDepth bounds the names in a path: "a/b/c" is 3 levels
	// deep.
	DefaultMaxDepth = 64
	// DefaultMaxPathBytes bounds a path and a link's target, as Linux's
	// PATH_MAX does.
	DefaultMaxPathBytes = 4096
)

// generatedDockerfile is the name the generated Dockerfile has in the
// build context; like the docker CLI's for a Dockerfile from stdin, it is
// listed in the context's .dockerignore so that the daemon drops it from
// the context once read (ADD . does not copy it).
const generatedDockerfile = ".deployplane.Dockerfile"

// ErrBuild is matched (errors.Is) by the errors of an image build that
// failed: a Dockerfile step, the daemon refusing the build, or a build
// context over the limits.
var ErrBuild = errors.New("build failed")

// Options configure a Builder. Nil means defaults; zero fields take their
// default.
type Options struct {
	// BaseImage is the base image of generated Dockerfiles (see
	// DockerfileOptions.BaseImage). Empty: the project's base_image or
	// the CLI's default (langchain/langgraph-api).
	BaseImage string
	// Repository prefixes image references: <Repository>/<deployment
	// id>:<revision id>. Default DefaultRepository.
	Repository string
	// Egress is the policy every clone over HTTP goes through (https to
	// public addresses only, unless the policy allows a host). Default:
	// the strict policy, egress.New(nil).
	Egress *egress.Policy
	// AllowLocalRepositories lets repo_url be a local path or a file://
	// URL, served by go-git's in-process upload-pack. Meant for tests and
	// for operators who mirror repositories on the server's disk: any
	// tenant could then build any repository the server can read.
	AllowLocalRepositories bool
	// InstallationToken returns a GitHub App installation token
	// (githubapp.App.InstallationToken). When set, repositories of
	// deployments with an integration_id are cloned with it, as HTTP
	// basic auth x-access-token:<token>; otherwise they are cloned
	// without credentials.
	InstallationToken func(ctx context.Context, installationID int64) (string, error)
	// InstallationID maps a deployment's integration_id to its GitHub App
	// installation id (controlplane.Integration.InstallationID);
	// InstallationIDs makes one. Needed with InstallationToken: Work
	// carries the integration_id only.
	InstallationID func(ctx context.Context, tenant, integrationID string) (int64, error)
	// CloneTimeout bounds a clone; default DefaultCloneTimeout.
	CloneTimeout time.Duration
	// BuildTimeout bounds an image build; default DefaultBuildTimeout.
	BuildTimeout time.Duration
	// MaxRepoBytes bounds the pack a clone downloads; default
	// DefaultMaxRepoBytes.
	MaxRepoBytes int64
	// MaxCheckoutBytes bounds the bytes of the files checked out or
	// unpacked (and so the build context); default
	// DefaultMaxCheckoutBytes.
	MaxCheckoutBytes int64
	// MaxFiles bounds the entries checked out or unpacked: files,
	// directories (a commit's tree names each one; a tarball's implied
	// directories count too) and links; default DefaultMaxFiles.
	MaxFiles int
	// MaxDepth bounds the levels of a path checked out or unpacked
	// ("a/b/f" is 3 deep); default DefaultMaxDepth.
	MaxDepth int
	// MaxPathBytes bounds the bytes of a path checked out or unpacked
	// (below the repository's or the tarball's root) and of a symbolic
	// link's target; default DefaultMaxPathBytes.
	MaxPathBytes int
	// MaxLogLine bounds a line handed to Build's log, in bytes (longer
	// lines are cut and marked with "…"); default DefaultMaxLogLine.
	MaxLogLine int
	// TempDir is where clones are made (and removed); default
	// os.TempDir().
	TempDir string
	// Tarballs opens the source tarballs of internal_source revisions
	// (package uploads' Service). Nil: such a revision fails its build
	// saying that this server keeps no tarballs.
	Tarballs Tarballs
	// NetworkMode is the Docker network a build's RUN steps run on;
	// default DefaultNetworkMode, "bridge": Docker's default bridge, which
	// reaches outside networks (package indexes) but not what listens on
	// the daemon host's loopback (this control plane's API, its metrics,
	// its registry). "none": no network at all, for projects whose build
	// needs none. "host": the daemon host's own network, its loopback
	// services included, for daemons without a bridge network (the
	// tenant's Dockerfile then reaches everything the host does); the
	// egress policy applies to clones, never to RUN steps. Any other
	// value is the name of a network of the daemon's. The build log says
	// which network the steps ran on.
	NetworkMode string
}

// Builder builds the images of github and internal_source revisions: it
// clones the repository or unpacks the uploaded tarball, finds or
// generates the Dockerfile, and builds it through the Docker Engine API.
// It is safe for concurrent use.
type Builder struct {
	docker *client.Client
	o      Options
	egress *egress.Policy
}

// New returns a Builder that builds on docker (a client made with
// client.WithAPIVersionNegotiation, so that older daemons answer).
//
// docker may be nil for a Builder that only checks out (Checkout).
func New(docker *client.Client, opts *Options) (*Builder, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Repository == "" {
		o.Repository = DefaultRepository
	}
	o.Repository = strings.TrimRight(o.Repository, "/")
	if o.CloneTimeout <= 0 {
		o.CloneTimeout = DefaultCloneTimeout
	}
	if o.BuildTimeout <= 0 {
		o.BuildTimeout = DefaultBuildTimeout
	}
	if o.MaxRepoBytes <= 0 {
		o.MaxRepoBytes = DefaultMaxRepoBytes
	}
	if o.MaxCheckoutBytes <= 0 {
		o.MaxCheckoutBytes = DefaultMaxCheckoutBytes
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxPathBytes <= 0 {
		o.MaxPathBytes = DefaultMaxPathBytes
	}
	if o.MaxLogLine <= 0 {
		o.MaxLogLine = DefaultMaxLogLine
	}
	if o.NetworkMode == "" {
		o.NetworkMode = DefaultNetworkMode
	}
	if o.InstallationToken != nil && o.InstallationID == nil {
		return nil, errors.New("imagebuild: Options.InstallationToken needs Options.InstallationID")
	}
	b := &Builder{docker: docker, o: o, egress: o.Egress}
	if b.egress == nil {
		p, err := egress.New(nil)
		if err != nil {
			return nil, err
		}
		b.egress = p
	}
	return b, nil
}

// ImageRef is the reference Build tags the image of a revision with.
func (b *Builder) ImageRef(deploymentID, revisionID string) string {
	return b.o.Repository + "/" + strings.ToLower(deploymentID) + ":" + revisionID
}

// Build builds the image of a github or internal_source revision: it
// clones source_config.repo_url at source_revision_config.repo_ref (or at
// repo_commit_sha when the revision has one: a push or a redeploy), or
// unpacks the revision's source_tarball_path (read through
// Options.Tarballs, within the limits of Unpack), uses the Dockerfile
// beside graph_config_path (default langgraph.json) or generates the one
// `langgraph dockerfile` writes, and builds it on the daemon. It returns
// the image reference (ImageRef) and the commit built ("" for a tarball).
// Every step and every line of the daemon's output goes to log (which
// may be nil), cut to Options.MaxLogLine. Errors match ErrClone,
// ErrTarball, ErrConfig or ErrBuild, and their text is meant for the
// revision's status_message; a cancelled ctx returns its cause. When the
// clone succeeded and a later step failed, commitSHA is still the commit
// that was to be built.
func (b *Builder) Build(ctx context.Context, w *controlplane.Work, log func(line string)) (image, commitSHA string, err error) {
	emit := func(line string) {
		if log != nil {
			log(b.cut(line))
		}
	}
	logf := func(format string, args ...any) { emit(fmt.Sprintf(format, args...)) }
	var src *source
	if w.Deployment.Source != controlplane.SourceInternalSource {
		if src, err = sourceOf(w); err != nil {
			return "", "", err
		}
	}
	configPath := deref(w.Revision.SourceRevisionConfig.GraphConfigPath)
	if configPath == "" {
		configPath = deref(w.Revision.SourceRevisionConfig.LanggraphConfigPath)
	}
	if configPath == "" {
		configPath = DefaultConfigPath
	}
	configPath = path.Clean(strings.TrimPrefix(configPath, "./"))
	if !fs.ValidPath(configPath) {
		return "", "", fmt.Errorf("%w: graph_config_path %q is not a path inside the repository", ErrConfig, configPath)
	}
	if b.docker == nil {
		return "", "", errors.New("imagebuild: Build needs a Docker client (New was given nil)")
	}
	tmp, err := os.MkdirTemp(b.o.TempDir, "imagebuild-")
	if err != nil {
		return "", "", fmt.Errorf("imagebuild: %w", err)
	}
	defer os.RemoveAll(tmp)
	var c *cloned
	var name string
	if src == nil {
		// internal_source: the project is the revision's tarball, its
		// root named after the deployment (langgraph deploy's default
		// name is the project directory's).
		name = w.Deployment.Name
		if c, err = b.unpackWork(ctx, w, filepath.Join(tmp, "src", name), logf); err != nil {
			return "", "", err
		}
	} else {
		name = repoName(src.url)
		if c, err = b.checkoutWork(ctx, w, src, filepath.Join(tmp, "git"), filepath.Join(tmp, "src", name), logf); err != nil {
			return "", "", err
		}
		logf("Checked out %s: %d files, %d bytes", c.commit, c.files, c.bytes)
	}

	root, err := os.OpenRoot(c.dir)
	if err != nil {
		return "", c.commit, fmt.Errorf("imagebuild: %w", err)
	}
	defer root.Close()
	ctxDir, dockerfile, generated := path.Dir(configPath), "Dockerfile", ""
	if st, err := root.Lstat(path.Join(ctxDir, "Dockerfile")); err == nil && st.Mode().IsRegular() {
		logf("Building with the repository's %s", path.Join(ctxDir, "Dockerfile"))
	} else {
		df, err := GenerateDockerfile(root.FS(), name, configPath, &DockerfileOptions{BaseImage: b.o.BaseImage,
			InstallCommand: deref(w.InstallCommand), BuildCommand: deref(w.BuildCommand)})
		if err != nil {
			return "", c.commit, err
		}
		ctxDir, dockerfile, generated = df.Context, generatedDockerfile, df.Text
		logf("No Dockerfile beside %s: generated the one `langgraph dockerfile` writes (build context %s)", configPath, ctxDir)
		for l := range strings.SplitSeq(generated, "\n") {
			if strings.HasPrefix(l, "FROM ") {
				logf("Dockerfile: %s", l)
			}
		}
	}
	image = b.ImageRef(w.Deployment.ID, w.Revision.ID)
	logf("%s", networkLine(b.o.NetworkMode))
	bctx, cancel := context.WithTimeoutCause(ctx, b.o.BuildTimeout, fmt.Errorf("%w: timed out after %s", ErrBuild, b.o.BuildTimeout))
	defer cancel()
	if err := b.build(bctx, root, ctxDir, dockerfile, generated, image, w, emit); err != nil {
		if ctx.Err() != nil {
			return "", c.commit, context.Cause(ctx)
		}
		if bctx.Err() != nil {
			return "", c.commit, context.Cause(bctx)
		}
		return "", c.commit, err
	}
	if c.commit == "" {
		logf("Built %s from %s", image, deref(w.Revision.SourceRevisionConfig.SourceTarballPath))
		return image, "", nil
	}
	logf("Built %s from %s", image, c.commit)
	return image, c.commit, nil
}

// networkLine is the build log's line saying what the build steps reach.
func networkLine(mode string) string {
	switch mode {
	case "host":
		return `Build steps run on Docker network "host": the daemon host's own network, its loopback services included`
	case "none":
		return `Build steps run on Docker network "none": no network at all`
	}
	return fmt.Sprintf("Build steps run on Docker network %q", mode)
}

// sourceOf is what w builds.
func sourceOf(w *controlplane.Work) (*source, error) {
	if w.Deployment.Source != controlplane.SourceGitHub {
		return nil, fmt.Errorf("imagebuild: source %q has no repository to build", w.Deployment.Source)
	}
	src := &source{url: deref(w.Deployment.SourceConfig.RepoURL), ref: deref(w.Revision.SourceRevisionConfig.RepoRef),
		commit: deref(w.Revision.SourceRevisionConfig.RepoCommitSHA)}
	if src.url == "" {
		return nil, fmt.Errorf("%w: the deployment has no repo_url", ErrClone)
	}
	return src, nil
}

// Checkout clones the commit w builds into dir (created if missing; it
// must be empty) as Build does, without building: the repository's
// files, without .git. It returns the commit's sha. Errors match ErrClone
// or ErrTooLarge, or are ctx's; after one, dir holds nothing of the
// checkout (and is gone if Checkout made it).
func (b *Builder) Checkout(ctx context.Context, w *controlplane.Work, dir string, log func(line string)) (commitSHA string, err error) {
	logf := func(format string, args ...any) {
		if log != nil {
			log(b.cut(fmt.Sprintf(format, args...)))
		}
	}
	src, err := sourceOf(w)
	if err != nil {
		return "", err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return "", fmt.Errorf("imagebuild: %s is not empty", dir)
	}
	tmp, err := os.MkdirTemp(b.o.TempDir, "imagebuild-git-")
	if err != nil {
		return "", fmt.Errorf("imagebuild: %w", err)
	}
	defer os.RemoveAll(tmp)
	c, err := b.checkoutWork(ctx, w, src, tmp, dir, logf)
	if err != nil {
		return "", err
	}
	return c.commit, nil
}

// checkoutWork clones src with w's credentials, within CloneTimeout.
func (b *Builder) checkoutWork(ctx context.Context, w *controlplane.Work, src *source, gitDir, dir string, logf func(string, ...any)) (*cloned, error) {
	if err := b.credentials(ctx, w, src, logf); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeoutCause(ctx, b.o.CloneTimeout, fmt.Errorf("%w: %s: timed out after %s", ErrClone, src.url, b.o.CloneTimeout))
	defer cancel()
	c, err := b.clone(cctx, src, gitDir, dir, logf)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if cctx.Err() != nil {
			return nil, context.Cause(cctx)
		}
		return nil, err
	}
	return c, nil
}

// credentials sets src.auth from the deployment's integration.
func (b *Builder) credentials(ctx context.Context, w *controlplane.Work, src *source, logf func(string, ...any)) error {
	integ := deref(w.Deployment.SourceConfig.IntegrationID)
	if integ == "" {
		return nil
	}
	if b.o.InstallationToken == nil {
		logf("No GitHub App is configured: cloning without credentials")
		return nil
	}
	id, err := b.o.InstallationID(ctx, w.Tenant, integ)
	if err != nil {
		return fmt.Errorf("%w: the GitHub integration %s: %v", ErrClone, integ, err)
	}
	tok, err := b.o.InstallationToken(ctx, id)
	if err != nil {
		return fmt.Errorf("%w: a token for GitHub App installation %d: %v", ErrClone, id, err)
	}
	src.auth = &githttp.BasicAuth{Username: "x-access-token", Password: tok}
	logf("Cloning as GitHub App installation %d", id)
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// cut bounds a log line.
func (b *Builder) cut(line string) string {
	if len(line) <= b.o.MaxLogLine {
		return line
	}
	n := b.o.MaxLogLine - len("…")
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return line[:n] + "…"
}

// build streams the context to the daemon and its output to emit.
func (b *Builder) build(ctx context.Context, root *os.Root, ctxDir, dockerfile, generated, image string, w *controlplane.Work, emit func(string)) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(b.writeContext(pw, root, ctxDir, dockerfile, generated))
	}()
	defer pr.Close()
	res, err := b.docker.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{image},
		Dockerfile:  dockerfile,
		Remove:      true,
		ForceRemove: true,
		NetworkMode: b.o.NetworkMode,
		Version:     build.BuilderV1,
		Labels:      map[string]string{LabelTenant: w.Tenant, LabelDeployment: w.Deployment.ID, LabelRevision: w.Revision.ID},
	})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("%w: %v", ErrBuild, err)
		}
		return fmt.Errorf("%w: the Docker daemon: %v", ErrBuild, err)
	}
	defer res.Body.Close()
	return b.readOutput(res.Body, emit)
}

// message is one JSON message of the daemon's build output.
type message struct {
	Stream      string `json:"stream"`
	Status      string `json:"status"`
	Progress    string `json:"progress"`
	ID          string `json:"id"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readOutput hands the build output to emit line by line and returns the
// build's error.
func (b *Builder) readOutput(r io.Reader, emit func(string)) error {
	dec := json.NewDecoder(r)
	var partial strings.Builder
	flush := func(text string) {
		for {
			i := strings.IndexByte(text, '\n')
			if i < 0 {
				break
			}
			line := partial.String() + text[:i]
			partial.Reset()
			text = text[i+1:]
			emit(strings.TrimRight(line, "\r"))
		}
		if partial.Len()+len(text) > b.o.MaxLogLine {
			emit(partial.String() + text)
			partial.Reset()
			return
		}
		partial.WriteString(text)
	}
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			if partial.Len() > 0 {
				emit(partial.String())
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%w: reading the daemon's output: %v", ErrBuild, err)
		}
		switch {
		case m.Error != "" || m.ErrorDetail != nil:
			if partial.Len() > 0 {
				emit(partial.String())
			}
			msg := m.Error
			if msg == "" {
				msg = m.ErrorDetail.Message
			}
			emit("ERROR: " + msg)
			return fmt.Errorf("%w: %s", ErrBuild, b.cut(strings.TrimSpace(msg)))
		case m.Stream != "":
			flush(m.Stream)
		case m.Status != "":
			line := m.Status
			if m.ID != "" {
				line = m.ID + ": " + line
			}
			if m.Progress == "" { // progress bars would flood the log
				emit(line)
			}
		}
	}
}

// writeContext writes ctxDir of root as a tar build context: regular
// files, directories and symbolic links, without what its .dockerignore
// excludes, and with the generated Dockerfile when there is one. Like the
// docker CLI, it keeps the Dockerfile and .dockerignore even when
// .dockerignore lists them (the daemon reads them, then drops them).
func (b *Builder) writeContext(w io.Writer, root *os.Root, ctxDir, dockerfile, generated string) error {
	sub, err := root.OpenRoot(ctxDir)
	if err != nil {
		return fmt.Errorf("the build context %s: %w", ctxDir, err)
	}
	defer sub.Close()
	var patterns []string
	if f, err := sub.Open(".dockerignore"); err == nil {
		patterns, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return fmt.Errorf(".dockerignore: %w", err)
		}
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return fmt.Errorf(".dockerignore: %w", err)
	}
	tw := tar.NewWriter(w)
	var total int64
	fsys := sub.FS()
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if p == generatedDockerfile {
			return nil
		}
		if generated != "" && p == ".dockerignore" {
			return nil // written below, with the generated Dockerfile added
		}
		if len(patterns) > 0 && p != dockerfile && p != ".dockerignore" {
			skip, err := pm.MatchesOrParentMatches(p)
			if err != nil {
				return err
			}
			if skip {
				if d.IsDir() && !pm.Exclusions() {
					return fs.SkipDir
				}
				return nil
			}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = sub.Readlink(p); err != nil {
				return err
			}
		case info.IsDir(), info.Mode().IsRegular():
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = p
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		total += info.Size()
		if total > b.o.MaxCheckoutBytes {
			return fmt.Errorf("%w: the build context is over %d bytes", ErrTooLarge, b.o.MaxCheckoutBytes)
		}
		f, err := sub.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, io.LimitReader(f, info.Size()))
		return err
	})
	if err != nil {
		return err
	}
	if generated != "" {
		ignore := strings.Join(append(patterns, generatedDockerfile, ".dockerignore"), "\n") + "\n"
		for _, f := range []struct{ name, body string }{{generatedDockerfile, generated}, {".dockerignore", ignore}} {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg,
				ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, f.body); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// RemoveImages removes every image Build built for a deployment (found by
// its labels), for a deployer's Teardown. Images a container still uses
// are removed too (forced); removing none is not an error.
func (b *Builder) RemoveImages(ctx context.Context, tenant, deploymentID string) error {
	if b.docker == nil {
		return errors.New("imagebuild: RemoveImages needs a Docker client (New was given nil)")
	}
	res, err := b.docker.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).
		Add("label", LabelTenant+"="+tenant, LabelDeployment+"="+deploymentID)})
	if err != nil {
		return fmt.Errorf("imagebuild: listing the images of deployment %s: %w", deploymentID, err)
	}
	var errs []error
	for _, im := range res.Items {
		if _, err := b.docker.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil &&
			!cerrdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("imagebuild: removing the images of deployment %s: %w", deploymentID, err)
	}
	return nil
}
