package deploydocker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/internal/testclock"
)

// The tests' deployments are external_docker (the images they push),
// which has no deployment_type: the Deployer is shown them as dev_zero.

// devZero is the deployment type the Deployer scales to zero.
const devZero = controlplane.DeploymentTypeDevZero

// zeroState is the control plane as a Deployer reads it, every deployment
// of type dev_zero.
type zeroState struct{ *controlplane.ControlPlane }

func (s zeroState) GetDeployment(ctx context.Context, tenant, id string) (*controlplane.Deployment, error) {
	d, err := s.ControlPlane.GetDeployment(ctx, tenant, id)
	if d != nil {
		d.SourceConfig.DeploymentType = new(devZero)
	}
	return d, err
}

// zeroDeployer drives each revision as one of a dev_zero deployment.
type zeroDeployer struct{ *deploydocker.Deployer }

func (z zeroDeployer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	w.Deployment.SourceConfig.DeploymentType = new(devZero)
	return z.Deployer.Deploy(ctx, w, r)
}

// zeroIdle is the fixtures' idle timeout, on their clock.
const zeroIdle = 15 * time.Minute

// zeroOptions are the options of a Deployer that scales to zero after
// zeroIdle on clock, looking every few milliseconds, reporting statuses
// to cp.
func zeroOptions(cp *controlplane.ControlPlane, clock *testclock.Clock) func(*deploydocker.Options) {
	return func(o *deploydocker.Options) {
		o.IdleTimeout, o.IdleCheckInterval, o.Clock = zeroIdle, 20*time.Millisecond, clock.Now
		o.StatusReporter = cp.ReportDeploymentStatus
	}
}

// newZeroFixture is a fixture whose deployments are all dev_zero, idle
// after zeroIdle on the returned clock.
func newZeroFixture(t *testing.T) (*fixture, *testclock.Clock) {
	t.Helper()
	clock := testclock.New(time.Now(), 0)
	var cp *controlplane.ControlPlane
	f := newFixtureOf(t, func(o *deploydocker.Options) { zeroOptions(cp, clock)(o) }, &wrapping{
		state: func(c *controlplane.ControlPlane) deploydocker.State { cp = c; return zeroState{c} },
		run:   func(d *deploydocker.Deployer) controlplane.Deployer { return zeroDeployer{d} },
	})
	return f, clock
}

// deployed creates a deployment of img and waits for it to serve at its
// url (gated images are let through), returning it.
func (f *fixture) deployed(name, img string) *controlplane.Deployment {
	f.t.Helper()
	d := f.create(uniq(name), img, nil)
	if strings.Contains(img, "gated") {
		f.openGate(d.ID, *d.LatestRevisionID)
	}
	rev := f.wait(d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		f.t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	got, err := f.cp.GetDeployment(context.Background(), tenant, d.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	eventually(f.t, "the url answers", func() bool { _, err := get(*got.URL + "/ok"); return err == nil })
	return got
}

// revisionContainer is the one container of a revision.
func (f *fixture) revisionContainer(rev string) container.Summary {
	f.t.Helper()
	res, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).
		Add("label", deploydocker.LabelInstance+"="+f.instance).Add("label", deploydocker.LabelRevision+"="+rev)})
	if err != nil || len(res.Items) != 1 {
		f.t.Fatalf("the containers of revision %s: %v, %v; want one", rev, res.Items, err)
	}
	return res.Items[0]
}

// openGate makes the gated container of a revision healthy, once it runs.
func (f *fixture) openGate(dep, rev string) {
	f.t.Helper()
	eventually(f.t, "the gated container takes POST /ready", func() bool {
		res, err := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: make(client.Filters).
			Add("label", deploydocker.LabelInstance+"="+f.instance).Add("label", deploydocker.LabelRevision+"="+rev)})
		if err != nil || len(res.Items) != 1 || res.Items[0].State != container.StateRunning {
			return false
		}
		resp, err := http.Post("http://127.0.0.1:"+res.Items[0].Labels[deploydocker.LabelPort]+"/ready", "text/plain", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// state is the state of the revision's container.
func (f *fixture) state(rev string) container.ContainerState {
	return f.revisionContainer(rev).State
}

// status is the deployment's status.
func (f *fixture) status(dep string) controlplane.DeploymentStatus {
	f.t.Helper()
	d, err := f.cp.GetDeployment(context.Background(), tenant, dep)
	if err != nil {
		f.t.Fatal(err)
	}
	return d.Status
}

// asleep advances clock past the idle timeout and waits until the
// deployment's container is stopped and the deployment UNUSED.
func (f *fixture) asleep(clock *testclock.Clock, d *controlplane.Deployment) {
	f.t.Helper()
	clock.Advance(zeroIdle + time.Second)
	eventually(f.t, "the idle deployment's container stops", func() bool {
		return f.state(*d.ActiveRevisionID) == container.StateExited
	})
	eventually(f.t, "the idle deployment is UNUSED", func() bool { return f.status(d.ID) == controlplane.StatusUnused })
}

// deployLog is the deploy log of a revision, one line each.
func (f *fixture) deployLog(dep, rev string) string {
	f.t.Helper()
	page, err := f.cp.ListLogs(context.Background(), tenant, dep, rev, &controlplane.LogQuery{Type: controlplane.LogDeploy, Limit: new(1000)})
	if err != nil {
		f.t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range page.Logs {
		b.WriteString(string(l.Level) + " " + l.Message + "\n")
	}
	return b.String()
}

// A dev_zero deployment nobody asks for is stopped after the idle
// timeout (its container stopped, not removed) and UNUSED, with a status
// event and a line in its deploy log. The first request after is held
// while the container starts and answered, and the deployment is READY
// again; Reconcile does not start a sleeping deployment.
func TestScaleToZero(t *testing.T) {
	f, clock := newZeroFixture(t)
	ctx := context.Background()
	d := f.deployed("zero", image("server:v1"))
	rev := *d.ActiveRevisionID
	if d.Status != controlplane.StatusReady {
		t.Fatalf("deployed: %s, want READY", d.Status)
	}
	stream, err := f.cp.FollowEvents(ctx, tenant, &controlplane.FollowOptions{DeploymentID: d.ID})
	if err != nil {
		t.Fatal(err)
	}

	f.asleep(clock, d)
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 1 {
		t.Errorf("%d containers while asleep, want the one stopped", n)
	}
	// The status event: the deployment, UNUSED.
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for found := false; !found; {
		es, err := stream.Next(sctx)
		if err != nil {
			t.Fatalf("no status event UNUSED: %v", err)
		}
		for _, e := range es {
			var ev struct {
				Change     string                  `json:"change"`
				Deployment controlplane.Deployment `json:"deployment"`
			}
			if e.Name == controlplane.EventDeployment && json.Unmarshal(e.Data, &ev) == nil &&
				ev.Change == controlplane.ChangeStatus && ev.Deployment.Status == controlplane.StatusUnused {
				found = true
			}
		}
	}
	if log := f.deployLog(d.ID, rev); !strings.Contains(log, "INFO no request for 15m0s: stopped 1 container(s) (scaled to zero)") {
		t.Errorf("the deploy log says nothing of the sleep:\n%s", log)
	}

	// The reconcile of a restart leaves it asleep.
	if err := f.d.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.state(rev); st != container.StateExited {
		t.Errorf("Reconcile started a sleeping deployment's container: %s", st)
	}

	// The first request is held while it starts, and answered.
	if v, err := get(*d.URL + "/version"); err != nil || v != "v1" {
		t.Fatalf("the first request to a sleeping deployment: %q, %v; want v1", v, err)
	}
	if st := f.state(rev); st != container.StateRunning {
		t.Errorf("after the request the container is %s", st)
	}
	eventually(t, "the deployment is READY again", func() bool { return f.status(d.ID) == controlplane.StatusReady })
	if log := f.deployLog(d.ID, rev); !strings.Contains(log, "a request woke the deployment: 1 container(s) healthy") {
		t.Errorf("the deploy log says nothing of the wake:\n%s", log)
	}
	// And it sleeps again once idle.
	f.asleep(clock, d)
}

// Requests that come while a sleeping deployment starts all wait for one
// start of its container; one whose client gives up ends only its own
// wait; the others are answered once the container is healthy.
func TestWakeOnceForConcurrentRequests(t *testing.T) {
	f, clock := newZeroFixture(t)
	d := f.deployed("zero-gated", image("gated:1")) // not healthy after a start until POST /ready
	rev := *d.ActiveRevisionID
	f.asleep(clock, d)
	since := time.Now()

	const n = 4
	answers := make(chan string, n)
	for range n {
		go func() {
			v, err := get(*d.URL + "/version")
			if err != nil {
				v = err.Error()
			}
			answers <- v
		}()
	}
	gaveUp, cancel := context.WithCancel(context.Background())
	quitter := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(gaveUp, http.MethodGet, *d.URL+"/version", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		quitter <- err
	}()
	eventually(t, "a request starts the container", func() bool { return f.state(rev) == container.StateRunning })
	cancel()
	if err := <-quitter; err == nil {
		t.Error("the request whose client gave up was answered")
	}
	select {
	case v := <-answers:
		t.Fatalf("a request was answered before the container was healthy: %q", v)
	default:
	}
	f.openGate(d.ID, rev)
	for range n {
		if v := <-answers; v != "gated" {
			t.Errorf("a held request: %q, want the container's answer", v)
		}
	}
	if got := f.starts(f.revisionContainer(rev).ID, since); got != 1 {
		t.Errorf("the container was started %d times for %d requests, want once", got, n+1)
	}
	eventually(t, "the deployment is READY again", func() bool { return f.status(d.ID) == controlplane.StatusReady })
}

// starts counts the daemon's start events of a container since then.
func (f *fixture) starts(id string, since time.Time) int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := f.cli.Events(ctx, client.EventsListOptions{
		Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()), Until: strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10),
		Filters: make(client.Filters).Add("type", "container").Add("container", id).Add("event", "start"),
	})
	n := 0
	for {
		select {
		case <-res.Messages:
			n++
		case err := <-res.Err:
			if err != nil && ctx.Err() != nil {
				f.t.Fatal(err)
			}
			return n
		}
	}
}

// A deployment asleep when its server stops stays asleep after a restart
// (Reconcile starts nothing), and a request to the new server's proxy
// wakes it.
func TestScaleToZeroAcrossRestart(t *testing.T) {
	f, clock := newZeroFixture(t)
	d := f.deployed("zero-restart", image("server:v1"))
	rev := *d.ActiveRevisionID
	f.asleep(clock, d)
	f.stopRun()
	f.d.Close()

	d2, proxyURL := newDeployer(t, zeroState{f.cp}, f.instance, nil, zeroOptions(f.cp, clock))
	if err := d2.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.state(rev); st != container.StateExited {
		t.Fatalf("after the restart's Reconcile the container is %s, want still stopped", st)
	}
	if f.status(d.ID) != controlplane.StatusUnused {
		t.Errorf("after the restart: %s, want UNUSED", f.status(d.ID))
	}
	if v, err := get(proxyURL + "/" + d.ID + "/version"); err != nil || v != "v1" {
		t.Fatalf("a request after the restart: %q, %v; want v1", v, err)
	}
	eventually(t, "the deployment is READY again", func() bool { return f.status(d.ID) == controlplane.StatusReady })
}

// A sleeping deployment whose container cannot start (its port taken
// meanwhile: the server exits) answers the request 502 with a body that
// says so, its deploy log says why, and it stays UNUSED and stopped; once
// the port is free the next request starts it.
func TestWakeFailure(t *testing.T) {
	f, clock := newZeroFixture(t)
	d := f.deployed("zero-fail", image("server:v1"))
	rev := *d.ActiveRevisionID
	f.asleep(clock, d)
	l, err := net.Listen("tcp", ":"+f.revisionContainer(rev).Labels[deploydocker.LabelPort])
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(*d.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(resp)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "failed to start") {
		t.Errorf("a request whose start failed: %s %s, want 502 saying so", resp.Status, body)
	}
	if log := f.deployLog(d.ID, rev); !strings.Contains(log, "ERROR starting the containers of the deployment, scaled to zero, for a request failed: container") {
		t.Errorf("the deploy log does not say why the start failed:\n%s", log)
	}
	if st := f.state(rev); st != container.StateExited {
		t.Errorf("after a failed start the container is %s, want stopped", st)
	}
	if s := f.status(d.ID); s != controlplane.StatusUnused {
		t.Errorf("after a failed start: %s, want UNUSED", s)
	}
	l.Close()
	if v, err := get(*d.URL + "/version"); err != nil || v != "v1" {
		t.Errorf("the next request: %q, %v; want v1", v, err)
	}
}

// A PATCH of a sleeping deployment deploys its new revision as usual: it
// serves, READY, and the old revision's stopped container is removed.
func TestPatchWhileAsleep(t *testing.T) {
	f, clock := newZeroFixture(t)
	ctx := context.Background()
	d := f.deployed("zero-patch", image("server:v1"))
	first := *d.ActiveRevisionID
	f.asleep(clock, d)
	img := image("server:v2")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	if rev := f.wait(d.ID, *patched.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("the new revision: %s %s", rev.Status, deref(rev.StatusMessage))
	}
	if s := f.status(d.ID); s != controlplane.StatusReady {
		t.Errorf("after the new revision: %s, want READY", s)
	}
	eventually(t, "the url answers v2", func() bool { v, _ := get(*d.URL + "/version"); return v == "v2" })
	eventually(t, "the old revision's container is removed", func() bool {
		return len(f.containers(deploydocker.LabelRevision+"="+first)) == 0
	})
}

func readAll(resp *http.Response) string {
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// A dev_zero deployment made through the API (internal_docker, as
// langgraph deploy makes them, min_scale 0) sleeps and wakes with no
// wrapper: the type the control plane stored is what decides.
func TestScaleToZeroThroughTheAPI(t *testing.T) {
	clock := testclock.New(time.Now(), 0)
	var cp *controlplane.ControlPlane
	f := newFixtureOf(t, func(o *deploydocker.Options) { zeroOptions(cp, clock)(o) }, &wrapping{
		state: func(c *controlplane.ControlPlane) deploydocker.State { cp = c; return c },
	})
	name, src, img, typ := uniq("api-zero"), controlplane.SourceInternalDocker, image("server:v1"), controlplane.DeploymentTypeDevZero
	d, err := f.cp.CreateDeployment(context.Background(), tenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
		SourceConfig:         &controlplane.SourceConfig{DeploymentType: &typ, ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(0))}},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	got, err := f.cp.GetDeployment(context.Background(), tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the url answers", func() bool { _, err := get(*got.URL + "/ok"); return err == nil })
	f.asleep(clock, got)
	if v, err := get(*got.URL + "/version"); err != nil || v != "v1" {
		t.Fatalf("the first request to the sleeping deployment: %q, %v; want v1", v, err)
	}
	eventually(t, "the deployment is READY again", func() bool { return f.status(d.ID) == controlplane.StatusReady })
}
