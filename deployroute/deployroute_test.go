package deployroute_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storemem"
)

// recorder is a simulated deployer that remembers which deployments it
// deployed and tore down.
type recorder struct {
	controlplane.Deployer
	mu                sync.Mutex
	deployed, removed []string
}

func newRecorder() *recorder {
	return &recorder{Deployer: deploysim.New(&deploysim.Options{Step: time.Millisecond})}
}

func (r *recorder) Deploy(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter) error {
	r.mu.Lock()
	if !slices.Contains(r.deployed, w.Deployment.ID) {
		r.deployed = append(r.deployed, w.Deployment.ID)
	}
	r.mu.Unlock()
	return r.Deployer.Deploy(ctx, w, rep)
}

func (r *recorder) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	r.mu.Lock()
	r.removed = append(r.removed, d.ID)
	r.mu.Unlock()
	return r.Deployer.Teardown(ctx, tenant, d)
}

func (r *recorder) got() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deployed), slices.Clone(r.removed)
}

// Each deployment runs, and is torn down, where its listener points: a
// k8s listener's cluster, a docker listener's engine, the default without
// a listener; a listener naming an unknown cluster fails its revision.
func TestRouting(t *testing.T) {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), &controlplane.Options{PollInterval: 10 * time.Millisecond})
	def, a, b, dock := newRecorder(), newRecorder(), newRecorder(), newRecorder()
	r := deployroute.New(&deployroute.Options{Default: def, Listeners: cp,
		Clusters: map[string]controlplane.Deployer{"a": a, "b": b},
		Docker:   map[string]controlplane.Deployer{"host-1": dock}})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(rctx, r) }()
	defer func() { cancel(); <-done }()

	const tenant = "t1"
	listener := func(typ, id string) *string {
		l, err := cp.CreateListener(ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: &typ, ComputeID: &id})
		if err != nil {
			t.Fatal(err)
		}
		return &l.ID
	}
	create := func(name string, listenerID *string) *controlplane.Deployment {
		src := controlplane.SourceExternalDocker
		d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
			SourceConfig:         &controlplane.SourceConfig{ListenerID: listenerID},
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("example.com/a:1")}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	wait := func(d *controlplane.Deployment) *controlplane.Revision {
		for {
			rev, err := cp.WaitRevision(ctx, tenant, d.ID, *d.LatestRevisionID, &controlplane.WaitRevisionQuery{Wait: "terminal", Timeout: new(30)})
			if err != nil {
				t.Fatal(err)
			}
			if controlplane.IsTerminal(rev.Status) {
				return rev
			}
		}
	}
	onA, onB, onDocker, plain := create("on-a", listener("k8s", "a")), create("on-b", listener("k8s", "b")),
		create("on-docker", listener("docker", "host-1")), create("plain", nil)
	unknown := create("unknown", listener("k8s", "nowhere"))
	for _, d := range []*controlplane.Deployment{onA, onB, onDocker, plain} {
		if rev := wait(d); rev.Status != controlplane.RevisionDeployed {
			t.Errorf("%s: %s", d.Name, rev.Status)
		}
	}
	rev := wait(unknown)
	if rev.Status != controlplane.RevisionDeployFailed ||
		rev.StatusMessage == nil || !strings.Contains(*rev.StatusMessage, `names k8s "nowhere", which this server is not configured with`) {
		t.Errorf("unknown cluster: %s %v, want DEPLOY_FAILED naming the cluster", rev.Status, deref(rev.StatusMessage))
	}
	logs, err := cp.ListLogs(ctx, tenant, unknown.ID, rev.ID, &controlplane.LogQuery{Type: controlplane.LogDeploy})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(logs.Logs); n == 0 || logs.Logs[n-1].Message != deref(rev.StatusMessage) {
		t.Errorf("the deploy log does not end with the reason: %+v", logs.Logs)
	}
	for _, d := range []*controlplane.Deployment{onA, onB, onDocker, plain} {
		if err := cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []*controlplane.Deployment{onA, onB, onDocker, plain} {
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := cp.GetDeployment(ctx, tenant, d.ID)
			if errors.Is(err, apierr.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not deleted", d.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, c := range []struct {
		rec  *recorder
		want string
	}{{def, plain.ID}, {a, onA.ID}, {b, onB.ID}, {dock, onDocker.ID}} {
		dep, rem := c.rec.got()
		if fmt.Sprint(dep) != fmt.Sprint([]string{c.want}) || fmt.Sprint(rem) != fmt.Sprint([]string{c.want}) {
			t.Errorf("deployed %v removed %v, want only %s", dep, rem, c.want)
		}
	}
}

// For names the Deployer of a listener, or why there is none.
func TestFor(t *testing.T) {
	def, k, d := newRecorder(), newRecorder(), newRecorder()
	r := deployroute.New(&deployroute.Options{Default: def,
		Clusters: map[string]controlplane.Deployer{"c": k}, Docker: map[string]controlplane.Deployer{"c": d}})
	for _, c := range []struct {
		l    *controlplane.Listener
		want controlplane.Deployer
	}{
		{nil, def},
		{&controlplane.Listener{ComputeType: "k8s", ComputeID: "c"}, k},
		{&controlplane.Listener{ComputeType: "docker", ComputeID: "c"}, d},
		{&controlplane.Listener{ComputeType: "k8s", ComputeID: "other"}, nil},
		{&controlplane.Listener{ComputeType: "docker", ComputeID: "other"}, nil},
	} {
		got, err := r.For(c.l)
		if got != c.want || (c.want == nil) != errors.Is(err, deployroute.ErrUnknownTarget) {
			t.Errorf("For(%+v) = %v, %v", c.l, got, err)
		}
	}
	if _, err := deployroute.New(nil).For(nil); !errors.Is(err, deployroute.ErrUnknownTarget) {
		t.Errorf("no default: %v", err)
	}
}

// Drives says which listeners the Router has a Deployer for; given to the
// control plane as Options.Drives, it leaves the deployments of the other
// listeners to their agents: they never reach the Router, and their
// revisions wait QUEUED for an agent instead of failing.
func TestDrives(t *testing.T) {
	def, k, d := newRecorder(), newRecorder(), newRecorder()
	r := deployroute.New(&deployroute.Options{Default: def,
		Clusters: map[string]controlplane.Deployer{"c": k}, Docker: map[string]controlplane.Deployer{"c": d}})
	for _, c := range []struct {
		l    *controlplane.Listener
		want bool
	}{
		{nil, true},
		{&controlplane.Listener{ComputeType: "k8s", ComputeID: "c"}, true},
		{&controlplane.Listener{ComputeType: "docker", ComputeID: "c"}, true},
		{&controlplane.Listener{ComputeType: "k8s", ComputeID: "other"}, false},
		{&controlplane.Listener{ComputeType: "docker", ComputeID: "other"}, false},
		{&controlplane.Listener{ComputeType: "ecs", ComputeID: "c"}, false},
	} {
		if got := r.Drives(c.l); got != c.want {
			t.Errorf("Drives(%+v) = %v, want %v", c.l, got, c.want)
		}
	}
	if deployroute.New(nil).Drives(nil) {
		t.Error("a Router without a default drives deployments without a listener")
	}

	ctx := context.Background()
	cp := controlplane.New(storemem.New(), &controlplane.Options{Drives: r.Drives})
	r = deployroute.New(&deployroute.Options{Default: def, Listeners: cp,
		Clusters: map[string]controlplane.Deployer{"c": k}, Docker: map[string]controlplane.Deployer{"c": d}})
	const tenant = "t1"
	create := func(typ, id string) (*controlplane.Deployment, *controlplane.Revision) {
		t.Helper()
		l, err := cp.CreateListener(ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: &typ, ComputeID: &id})
		if err != nil {
			t.Fatal(err)
		}
		dep, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new(typ + "-" + id),
			Source: new(controlplane.SourceExternalDocker), SourceConfig: &controlplane.SourceConfig{ListenerID: &l.ID},
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1")}})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := cp.GetRevision(ctx, tenant, dep.ID, *dep.LatestRevisionID)
		if err != nil {
			t.Fatal(err)
		}
		return dep, rev
	}
	driven, _ := create("k8s", "c")
	remote, rev := create("k8s", "elsewhere")
	for {
		ok, err := cp.Process(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	if dep, _ := k.got(); fmt.Sprint(dep) != fmt.Sprint([]string{driven.ID}) {
		t.Errorf("the cluster deployed %v, want only %s", dep, driven.ID)
	}
	got, err := cp.GetRevision(ctx, tenant, remote.ID, rev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != controlplane.RevisionQueued || !strings.Contains(deref(got.StatusMessage), "Waiting for the agent") {
		t.Errorf("the revision on an undriven listener: %s %q, want QUEUED waiting for its agent", got.Status, deref(got.StatusMessage))
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// engine is a deployer whose engine answers or not: a
// controlplane.ReadinessChecker.
type engine struct {
	controlplane.Deployer
	err error
}

func (e engine) Ready(context.Context) error { return e.err }

// A cluster that does not answer leaves the Router ready and shows in
// ClusterHealth; the default deployer and the Docker engines make Ready.
func TestReadyAndClusterHealth(t *testing.T) {
	down := errors.New("connection refused")
	sim := deploysim.New(nil)
	r := deployroute.New(&deployroute.Options{Default: engine{sim, nil},
		Clusters: map[string]controlplane.Deployer{"east": engine{sim, nil}, "west": engine{sim, down}, "plain": sim},
		Docker:   map[string]controlplane.Deployer{"host": engine{sim, nil}}})
	ctx := context.Background()
	if err := r.Ready(ctx); err != nil {
		t.Errorf("Ready with one cluster down: %v", err)
	}
	got := r.ClusterHealth(ctx)
	if len(got) != 2 || got["east"] != nil || !errors.Is(got["west"], down) {
		t.Errorf("ClusterHealth %v, want east answering and west not (plain cannot tell)", got)
	}
	r = deployroute.New(&deployroute.Options{Default: engine{sim, nil}, Docker: map[string]controlplane.Deployer{"host": engine{sim, down}}})
	if err := r.Ready(ctx); !errors.Is(err, down) {
		t.Errorf("Ready with the Docker engine down: %v", err)
	}
}
