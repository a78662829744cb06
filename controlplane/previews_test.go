package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/internal/githubtest"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// statusLog is a PreviewStatusReporter that keeps what it is told and
// numbers the GitHub Deployments it makes from 1.
type statusLog struct {
	mu   sync.Mutex
	got  []controlplane.PreviewStatus
	next int64
}

func (l *statusLog) ReportPreviewStatus(_ context.Context, s *controlplane.PreviewStatus) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := s.GitHubDeploymentID
	if id == 0 {
		l.next++
		id = l.next
	}
	c := *s
	c.GitHubDeploymentID = id
	l.got = append(l.got, c)
	return id, nil
}

// states is the statuses told so far, as "deployment:state ref url".
func (l *statusLog) states() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.got {
		out = append(out, fmt.Sprintf("%d:%s %s %s", s.GitHubDeploymentID, s.State, s.Ref, s.EnvironmentURL))
	}
	return out
}

// deployOK is a Deployer that deploys every revision, served at a url
// naming the deployment.
type deployOK struct{}

func (deployOK) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	_, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeployed,
		controlplane.Step{URL: new("http://previews.example/" + w.Deployment.ID)})
	return err
}

func (deployOK) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

const prInstallation = 4242

// previewFixture is a fixture whose clock is a testclock.Clock (one
// microsecond a reading), with an integration of installation
// prInstallation for tenant A.
func previewFixture(t *testing.T, opts *controlplane.Options) (*fixture, *testclock.Clock, string) {
	t.Helper()
	clk := testclock.New(t0, time.Microsecond)
	f := &fixture{t: t, st: storemem.New(), ctx: context.Background(), now: t0}
	var o controlplane.Options
	if opts != nil {
		o = *opts
	}
	o.Clock = clk.Now
	o.NewID = func() string { f.ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", f.ids) }
	f.cp = controlplane.New(f.st, &o)
	t.Cleanup(func() { f.st.Close() })
	in, err := f.cp.CreateIntegration(f.ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(prInstallation)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	return f, clk, in.ID
}

// previewParent creates a github deployment of acme/agent's main with
// source_config.preview set to preview (JSON) and a secret.
func (f *fixture) previewParent(name, integration, preview string) *controlplane.Deployment {
	f.t.Helper()
	return f.create(tenantA, fmt.Sprintf(`{"name": %q, "source": "github",
		"source_config": {"integration_id": %q, "repo_url": "https://github.com/acme/agent", "build_on_push": true, "preview": %s},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"},
		"secrets": [{"name": "API_KEY", "value": "parent-secret"}]}`, name, integration, preview))
}

// pr is a pull_request delivery of acme/agent's main from branch feature.
func pr(action string, number int64, sha string, labels ...string) *controlplane.PullRequestEvent {
	return &controlplane.PullRequestEvent{InstallationID: prInstallation, Action: action, Number: number,
		BaseRepoURL: "https://github.com/acme/agent.git", BaseRepo: "acme/agent", BaseRef: "main",
		HeadRepoURL: "https://github.com/acme/agent.git", HeadRef: "feature", HeadSHA: sha, Labels: labels,
		DeliveryID: fmt.Sprintf("delivery-%s-%d-%s-%v", action, number, sha, labels)}
}

func (f *fixture) pullRequest(ev *controlplane.PullRequestEvent) []controlplane.PreviewChange {
	f.t.Helper()
	got, err := f.cp.HandleGitHubPullRequest(f.ctx, ev)
	if err != nil {
		f.t.Fatal(err)
	}
	return got
}

func actions(cs []controlplane.PreviewChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Action)
	}
	return out
}

func TestPreviewOfPullRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &statusLog{}
		f, _, integ := previewFixture(t, &controlplane.Options{PreviewStatus: log})
		parent := f.previewParent("agent", integ, `{"mode": "all"}`)
		other := f.create(tenantA, githubPushBody("no-previews", integ))

		// Opened: a preview of the head commit.
		got := f.pullRequest(pr(controlplane.PullRequestOpened, 7, "sha-1"))
		diff(t, "changes of opened", []string{controlplane.PreviewCreated}, actions(got))
		c := got[0]
		diff(t, "parent", parent.ID, c.ParentID)
		p, err := f.cp.GetDeployment(f.ctx, tenantA, c.PreviewID)
		if err != nil {
			t.Fatal(err)
		}
		if !p.IsPreview || p.Name != "agent-pr-7" || *p.SourceRevisionConfig.RepoRef != "feature" ||
			*p.SourceRevisionConfig.RepoCommitSHA != "sha-1" || p.SourceConfig.Preview != nil || *p.SourceConfig.BuildOnPush {
			t.Errorf("preview = %+v", p)
		}
		diff(t, "preview's secrets", parent.Secrets, p.Secrets)
		rev, err := f.cp.GetRevision(f.ctx, tenantA, p.ID, *p.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "revision of opened", c.Revision, rev)
		diff(t, "revision's commit", "sha-1", *rev.SourceRevisionConfig.RepoCommitSHA)

		// The copy is the preview's own: the parent's secrets change alone.
		if _, err := f.cp.UpdateDeployment(f.ctx, tenantA, parent.ID, decode[controlplane.UpdateDeploymentRequest](t,
			`{"secrets": [{"name": "API_KEY", "value": "changed"}]}`)); err != nil {
			t.Fatal(err)
		}
		p2, _ := f.cp.GetDeployment(f.ctx, tenantA, p.ID)
		diff(t, "preview's secrets after the parent's change", parent.Secrets, p2.Secrets)

		// Deployed: the pull request is told, queued, in progress, success at
		// the url.
		f.drainer(deployOK{})()
		synctest.Wait()
		deployed, err := f.cp.GetDeployment(f.ctx, tenantA, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		url := *deployed.URL // github: its custom_url
		diff(t, "statuses after the deploy", []string{"1:queued sha-1 ", "1:in_progress sha-1 ", "1:in_progress sha-1 ",
			"1:in_progress sha-1 ", "1:success sha-1 " + url}, log.states())
		log.mu.Lock()
		if s := log.got[0]; s.Environment != "preview/agent" || s.Repo != "acme/agent" || s.InstallationID != prInstallation {
			t.Errorf("first status %+v", s)
		}
		log.mu.Unlock()

		// Pushed to: a new revision of the same preview at the new commit.
		got = f.pullRequest(pr(controlplane.PullRequestSynchronize, 7, "sha-2"))
		synctest.Wait()
		diff(t, "changes of synchronize", []string{controlplane.PreviewUpdated}, actions(got))
		diff(t, "preview of synchronize", p.ID, got[0].PreviewID)
		diff(t, "new revision's commit", "sha-2", *got[0].Revision.SourceRevisionConfig.RepoCommitSHA)
		// The same delivery again, or its body under another id: nothing.
		again := pr(controlplane.PullRequestSynchronize, 7, "sha-3")
		again.DeliveryID = "delivery-synchronize-7-sha-2-[]"
		diff(t, "changes of a replayed delivery", []string(nil), actions(f.pullRequest(again)))
		again = pr(controlplane.PullRequestSynchronize, 7, "sha-3")
		again.BodyDigest = "digest"
		f.pullRequest(again)
		synctest.Wait()
		again.DeliveryID = "another"
		diff(t, "changes of a replayed body", []string(nil), actions(f.pullRequest(again)))

		f.drainer(deployOK{})()
		synctest.Wait()
		states := log.states()
		diff(t, "last status after the push", "3:success sha-3 "+url, states[len(states)-1])

		// Another branch, another repository, a deployment without
		// previews: no preview.
		ev := pr(controlplane.PullRequestOpened, 8, "sha-x")
		ev.BaseRef = "dev"
		diff(t, "changes of a pull request against dev", []string(nil), actions(f.pullRequest(ev)))
		ev = pr(controlplane.PullRequestOpened, 8, "sha-x")
		ev.BaseRepoURL, ev.HeadRepoURL = "https://github.com/acme/other", "https://github.com/acme/other"
		diff(t, "changes of a pull request of another repository", []string(nil), actions(f.pullRequest(ev)))
		if l, err := f.cp.GetDeployment(f.ctx, tenantA, other.ID); err != nil || l.LatestRevisionID == nil {
			t.Fatal(err)
		}

		// Closed: deleted, with the reason, and the pull request is told.
		got = f.pullRequest(pr(controlplane.PullRequestClosed, 7, "sha-3"))
		diff(t, "changes of closed", []string{controlplane.PreviewDeleted}, actions(got))
		gone, err := f.cp.GetDeployment(f.ctx, tenantA, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if gone.Status != controlplane.StatusAwaitingDelete || gone.StatusMessage == nil || !strings.Contains(*gone.StatusMessage, "pull request #7 was closed") {
			t.Errorf("closed preview: %s %v", gone.Status, gone.StatusMessage)
		}
		synctest.Wait()
		states = log.states()
		diff(t, "last status after closed", "3:inactive sha-3 ", states[len(states)-1])
		f.drainer(deployOK{})()
		if _, err := f.cp.GetDeployment(f.ctx, tenantA, p.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("preview after its teardown: %v, want not found", err)
		}
		// Reopened: a new preview.
		diff(t, "changes of reopened", []string{controlplane.PreviewCreated}, actions(f.pullRequest(pr(controlplane.PullRequestReopened, 7, "sha-3"))))
	})
}

func TestPreviewByLabel(t *testing.T) {
	f, _, integ := previewFixture(t, nil)
	f.previewParent("agent", integ, `{"mode": "label", "label": "preview"}`)
	diff(t, "opened without the label", []string(nil), actions(f.pullRequest(pr(controlplane.PullRequestOpened, 3, "a"))))
	diff(t, "labeled otherwise", []string(nil), actions(f.pullRequest(pr(controlplane.PullRequestLabeled, 3, "a", "bug"))))
	got := f.pullRequest(pr(controlplane.PullRequestLabeled, 3, "a", "bug", "preview"))
	diff(t, "labeled preview", []string{controlplane.PreviewCreated}, actions(got))
	diff(t, "synchronize with the label", []string{controlplane.PreviewUpdated},
		actions(f.pullRequest(pr(controlplane.PullRequestSynchronize, 3, "b", "bug", "preview"))))
	diff(t, "another label removed", []string(nil), actions(f.pullRequest(pr(controlplane.PullRequestUnlabeled, 3, "b", "preview"))))
	diff(t, "the label removed", []string{controlplane.PreviewDeleted}, actions(f.pullRequest(pr(controlplane.PullRequestUnlabeled, 3, "b"))))
	if _, err := f.cp.GetDeployment(f.ctx, tenantA, got[0].PreviewID); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("preview that never ran, deleted: %v, want not found", err)
	}
}

func TestPreviewOfFork(t *testing.T) {
	for _, forks := range []bool{false, true} {
		t.Run(fmt.Sprint("forks ", forks), func(t *testing.T) {
			f, _, integ := previewFixture(t, &controlplane.Options{PreviewForks: forks})
			f.previewParent("agent", integ, `{"mode": "all"}`)
			ev := pr(controlplane.PullRequestOpened, 5, "f00")
			ev.HeadRepoURL = "https://github.com/mallory/agent.git"
			var want []string
			if forks {
				want = []string{controlplane.PreviewCreated}
			}
			diff(t, "changes of a fork's pull request", want, actions(f.pullRequest(ev)))
			// A fork since deleted (no head repository) is a fork too.
			ev = pr(controlplane.PullRequestOpened, 6, "f01")
			ev.HeadRepoURL = ""
			diff(t, "changes of a deleted fork's pull request", want, actions(f.pullRequest(ev)))
		})
	}
}

func TestPreviewIdleTTL(t *testing.T) {
	f, clk, integ := previewFixture(t, nil)
	f.previewParent("agent", integ, `{"mode": "all", "idle_ttl_minutes": 60}`)
	p := f.pullRequest(pr(controlplane.PullRequestOpened, 1, "a"))[0].PreviewID
	f.reachEngine()
	sweep := func(want int) {
		t.Helper()
		n, err := f.cp.SweepPreviews(f.ctx)
		if err != nil || n != want {
			t.Fatalf("SweepPreviews = %d, %v; want %d", n, err, want)
		}
	}
	clk.Advance(50 * time.Minute)
	sweep(0)
	// A request keeps it alive; more within the minute write nothing.
	if err := f.cp.RecordActivity(f.ctx, tenantA, p, clk.Now()); err != nil {
		t.Fatal(err)
	}
	before := dump(t, f.st)["cp_preview_activity"]
	if err := f.cp.RecordActivity(f.ctx, tenantA, p, clk.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	diff(t, "activity after a second request in the minute", before, dump(t, f.st)["cp_preview_activity"])
	clk.Advance(50 * time.Minute)
	sweep(0)
	// A push does too.
	f.pullRequest(pr(controlplane.PullRequestSynchronize, 1, "b"))
	f.reachEngine()
	clk.Advance(59 * time.Minute)
	sweep(0)
	clk.Advance(2 * time.Minute)
	sweep(1)
	d, err := f.cp.GetDeployment(f.ctx, tenantA, p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != controlplane.StatusAwaitingDelete || d.StatusMessage == nil || !strings.Contains(*d.StatusMessage, "idle for 61 minutes") {
		t.Errorf("idle preview: %s %v", d.Status, *d.StatusMessage)
	}
	sweep(0)
	// A deployment that is no preview records nothing.
	if err := f.cp.RecordActivity(f.ctx, tenantA, "00000000-0000-7000-8000-0000000000ff", clk.Now()); err != nil {
		t.Fatal(err)
	}
	diff(t, "activity of no preview", map[string]string(nil), dump(t, f.st)["cp_preview_activity"])
}

func TestPreviewMaxConcurrent(t *testing.T) {
	f, clk, integ := previewFixture(t, nil)
	f.previewParent("agent", integ, `{"mode": "all", "max_concurrent": 2}`)
	p1 := f.pullRequest(pr(controlplane.PullRequestOpened, 1, "a"))[0].PreviewID
	clk.Advance(time.Minute)
	p2 := f.pullRequest(pr(controlplane.PullRequestOpened, 2, "b"))[0].PreviewID
	f.reachEngine()
	clk.Advance(time.Minute)
	// The first is asked for: the second is now the one idle longest.
	if err := f.cp.RecordActivity(f.ctx, tenantA, p1, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	got := f.pullRequest(pr(controlplane.PullRequestOpened, 3, "c"))
	diff(t, "changes of a third pull request", []string{controlplane.PreviewDeleted, controlplane.PreviewCreated}, actions(got))
	diff(t, "preview deleted", p2, got[0].PreviewID)
	d, err := f.cp.GetDeployment(f.ctx, tenantA, p2)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "reason", "preview deleted: parent agent is at max_concurrent 2 (pull request #3 needs a preview)", *d.StatusMessage)
	if d, err := f.cp.GetDeployment(f.ctx, tenantA, p1); err != nil || d.Status == controlplane.StatusAwaitingDelete {
		t.Errorf("the preview asked for: %v, %v", d, err)
	}
}

func TestPreviewsDeletedWithParent(t *testing.T) {
	f, _, integ := previewFixture(t, nil)
	parent := f.previewParent("agent", integ, `{"mode": "all"}`)
	var ids []string
	for n := range int64(3) {
		ids = append(ids, f.pullRequest(pr(controlplane.PullRequestOpened, n+1, "a"))[0].PreviewID)
	}
	f.reachEngine()
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, parent.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		d, err := f.cp.GetDeployment(f.ctx, tenantA, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != controlplane.StatusAwaitingDelete || !strings.Contains(*d.StatusMessage, "its parent agent was deleted") {
			t.Errorf("preview %s: %s %v", id, d.Status, *d.StatusMessage)
		}
	}
	f.drainer(deployOK{})()
	for _, c := range []string{"cp_previews", "cp_preview_of", "cp_preview_activity"} {
		if recs := dump(t, f.st)[c]; len(recs) > 0 {
			t.Errorf("%s after the deletes: %v", c, recs)
		}
	}
	// A preview deleted by itself is forgotten: the pull request's next
	// push makes a new one.
	p2 := f.previewParent("agent2", integ, `{"mode": "all"}`)
	first := f.pullRequest(pr(controlplane.PullRequestOpened, 9, "a"))
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, first[0].PreviewID); err != nil {
		t.Fatal(err)
	}
	got := f.pullRequest(pr(controlplane.PullRequestSynchronize, 9, "b"))
	diff(t, "changes after the preview was deleted", []string{controlplane.PreviewCreated}, actions(got))
	diff(t, "parent", p2.ID, got[0].ParentID)
}

func TestPreviewConfigRules(t *testing.T) {
	f, _, integ := previewFixture(t, nil)
	for _, tc := range []struct {
		preview string
		want    []string
	}{
		{`{}`, []string{"body.source_config.preview.mode: missing"}},
		{`{"mode": "some"}`, []string{"body.source_config.preview.mode: literal_error"}},
		{`{"mode": "label"}`, []string{"body.source_config.preview.label: missing"}},
		{`{"mode": "all", "label": "x"}`, []string{"body.source_config.preview.label: not_applicable"}},
		{`{"mode": "all", "idle_ttl_minutes": 0, "max_concurrent": 0}`, []string{"body.source_config.preview.idle_ttl_minutes: greater_than_equal",
			"body.source_config.preview.max_concurrent: greater_than_equal"}},
	} {
		body := fmt.Sprintf(`{"name": "x", "source": "github",
			"source_config": {"integration_id": %q, "repo_url": "https://github.com/acme/agent", "preview": %s},
			"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, integ, tc.preview)
		_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, body))
		diff(t, "problems of "+tc.preview, tc.want, locTypes(problems(t, err)))
	}
	_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, `{"name": "d", "source": "external_docker",
		"source_config": {"preview": {"mode": "all"}}, "source_revision_config": {"image_uri": "r/a:1"}}`))
	diff(t, "problems of an external_docker preview", []string{"body.source_config.preview: not_applicable_to_source"}, locTypes(problems(t, err)))
	// The defaults.
	def := controlplane.PreviewConfig{}.WithDefaults()
	if *def.IdleTTLMinutes != controlplane.DefaultPreviewIdleTTLMinutes || *def.MaxConcurrent != controlplane.DefaultPreviewMaxConcurrent {
		t.Errorf("defaults %+v", def)
	}
	// Names are unique and within the limit.
	long := strings.Repeat("a", 63)
	f.previewParent(long, integ, `{"mode": "all"}`)
	f.create(tenantA, githubBody(long[:58]+"-pr-4", integ))
	got := f.pullRequest(pr(controlplane.PullRequestOpened, 4, "a"))
	d, err := f.cp.GetDeployment(f.ctx, tenantA, got[0].PreviewID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "preview name", long[:56]+"-pr-4-2", d.Name)
	if len(d.Name) != 63 {
		t.Errorf("name %q of %d bytes", d.Name, len(d.Name))
	}
	_, err = f.cp.HandleGitHubPullRequest(f.ctx, &controlplane.PullRequestEvent{Action: controlplane.PullRequestOpened})
	diff(t, "problems of an empty delivery", []string{"body.installation.id: greater_than", "body.number: greater_than",
		"body.pull_request.base.repo.clone_url: missing", "body.pull_request.base.ref: missing", "body.pull_request.base.repo.full_name: missing",
		"body.pull_request.head.ref: missing", "body.pull_request.head.sha: missing"}, locTypes(problems(t, err)))
}

// TestPreviewToldToGitHub: through the GitHub App, a preview's statuses
// reach the pull request as a Deployment of the head commit and its
// statuses.
func TestPreviewToldToGitHub(t *testing.T) {
	g := githubtest.New(t)
	g.AddInstallation(prInstallation, "acme")
	app, err := githubapp.New(&githubapp.Options{AppID: g.AppID(), Slug: g.Slug(), PrivateKeyPEM: g.PrivateKeyPEM(),
		ClientID: g.ClientID(), ClientSecret: g.ClientSecret(), APIURL: g.APIURL(), WebURL: g.URL(), HTTPClient: g.Client()})
	if err != nil {
		t.Fatal(err)
	}
	f, _, integ := previewFixture(t, &controlplane.Options{PreviewStatus: app})
	f.previewParent("agent", integ, `{"mode": "all"}`)
	p := f.pullRequest(pr(controlplane.PullRequestOpened, 12, "c0ffee"))[0].PreviewID
	f.drainer(deployOK{})()
	if err := f.cp.FlushPreviewStatuses(f.ctx); err != nil {
		t.Fatal(err)
	}
	d, err := f.cp.GetDeployment(f.ctx, tenantA, p)
	if err != nil {
		t.Fatal(err)
	}
	no := false
	diff(t, "GitHub deployments", []githubtest.Deployment{{ID: 1, InstallationID: prInstallation, Repo: "acme/agent", Ref: "c0ffee",
		Environment: "preview/agent", Description: "Preview of the pull request", Transient: true, AutoMerge: &no, RequiredContexts: []string{}}},
		g.Deployments())
	var states []string
	for _, s := range g.DeploymentStatuses() {
		states = append(states, s.State+" "+s.EnvironmentURL)
	}
	diff(t, "GitHub deployment statuses", []string{"queued ", "in_progress ", "in_progress ", "in_progress ", "success " + *d.URL}, states)

	// A GitHub that fails changes nothing of the preview.
	g.Down(true)
	got := f.pullRequest(pr(controlplane.PullRequestClosed, 12, "c0ffee"))
	diff(t, "changes of closed with GitHub down", []string{controlplane.PreviewDeleted}, actions(got))
	if err := f.cp.FlushPreviewStatuses(f.ctx); err != nil {
		t.Fatal(err)
	}
	g.Down(false)
	diff(t, "statuses after GitHub was down", 5, len(g.DeploymentStatuses()))
}

// TestPreviewsTurnedOff: a PATCH that removes source_config.preview (a
// JSON merge patch's null) turns previews off: the parent's previews are
// deleted by the next sweep, and pull requests make no more.
func TestPreviewsTurnedOff(t *testing.T) {
	f, _, integ := previewFixture(t, nil)
	parent := f.previewParent("agent", integ, `{"mode": "all"}`)
	p := f.pullRequest(pr(controlplane.PullRequestOpened, 1, "a"))[0].PreviewID
	d, err := f.cp.UpdateDeployment(f.ctx, tenantA, parent.ID, &controlplane.UpdateDeploymentRequest{Remove: []string{"source_config.preview"}})
	if err != nil {
		t.Fatal(err)
	}
	if d.SourceConfig.Preview != nil {
		t.Fatalf("preview after its removal: %+v", d.SourceConfig.Preview)
	}
	diff(t, "changes of a pull request after previews were turned off", []string(nil),
		actions(f.pullRequest(pr(controlplane.PullRequestOpened, 2, "b"))))
	if n, err := f.cp.SweepPreviews(f.ctx); err != nil || n != 1 {
		t.Fatalf("SweepPreviews = %d, %v; want 1", n, err)
	}
	if _, err := f.cp.GetDeployment(f.ctx, tenantA, p); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("preview after previews were turned off: %v", err)
	}
}
