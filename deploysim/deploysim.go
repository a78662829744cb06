package deploysim

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// DefaultStep is the default delay before each status: a quick start's
// external_docker revision is DEPLOYED in about 2 seconds, a github one in
// about 3.
const DefaultStep = 500 * time.Millisecond

// Options configure the simulated Deployer. A nil *Options, and every zero
// field, means the default.
type Options struct {
	// Step is the delay before each status change and before a teardown
	// completes. Default DefaultStep.
	Step time.Duration
	// FailAt, when set, is the status at which revisions fail: the
	// simulation reaches it, waits one step, and reports the failure of
	// its phase (controlplane.FailureOf: CREATE_FAILED for CREATING and
	// QUEUED, BUILD_FAILED for AWAITING_BUILD and BUILDING, DEPLOY_FAILED
	// for AWAITING_DEPLOY and DEPLOYING) with FailMessage. A status not on
	// a revision's path (the build states of an external_docker revision)
	// never fires.
	FailAt controlplane.RevisionStatus
	// FailMessage is the status_message of a simulated failure. Default:
	// "simulated failure at <status>".
	FailMessage string
	// URL, when set, is the address a revision reports with DEPLOYED
	// (controlplane.Step.URL), "{id}" and "{tenant}" replaced by the
	// deployment's id and tenant: for a front of an embedder's own, or
	// tests of what the control plane does with a deployer's address.
	// Default "": none, as nothing answers for a simulated revision (its
	// deployment's url stays null).
	URL string
}

// Deployer is the simulated controlplane.Deployer. It is safe for
// concurrent use and keeps no state: every call works from the Work it is
// given, so it resumes a revision wherever a previous run left it.
type Deployer struct {
	step   time.Duration
	failAt controlplane.RevisionStatus
	msg    string
	url    string
}

var _ controlplane.Deployer = (*Deployer)(nil)

// New returns a simulated Deployer. A nil opts means defaults.
func New(opts *Options) *Deployer {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Step <= 0 {
		o.Step = DefaultStep
	}
	return &Deployer{step: o.Step, failAt: o.FailAt, msg: o.FailMessage, url: o.URL}
}

// Deploy walks the revision along its source's happy path from its current
// status (controlplane.HappyPath: github through the build states,
// external_docker without them; a revision in UNKNOWN starts again at
// QUEUED), one Report per status after a delay of one step. On the way it
// reports, for github revisions, repo_commit_sha when the revision has none
// (FakeCommitSHA of repo_url and repo_ref) as it enters BUILDING, and on
// DEPLOYED the image version (ImageVersion) and Options.URL, when set. When a report is refused (the
// revision was superseded, the deployment is being deleted, the lease was
// lost) or fails, Deploy stops and returns nil: the control plane calls it
// again if the work is still pending. Before each report it writes that
// step's lines (StepLog) to the revision's build or deploy log, in one
// Reporter.Log call per step.
func (d *Deployer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	cur := w.Revision.Status
	i := slices.Index(path, cur)
	if cur == controlplane.RevisionUnknown {
		i = 0 // start again after CREATING
	}
	if i < 0 {
		return nil // terminal, or a source this simulation does not know
	}
	sha := w.Revision.SourceRevisionConfig.RepoCommitSHA
	for _, next := range path[i+1:] {
		if d.failAt != "" && cur == d.failAt {
			break
		}
		if !d.sleep(ctx) {
			return nil
		}
		st := controlplane.Step{Status: next}
		if w.Revision.Source == controlplane.SourceGitHub && next == controlplane.RevisionBuilding && sha == nil {
			sha = new(FakeCommitSHA(w))
			st.RepoCommitSHA = sha
		}
		if next == controlplane.RevisionDeployed {
			st.ImageVersion = new(ImageVersion(w, sha))
			if d.url != "" {
				st.URL = new(strings.NewReplacer("{id}", w.Deployment.ID, "{tenant}", w.Tenant).Replace(d.url))
			}
		}
		if r.Log(ctx, StepLog(w, next, sha)...) != nil || r.Report(ctx, st) != nil {
			return nil
		}
		cur = next
	}
	if d.failAt == "" || cur != d.failAt || controlplane.IsTerminal(cur) {
		return nil
	}
	if !d.sleep(ctx) {
		return nil
	}
	msg := d.msg
	if msg == "" {
		msg = "simulated failure at " + string(cur)
	}
	fail := controlplane.FailureOf(cur)
	if r.Log(ctx, StepLog(w, fail, sha)[0], controlplane.LogLine{Type: logOf(fail), Level: controlplane.LevelError, Message: msg}) != nil {
		return nil
	}
	_ = r.Report(ctx, controlplane.Step{Status: fail, Message: msg})
	return nil
}

// logOf is the log a status's lines go to: the build log for the build
// states and BUILD_FAILED, the deploy log otherwise.
func logOf(s controlplane.RevisionStatus) controlplane.LogType {
	switch s {
	case controlplane.RevisionAwaitingBuild, controlplane.RevisionBuilding, controlplane.RevisionBuildFailed:
		return controlplane.LogBuild
	}
	return controlplane.LogDeploy
}

// StepLog is the log lines the simulation writes as a revision enters
// status s (sha is the commit being built, when known), before reporting
// it: a build's clone and image steps in the build log, the deployer's
// steps and the server's start in the deploy log. A failure status gets
// one line naming it (the simulation adds the failure message at ERROR).
// The lines carry no time: the control plane stamps them.
func StepLog(w *controlplane.Work, s controlplane.RevisionStatus, sha *string) []controlplane.LogLine {
	var repo, ref, commit string
	if u := w.Deployment.SourceConfig.RepoURL; u != nil {
		repo = *u
	}
	if v := w.Revision.SourceRevisionConfig.RepoRef; v != nil {
		ref = *v
	}
	if sha != nil {
		commit = *sha
	}
	image := ""
	if v := w.Revision.SourceRevisionConfig.ImageURI; v != nil {
		image = *v
	} else if w.Revision.Source == controlplane.SourceGitHub {
		image = "deployplane.local/" + w.Deployment.Name + ":" + ImageVersion(w, sha)
	}
	var msgs []string
	level := controlplane.LevelInfo
	switch s {
	case controlplane.RevisionQueued:
		msgs = []string{"Revision " + w.Revision.ID + " queued."}
	case controlplane.RevisionAwaitingBuild:
		msgs = []string{"Waiting for a builder."}
	case controlplane.RevisionBuilding:
		msgs = []string{
			"Cloning " + repo + " at " + ref + ".",
			"Checked out commit " + commit + ".",
			"Step 1/4 : FROM langchain/langgraph-api:3.11",
			"Step 2/4 : ADD . /deps/" + w.Deployment.Name,
			"Step 3/4 : RUN pip install -c /api/constraints.txt -e /deps/*",
			"Step 4/4 : ENV LANGSERVE_GRAPHS='{\"agent\": \"/deps/" + w.Deployment.Name + "/agent.py:graph\"}'",
		}
	case controlplane.RevisionAwaitingDeploy:
		if w.Revision.Source == controlplane.SourceGitHub {
			msgs = []string{"Successfully built " + image + "."}
		} else {
			msgs = []string{"Using image " + image + "."}
		}
	case controlplane.RevisionDeploying:
		msgs = []string{"Pulling image " + image + ".", "Starting 1 replica."}
	case controlplane.RevisionDeployed:
		msgs = []string{"Server listening on 0.0.0.0:8000.", "Revision " + w.Revision.ID + " is serving."}
	default:
		if controlplane.IsTerminal(s) {
			msgs, level = []string{"Revision " + w.Revision.ID + " is " + string(s) + "."}, controlplane.LevelError
		}
	}
	lines := make([]controlplane.LogLine, len(msgs))
	for i, m := range msgs {
		lines[i] = controlplane.LogLine{Type: logOf(s), Level: level, Message: "[simulated] " + m}
	}
	return lines
}

// Teardown waits one step and succeeds: there is nothing to remove.
func (d *Deployer) Teardown(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
	if !d.sleep(ctx) {
		return ctx.Err()
	}
	return nil
}

// sleep waits one step; false when ctx is done first.
func (d *Deployer) sleep(ctx context.Context) bool {
	t := time.NewTimer(d.step)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// FakeCommitSHA is the repo_commit_sha the simulation gives a github
// revision that has none: 40 hex digits derived from repo_url and
// repo_ref, so the same branch always "builds" the same commit.
func FakeCommitSHA(w *controlplane.Work) string {
	var url, ref string
	if u := w.Deployment.SourceConfig.RepoURL; u != nil {
		url = *u
	}
	if r := w.Revision.SourceRevisionConfig.RepoRef; r != nil {
		ref = *r
	}
	sum := sha1.Sum([]byte(url + "@" + ref))
	return hex.EncodeToString(sum[:])
}

// ImageVersion is the image version the simulation reports on DEPLOYED:
// for github revisions "git-" and the first 12 digits of the commit sha
// (sha, when known); for external_docker ones the tag of image_uri (the
// text after its last ':' when that follows the last '/'), or "latest".
func ImageVersion(w *controlplane.Work, sha *string) string {
	if w.Revision.Source == controlplane.SourceGitHub {
		s := ""
		if sha != nil {
			s = *sha
		}
		return "git-" + s[:min(12, len(s))]
	}
	img := ""
	if u := w.Revision.SourceRevisionConfig.ImageURI; u != nil {
		img = *u
	}
	img, _, _ = strings.Cut(img, "@") // a digest is not a tag
	if i := strings.LastIndexByte(img, ':'); i > strings.LastIndexByte(img, '/') {
		return img[i+1:]
	}
	return "latest"
}
