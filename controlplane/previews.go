package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// Preview deployments (wire contract section 11): a github deployment
// whose source_config.preview is set (its parent) gets, for each pull
// request against its repository and repo_ref, a deployment of its own
// (is_preview true) at the pull request's head commit, made, moved and
// deleted by the pull request's webhook deliveries
// (HandleGitHubPullRequest), deleted when idle (SweepPreviews) and with
// its parent, and told back to the pull request through a
// PreviewStatusReporter.
//
// Collections:
//
//	cp_previews          tenant/parent id/pr number  -> previewLink (JSON)
//	cp_preview_of        tenant/preview id           -> parent id/pr number
//	cp_preview_activity  tenant/preview id           -> Unix microseconds of its last request (RecordActivity)
const (
	colPreviews        = "cp_previews"
	colPreviewOf       = "cp_preview_of"
	colPreviewActivity = "cp_preview_activity"
)

// The actions of a pull_request delivery that HandleGitHubPullRequest
// acts on; the others change nothing.
const (
	PullRequestOpened      = "opened"
	PullRequestReopened    = "reopened"
	PullRequestSynchronize = "synchronize"
	PullRequestLabeled     = "labeled"
	PullRequestUnlabeled   = "unlabeled"
	PullRequestClosed      = "closed"
)

// PullRequestEvent is what previews need of a GitHub pull_request webhook
// delivery. The caller (the HTTP layer) checks the delivery's signature.
type PullRequestEvent struct {
	// InstallationID is installation.id of the delivery.
	InstallationID int64
	// Action is the delivery's action (PullRequestOpened, ...).
	Action string
	// Number is the pull request's number.
	Number int64
	// BaseRepoURL is the repository the pull request is against
	// (pull_request.base.repo's clone_url), compared with each
	// deployment's repo_url as PushEvent.RepoURL is; BaseRepo is its
	// owner/name (full_name), where the statuses go.
	BaseRepoURL, BaseRepo string
	// BaseRef is the branch the pull request is against
	// (pull_request.base.ref), compared with each deployment's repo_ref.
	BaseRef string
	// HeadRepoURL is the repository the pull request's commits come from
	// (pull_request.head.repo's clone_url): another than BaseRepoURL for
	// a fork's pull request. Empty (a fork since deleted) counts as a
	// fork.
	HeadRepoURL string
	// HeadRef and HeadSHA are the pull request's branch and commit: the
	// preview's repo_ref and repo_commit_sha.
	HeadRef, HeadSHA string
	// Labels are the names of the pull request's labels.
	Labels []string
	// DeliveryID and BodyDigest are as PushEvent's: a delivery seen in
	// the last DeliveryRetention changes nothing.
	DeliveryID, BodyDigest string
}

// The actions of a PreviewChange.
const (
	PreviewCreated = "created"
	PreviewUpdated = "updated"
	PreviewDeleted = "deleted"
)

// PreviewChange is what a pull_request delivery did to one preview.
type PreviewChange struct {
	// Tenant holds both deployments: the parent (ParentID), whose
	// source_config.preview made the preview (PreviewID).
	Tenant    string
	ParentID  string
	PreviewID string
	// Action is PreviewCreated, PreviewUpdated (a new revision at the
	// new head commit) or PreviewDeleted.
	Action string
	// Revision is the revision created (created and updated only).
	Revision *Revision
}

// PreviewState is the state of a GitHub deployment status.
type PreviewState string

// The states a preview reports.
const (
	PreviewQueued     PreviewState = "queued"
	PreviewInProgress PreviewState = "in_progress"
	PreviewSuccess    PreviewState = "success"
	PreviewFailure    PreviewState = "failure"
	PreviewInactive   PreviewState = "inactive"
)

// PreviewStatus is one status of a preview for its pull request: a
// GitHub Deployment of the head commit in the environment
// "preview/<parent name>", and a Deployment Status of it.
type PreviewStatus struct {
	// InstallationID is the GitHub App installation to act as.
	InstallationID int64
	// Repo is the base repository, owner/name.
	Repo string
	// Ref is the commit (the pull request's head sha).
	Ref string
	// Environment is "preview/<parent name>".
	Environment string
	// GitHubDeploymentID is the GitHub Deployment of Ref made before, 0
	// when there is none yet: the reporter makes one (transient, no
	// auto merge, no required contexts).
	GitHubDeploymentID int64
	// State is the status's state.
	State PreviewState
	// EnvironmentURL is the preview's url, with state success ("" for the
	// others).
	EnvironmentURL string
	// Description says why, in a sentence ("" for none).
	Description string
}

// PreviewStatusReporter tells a pull request about its preview. Package
// githubapp's App implements it over GitHub's Deployments API. The
// control plane calls it one report at a time, in the background, after
// the change it reports has committed; its errors are logged and change
// nothing.
type PreviewStatusReporter interface {
	// ReportPreviewStatus makes the GitHub Deployment when
	// s.GitHubDeploymentID is 0, adds the status, and returns the
	// Deployment's id (also with an error of the status, once the
	// Deployment was made; 0 when it was not).
	ReportPreviewStatus(ctx context.Context, s *PreviewStatus) (githubDeploymentID int64, err error)
}

// previewLink is a cp_previews record: a parent's preview of one pull
// request.
type previewLink struct {
	PreviewID      string `json:"id"`
	Number         int64  `json:"pr"`
	InstallationID int64  `json:"inst"`
	Repo           string `json:"repo"` // the base repository, owner/name
	HeadRef        string `json:"ref"`
	HeadSHA        string `json:"sha"`
	Environment    string `json:"env"`
	Created        int64  `json:"c"` // Unix microseconds
	// Pushed is when the pull request last moved the preview (its
	// create, a synchronize), Unix microseconds.
	Pushed int64 `json:"p"`
	// GitHubDeployment is the GitHub Deployment of GitHubSHA.
	GitHubDeployment int64  `json:"ghd,omitempty"`
	GitHubSHA        string `json:"ghs,omitempty"`
}

func previewKey(tenant, parentID string, number int64) string {
	return key(tenant, parentID, fmt.Sprintf("%020d", number))
}

// previewState is a ControlPlane's part of the previews.
type previewState struct {
	forks    bool
	reporter PreviewStatusReporter // nil: no reports

	mu       sync.Mutex
	seen     map[string]int64 // tenant/deployment -> the minute RecordActivity last wrote
	reports  []previewReport  // waiting for the reporter
	draining bool
	drained  chan struct{} // closed when the drainer stops
	swept    time.Time     // the last sweep of Run (sweepPreviewsDue)
}

// previewReport is a status waiting for the reporter: of the preview's
// latest revision (link nil: read when sent), or of a deleted preview
// (link as it was).
type previewReport struct {
	tenant, preview string
	state           PreviewState
	revision        string // the revision whose status it is; "" for queued and deletes
	link            *previewLink
	description     string
}

// previewName is the name of parent's preview of pull request number:
// <parent>-pr-<number>, cut to the longest name, with -2, -3, ... added
// while the name is taken in tp.
func previewName(r store.Reader, tp, parent string, number int64) (string, error) {
	const maxName = 63
	for n := 1; ; n++ {
		suffix := "-pr-" + strconv.FormatInt(number, 10)
		if n > 1 {
			suffix += "-" + strconv.Itoa(n)
		}
		base := parent
		if len(base)+len(suffix) > maxName {
			base = base[:maxName-len(suffix)]
		}
		name := base + suffix
		_, err := r.Get(colDeploymentNames, tp+name)
		if errors.Is(err, store.ErrNotFound) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// previewWanted reports whether the pull request gets a preview of a
// parent whose preview config is p.
func previewWanted(p *PreviewConfig, ev *PullRequestEvent) bool {
	if p == nil || p.Mode == nil {
		return false
	}
	if *p.Mode == PreviewLabel {
		return p.Label != nil && slices.Contains(ev.Labels, *p.Label)
	}
	return true
}

// previewParent reports whether d takes previews of pull requests against
// repo's branch.
func previewParent(d *deploymentRecord, repo, branch string) bool {
	if d.Status == StatusAwaitingDelete || d.Source != SourceGitHub || d.IsPreview || d.SourceConfig.Preview == nil {
		return false
	}
	if u := d.SourceConfig.RepoURL; u == nil || normalizeRepoURL(*u) != repo {
		return false
	}
	return refIsBranch(d.SourceRevisionConfig.RepoRef, branch)
}

// previewDone is what a committed Update did to previews, for what
// follows its commit.
type previewDone struct {
	changes []PreviewChange
	reports []previewReport
}

// HandleGitHubPullRequest applies the previews of a pull_request
// delivery. For each github deployment of the integration holding the
// installation (found through an index, never by scanning all
// deployments) whose source_config.preview is set, whose repository is
// the pull request's base repository and whose repo_ref is its base
// branch, and that is not being deleted:
//
//   - opened, reopened, synchronize, labeled: when the pull request
//     wants a preview (mode "all", or mode "label" and it carries the
//     label) and comes from the base repository (or forks are allowed:
//     Options.PreviewForks), its preview is created (a copy of the
//     parent's settings and secrets, repo_ref the head branch, its
//     revision at the head commit), or, when it exists at another
//     commit, given a new revision at the head commit. A new preview of
//     a parent at its max_concurrent first deletes the one idle longest.
//   - closed, and unlabeled of mode "label" when the label is gone: the
//     preview is deleted.
//
// Everything happens in one Update, which also records the delivery: a
// delivery seen before (DeliveryID, BodyDigest) changes nothing. The
// pull request is told (PreviewStatusReporter) after the commit. Errors:
// *apierr.ValidationError when the delivery lacks what its action needs.
func (cp *ControlPlane) HandleGitHubPullRequest(ctx context.Context, ev *PullRequestEvent) ([]PreviewChange, error) {
	if ev == nil {
		ev = &PullRequestEvent{}
	}
	var create bool
	switch ev.Action {
	case PullRequestOpened, PullRequestReopened, PullRequestSynchronize, PullRequestLabeled:
		create = true
	case PullRequestUnlabeled, PullRequestClosed:
	default:
		return []PreviewChange{}, nil
	}
	c := &checker{lim: cp.lim}
	if ev.InstallationID <= 0 {
		c.add([]any{"body", "installation", "id"}, apierr.TypeGreaterThan, "Input should be greater than 0")
	}
	if ev.Number <= 0 {
		c.add([]any{"body", "number"}, apierr.TypeGreaterThan, "Input should be greater than 0")
	}
	type need struct {
		loc []any
		v   string
	}
	needs := []need{{[]any{"body", "pull_request", "base", "repo", "clone_url"}, ev.BaseRepoURL},
		{[]any{"body", "pull_request", "base", "ref"}, ev.BaseRef}}
	if create {
		needs = append(needs, need{[]any{"body", "pull_request", "base", "repo", "full_name"}, ev.BaseRepo},
			need{[]any{"body", "pull_request", "head", "ref"}, ev.HeadRef}, need{[]any{"body", "pull_request", "head", "sha"}, ev.HeadSHA})
	}
	for _, n := range needs {
		if n.v == "" {
			c.add(n.loc, apierr.TypeMissing, apierr.MsgFieldRequired)
		} else {
			c.str(n.loc, n.v, cp.lim.MaxStringBytes)
		}
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	repo := normalizeRepoURL(ev.BaseRepoURL)
	fork := ev.HeadRepoURL == "" || normalizeRepoURL(ev.HeadRepoURL) != repo
	branch := strings.TrimPrefix(ev.BaseRef, "refs/heads/")
	now := cp.now()
	ids := map[string][2]string{} // parent id -> preview and revision ids, made outside the closure's reruns
	var done previewDone
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		done = previewDone{}
		if again, err := seenDelivery(tx, deliveryKeys(ev.DeliveryID, ev.BodyDigest), now); again || err != nil {
			return err
		}
		tenant, integID, err := installationOwner(tx, ev.InstallationID) // push.go
		if tenant == "" || err != nil {
			return err
		}
		parents, err := cp.termIDs(tx, tenant, indexTerm(idxPreview, integID))
		if err != nil {
			return err
		}
		for _, id := range parents {
			d, err := cp.getDeployment(tx, tenant, id)
			if err != nil {
				return err
			}
			if !previewParent(d, repo, branch) {
				continue
			}
			link, prev, err := cp.previewOf(tx, tenant, d.ID, ev.Number)
			if err != nil {
				return err
			}
			want := create && previewWanted(d.SourceConfig.Preview, ev) && (!fork || cp.previews.forks)
			switch {
			case want && prev == nil:
				if _, ok := ids[d.ID]; !ok {
					ids[d.ID] = [2]string{cp.newID(), cp.newID()}
				}
				if err := cp.createPreview(ctx, tx, tenant, d, ev, ids[d.ID], now, &done); err != nil {
					return err
				}
			case want && link.HeadSHA != ev.HeadSHA:
				if _, ok := ids[d.ID]; !ok {
					ids[d.ID] = [2]string{cp.newID(), cp.newID()}
				}
				if err := cp.movePreview(tx, tenant, d.ID, link, prev, ev, ids[d.ID][1], now, &done); err != nil {
					return err
				}
			case prev != nil && (ev.Action == PullRequestClosed || ev.Action == PullRequestUnlabeled && !previewWanted(d.SourceConfig.Preview, ev)):
				why := fmt.Sprintf("preview deleted: pull request #%d was closed", ev.Number)
				if ev.Action == PullRequestUnlabeled {
					why = fmt.Sprintf("preview deleted: pull request #%d no longer carries the label %q", ev.Number, *d.SourceConfig.Preview.Label)
				}
				if err := cp.deletePreview(ctx, tx, tenant, d.ID, link, prev, why, now, &done); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("github pull request", err)
	}
	cp.previewsCommitted(&done)
	if done.changes == nil {
		return []PreviewChange{}, nil
	}
	return done.changes, nil
}

// previewOf reads parent's preview of pull request number: its link and
// deployment, or nils when it has none (a link whose deployment is gone
// is removed).
func (cp *ControlPlane) previewOf(tx store.Tx, tenant, parentID string, number int64) (*previewLink, *deploymentRecord, error) {
	link, err := readPreviewLink(tx, tenant, parentID, number)
	if link == nil || err != nil {
		return nil, nil, err
	}
	d, err := cp.getDeployment(tx, tenant, link.PreviewID)
	switch {
	case errors.Is(err, apierr.ErrNotFound):
		return nil, nil, dropPreviewLink(tx, tenant, parentID, link)
	case err != nil:
		return nil, nil, err
	case d.Status == StatusAwaitingDelete:
		return nil, nil, dropPreviewLink(tx, tenant, parentID, link)
	}
	return link, d, nil
}

// readPreviewLink reads parent's link to its preview of pull request
// number, nil when there is none.
func readPreviewLink(r store.Reader, tenant, parentID string, number int64) (*previewLink, error) {
	k := previewKey(tenant, parentID, number)
	b, err := r.Get(colPreviews, k)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var link previewLink
	if err := json.Unmarshal(b, &link); err != nil {
		return nil, fmt.Errorf("controlplane: decoding preview %s: %w", k, err)
	}
	return &link, nil
}

// linkedPreview reads the preview a link names, nil when it is gone (the
// link is dropped then, in tx).
func (cp *ControlPlane) linkedPreview(tx store.Tx, tenant, parentID string, l *previewLink) (*deploymentRecord, error) {
	p, err := cp.getDeployment(tx, tenant, l.PreviewID)
	if errors.Is(err, apierr.ErrNotFound) {
		return nil, dropPreviewLink(tx, tenant, parentID, l)
	}
	return p, err
}

// dropPreviewLink removes a preview's records of this file.
func dropPreviewLink(tx store.Tx, tenant, parentID string, link *previewLink) error {
	for _, k := range [][2]string{{colPreviews, previewKey(tenant, parentID, link.Number)},
		{colPreviewOf, key(tenant, link.PreviewID)}, {colPreviewActivity, key(tenant, link.PreviewID)}} {
		if err := tx.Delete(k[0], k[1]); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

func putPreviewLink(tx store.Tx, tenant, parentID string, link *previewLink) error {
	b, err := json.Marshal(link)
	if err != nil {
		return err
	}
	if err := tx.Put(colPreviews, previewKey(tenant, parentID, link.Number), b); err != nil {
		return err
	}
	return tx.Put(colPreviewOf, key(tenant, link.PreviewID), []byte(parentID+"/"+strconv.FormatInt(link.Number, 10)))
}

// createPreview creates parent's preview of the pull request in tx, ids
// its deployment's and revision's, after deleting the preview idle
// longest when the parent is at its max_concurrent.
func (cp *ControlPlane) createPreview(ctx context.Context, tx store.Tx, tenant string, parent *deploymentRecord, ev *PullRequestEvent,
	ids [2]string, now time.Time, done *previewDone) error {
	cfg := parent.SourceConfig.Preview.WithDefaults()
	links, err := cp.previewsOf(tx, tenant, parent.ID)
	if err != nil {
		return err
	}
	for len(links) >= int(*cfg.MaxConcurrent) {
		oldest, err := cp.idlest(tx, tenant, links)
		if err != nil {
			return err
		}
		l := links[oldest]
		links = slices.Delete(links, oldest, oldest+1)
		prev, err := cp.linkedPreview(tx, tenant, parent.ID, l)
		if err != nil {
			return err
		}
		if prev == nil {
			continue
		}
		why := fmt.Sprintf("preview deleted: parent %s is at max_concurrent %d (pull request #%d needs a preview)", parent.Name, *cfg.MaxConcurrent, ev.Number)
		if err := cp.deletePreview(ctx, tx, tenant, parent.ID, l, prev, why, now, done); err != nil {
			return err
		}
	}
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	name, err := previewName(tx, tp, parent.Name, ev.Number)
	if err != nil {
		return err
	}
	rec := &deploymentRecord{Tags: slices.Clone(parent.Tags)}
	si := sourceIndex(SourceGitHub)
	for i := range rules {
		if r := &rules[i]; r.create[si] == CreateRequired || r.create[si] == CreateOptional {
			r.set(&rec.Deployment, &parent.Deployment)
		}
	}
	rec.Secrets = slices.Clone(parent.Secrets)
	rec.SecretReferences = slices.Clone(parent.SecretReferences)
	rec.Name, rec.DisplayName, rec.Agent = name, nil, nil
	rec.SourceConfig.Preview = nil
	rec.SourceConfig.BuildOnPush = new(false) // the pull request moves it, not pushes to its branch
	rec.SourceRevisionConfig.RepoRef = new(ev.HeadRef)
	rec.SourceRevisionConfig.RepoCommitSHA = new(ev.HeadSHA)
	rec.IsPreview = true
	rec.TenantID = tenant
	rec.ID, rec.CreatedAt, rec.UpdatedAt = ids[0], wiretime.New(now), wiretime.New(now)
	rec.Status = StatusAwaitingDatabase
	rec.LatestRevisionID = new(ids[1])
	applyCreateDefaults(&rec.Deployment, rec.Source)
	rec.SourceConfig.CustomURL = new(cp.customURL(tenant, rec.ID, rec.Name))
	if err := cp.insertDeployment(ctx, tx, tenant, rec, ids[1], true, nil, now); err != nil {
		return err
	}
	link := &previewLink{PreviewID: rec.ID, Number: ev.Number, InstallationID: ev.InstallationID, Repo: ev.BaseRepo,
		HeadRef: ev.HeadRef, HeadSHA: ev.HeadSHA, Environment: "preview/" + parent.Name,
		Created: now.UnixMicro(), Pushed: now.UnixMicro()}
	if err := putPreviewLink(tx, tenant, parent.ID, link); err != nil {
		return err
	}
	rev, err := cp.getRevision(tx, tenant, rec.ID, ids[1])
	if err != nil {
		return err
	}
	w := rev.wire()
	done.changes = append(done.changes, PreviewChange{Tenant: tenant, ParentID: parent.ID, PreviewID: rec.ID, Action: PreviewCreated, Revision: &w})
	done.reports = append(done.reports, previewReport{tenant: tenant, preview: rec.ID, state: PreviewQueued, revision: ids[1]})
	return nil
}

// movePreview gives a preview a new revision (id revID) at the pull
// request's head commit.
func (cp *ControlPlane) movePreview(tx store.Tx, tenant, parentID string, link *previewLink, d *deploymentRecord, ev *PullRequestEvent,
	revID string, now time.Time, done *previewDone) error {
	next := *d
	at := later(now, d.UpdatedAt)
	next.SourceRevisionConfig.RepoRef = new(ev.HeadRef)
	next.SourceRevisionConfig.RepoCommitSHA = new(ev.HeadSHA)
	rev := newRevision(&next, revID, at)
	next.LatestRevisionID = new(rev.ID)
	next.UpdatedAt = at
	if err := cp.addRevision(tx, tenant, &next, rev); err != nil {
		return err
	}
	if err := cp.putDeployment(tx, tenant, d, &next); err != nil {
		return err
	}
	moved := *link
	moved.HeadRef, moved.HeadSHA, moved.Pushed = ev.HeadRef, ev.HeadSHA, now.UnixMicro()
	if err := putPreviewLink(tx, tenant, parentID, &moved); err != nil {
		return err
	}
	w := rev.wire()
	done.changes = append(done.changes, PreviewChange{Tenant: tenant, ParentID: parentID, PreviewID: d.ID, Action: PreviewUpdated, Revision: &w})
	done.reports = append(done.reports, previewReport{tenant: tenant, preview: d.ID, state: PreviewQueued, revision: rev.ID})
	return nil
}

// deletePreview deletes preview d (of link) in tx: its status_message
// says why (a change of its own in the event log), then it is deleted as
// a DELETE deletes it, and its records of this file go.
func (cp *ControlPlane) deletePreview(ctx context.Context, tx store.Tx, tenant, parentID string, link *previewLink, d *deploymentRecord,
	why string, now time.Time, done *previewDone) error {
	if err := dropPreviewLink(tx, tenant, parentID, link); err != nil {
		return err
	}
	if d.Status == StatusAwaitingDelete {
		return nil
	}
	said := *d
	said.StatusMessage = new(why)
	said.UpdatedAt = later(now, d.UpdatedAt)
	if err := cp.putDeployment(tx, tenant, d, &said); err != nil {
		return err
	}
	if _, err := cp.deleteInTx(ctx, tx, tenant, &said, false, now); err != nil {
		return err
	}
	cp.log.Info("controlplane: "+why, "tenant", tenant, "deployment", d.ID, "name", d.Name)
	l := *link
	done.changes = append(done.changes, PreviewChange{Tenant: tenant, ParentID: parentID, PreviewID: d.ID, Action: PreviewDeleted})
	done.reports = append(done.reports, previewReport{tenant: tenant, preview: d.ID, state: PreviewInactive, link: &l, description: why})
	return nil
}

// previewsOf lists parent's preview links.
func (cp *ControlPlane) previewsOf(r store.Reader, tenant, parentID string) ([]*previewLink, error) {
	var out []*previewLink
	err := r.Scan(colPreviews, key(tenant, parentID)+"/", nil, func(k string, v []byte) (bool, error) {
		var l previewLink
		if err := json.Unmarshal(v, &l); err != nil {
			return false, fmt.Errorf("controlplane: decoding preview %s: %w", k, err)
		}
		out = append(out, &l)
		return true, nil
	})
	return out, err
}

// lastActive is when the preview of link was last asked for or moved,
// Unix microseconds.
func lastActive(r store.Reader, tenant string, link *previewLink) (int64, error) {
	last := link.Pushed
	b, err := r.Get(colPreviewActivity, key(tenant, link.PreviewID))
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if at, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			last = max(last, at)
		}
	}
	return last, nil
}

// idlest is the index in links of the preview idle longest.
func (cp *ControlPlane) idlest(r store.Reader, tenant string, links []*previewLink) (int, error) {
	best, bestAt := 0, int64(0)
	for i, l := range links {
		at, err := lastActive(r, tenant, l)
		if err != nil {
			return 0, err
		}
		if i == 0 || at < bestAt {
			best, bestAt = i, at
		}
	}
	return best, nil
}

// previewsCommitted does what follows a committed Update that changed
// previews: wake the reconcile loop, stop the revisions that ended, and
// tell the pull requests.
func (cp *ControlPlane) previewsCommitted(done *previewDone) {
	if len(done.changes) > 0 {
		cp.notify()
	}
	for _, c := range done.changes {
		cp.stopEnded(c.Tenant, c.PreviewID)
	}
	cp.reportPreviews(done.reports...)
}

// RecordActivity records that deployment id of tenant served a request at
// at, for the idle time of previews (source_config.preview's
// idle_ttl_minutes): a deployer calls it for the requests it serves. It
// writes at most one small record a minute per preview (not the
// deployment's record), and nothing for a deployment that is no preview;
// the minutes already written are remembered in memory, so most calls
// cost no store access.
func (cp *ControlPlane) RecordActivity(ctx context.Context, tenant, deploymentID string, at time.Time) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	id, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	k := key(tenant, id)
	minute := at.Unix() / 60
	cp.previews.mu.Lock()
	if cp.previews.seen[k] >= minute {
		cp.previews.mu.Unlock()
		return nil
	}
	if len(cp.previews.seen) >= 4096 {
		clear(cp.previews.seen) // bounded: a few more writes after this
	}
	if cp.previews.seen == nil {
		cp.previews.seen = map[string]int64{}
	}
	cp.previews.seen[k] = minute
	cp.previews.mu.Unlock()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Get(colPreviewOf, k); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil // no preview
			}
			return err
		}
		b, err := tx.Get(colPreviewActivity, k)
		if err == nil {
			if prev, _ := strconv.ParseInt(string(b), 10, 64); prev >= at.UnixMicro() {
				return nil
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.Put(colPreviewActivity, k, []byte(strconv.FormatInt(at.UnixMicro(), 10)))
	})
	return cp.storeErr("record activity", err)
}

// PreviewSweepInterval is how often Run looks for previews to delete
// (SweepPreviews).
const PreviewSweepInterval = time.Minute

// SweepPreviews deletes the previews idle for their parent's
// idle_ttl_minutes (no request, RecordActivity, and no push to their pull
// request for that long, by Options.Clock) and those whose parent is
// gone, each with the reason in its status_message before its delete.
// Run calls it every PreviewSweepInterval; it returns how many it
// deleted.
func (cp *ControlPlane) SweepPreviews(ctx context.Context) (int, error) {
	type found struct {
		tenant, parent string
		link           previewLink
	}
	var all []found
	err := cp.st.View(ctx, func(r store.Reader) error {
		all = all[:0]
		return r.Scan(colPreviews, "", nil, func(k string, v []byte) (bool, error) {
			parts := strings.SplitN(k, "/", 3)
			var f found
			if len(parts) != 3 || json.Unmarshal(v, &f.link) != nil {
				return true, nil
			}
			f.tenant, f.parent = parts[0], parts[1]
			all = append(all, f)
			return true, nil
		})
	})
	if err != nil {
		return 0, cp.storeErr("sweep previews", err)
	}
	deleted := 0
	for _, f := range all {
		if ctx.Err() != nil {
			break
		}
		var done previewDone
		now := cp.now()
		err := cp.st.Update(ctx, func(tx store.Tx) error {
			done = previewDone{}
			link, d, err := cp.previewOf(tx, f.tenant, f.parent, f.link.Number)
			if err != nil || d == nil {
				return err
			}
			parent, err := cp.getDeployment(tx, f.tenant, f.parent)
			var why string
			switch {
			case errors.Is(err, apierr.ErrNotFound) || err == nil && parent.Status == StatusAwaitingDelete:
				why = "preview deleted: its parent deployment was deleted"
			case err != nil:
				return err
			case parent.SourceConfig.Preview == nil:
				why = fmt.Sprintf("preview deleted: parent %s has previews turned off", parent.Name)
			default:
				ttl := time.Duration(*parent.SourceConfig.Preview.WithDefaults().IdleTTLMinutes) * time.Minute
				last, err := lastActive(tx, f.tenant, link)
				if err != nil {
					return err
				}
				if now.Sub(time.UnixMicro(last)) < ttl {
					return nil
				}
				why = fmt.Sprintf("preview deleted: idle for %d minutes (no request and no push; idle_ttl_minutes of %s is %d)",
					int64(now.Sub(time.UnixMicro(last))/time.Minute), parent.Name, int64(ttl/time.Minute))
			}
			return cp.deletePreview(ctx, tx, f.tenant, f.parent, link, d, why, now, &done)
		})
		if err != nil {
			return deleted, cp.storeErr("sweep previews", err)
		}
		deleted += len(done.changes)
		cp.previewsCommitted(&done)
	}
	return deleted, nil
}

// sweepPreviewsDue runs SweepPreviews when PreviewSweepInterval has passed
// since this ControlPlane's last (Run's maintenance).
func (cp *ControlPlane) sweepPreviewsDue(ctx context.Context) {
	now := cp.now()
	cp.previews.mu.Lock()
	due := now.Sub(cp.previews.swept) >= PreviewSweepInterval
	if due {
		cp.previews.swept = now
	}
	cp.previews.mu.Unlock()
	if !due {
		return
	}
	if _, err := cp.SweepPreviews(ctx); err != nil && ctx.Err() == nil {
		cp.log.Error("controlplane: sweeping previews failed", "err", err)
	}
}

// deletePreviewsOf deletes the previews of a deployment just deleted, and
// forgets the preview it was; each in an Update of its own after the
// parent's (SweepPreviews deletes those a crash leaves).
func (cp *ControlPlane) deletePreviewsOf(ctx context.Context, tenant string, d *deploymentRecord) {
	// Most deployments are neither a preview nor a parent of one: a read
	// tells.
	some := false
	err := cp.st.View(ctx, func(r store.Reader) error {
		some = false
		if d.IsPreview {
			some = true
			return nil
		}
		return r.Scan(colPreviews, key(tenant, d.ID)+"/", nil, func(string, []byte) (bool, error) {
			some = true
			return false, nil
		})
	})
	if err == nil && !some {
		return
	}
	now := cp.now()
	var done previewDone
	err = cp.st.Update(ctx, func(tx store.Tx) error {
		done = previewDone{}
		if d.IsPreview {
			v, err := tx.Get(colPreviewOf, key(tenant, d.ID))
			if err == nil {
				parentID, num, _ := strings.Cut(string(v), "/")
				n, _ := strconv.ParseInt(num, 10, 64)
				b, err := tx.Get(colPreviews, previewKey(tenant, parentID, n))
				var link previewLink
				if err == nil && json.Unmarshal(b, &link) == nil {
					if err := dropPreviewLink(tx, tenant, parentID, &link); err != nil {
						return err
					}
					done.reports = append(done.reports, previewReport{tenant: tenant, preview: d.ID, state: PreviewInactive, link: &link,
						description: "preview deleted"})
				} else if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		links, err := cp.previewsOf(tx, tenant, d.ID)
		if err != nil {
			return err
		}
		for _, l := range links {
			p, err := cp.linkedPreview(tx, tenant, d.ID, l)
			if err != nil {
				return err
			}
			if p == nil {
				continue
			}
			why := fmt.Sprintf("preview deleted: its parent %s was deleted", d.Name)
			if err := cp.deletePreview(ctx, tx, tenant, d.ID, l, p, why, now, &done); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		cp.log.Error("controlplane: deleting the previews of a deleted deployment failed", "tenant", tenant, "deployment", d.ID,
			"err", cp.storeErr("delete previews", err))
		return
	}
	cp.previewsCommitted(&done)
}

// previewTransition tells the pull request of a preview about its latest
// revision's status change, in the background. Other deployments' changes
// cost one read, and never wait in the queue that previews' reports share.
func (cp *ControlPlane) previewTransition(ctx context.Context, t Transition) {
	if cp.previews.reporter == nil {
		return
	}
	preview := false
	err := cp.st.View(context.WithoutCancel(ctx), func(r store.Reader) error {
		_, err := r.Get(colPreviewOf, key(t.Tenant, t.DeploymentID))
		preview = err == nil
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		cp.log.Warn("controlplane: is the deployment a preview", "deployment", t.DeploymentID, "err", err)
	}
	if !preview {
		return
	}
	var s PreviewState
	switch t.To {
	case RevisionQueued, RevisionBuilding, RevisionDeploying:
		s = PreviewInProgress
	case RevisionDeployed:
		s = PreviewSuccess
	case RevisionCreateFailed, RevisionBuildFailed, RevisionDeployFailed:
		s = PreviewFailure
	default:
		return
	}
	cp.reportPreviews(previewReport{tenant: t.Tenant, preview: t.DeploymentID, state: s, revision: t.RevisionID})
}

// reportPreviews queues reports for the reporter, sent one at a time in
// order by one goroutine while there are any.
func (cp *ControlPlane) reportPreviews(rs ...previewReport) {
	if cp.previews.reporter == nil || len(rs) == 0 {
		return
	}
	cp.previews.mu.Lock()
	defer cp.previews.mu.Unlock()
	const maxWaiting = 1024
	if n := len(cp.previews.reports) + len(rs) - maxWaiting; n > 0 {
		cp.log.Warn("controlplane: preview statuses dropped: too many waiting", "dropped", n)
		cp.previews.reports = cp.previews.reports[min(n, len(cp.previews.reports)):]
	}
	cp.previews.reports = append(cp.previews.reports, rs...)
	if !cp.previews.draining {
		cp.previews.draining = true
		cp.previews.drained = make(chan struct{})
		go cp.drainPreviewReports()
	}
}

// FlushPreviewStatuses waits until the statuses of previews waiting for
// the PreviewStatusReporter have been sent (or failed), or ctx is done: a
// server calls it before it exits, a test before it looks at what
// GitHub was told.
func (cp *ControlPlane) FlushPreviewStatuses(ctx context.Context) error {
	for {
		cp.previews.mu.Lock()
		draining, drained := cp.previews.draining, cp.previews.drained
		cp.previews.mu.Unlock()
		if !draining {
			return nil
		}
		select {
		case <-drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (cp *ControlPlane) drainPreviewReports() {
	for {
		cp.previews.mu.Lock()
		if len(cp.previews.reports) == 0 {
			cp.previews.draining = false
			close(cp.previews.drained)
			cp.previews.mu.Unlock()
			return
		}
		r := cp.previews.reports[0]
		cp.previews.reports = cp.previews.reports[1:]
		cp.previews.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := cp.sendPreviewReport(ctx, &r); err != nil {
			cp.log.Warn("controlplane: telling the pull request about its preview failed", "tenant", r.tenant,
				"deployment", r.preview, "state", string(r.state), "err", err)
		}
		cancel()
	}
}

// sendPreviewReport sends one report, and remembers the GitHub
// Deployment the reporter made.
func (cp *ControlPlane) sendPreviewReport(ctx context.Context, r *previewReport) error {
	s := &PreviewStatus{State: r.state, Description: r.description}
	var parentID string
	link := r.link
	if link == nil {
		var d *deploymentRecord
		err := cp.st.View(ctx, func(rd store.Reader) error {
			link, d = nil, nil
			v, err := rd.Get(colPreviewOf, key(r.tenant, r.preview))
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			var num string
			parentID, num, _ = strings.Cut(string(v), "/")
			n, _ := strconv.ParseInt(num, 10, 64)
			l, err := readPreviewLink(rd, r.tenant, parentID, n)
			if l == nil || err != nil {
				return err
			}
			if d, err = cp.getDeployment(rd, r.tenant, r.preview); err != nil {
				return err
			}
			link = l
			return nil
		})
		if err != nil || link == nil {
			return err // not a preview (any more)
		}
		if d.LatestRevisionID == nil || *d.LatestRevisionID != r.revision {
			return nil // of a revision superseded since
		}
		switch {
		case r.state != PreviewSuccess:
		case d.URL != nil:
			s.EnvironmentURL = *d.URL
		case d.SourceConfig.CustomURL != nil: // what its url will be (servedURL)
			s.EnvironmentURL = *d.SourceConfig.CustomURL
		}
		if r.state == PreviewFailure {
			if rev, err := cp.GetRevision(ctx, r.tenant, r.preview, r.revision); err == nil && rev.StatusMessage != nil {
				s.Description = *rev.StatusMessage
			}
		}
	}
	s.InstallationID, s.Repo, s.Ref, s.Environment = link.InstallationID, link.Repo, link.HeadSHA, link.Environment
	if link.GitHubSHA == link.HeadSHA {
		s.GitHubDeploymentID = link.GitHubDeployment
	}
	if r.state == PreviewInactive && s.GitHubDeploymentID == 0 {
		return nil // the pull request was never told of it
	}
	if len(s.Description) > 140 { // GitHub's limit
		s.Description = s.Description[:137] + "..."
	}
	id, rerr := cp.previews.reporter.ReportPreviewStatus(ctx, s)
	if id == 0 || r.link != nil || id == s.GitHubDeploymentID {
		return rerr
	}
	// Remember the GitHub Deployment of the head commit (made even when
	// its status failed).
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		l, err := readPreviewLink(tx, r.tenant, parentID, link.Number)
		if l == nil || err != nil || l.PreviewID != r.preview || l.HeadSHA != link.HeadSHA {
			return err
		}
		l.GitHubDeployment, l.GitHubSHA = id, link.HeadSHA
		return putPreviewLink(tx, r.tenant, parentID, l)
	})
	return errors.Join(rerr, cp.storeErr("remember github deployment", err))
}
