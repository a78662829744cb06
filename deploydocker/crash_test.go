package deploydocker_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/storebolt"
)

// childEnv, when set, makes the test binary the kill -9 test's control
// plane (runChild); the other variables say where its store, daemon,
// instance and proxy are.
const (
	childEnv      = "DEPLOYDOCKER_TEST_CHILD"
	childDB       = "DEPLOYDOCKER_TEST_CHILD_DB"
	childInstance = "DEPLOYDOCKER_TEST_CHILD_INSTANCE"
	childProxy    = "DEPLOYDOCKER_TEST_CHILD_PROXY"
)

// cpOptions are the control plane options of both lives of the kill -9
// test: a short lease, so that the restarted one takes over the work the
// killed one held without a long wait.
func cpOptions(log *slog.Logger) *controlplane.Options {
	return &controlplane.Options{PollInterval: 100 * time.Millisecond, LeaseDuration: 2 * time.Second, Logger: log}
}

// runChild runs a control plane with the Docker deployer over the store
// the parent prepared, until it is killed.
func runChild() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, "child:", err); os.Exit(2) }
	st, err := storebolt.Open(os.Getenv(childDB), nil)
	if err != nil {
		fail(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cp := controlplane.New(st, cpOptions(log))
	d, err := deploydocker.New(&deploydocker.Options{
		Host: os.Getenv("DEPLOYPLANE_TEST_DOCKER"), Network: "host", Instance: os.Getenv(childInstance), ProxyURL: os.Getenv(childProxy),
		State: cp, HealthInterval: 50 * time.Millisecond, HealthTimeout: time.Hour, Logger: log,
	})
	if err != nil {
		fail(err)
	}
	if err := d.Reconcile(context.Background()); err != nil {
		fail(err)
	}
	fail(cp.Run(context.Background(), d)) // returns only if the store fails
}

// A control plane killed with SIGKILL while a revision is deploying (its
// container started, not yet healthy): after a restart the revision
// completes on the container the dead process created (adopted, not
// duplicated), and Reconcile removes a container that matches no stored
// deployment.
func TestKill9MidDeploy(t *testing.T) {
	needDocker(t)
	ctx := context.Background()
	cli, err := client.New(client.WithHost(dockerHost))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	instance := uniq("crash")
	t.Cleanup(func() { removeInstance(t, cli, instance) })
	db := filepath.Join(t.TempDir(), "db.bolt")

	// The deployment, written before the first life starts.
	st, err := storebolt.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := createIn(t, controlplane.New(st, cpOptions(quiet())), uniq("crash"), image("gated:1"), nil)
	revID := *d.LatestRevisionID
	st.Close()

	proxyL, err := net.Listen("tcp", "127.0.0.1:0") // the url's address, served by the second life
	if err != nil {
		t.Fatal(err)
	}
	proxyURL := "http://" + proxyL.Addr().String()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=1", childDB+"="+db, childInstance+"="+instance, childProxy+"="+proxyURL)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			child.Process.Kill()
			child.Wait()
		}
	}()

	// Mid-deploy: the revision's container runs but is not healthy (the
	// gated image answers /ok only after POST /ready).
	var started container.Summary
	eventually(t, "the first life starts the revision's container", func() bool {
		res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).
			Add("label", deploydocker.LabelInstance+"="+instance).Add("label", deploydocker.LabelRevision+"="+revID)})
		if err != nil || len(res.Items) == 0 || res.Items[0].State != container.StateRunning {
			return false
		}
		started = res.Items[0]
		return true
	})
	if err := child.Process.Kill(); err != nil { // kill -9
		t.Fatal(err)
	}
	child.Wait()
	killed = true

	// While no control plane runs: the container becomes healthy, and a
	// container of a deployment that is not in the store appears.
	port := started.Labels[deploydocker.LabelPort]
	eventually(t, "the container takes POST /ready", func() bool {
		resp, err := http.Post("http://127.0.0.1:"+port+"/ready", "text/plain", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	orphan, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: uniq("orphan"),
		Config: &container.Config{Image: image("gated:1"), Labels: map[string]string{
			deploydocker.LabelInstance: instance, deploydocker.LabelTenant: tenant,
			deploydocker.LabelDeployment: "0190a2b4-0000-7000-8000-0000000000ff", deploydocker.LabelRevision: "0190a2b4-0000-7000-8000-0000000000fe",
			deploydocker.LabelPort: "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}

	// The second life: same store, same instance, same url address.
	st2, err := storebolt.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	cp := controlplane.New(st2, cpOptions(quiet()))
	dep, _ := newDeployer(t, cp, instance, proxyL, nil)
	if err := dep.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(ctx, orphan.ID, client.ContainerInspectOptions{}); err == nil {
		t.Errorf("Reconcile left the container of a deployment that does not exist")
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cp.Run(rctx, dep) }()
	defer func() { cancel(); <-done }()

	rev := waitTerminal(t, cp, d.ID, revID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("after the restart: %s %s", rev.Status, deref(rev.StatusMessage))
	}
	ids := listContainers(t, cli, instance)
	if len(ids) != 1 || ids[0] != started.ID {
		t.Errorf("containers after the restart %v, want only the adopted %s", ids, started.ID)
	}
	eventually(t, "the url answers", func() bool { v, _ := get(proxyURL + "/" + d.ID + "/version"); return v == "gated" })

	// The deploy log holds both lives' steps, and the adopted container's
	// output goes on reaching it.
	line := uniq("said-after-the-restart")
	resp, err := http.Post(proxyURL+"/"+d.ID+"/say?line="+line, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var logs []controlplane.LogEntry
	eventually(t, "the deploy log holds the adopted container's output", func() bool {
		logs = logMessages(t, cp, d.ID, revID, controlplane.LogDeploy)
		return hasLine(logs, controlplane.LevelInfo, line)
	})
	for _, want := range []string{"created container", "adopting container", "server: listening on"} {
		if !hasLine(logs, controlplane.LevelInfo, want) {
			t.Errorf("the deploy log has no line with %q:\n%s", want, dump(logs))
		}
	}
}

// racingState is a State in which revision next becomes active as it is
// read, as if another process (an agent of the same listener, a replica
// sharing the daemon) made it DEPLOYED between the reads of a reconcile:
// until then the deployment is answered as it was before, with the
// revision it replaced active.
type racingState struct {
	deploydocker.State
	before *controlplane.Deployment
	next   string

	mu       sync.Mutex
	switched bool
}

func (s *racingState) GetDeployment(ctx context.Context, tenant, id string) (*controlplane.Deployment, error) {
	s.mu.Lock()
	switched := s.switched
	s.mu.Unlock()
	if !switched {
		d := *s.before
		return &d, nil
	}
	return s.State.GetDeployment(ctx, tenant, id)
}

func (s *racingState) GetRevision(ctx context.Context, tenant, deploymentID, revisionID string) (*controlplane.Revision, error) {
	if revisionID == s.next {
		s.mu.Lock()
		s.switched = true
		s.mu.Unlock()
	}
	return s.State.GetRevision(ctx, tenant, deploymentID, revisionID)
}

// A Deployer of the same instance starting (its Reconcile) while another
// one activates a new revision: the new revision's container, DEPLOYED
// and active by the time the reconcile could remove it, is adopted (the
// second Deployer's proxy serves it), not removed as a replaced one.
func TestReconcileWhileAnotherActivates(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	d := f.create(uniq("race"), image("server:v1"), nil)
	if r := f.wait(d.ID, *d.LatestRevisionID); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	before, err := f.cp.GetDeployment(ctx, tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	img := image("server:v2")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	next := *patched.LatestRevisionID
	if r := f.wait(d.ID, next); r.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", r.Status, deref(r.StatusMessage))
	}
	eventually(t, "the first revision's container removed", func() bool {
		return len(f.containers(deploydocker.LabelDeployment+"="+d.ID)) == 1
	})
	serving := f.containers(deploydocker.LabelRevision + "=" + next)

	other, url := newDeployer(t, &racingState{State: f.cp, before: before, next: next}, f.instance, nil, nil)
	if err := other.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.containers(deploydocker.LabelRevision + "=" + next); len(got) != 1 || got[0] != serving[0] {
		t.Fatalf("the active revision's containers after the other Deployer's Reconcile: %v, want %v", got, serving)
	}
	if v, err := get(url + "/" + d.ID + "/version"); v != "v2" {
		t.Errorf("the other Deployer's proxy: %q %v, want the active revision's v2", v, err)
	}
}
