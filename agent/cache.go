package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	"github.com/deployplane/deployplane/controlplane"
)

// The answers a Client keeps. A deployer reconciling a cluster asks the
// State for every deployment it runs, at each reconciliation; over the
// agent routes that would be a request per deployment each time, however
// little changed. The list of the listener's deployments (GET
// deployments) gives each one's digest, which changes with its record: an
// answer asked for after a list gave a digest holds as long as a later
// list gives the same one. Under a context of Reconciling, the State
// answers from what is kept when the list read then vouches for it;
// elsewhere (a Deploy's checks) it asks, and keeps the answer.
//
// Asking for a revision that was not kept (one the deployer found running
// without the Client having seen it end, as when another agent of the
// listener deployed it) drops the deployment's kept answer, so that what
// the deployer decides next about it reads the control plane's.

// listingPage is the page size of the list.
const listingPage = controlplane.MaxAgentPageLimit

// stateCache is what a Client keeps of the State's answers.
type stateCache struct {
	mu      sync.Mutex
	digests map[string]string // deployment id -> digest, of the last list read; nil before
	kept    map[string]*kept  // by deployment id: only those in the last list
	// noDigests: the control plane's list has no digests (an earlier
	// version): nothing is kept, and the list is not read again.
	noDigests bool
}

// kept is what a Client keeps of one deployment: answers as JSON, so
// that each caller gets a copy of its own.
type kept struct {
	digest string            // the list's digest when it was answered
	dep    []byte            // nil: ask again
	revs   map[string][]byte // terminal revisions, by id
}

// listed is the list a context of Reconciling carries.
type listed struct{ digests map[string]string }

type listedKey struct{}

// Reconciling reads the list of the listener's deployments, with each
// one's record digest (a request per 1,000 deployments), and returns a
// context under which the Client's GetDeployment and GetRevision answer
// from what it kept of a deployment while that list says its record is
// unchanged since: a deployer that reconciles its cluster under it (as
// `deployplane agent` does) asks the control plane for the deployments
// that changed only. Use a new one for each reconciliation: its answers
// are as old as its list. When the list cannot be read (or has no
// digests: an earlier control plane) it returns ctx, under which every
// answer is asked for.
func (c *Client) Reconciling(ctx context.Context) context.Context {
	s := &c.cache
	s.mu.Lock()
	no := s.noDigests
	s.mu.Unlock()
	if no {
		return ctx
	}
	digests, err := c.list(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
		return ctx // each answer is asked for, and says what is wrong
	case digests == nil:
		s.noDigests, s.digests, s.kept = true, nil, nil
		return ctx
	}
	s.digests = digests
	for id, k := range s.kept {
		if digests[id] != k.digest {
			delete(s.kept, id) // changed or gone
		}
	}
	return context.WithValue(ctx, listedKey{}, &listed{digests: digests})
}

// list reads the listener's deployments, every page, and answers each
// one's digest; nil (and no error) when the control plane's answer has no
// digests. One try: when it fails, the State's callers ask the control
// plane directly, and their tries say what is wrong.
func (c *Client) list(ctx context.Context) (map[string]string, error) {
	digests := map[string]string{}
	after := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(listingPage)}}
		if after != "" {
			q.Set("after", after)
		}
		var page controlplane.AgentDeploymentPage
		if _, err := c.call(ctx, http.MethodGet, "deployments", q, nil, &page, 0); err != nil {
			return nil, err
		}
		if len(page.Digests) != len(page.DeploymentIDs) {
			return nil, nil
		}
		for i, id := range page.DeploymentIDs {
			if page.Digests[i] != "" {
				digests[id] = page.Digests[i]
			}
		}
		if page.Next == nil || *page.Next == "" {
			return digests, nil
		}
		after = *page.Next
	}
}

// vouched is the digest the list of ctx (Reconciling's) gives the
// deployment, "" when ctx has none or the list does not name it.
func vouched(ctx context.Context, id string) string {
	if l, ok := ctx.Value(listedKey{}).(*listed); ok {
		return l.digests[id]
	}
	return ""
}

// digest is the digest the last list gave the deployment, "" when none
// did: an answer asked for after this call may be kept under it.
func (s *stateCache) digest(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.digests[id]
}

// keptDeployment returns the deployment's kept answer when its digest is
// digest, else nil.
func (s *stateCache) keptDeployment(id, digest string) *controlplane.Deployment {
	s.mu.Lock()
	k := s.kept[id]
	var b []byte
	if digest != "" && k != nil && k.digest == digest {
		b = k.dep
	}
	s.mu.Unlock()
	var d controlplane.Deployment
	if b == nil || json.Unmarshal(b, &d) != nil {
		return nil
	}
	return &d
}

// keepDeployment keeps an answer asked for after the list gave the
// deployment digest: the record has not changed since as long as a list
// gives it.
func (s *stateCache) keepDeployment(d *controlplane.Deployment, digest string) {
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.entry(d.ID, digest); k != nil {
		k.dep = b
	}
}

// entry returns the deployment's entry for digest (a new one when its
// digest was another), nil when the last list does not give it digest.
// s.mu is held.
func (s *stateCache) entry(id, digest string) *kept {
	if digest == "" || s.digests[id] != digest {
		return nil
	}
	if s.kept == nil {
		s.kept = map[string]*kept{}
	}
	k := s.kept[id]
	if k == nil || k.digest != digest {
		k = &kept{digest: digest}
		s.kept[id] = k
	}
	return k
}

// forget drops what is kept of a deployment.
func (s *stateCache) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kept, id)
}

// keptRevision returns a kept revision of the deployment when the
// deployment's digest is digest, else nil.
func (s *stateCache) keptRevision(dep, rev, digest string) *controlplane.Revision {
	s.mu.Lock()
	k := s.kept[dep]
	var b []byte
	if digest != "" && k != nil && k.digest == digest {
		b = k.revs[rev]
	}
	s.mu.Unlock()
	var r controlplane.Revision
	if b == nil || json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

// keepRevision keeps a terminal revision of a deployment whose digest in
// the list was digest when it was asked for, and drops the deployment's
// kept answer: it is asked for again next time, since a revision the
// Client had not kept may be news the kept answer does not know (another
// agent of the listener deployed it, say).
func (s *stateCache) keepRevision(dep string, r *controlplane.Revision, digest string) {
	var b []byte
	if controlplane.IsTerminal(r.Status) {
		var err error
		if b, err = json.Marshal(r); err != nil {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.entry(dep, digest)
	if k == nil {
		return
	}
	k.dep = nil
	if b == nil {
		return
	}
	if k.revs == nil {
		k.revs = map[string][]byte{}
	}
	k.revs[r.ID] = b
}
