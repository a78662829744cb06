// Package imagebuild turns a github or internal_source revision into a
// container image: it clones the repository or unpacks the uploaded
// tarball, finds or generates the Dockerfile, and builds it through the
// Docker Engine API. Package deploydocker calls it through its Builder
// interface (and RemoveImages through its ImageRemover at a deployment's
// teardown); cmd/deployplane wires one in with -deployer docker. The log
// function's lines become the revision's build log.
//
// Clone: Builder.Build (and Builder.Checkout, which stops after this step)
// clones source_config.repo_url with go-git (no git binary) at the
// revision's repo_commit_sha, else at source_revision_config.repo_ref (a
// branch, a tag, a full ref name or a full commit sha; none means the
// remote's HEAD). Only the wanted commit is fetched, within
// Options.CloneTimeout and MaxRepoBytes. Its tree is checked from the git
// objects before anything is written, with a tarball's limits: at most
// Options.MaxFiles entries (directories count), MaxCheckoutBytes of
// files, paths MaxDepth levels deep and MaxPathBytes long, and symbolic
// links whose targets, resolved on the tree as written, stay inside it;
// a tree over a limit writes nothing, and a checkout that fails midway
// removes what it wrote. The files are checked out into a temporary
// directory through an os.Root; .git is not checked out, submodules are
// skipped. URLs are https only, through Options.Egress, unless the
// policy allows the host; local paths and file:// URLs need
// Options.AllowLocalRepositories. With Options.InstallationToken (and
// Options.InstallationID, see InstallationIDs), a deployment with an
// integration_id is cloned with its GitHub App installation's token.
//
// Tarball: an internal_source revision is built from the tarball its
// source_tarball_path names, opened through Options.Tarballs (package
// uploads). Unpack refuses, with an ErrTarball error naming the entry,
// absolute paths, "..", entries below a symbolic link, hard links to
// anything but a file of the archive, symbolic links leaving the root,
// devices and FIFOs, and applies UnpackLimits (errors also matching
// ErrTooLarge); a Builder's are its Options' MaxCheckoutBytes, MaxFiles,
// MaxDepth and MaxPathBytes. A refused archive leaves nothing behind.
//
// Dockerfile: a Dockerfile beside graph_config_path (default
// langgraph.json) is built with that directory as the context. Otherwise
// GenerateDockerfile writes what the langgraph CLI's `langgraph
// dockerfile` writes for that config, from Options.BaseImage when set;
// for JavaScript projects install_command and build_command are honoured
// as `langgraph build` does. What the generator does not do is an
// ErrConfig naming it.
//
// Build: the context (less what .dockerignore excludes) is streamed to the
// daemon's classic builder on the network Options.NetworkMode names
// (default "bridge"; "none" for no network; "host" only where the
// operator says so, since RUN steps then reach the host's loopback), with
// the labels LabelTenant, LabelDeployment and LabelRevision. The image is
// tagged <Options.Repository>/<deployment id>:<revision id> (ImageRef).
// Every output line goes to the log function, cut to Options.MaxLogLine
// bytes.
//
// Errors match ErrClone (the repository, the ref or the credentials),
// ErrTooLarge (a limit; with ErrClone or ErrBuild), ErrConfig (a
// langgraph.json the CLI would refuse) or ErrBuild (a Dockerfile step, or
// the daemon), and their text is written for the revision's
// status_message: "clone failed: https://github.com/org/repo: repository
// not found", "build failed: COPY failed: ...". A cancelled ctx is
// returned as its cause. Design notes: docs/design-notes.md, "imagebuild".
package imagebuild
