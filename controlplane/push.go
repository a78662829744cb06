package controlplane

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/internal/expiry"
	"github.com/deployplane/deployplane/store"
)

// PushEvent is what build_on_push needs of a GitHub push webhook
// delivery. The caller (the HTTP layer) checks the delivery's signature.
type PushEvent struct {
	// InstallationID is installation.id of the delivery.
	InstallationID int64
	// RepoURL is the pushed repository: repository.clone_url, html_url or
	// ssh_url. It is compared with each deployment's repo_url without
	// regard to case, scheme, user, a trailing ".git" or "/", and with
	// git@host:owner/repo equal to https://host/owner/repo.
	RepoURL string
	// Ref is the pushed ref, e.g. "refs/heads/main". Only branch refs
	// create revisions.
	Ref string
	// After is the pushed commit's sha; it becomes the new revisions'
	// repo_commit_sha.
	After string
	// DeliveryID is the delivery's X-GitHub-Delivery, and BodyDigest a
	// digest of its raw (signed) body, such as its hex SHA-256. A push
	// whose delivery id or body digest was seen in the last
	// DeliveryRetention creates nothing: GitHub's redeliveries and a
	// replayed signed body (under any delivery id, which the signature
	// does not cover) are processed once. Empty: not checked.
	DeliveryID, BodyDigest string
}

// DeliveryRetention is how long HandleGitHubPush remembers a delivery (its
// id and body digest) to refuse it a second time. It is remembered in the
// store, so a restart or another replica over the same store knows it too;
// each push that records a delivery removes a few of those older than
// this, so the number remembered is bounded by the deliveries of about one
// retention period.
const DeliveryRetention = 24 * time.Hour

// PushedRevision is a revision a push created.
type PushedRevision struct {
	Tenant       string
	DeploymentID string
	Revision     Revision
}

// zeroSHA is the After of a push that deletes a branch.
const zeroSHA = "0000000000000000000000000000000000000000"

// HandleGitHubPush applies build_on_push: a push to refs/heads/<branch>
// creates a revision, with repo_commit_sha set to the pushed commit, for
// every github deployment of the integration holding that installation
// (an installation belongs to one tenant at most) that has build_on_push true, the same repository (see
// PushEvent.RepoURL) and repo_ref equal to the branch (or to
// "refs/heads/<branch>"), and is not being deleted. The revisions are
// created in one Update and supersede older ones like any new revision.
// Tag pushes, other refs and branch deletions create nothing and are not
// errors. The deployments are found through indexes (installation id to
// its owner's integration, integration to build_on_push deployments),
// never by scanning all deployments. A delivery seen before (PushEvent.DeliveryID,
// BodyDigest) creates nothing; a delivery is recorded as seen in the same
// Update that creates its revisions, so that it is processed exactly once
// even across a crash. Errors: *apierr.ValidationError when a branch push lacks
// the installation id, the repository or the commit.
func (cp *ControlPlane) HandleGitHubPush(ctx context.Context, ev *PushEvent) ([]PushedRevision, error) {
	if ev == nil {
		ev = &PushEvent{}
	}
	branch, ok := strings.CutPrefix(ev.Ref, "refs/heads/")
	if !ok || branch == "" || ev.After == zeroSHA {
		return []PushedRevision{}, nil
	}
	c := &checker{lim: cp.lim}
	if ev.InstallationID <= 0 {
		c.add([]any{"body", "installation", "id"}, apierr.TypeGreaterThan, "Input should be greater than 0")
	}
	if ev.RepoURL == "" {
		c.add([]any{"body", "repository", "clone_url"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	} else {
		c.str([]any{"body", "repository", "clone_url"}, ev.RepoURL, cp.lim.MaxStringBytes)
	}
	if ev.After == "" {
		c.add([]any{"body", "after"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	} else {
		c.str([]any{"body", "after"}, ev.After, cp.lim.MaxStringBytes)
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	repo := normalizeRepoURL(ev.RepoURL)
	now := cp.now()
	var ids []string // allocated outside the closure's reruns
	var out []PushedRevision
	seen := deliveryKeys(ev.DeliveryID, ev.BodyDigest)
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out = out[:0]
		if again, err := seenDelivery(tx, seen, now); again || err != nil {
			return err // processed before, or failed
		}
		// The installation's one owner, if any, and its build_on_push
		// deployments.
		tenant, integID, err := installationOwner(tx, ev.InstallationID)
		if tenant == "" || err != nil {
			return err
		}
		deps, err := cp.termIDs(tx, tenant, indexTerm(idxPush, integID))
		if err != nil {
			return err
		}
		for _, id := range deps {
			d, err := cp.getDeployment(tx, tenant, id)
			if err != nil {
				if errors.Is(err, apierr.ErrNotFound) {
					err = errors.New("controlplane: the push index names a missing deployment " + id)
				}
				return err
			}
			if !pushMatches(d, repo, branch) {
				continue
			}
			if len(out) == len(ids) {
				ids = append(ids, cp.newID())
			}
			next := *d
			at := later(now, d.UpdatedAt)
			next.SourceRevisionConfig.RepoCommitSHA = new(ev.After) // the revision's, mirrored
			rev := newRevision(&next, ids[len(out)], at)
			next.LatestRevisionID = new(rev.ID)
			next.UpdatedAt = at
			if err := cp.addRevision(tx, tenant, &next, rev); err != nil {
				return err
			}
			if err := cp.putDeployment(tx, tenant, d, &next); err != nil {
				return err
			}
			out = append(out, PushedRevision{Tenant: tenant, DeploymentID: d.ID, Revision: rev.wire()})
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("github push", err)
	}
	if len(out) > 0 {
		cp.notify()
	}
	for _, p := range out {
		cp.stopEnded(p.Tenant, p.DeploymentID) // the revisions it SKIPPED (interrupt.go)
	}
	if out == nil {
		out = []PushedRevision{}
	}
	return out, nil
}

// deliveryKeys are the keys in cp_webhook_deliveries of a delivery's id
// and body digest (either may be empty: not checked).
func deliveryKeys(deliveryID, bodyDigest string) []string {
	var seen []string
	if deliveryID != "" {
		seen = append(seen, "d/"+digestKey(deliveryID))
	}
	if bodyDigest != "" {
		seen = append(seen, "b/"+digestKey(bodyDigest))
	}
	return seen
}

// seenDelivery reports whether a delivery whose keys are seen was
// processed before; when not, it records it as processed in tx (and
// removes a few older than DeliveryRetention), so that the Update that
// processes it remembers it.
func seenDelivery(tx store.Tx, seen []string, now time.Time) (bool, error) {
	for _, k := range seen {
		_, err := tx.Get(colDeliveries, k)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return false, err
		}
	}
	if len(seen) == 0 {
		return false, nil
	}
	if err := expiry.Sweep(tx, colDeliveries, expiry.Key(now.Add(-DeliveryRetention))); err != nil {
		return false, err
	}
	for _, k := range seen {
		if err := tx.Put(colDeliveries, k, []byte(createdKey(now))); err != nil {
			return false, err
		}
		if err := tx.Put(colDeliveries, expiry.Entry(now, k), nil); err != nil {
			return false, err
		}
	}
	return false, nil
}

func pushMatches(d *deploymentRecord, repo, branch string) bool {
	if d.Status == StatusAwaitingDelete || d.Source != SourceGitHub {
		return false
	}
	if bop := d.SourceConfig.BuildOnPush; bop == nil || !*bop {
		return false
	}
	if u := d.SourceConfig.RepoURL; u == nil || normalizeRepoURL(*u) != repo {
		return false
	}
	ref := d.SourceRevisionConfig.RepoRef
	return refIsBranch(ref, branch)
}

// refIsBranch reports whether a repo_ref names branch (as itself or as
// refs/heads/<branch>).
func refIsBranch(ref *string, branch string) bool {
	return ref != nil && (*ref == branch || *ref == "refs/heads/"+branch)
}

// normalizeRepoURL reduces a repository URL to lowercased host/path:
// scheme, user, a trailing "/" and ".git" dropped, and the scp-like
// git@host:owner/repo form read as host/owner/repo.
func normalizeRepoURL(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	scheme := false
	if i := strings.Index(s, "://"); i >= 0 {
		s, scheme = s[i+3:], true
	}
	if at := strings.IndexByte(s, '@'); at >= 0 && (strings.IndexByte(s, '/') < 0 || at < strings.IndexByte(s, '/')) {
		s = s[at+1:]
	}
	if !scheme {
		if colon, slash := strings.IndexByte(s, ':'), strings.IndexByte(s, '/'); colon >= 0 && (slash < 0 || colon < slash) {
			s = s[:colon] + "/" + s[colon+1:]
		}
	}
	s = strings.TrimRight(s, "/")
	s = strings.TrimSuffix(s, ".git")
	return strings.TrimRight(s, "/")
}

// installationOwner returns the tenant that holds a GitHub App
// installation and the integration that records it; "" when no tenant
// does.
func installationOwner(r store.Reader, installationID int64) (tenant, integrationID string, err error) {
	owner, err := r.Get(colInstallationOwners, strconv.FormatInt(installationID, 10))
	if errors.Is(err, store.ErrNotFound) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	tenant, integrationID, _ = strings.Cut(string(owner), "/")
	return tenant, integrationID, nil
}

// termIDs lists the ids of the tenant's deployments an index term names,
// newest first: the deployments a push or a pull request of an
// installation concerns.
func (cp *ControlPlane) termIDs(r store.Reader, tenant, term string) ([]string, error) {
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, err
	}
	var ids []string
	err = index.ScanTerm(r, tp, term, "", func(tail string) (bool, error) {
		ids = append(ids, tailID(tail))
		return true, nil
	})
	return ids, err
}
