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
}

// Deployer is the simulated controlplane.Deployer. It is safe for
// concurrent use and keeps no state: every call works from the Work it is
// given, so it resumes a revision wherever a previous run left it.
type Deployer struct {
	step   time.Duration
	failAt controlplane.RevisionStatus
	msg    string
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
	return &Deployer{step: o.Step, failAt: o.FailAt, msg: o.FailMessage}
}

// Deploy walks the revision along its source's happy path from its current
// status (controlplane.HappyPath: github through the build states,
// external_docker without them; a revision in UNKNOWN starts again at
// QUEUED), one Report per status after a delay of one step. On the way it
// reports, for github revisions, repo_commit_sha when the revision has none
// (FakeCommitSHA of repo_url and repo_ref) as it enters BUILDING, and on
// DEPLOYED the image version (ImageVersion). When a report is refused (the
// revision was superseded, the deployment is being deleted, the lease was
// lost) or fails, Deploy stops and returns nil: the control plane calls it
// again if the work is still pending.
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
		}
		if r.Report(ctx, st) != nil {
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
	_ = r.Report(ctx, controlplane.Step{Status: controlplane.FailureOf(cur), Message: msg})
	return nil
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
