package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/deployplane/deployplane/controlplane"
)

// The answers a Client keeps (see Client). A deployer reconciling a
// cluster asks the State for every deployment it runs, at each
// reconciliation; over the agent routes that would be a request per
// deployment each time, however little changed. The list of the
// listener's deployments (GET deployments) gives each one's digest,
// which changes with its record: an answer asked for after the list gave
// a digest holds as long as the list gives the same one.
//
// An answer at most listingMaxAge old is what the deployers' checks (a
// newer revision active already) tolerate: the control plane refuses the
// reports of a revision that lost its place all the same. Asking for a
// revision that was not kept (one the deployer found running without the
// Client having seen it end, as when another agent of the listener
// deployed it) drops the deployment's kept answer, so that what the
// deployer decides next about it reads the control plane's.

// listingMaxAge is how old the listener's list of deployments may be for
// the answers it vouches for to be used.
const listingMaxAge = 5 * time.Second

// listingPage is the page size of the list.
const listingPage = controlplane.MaxAgentPageLimit

// stateCache is what a Client keeps of the State's answers.
type stateCache struct {
	walk sync.Mutex // held while the list is read: one reading at a time

	mu       sync.Mutex
	digests  map[string]string // deployment id -> digest, of the last list; nil when it could not be read
	listedAt time.Time         // when that list was asked for
	kept     map[string]*kept  // by deployment id: only those in the last list
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

// digest returns the digest the current list gives the deployment, ""
// when the list could not be read or does not name it (new since, or
// gone): its answers are then neither used nor kept. It reads the list
// again when it is listingMaxAge old.
func (c *Client) digest(ctx context.Context, id string) string {
	s := &c.cache
	if d, ok := s.current(id); ok {
		return d
	}
	s.walk.Lock()
	defer s.walk.Unlock()
	if d, ok := s.current(id); ok { // read by another caller meanwhile
		return d
	}
	asked := time.Now()
	digests, err := c.list(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listedAt = asked
	switch {
	case err != nil:
		// The callers ask the control plane themselves, which says what
		// is wrong; the list is read again listingMaxAge later.
		s.digests = nil
		return ""
	case digests == nil:
		s.noDigests, s.kept = true, nil
		return ""
	}
	s.digests = digests
	for id, k := range s.kept {
		if digests[id] != k.digest {
			delete(s.kept, id) // changed or gone
		}
	}
	return digests[id]
}

// current returns the deployment's digest in the list when the list is
// recent enough to vouch for answers (ok), or when the control plane
// gives no digests.
func (s *stateCache) current(id string) (digest string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noDigests {
		return "", true
	}
	if s.listedAt.IsZero() || time.Since(s.listedAt) >= listingMaxAge {
		return "", false
	}
	return s.digests[id], true
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

// keptDeployment returns the deployment's kept answer when the list
// vouches for it (its digest is digest), else nil.
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
// deployment digest: the record has not changed since as long as the
// list gives it.
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
// digest was another), nil when the current list does not give it
// digest. s.mu is held.
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

// keptRevision returns a kept revision of the deployment when the list
// vouches for the deployment (its digest is digest), else nil.
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
// the list is digest, and drops the deployment's kept answer: it is asked
// for again next time, since a revision the Client had not kept may be
// news the kept answer does not know (another agent of the listener
// deployed it, say).
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
