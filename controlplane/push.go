package controlplane

import (
	"context"
	"errors"
	"strconv"
	"strings"

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
}

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
// every github deployment of every tenant's integration with that
// installation id that has build_on_push true, the same repository (see
// PushEvent.RepoURL) and repo_ref equal to the branch (or to
// "refs/heads/<branch>"), and is not being deleted. The revisions are
// created in one Update and supersede older ones like any new revision.
// Tag pushes, other refs and branch deletions create nothing and are not
// errors. The deployments are found through indexes (installation id to
// tenant integrations, integration to build_on_push deployments), never by
// scanning all deployments. Errors: *ValidationError when a branch push
// lacks the installation id, the repository or the commit.
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
		c.add([]any{"body", "installation", "id"}, TypeGreaterThan, "Input should be greater than 0")
	}
	if ev.RepoURL == "" {
		c.add([]any{"body", "repository", "clone_url"}, TypeMissing, "Field required")
	} else {
		c.str([]any{"body", "repository", "clone_url"}, ev.RepoURL, cp.lim.MaxStringBytes)
	}
	if ev.After == "" {
		c.add([]any{"body", "after"}, TypeMissing, "Field required")
	} else {
		c.str([]any{"body", "after"}, ev.After, cp.lim.MaxStringBytes)
	}
	if err := validationError(c.ps); err != nil {
		return nil, err
	}
	repo := normalizeRepoURL(ev.RepoURL)
	now := cp.now()
	var ids []string // allocated outside the closure's reruns
	var out []PushedRevision
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		out = out[:0]
		type integ struct{ tenant, id string }
		var integs []integ
		prefix := strconv.FormatInt(ev.InstallationID, 10) + "/"
		err := tx.Scan(colInstallations, prefix, nil, func(k string, v []byte) (bool, error) {
			integs = append(integs, integ{tenant: k[len(prefix):], id: string(v)})
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, in := range integs {
			var tails []string
			ip := key(in.tenant, idxPush, in.id) + "/"
			err := tx.Scan(colDeploymentIndex, ip, nil, func(k string, _ []byte) (bool, error) {
				tails = append(tails, k[len(ip):])
				return true, nil
			})
			if err != nil {
				return err
			}
			for _, t := range tails {
				_, id, _ := strings.Cut(t, "/")
				d, err := getDeployment(tx, in.tenant, id)
				if err != nil {
					if errors.Is(err, ErrNotFound) {
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
				if err := addRevision(tx, in.tenant, rev); err != nil {
					return err
				}
				if err := putDeployment(tx, in.tenant, d, &next); err != nil {
					return err
				}
				out = append(out, PushedRevision{Tenant: in.tenant, DeploymentID: d.ID, Revision: rev.Revision})
			}
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("github push", err)
	}
	if len(out) > 0 {
		cp.notify()
	}
	if out == nil {
		out = []PushedRevision{}
	}
	return out, nil
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
