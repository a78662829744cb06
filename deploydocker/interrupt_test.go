package deploydocker_test

import (
	"context"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
)

// A revision interrupted while its containers start is stopped at once:
// its containers are removed and it stays INTERRUPTED, while the active
// revision's containers serve on behind the url, the deployment READY.
func TestInterruptWhileStarting(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	d := f.create(uniq("interrupt"), image("server:v1"), nil)
	first := f.wait(d.ID, *d.LatestRevisionID)
	if first.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", first.Status, deref(first.StatusMessage))
	}
	img := image("gated:1") // never healthy on its own
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	second := *patched.LatestRevisionID
	eventually(t, "the second revision's container runs", func() bool {
		return len(f.containers(deploydocker.LabelRevision+"="+second)) == 1
	})
	if _, err := f.cp.InterruptRevision(ctx, tenant, d.ID, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the interrupted revision's containers are removed", func() bool {
		return len(f.containers(deploydocker.LabelRevision+"="+second)) == 0
	})
	if rev := f.wait(d.ID, second); rev.Status != controlplane.RevisionInterrupted {
		t.Errorf("interrupted revision %s %q", rev.Status, deref(rev.StatusMessage))
	}
	if v, err := get(f.proxyURL + "/" + d.ID + "/version"); err != nil || v != "v1" {
		t.Errorf("url answers %q, %v; want the active revision's v1", v, err)
	}
	if n := len(f.containers(deploydocker.LabelRevision + "=" + first.ID)); n != 1 {
		t.Errorf("%d containers of the active revision, want 1", n)
	}
	got, _ := f.cp.GetDeployment(ctx, tenant, d.ID)
	if deref(got.ActiveRevisionID) != first.ID || got.Status != controlplane.StatusReady {
		t.Errorf("deployment %s, active %v; want READY with the first revision", got.Status, deref(got.ActiveRevisionID))
	}
}

// blockingBuilder is an image builder that builds until its ctx ends, and
// says so.
type blockingBuilder struct {
	started, cancelled chan struct{}
}

func (b *blockingBuilder) Build(ctx context.Context, w *controlplane.Work, log func(string)) (string, string, error) {
	log("step 1/1: RUN sleep forever")
	close(b.started)
	<-ctx.Done()
	close(b.cancelled)
	return "", "", context.Cause(ctx)
}

// A revision interrupted while it builds has its build cancelled, and
// nothing of it runs.
func TestInterruptCancelsTheBuild(t *testing.T) {
	b := &blockingBuilder{started: make(chan struct{}), cancelled: make(chan struct{})}
	f := newFixture(t, func(o *deploydocker.Options) { o.Builder = b })
	d := createGitHub(t, f.cp, uniq("gh-interrupt"))
	<-b.started
	rev, err := f.cp.InterruptRevision(context.Background(), tenant, d.ID, *d.LatestRevisionID)
	if err != nil {
		t.Fatal(err)
	}
	if rev.Status != controlplane.RevisionInterrupted {
		t.Errorf("interrupted revision %s", rev.Status)
	}
	<-b.cancelled
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 0 {
		t.Errorf("%d containers of a revision interrupted while it built", n)
	}
}
