// Package imagebuild turns a github or internal_source revision into a
// container image: it clones the repository or unpacks the uploaded
// tarball, finds or generates the Dockerfile, and builds it
// through the Docker Engine API. It is shared by the deployers (package
// deploydocker calls it through its Builder interface, and RemoveImages
// through its ImageRemover at a deployment's teardown; cmd/deployplane
// wires one in with -deployer docker) and knows nothing of running
// containers. The log function's lines become the revision's build log.
//
// # Clone
//
// Builder.Build (and Builder.Checkout, which stops after this step)
// clones source_config.repo_url with go-git (pure Go, no git binary), at
// the revision's repo_commit_sha when it has one (a push or a redeploy
// names the commit), otherwise at source_revision_config.repo_ref: a
// branch, a tag (annotated tags are peeled), a full ref name or a full
// commit sha; no ref means the remote's HEAD. Only the wanted commit is
// fetched, with depth 1 when the server supports shallow fetches; a
// server that refuses to send a commit it does not advertise gets one
// more try that fetches every branch and tag. The files are checked out
// through an os.Root into a temporary directory (removed afterwards), so
// no path or symbolic link of the repository reaches outside it; .git is
// not checked out, submodules are skipped. The clone is bounded in time
// (Options.CloneTimeout), in pack bytes (MaxRepoBytes), in checked-out
// bytes (MaxCheckoutBytes) and in entries (MaxFiles).
//
// URLs are https only, through Options.Egress (an egress.Policy: public
// addresses only, checked when connecting, no proxy), unless the policy
// allows a host (a test server, a company's git server). Local paths and
// file:// URLs are refused unless Options.AllowLocalRepositories is set;
// they are served by go-git's in-process upload-pack.
//
// Private repositories: when Options.InstallationToken is set (for
// example githubapp.App.InstallationToken), a deployment with an
// integration_id is cloned with that installation's token, sent as HTTP
// basic auth x-access-token:<token>, the way GitHub documents for App
// installations. controlplane.Work carries the integration_id, not the
// installation id, so Options.InstallationID maps one to the other
// (InstallationIDs(cp) looks them up in the control plane).
//
// # Tarball
//
// An internal_source revision (langgraph deploy --remote) is built from
// the tarball its source_tarball_path names, which Options.Tarballs opens
// (package uploads keeps them). Unpack writes it into a temporary
// directory through an os.Root and refuses, with an ErrTarball error that
// names the entry (the revision's status_message: "source tarball
// refused: entry "../x" has a ".." in its path"), absolute paths, "..",
// entries below a symbolic link, hard links to anything but a file of the
// archive, symbolic links whose target leaves the root, devices and FIFOs.
// Link targets are resolved on the tree as written, through the links
// they pass (x/y -> . makes x/y/../.. the root's parent, not the root),
// once the whole archive is written, so that a later link cannot redirect
// an earlier one. The limits (UnpackLimits; each also matches ErrTooLarge)
// count what the archive implies, not only its headers: at most MaxFiles
// entries and directories their paths imply ("a/b/f" alone writes 3), at
// most MaxCheckoutBytes of files (wire contract section 10: 100,000 and
// 1 GiB; the size is checked against each header before its data is
// decompressed), paths at most 64 levels deep and 4096 bytes long, link
// targets at most 4096 bytes; depth and length are checked on the
// header, before anything is made for it. A refused archive leaves
// nothing behind: Unpack removes what it wrote. The project's root
// directory is named after the deployment (the CLI names paths in the
// image after directories, and langgraph deploy's default deployment name
// is the project directory's). The rest is as for a clone.
//
// # Dockerfile
//
// When a file named Dockerfile sits beside graph_config_path (default
// langgraph.json), it is built with that directory as the build context.
// Otherwise GenerateDockerfile writes the Dockerfile that the langgraph
// CLI's `langgraph dockerfile` writes for that langgraph.json (tested
// against the real CLI's output for Python and JavaScript projects), from
// Options.BaseImage when set (the CLI's --base-image: the image is
// <BaseImage>:<python or node version tag>). For JavaScript projects the
// deployment's install_command and build_command are honoured as
// `langgraph build --install-command ... --build-command ...` does at the
// repository's root: the context is then the repository root, the
// install runs there and the build in the config's directory. What the
// generator does not do is an ErrConfig naming it: local dependencies
// outside the config's directory (the CLI passes those as extra BuildKit
// contexts), "source": {"kind": "uv"} projects, and api_version pins,
// which the CLI resolves against PyPI (here the pin is used as written).
//
// # Build
//
// The build context (the directory, without what its .dockerignore
// excludes, plus the generated Dockerfile) is streamed as a tar to
// POST /build of the daemon, with the classic builder (API 1.41 daemons
// such as Debian's docker.io 20.10 answer), on the network
// Options.NetworkMode names (default Docker's "bridge", which keeps RUN
// steps away from what listens on the daemon host's loopback; "none" for
// no network; "host" only where the operator says so, since RUN steps
// then reach the host's loopback services; the build log says which),
// and the labels
// LabelTenant, LabelDeployment and LabelRevision, so that a deployer can
// find what it built (Builder.RemoveImages removes a deployment's images
// when it is deleted). The image is tagged
// <Options.Repository>/<deployment id>:<revision id> (ImageRef). Every
// line of the daemon's output, and a line per step of the clone, goes to
// the log function, cut to Options.MaxLogLine bytes.
//
// # Errors
//
// Errors match ErrClone (the repository, the ref or the credentials),
// ErrTooLarge (a limit; with ErrClone or ErrBuild), ErrConfig (a
// langgraph.json the CLI would refuse) or ErrBuild (a Dockerfile step, or
// the daemon), and their text is written for the revision's
// status_message: "clone failed: https://github.com/org/repo: repository
// not found", "build failed: COPY failed: ...". A cancelled ctx is
// returned as its cause.
package imagebuild
