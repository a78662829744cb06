package deployroute_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storemem"
)

// errorLines is a slog.Handler that keeps the messages of the records at
// WARN and above, with their "err" attribute.
type errorLines struct {
	mu    sync.Mutex
	lines []string
}

func (h *errorLines) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *errorLines) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *errorLines) WithGroup(string) slog.Handler                { return h }

func (h *errorLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			line += ": " + a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}

func (h *errorLines) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.lines...)
}

// deleteRig is a ControlPlane over storemem that a Router drives, in a
// synctest bubble.
type deleteRig struct {
	t    *testing.T
	ctx  context.Context
	cp   *controlplane.ControlPlane
	log  *errorLines
	stop func()
}

const rigTenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

func newDeleteRig(t *testing.T) *deleteRig {
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	rig := &deleteRig{t: t, ctx: context.Background(), log: &errorLines{}}
	rig.cp = controlplane.New(st, &controlplane.Options{Logger: slog.New(rig.log)})
	return rig
}

// run drives the ControlPlane with a Router over clusters (name ->
// Deployer) until the next run or the end of the test.
func (rig *deleteRig) run(clusters map[string]controlplane.Deployer) {
	if rig.stop != nil {
		rig.stop()
	}
	r := deployroute.New(&deployroute.Options{Clusters: clusters, Listeners: rig.cp})
	ctx, cancel := context.WithCancel(rig.ctx)
	done := make(chan error, 1)
	go func() { done <- rig.cp.Run(ctx, r) }()
	rig.stop = func() {
		cancel()
		if err := <-done; err != nil {
			rig.t.Error(err)
		}
		rig.stop = nil
	}
	rig.t.Cleanup(func() {
		if rig.stop != nil {
			rig.stop()
		}
	})
}

func (rig *deleteRig) listener(computeID string) string {
	rig.t.Helper()
	l, err := rig.cp.CreateListener(rig.ctx, rigTenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new(computeID)})
	if err != nil {
		rig.t.Fatal(err)
	}
	return l.ID
}

func (rig *deleteRig) create(name, listenerID string) *controlplane.Deployment {
	rig.t.Helper()
	d, err := rig.cp.CreateDeployment(rig.ctx, rigTenant, &controlplane.CreateDeploymentRequest{Name: &name,
		Source: new(controlplane.SourceExternalDocker), SourceConfig: &controlplane.SourceConfig{ListenerID: &listenerID},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("example.com/a:1")}})
	if err != nil {
		rig.t.Fatal(err)
	}
	return d
}

// terminal waits for the deployment's latest revision to end.
func (rig *deleteRig) terminal(d *controlplane.Deployment) *controlplane.Revision {
	rig.t.Helper()
	for {
		rev, err := rig.cp.WaitRevision(rig.ctx, rigTenant, d.ID, *d.LatestRevisionID, &controlplane.WaitRevisionQuery{Wait: "terminal", Timeout: new(30)})
		if err != nil {
			rig.t.Fatal(err)
		}
		if controlplane.IsTerminal(rev.Status) {
			return rev
		}
	}
}

// The bug this fixes: a deployment whose listener names a cluster the
// server is not configured with fails DEPLOY_FAILED; its DELETE used to
// leave it AWAITING_DELETE forever (name taken, listener undeletable, an
// ERROR line every 2 s). None of its revisions reached an engine, so the
// DELETE now removes it at once: its name is free, and the listener can be
// deleted.
func TestDeleteOfADeploymentWhoseClusterIsUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newDeleteRig(t)
		rig.run(nil) // no cluster at all
		l := rig.listener("nowhere")
		d := rig.create("agent", l)
		rev := rig.terminal(d)
		if rev.Status != controlplane.RevisionDeployFailed || !strings.Contains(deref(rev.StatusMessage), `names k8s "nowhere"`) {
			t.Fatalf("revision %s %q, want DEPLOY_FAILED naming the cluster", rev.Status, deref(rev.StatusMessage))
		}
		if err := rig.cp.DeleteDeployment(rig.ctx, rigTenant, d.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := rig.cp.GetDeployment(rig.ctx, rigTenant, d.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Fatalf("GET after DELETE: %v, want not found at once", err)
		}
		again := rig.create("agent", l) // the name is free
		if err := rig.cp.DeleteDeployment(rig.ctx, rigTenant, again.ID); err != nil {
			t.Fatal(err)
		}
		if err := rig.cp.DeleteListener(rig.ctx, rigTenant, l); err != nil {
			t.Fatalf("delete of the listener once its deployments are deleted: %v", err)
		}
		time.Sleep(time.Minute) // whatever the loop would do
		synctest.Wait()
		if lines := rig.log.got(); len(lines) > 0 {
			t.Errorf("logged: %q", lines)
		}
	})
}

// A deployment that did run on a cluster since removed from the server's
// configuration: its teardown is refused, retried with backoff, logged
// once, and said in its status_message; a forced delete removes it, and
// its listener can then be deleted.
func TestForcedDeleteOfADeploymentWhoseClusterIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rig := newDeleteRig(t)
		rig.run(map[string]controlplane.Deployer{"east": deploysim.New(&deploysim.Options{Step: time.Second})})
		l := rig.listener("east")
		d := rig.create("agent", l)
		if rev := rig.terminal(d); rev.Status != controlplane.RevisionDeployed {
			t.Fatalf("on east: %s", rev.Status)
		}
		rig.run(nil) // east is gone from the configuration
		if err := rig.cp.DeleteDeployment(rig.ctx, rigTenant, d.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		got, err := rig.cp.GetDeployment(rig.ctx, rigTenant, d.ID)
		if err != nil || got.Status != controlplane.StatusAwaitingDelete || !strings.Contains(deref(got.StatusMessage), `names k8s "east"`) {
			t.Fatalf("while its teardown is refused: %+v, %v", got, err)
		}
		if lines := rig.log.got(); len(lines) != 1 || !strings.Contains(lines[0], deployroute.ErrUnknownTarget.Error()) {
			t.Errorf("logged %q, want one line for the refused teardown", lines)
		}
		if err := rig.cp.DeleteListener(rig.ctx, rigTenant, l); !errors.Is(err, apierr.ErrInvalidState) {
			t.Errorf("delete of the listener of a deployment being deleted: %v, want refused", err)
		}
		if err := rig.cp.DeleteDeploymentWith(rig.ctx, rigTenant, d.ID, &controlplane.DeleteDeploymentOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := rig.cp.GetDeployment(rig.ctx, rigTenant, d.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Fatalf("after the forced delete: %v, want not found", err)
		}
		rig.create("agent", l) // the name is free
		if err := rig.cp.DeleteListenerWith(rig.ctx, rigTenant, l, &controlplane.DeleteListenerOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := rig.cp.GetListener(rig.ctx, rigTenant, l); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("the listener after its forced delete: %v, want removed", err)
		}
		if lines := rig.log.got(); len(lines) != 2 || !strings.Contains(lines[1], "may remain") {
			t.Errorf("logged %q, want the forced delete's warning", lines)
		}
	})
}
