package httphandler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// The lifecycle over HTTP (wire contract section 7): a real ControlPlane
// runs Run with the simulated deployer behind a real httptest.Server, and
// the tests poll the API the way a client does, each wait bounded by a
// deadline. Each test runs in a synctest bubble, the server on an in-memory
// network: the deployer's steps, the reconcile loop's polling and the
// tests' waits all run on the bubble's fake clock, so a loaded machine
// changes nothing.

// step is the simulated deployer's delay per status in these tests.
const step = time.Millisecond

// pollDeadline bounds every wait for the lifecycle, in fake time; only a
// broken lifecycle reaches it.
const pollDeadline = 30 * time.Second

// newLiveServer starts a server whose ControlPlane runs Run with d until
// the test ends. opts may be nil. Call it in a synctest bubble.
func newLiveServer(t *testing.T, d controlplane.Deployer, opts *httphandler.Options) *server {
	t.Helper()
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 10 * time.Millisecond})
	s := newServerWith(t, serverSetup{cp: cp, opts: opts, inMemory: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, d) }()
	t.Cleanup(func() { // runs before the server closes
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}

// inBubble is f as a subtest that runs in a synctest bubble.
func inBubble(f func(*testing.T)) func(*testing.T) {
	return func(t *testing.T) { synctest.Test(t, f) }
}

func sim(o *deploysim.Options) *deploysim.Deployer {
	if o == nil {
		o = &deploysim.Options{}
	}
	if o.Step == 0 {
		o.Step = step
	}
	return deploysim.New(o)
}

// eventually calls f every few (fake) milliseconds until it reports done,
// and fails the test with f's last description of the state at the
// deadline.
func eventually(t *testing.T, what string, f func() (done bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(pollDeadline)
	for {
		done, state := f()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not done after %v; last state: %s", what, pollDeadline, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRevision polls GET .../revisions/{id} until the revision is terminal
// and checks that it ended in want. It also checks that the statuses seen
// on the way follow the source's happy path in order.
func (s *server) waitRevision(t *testing.T, key, deploymentID, revisionID string, want controlplane.RevisionStatus) controlplane.Revision {
	t.Helper()
	path := "/v2/deployments/" + deploymentID + "/revisions/" + revisionID
	var rev controlplane.Revision
	var seen []controlplane.RevisionStatus
	eventually(t, "revision "+revisionID+" to end", func() (bool, string) {
		rev = must[controlplane.Revision](t, s, key, "GET", path, "", 200)
		if len(seen) == 0 || seen[len(seen)-1] != rev.Status {
			seen = append(seen, rev.Status)
		}
		return controlplane.IsTerminal(rev.Status), string(rev.Status)
	})
	if rev.Status != want {
		t.Fatalf("revision %s ended %s (%v), want %s", revisionID, rev.Status, deref(rev.StatusMessage), want)
	}
	happy := controlplane.HappyPath(rev.Source)
	last := -1
	for _, st := range seen {
		i := slices.Index(happy, st)
		if i < 0 {
			continue // the failure at the end
		}
		if i <= last {
			t.Errorf("statuses seen out of order: %v", seen)
		}
		last = i
	}
	return rev
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// deployment reads a deployment.
func (s *server) deployment(t *testing.T, key, id string) controlplane.Deployment {
	t.Helper()
	return must[controlplane.Deployment](t, s, key, "GET", "/v2/deployments/"+id, "", 200)
}

// checkActive: the deployment is READY with rev active, and the image
// version the simulation gave it.
func checkActive(t *testing.T, d controlplane.Deployment, rev controlplane.Revision, imageVersion string) {
	t.Helper()
	diff(t, "deployment status", controlplane.StatusReady, d.Status)
	diff(t, "active_revision_id", rev.ID, deref(d.ActiveRevisionID))
	diff(t, "image_version", imageVersion, deref(d.ImageVersion))
}

// TestLifecycleReachesDeployed: a created deployment's first revision,
// polled like the quick start does, reaches DEPLOYED for both sources; the
// deployment then is READY with it active.
func TestLifecycleReachesDeployed(t *testing.T) {
	for _, c := range []struct {
		source string
		body   func(integrationID string) string
	}{
		{"github", func(in string) string { return githubBody("gh-agent", in) }},
		{"external_docker", func(string) string { return dockerBody("docker-agent") }},
	} {
		t.Run(c.source, inBubble(func(t *testing.T) {
			s := newLiveServer(t, sim(nil), nil)
			in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
			d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", c.body(in.ID), 201)
			diff(t, "status after create", controlplane.StatusAwaitingDatabase, d.Status)
			rev := s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)
			d = s.deployment(t, keyA, d.ID)
			if c.source == "github" {
				sha := deref(rev.SourceRevisionConfig.RepoCommitSHA)
				if s, ok := sha.(string); !ok || len(s) != 40 || strings.Trim(s, "0123456789abcdef") != "" {
					t.Fatalf("repo_commit_sha of a built github revision: %v", sha)
				}
				checkActive(t, d, rev, "git-"+sha.(string)[:12])
			} else {
				checkActive(t, d, rev, "1")
				diff(t, "repo_commit_sha of a docker revision", nil, deref(rev.SourceRevisionConfig.RepoCommitSHA))
			}
		}))
	}
}

// TestLifecyclePatchBecomesActive: a PATCH that makes a revision is
// deployed, becomes active, and the older DEPLOYED revision keeps its
// status.
func TestLifecyclePatchBecomesActive(t *testing.T) { synctest.Test(t, lifecyclePatchBecomesActive) }

func lifecyclePatchBecomesActive(t *testing.T) {
	s := newLiveServer(t, sim(nil), nil)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	first := s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)

	p := must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID,
		`{"source_revision_config": {"image_uri": "registry.example/agent:2"}}`, 200)
	if *p.LatestRevisionID == first.ID {
		t.Fatal("the PATCH made no revision")
	}
	diff(t, "active while the new revision deploys", first.ID, deref(p.ActiveRevisionID))
	second := s.waitRevision(t, keyA, d.ID, *p.LatestRevisionID, controlplane.RevisionDeployed)
	checkActive(t, s.deployment(t, keyA, d.ID), second, "2")
	old := must[controlplane.Revision](t, s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions/"+first.ID, "", 200)
	diff(t, "the older revision's status", controlplane.RevisionDeployed, old.Status)
}

// TestLifecycleRedeploy: redeploying an older revision creates a new one
// with its snapshot, which is deployed and becomes active.
func TestLifecycleRedeploy(t *testing.T) { synctest.Test(t, lifecycleRedeploy) }

func lifecycleRedeploy(t *testing.T) {
	s := newLiveServer(t, sim(nil), nil)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	first := s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)
	p := must[controlplane.Deployment](t, s, keyA, "PATCH", "/v2/deployments/"+d.ID,
		`{"source_revision_config": {"image_uri": "registry.example/agent:2"}}`, 200)
	s.waitRevision(t, keyA, d.ID, *p.LatestRevisionID, controlplane.RevisionDeployed)

	re := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments/"+d.ID+"/revisions/"+first.ID+"/redeploy", "", 200)
	if *re.LatestRevisionID == first.ID || *re.LatestRevisionID == *p.LatestRevisionID {
		t.Fatalf("redeploy made no new revision: %v", *re.LatestRevisionID)
	}
	copied := s.waitRevision(t, keyA, d.ID, *re.LatestRevisionID, controlplane.RevisionDeployed)
	diff(t, "the copy's snapshot", first.SourceRevisionConfig, copied.SourceRevisionConfig)
	checkActive(t, s.deployment(t, keyA, d.ID), copied, "1")
}

// gatedTeardown is the simulated deployer whose teardowns wait until open
// is closed, so that a test can act on a deployment while it is
// AWAITING_DELETE.
type gatedTeardown struct {
	*deploysim.Deployer
	open chan struct{}
}

func (g gatedTeardown) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Deployer.Teardown(ctx, tenant, d)
}

// TestLifecycleDelete: DELETE answers 204 and the deployment is
// AWAITING_DELETE (PATCH and redeploy answer 400, its name stays taken)
// until the deployer has torn it down; then every route of it answers 404
// and the name can be used again.
func TestLifecycleDelete(t *testing.T) { synctest.Test(t, lifecycleDelete) }

func lifecycleDelete(t *testing.T) {
	gate := gatedTeardown{Deployer: sim(nil), open: make(chan struct{})}
	s := newLiveServer(t, gate, nil)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	rev := s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)

	r := s.as(keyA, "DELETE", "/v2/deployments/"+d.ID, "")
	diff(t, "DELETE", 204, r.status)
	diff(t, "DELETE body", "", string(r.body))
	diff(t, "status while deleting", controlplane.StatusAwaitingDelete, s.deployment(t, keyA, d.ID).Status)
	being := "Deployment ID " + d.ID + " is being deleted."
	r = s.as(keyA, "POST", "/v2/deployments/"+d.ID+"/revisions/"+rev.ID+"/redeploy", "")
	diff(t, "redeploy while deleting", "400 "+being, fmt.Sprint(r.status, " ", detail(t, r)))
	r = s.as(keyA, "PATCH", "/v2/deployments/"+d.ID, `{"source_revision_config": {"image_uri": "registry.example/agent:2"}}`)
	diff(t, "PATCH while deleting", "400 "+being, fmt.Sprint(r.status, " ", detail(t, r)))
	r = s.as(keyA, "POST", "/v2/deployments", dockerBody("agent"))
	diff(t, "the name while deleting", 409, r.status)

	close(gate.open)
	eventually(t, "the deployment to be removed", func() (bool, string) {
		r := s.as(keyA, "GET", "/v2/deployments/"+d.ID, "")
		return r.status == 404, fmt.Sprint(r.status, " ", string(r.body))
	})
	r = s.as(keyA, "GET", "/v2/deployments/"+d.ID, "")
	diff(t, "GET after removal", "Deployment ID "+d.ID+" not found.", detail(t, r))
	for _, path := range []string{"/revisions", "/revisions/" + rev.ID} {
		r := s.as(keyA, "GET", "/v2/deployments/"+d.ID+path, "")
		diff(t, "GET "+path+" after removal", 404, r.status)
	}
	page := must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments", "", 200)
	diff(t, "list after removal", []string{}, ids(page.Resources))

	again := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", dockerBody("agent"), 201)
	s.waitRevision(t, keyA, again.ID, *again.LatestRevisionID, controlplane.RevisionDeployed)
}

// TestLifecycleFailures: a step that fails ends the revision in the failure
// of its phase with the deployer's message; the deployment stays
// AWAITING_DATABASE with no active revision.
func TestLifecycleFailures(t *testing.T) {
	for _, c := range []struct {
		source string
		failAt controlplane.RevisionStatus
		want   controlplane.RevisionStatus
	}{
		{"external_docker", controlplane.RevisionQueued, controlplane.RevisionCreateFailed},
		{"github", controlplane.RevisionAwaitingBuild, controlplane.RevisionBuildFailed},
		{"github", controlplane.RevisionBuilding, controlplane.RevisionBuildFailed},
		{"github", controlplane.RevisionDeploying, controlplane.RevisionDeployFailed},
		{"external_docker", controlplane.RevisionAwaitingDeploy, controlplane.RevisionDeployFailed},
	} {
		t.Run(c.source+" at "+string(c.failAt), inBubble(func(t *testing.T) {
			msg := "the simulation fails at " + string(c.failAt)
			s := newLiveServer(t, sim(&deploysim.Options{FailAt: c.failAt, FailMessage: msg}), nil)
			body := dockerBody("agent")
			if c.source == "github" {
				in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
				body = githubBody("agent", in.ID)
			}
			d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", body, 201)
			rev := s.waitRevision(t, keyA, d.ID, *d.LatestRevisionID, c.want)
			diff(t, "status_message", msg, deref(rev.StatusMessage))
			d = s.deployment(t, keyA, d.ID)
			diff(t, "deployment status", controlplane.StatusAwaitingDatabase, d.Status)
			diff(t, "active_revision_id", nil, deref(d.ActiveRevisionID))
			failed := must[controlplane.RevisionPage](t, s, keyA, "GET",
				"/v2/deployments/"+d.ID+"/revisions?status="+string(c.want), "", 200)
			diff(t, "revisions listed by the failure status", []string{rev.ID}, revIDs(failed.Resources))
		}))
	}
}
