package deploysim_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storemem"
)

const tenant = "acme"

// recorder wraps a Deployer and records every step its Reporter accepted.
type recorder struct {
	controlplane.Deployer
	mu    sync.Mutex
	steps []controlplane.Step
}

type recReporter struct {
	r   controlplane.Reporter
	rec *recorder
}

func (r *recReporter) Report(ctx context.Context, s controlplane.Step) error {
	err := r.r.Report(ctx, s)
	if err == nil {
		r.rec.mu.Lock()
		r.rec.steps = append(r.rec.steps, s)
		r.rec.mu.Unlock()
	}
	return err
}

func (r *recReporter) Log(ctx context.Context, lines ...controlplane.LogLine) error {
	return r.r.Log(ctx, lines...)
}

func (r *recorder) Deploy(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter) error {
	return r.Deployer.Deploy(ctx, w, &recReporter{r: rep, rec: r})
}

func (r *recorder) statuses() []controlplane.RevisionStatus {
	var out []controlplane.RevisionStatus
	for _, s := range r.steps {
		out = append(out, s.Status)
	}
	return out
}

type env struct {
	t   *testing.T
	ctx context.Context
	cp  *controlplane.ControlPlane
}

// newEnv is a control plane over storemem. Every test runs in a synctest
// bubble, so the simulation's steps and the control plane's retry delays
// pass in fake time: the tests do not depend on the machine's speed.
func newEnv(t *testing.T) *env {
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	// Work a Deployer gave back unfinished is retried after PollInterval.
	return &env{t: t, ctx: context.Background(), cp: controlplane.New(st, &controlplane.Options{PollInterval: time.Millisecond})}
}

func (e *env) github(bop bool) *controlplane.Deployment {
	e.t.Helper()
	in, err := e.cp.CreateIntegration(e.ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(42)), Name: new("acme")})
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := e.cp.CreateDeployment(e.ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("gh"), Source: new(controlplane.SourceGitHub),
		SourceConfig:         &controlplane.SourceConfig{IntegrationID: &in.ID, RepoURL: new("https://github.com/acme/agent"), BuildOnPush: new(bop)},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")}})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *env) docker() *controlplane.Deployment {
	e.t.Helper()
	d, err := e.cp.CreateDeployment(e.ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("dk"), Source: new(controlplane.SourceExternalDocker),
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.4.2")}})
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// drain processes work until there is none.
func (e *env) drain(d controlplane.Deployer) {
	e.t.Helper()
	for {
		ok, err := e.cp.Process(e.ctx, d)
		if err != nil {
			e.t.Fatal(err)
		}
		if !ok {
			return
		}
	}
}

func (e *env) revision(d *controlplane.Deployment) *controlplane.Revision {
	e.t.Helper()
	r, err := e.cp.GetRevision(e.ctx, tenant, d.ID, *d.LatestRevisionID)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) deployment(d *controlplane.Deployment) *controlplane.Deployment {
	e.t.Helper()
	got, err := e.cp.GetDeployment(e.ctx, tenant, d.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

const tiny = time.Microsecond

// inBubble is f as a subtest that runs in a synctest bubble.
func inBubble(f func(*testing.T)) func(*testing.T) {
	return func(t *testing.T) { synctest.Test(t, f) }
}

func TestGitHubGoesThroughTheBuild(t *testing.T) { synctest.Test(t, gitHubGoesThroughTheBuild) }

func gitHubGoesThroughTheBuild(t *testing.T) {
	e := newEnv(t)
	d := e.github(false)
	rec := &recorder{Deployer: deploysim.New(&deploysim.Options{Step: tiny})}
	e.drain(rec)
	want := []controlplane.RevisionStatus{"QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"}
	if diff := cmp.Diff(want, rec.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	rev := e.revision(d)
	sha := deploysim.FakeCommitSHA(&controlplane.Work{Deployment: *d, Revision: *rev})
	if len(sha) != 40 || rev.SourceRevisionConfig.RepoCommitSHA == nil || *rev.SourceRevisionConfig.RepoCommitSHA != sha {
		t.Errorf("repo_commit_sha = %v, want the fake sha %s", rev.SourceRevisionConfig.RepoCommitSHA, sha)
	}
	// The quick start shows logs: the build's steps, then the deployer's.
	for typ, want := range map[controlplane.LogType][]string{
		controlplane.LogBuild: {"[simulated] Waiting for a builder.", "[simulated] Cloning https://github.com/acme/agent at main.",
			"[simulated] Checked out commit " + sha + "."},
		controlplane.LogDeploy: {"[simulated] Revision " + rev.ID + " queued."},
	} {
		page, err := e.cp.ListLogs(e.ctx, tenant, d.ID, rev.ID, &controlplane.LogQuery{Type: typ, Limit: new(3)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range page.Logs {
			got = append(got, l.Message)
		}
		if diff := cmp.Diff(want[:min(3, len(want))], got[:min(len(want), len(got))]); diff != "" {
			t.Errorf("first %s log lines (-want +got):\n%s", typ, diff)
		}
	}
	last, err := e.cp.ListLogs(e.ctx, tenant, d.ID, rev.ID, &controlplane.LogQuery{Type: controlplane.LogDeploy, Order: "desc", Limit: new(1)})
	if err != nil || len(last.Logs) != 1 || last.Logs[0].Message != "[simulated] Revision "+rev.ID+" is serving." {
		t.Errorf("last deploy log line = %+v, %v; want the serving line", last, err)
	}
	got := e.deployment(d)
	if got.Status != controlplane.StatusReady || got.ActiveRevisionID == nil || *got.ActiveRevisionID != rev.ID ||
		got.ImageVersion == nil || *got.ImageVersion != "git-"+sha[:12] {
		t.Errorf("deployment status %s, active %v, image %v; want READY, %s, git-%s", got.Status, got.ActiveRevisionID, got.ImageVersion, rev.ID, sha[:12])
	}
}

func TestExternalDockerSkipsTheBuild(t *testing.T) { synctest.Test(t, externalDockerSkipsTheBuild) }

func externalDockerSkipsTheBuild(t *testing.T) {
	e := newEnv(t)
	d := e.docker()
	rec := &recorder{Deployer: deploysim.New(&deploysim.Options{Step: tiny, FailAt: controlplane.RevisionBuilding})} // not on its path
	e.drain(rec)
	want := []controlplane.RevisionStatus{"QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"}
	if diff := cmp.Diff(want, rec.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if rev := e.revision(d); rev.SourceRevisionConfig.RepoCommitSHA != nil {
		t.Errorf("external_docker revision got a commit sha %s", *rev.SourceRevisionConfig.RepoCommitSHA)
	}
	if got := e.deployment(d); got.ImageVersion == nil || *got.ImageVersion != "1.4.2" {
		t.Errorf("image_version = %v, want the image tag 1.4.2", got.ImageVersion)
	}
}

func TestFailAt(t *testing.T) {
	for _, tc := range []struct {
		at     controlplane.RevisionStatus
		github bool
		want   []controlplane.RevisionStatus
	}{
		{"CREATING", false, []controlplane.RevisionStatus{"CREATE_FAILED"}},
		{"QUEUED", true, []controlplane.RevisionStatus{"QUEUED", "CREATE_FAILED"}},
		{"BUILDING", true, []controlplane.RevisionStatus{"QUEUED", "AWAITING_BUILD", "BUILDING", "BUILD_FAILED"}},
		{"AWAITING_DEPLOY", false, []controlplane.RevisionStatus{"QUEUED", "AWAITING_DEPLOY", "DEPLOY_FAILED"}},
		{"DEPLOYING", true, []controlplane.RevisionStatus{"QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOY_FAILED"}},
	} {
		t.Run(string(tc.at), inBubble(func(t *testing.T) {
			e := newEnv(t)
			var d *controlplane.Deployment
			if tc.github {
				d = e.github(false)
			} else {
				d = e.docker()
			}
			rec := &recorder{Deployer: deploysim.New(&deploysim.Options{Step: tiny, FailAt: tc.at, FailMessage: "boom"})}
			e.drain(rec)
			if diff := cmp.Diff(tc.want, rec.statuses()); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			rev := e.revision(d)
			if rev.Status != tc.want[len(tc.want)-1] || rev.StatusMessage == nil || *rev.StatusMessage != "boom" {
				t.Errorf("revision %s (%v), want %s with the message", rev.Status, rev.StatusMessage, tc.want[len(tc.want)-1])
			}
			// The failure's message is the last line of its phase's log.
			typ := controlplane.LogDeploy
			if tc.want[len(tc.want)-1] == controlplane.RevisionBuildFailed {
				typ = controlplane.LogBuild
			}
			last, err := e.cp.ListLogs(e.ctx, tenant, d.ID, rev.ID, &controlplane.LogQuery{Type: typ, Order: "desc", Limit: new(1)})
			if err != nil || len(last.Logs) != 1 || last.Logs[0].Level != controlplane.LevelError || last.Logs[0].Message != "boom" {
				t.Errorf("last %s log line = %+v, %v; want boom at ERROR", typ, last, err)
			}
			if got := e.deployment(d); got.Status != controlplane.StatusAwaitingDatabase || got.ActiveRevisionID != nil {
				t.Errorf("deployment %s, active %v; want AWAITING_DATABASE and none", got.Status, got.ActiveRevisionID)
			}
		}))
	}
}

// stopAt is a Deployer that runs the simulation until the revision reaches
// a status, then gives up (as if the process stopped there).
type stopAt struct {
	sim  controlplane.Deployer
	stop controlplane.RevisionStatus
}

type stopReporter struct {
	r    controlplane.Reporter
	stop controlplane.RevisionStatus
}

var errStopped = context.Canceled

func (s *stopReporter) Report(ctx context.Context, st controlplane.Step) error {
	if err := s.r.Report(ctx, st); err != nil {
		return err
	}
	if st.Status == s.stop {
		return errStopped
	}
	return nil
}

func (s *stopReporter) Log(ctx context.Context, lines ...controlplane.LogLine) error {
	return s.r.Log(ctx, lines...)
}

func (s *stopAt) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	return s.sim.Deploy(ctx, w, &stopReporter{r: r, stop: s.stop})
}

func (s *stopAt) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	return s.sim.Teardown(ctx, tenant, d)
}

func TestResumesWhereTheRevisionIs(t *testing.T) { synctest.Test(t, resumesWhereTheRevisionIs) }

func resumesWhereTheRevisionIs(t *testing.T) {
	e := newEnv(t)
	d := e.github(false)
	sim := deploysim.New(&deploysim.Options{Step: tiny})
	if ok, err := e.cp.Process(e.ctx, &stopAt{sim: sim, stop: controlplane.RevisionBuilding}); !ok || err != nil {
		t.Fatalf("Process = %v, %v", ok, err)
	}
	if rev := e.revision(d); rev.Status != controlplane.RevisionBuilding {
		t.Fatalf("revision %s, want BUILDING", rev.Status)
	}
	rec := &recorder{Deployer: sim}
	time.Sleep(2 * time.Millisecond) // fake time: past the retry delay (PollInterval)
	e.drain(rec)
	want := []controlplane.RevisionStatus{"AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"}
	if diff := cmp.Diff(want, rec.statuses()); diff != "" {
		t.Errorf("resumed statuses (-want +got):\n%s", diff)
	}
}

func TestPushedCommitIsKept(t *testing.T) { synctest.Test(t, pushedCommitIsKept) }

func pushedCommitIsKept(t *testing.T) {
	e := newEnv(t)
	d := e.github(true)
	sim := deploysim.New(&deploysim.Options{Step: tiny})
	e.drain(sim)
	pushed, err := e.cp.HandleGitHubPush(e.ctx, &controlplane.PushEvent{InstallationID: 42, RepoURL: "https://github.com/acme/agent.git",
		Ref: "refs/heads/main", After: "0123456789abcdef0123456789abcdef01234567"})
	if err != nil || len(pushed) != 1 {
		t.Fatalf("push = %v, %v; want one revision", pushed, err)
	}
	e.drain(sim)
	got := e.deployment(d)
	if *got.ActiveRevisionID != pushed[0].Revision.ID || *got.ImageVersion != "git-0123456789ab" {
		t.Errorf("active %s image %s; want the pushed revision %s, git-0123456789ab", *got.ActiveRevisionID, *got.ImageVersion, pushed[0].Revision.ID)
	}
}

func TestRunToDeployedAndDelete(t *testing.T) { synctest.Test(t, runToDeployedAndDelete) }

func runToDeployedAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error)
	go func() { done <- e.cp.Run(ctx, deploysim.New(&deploysim.Options{Step: time.Millisecond})) }()
	d := e.docker()
	for e.deployment(d).Status != controlplane.StatusReady {
		time.Sleep(time.Millisecond)
	}
	if err := e.cp.DeleteDeployment(e.ctx, tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := e.cp.GetDeployment(e.ctx, tenant, d.ID)
		if err != nil {
			if !errorsIsNotFound(err) {
				t.Fatal(err)
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	e.docker() // the name is free again
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// DEPLOYED reports no url by default (nothing answers), and Options.URL
// with the deployment's id and tenant when set.
func TestURL(t *testing.T) { synctest.Test(t, reportsURL) }

func reportsURL(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"", ""},
		{"http://sim.example/{tenant}/{id}", "http://sim.example/" + tenant + "/{id}"},
	} {
		e := newEnv(t)
		d := e.docker()
		e.drain(deploysim.New(&deploysim.Options{Step: tiny, URL: c.url}))
		got := e.deployment(d)
		want := strings.ReplaceAll(c.want, "{id}", d.ID)
		if (want == "") != (got.URL == nil) || (got.URL != nil && *got.URL != want) {
			t.Errorf("Options.URL %q: url %v, want %q", c.url, got.URL, want)
		}
	}
}
