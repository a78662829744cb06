package deploydocker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
)

// An image that passes its health check when it starts and fails it
// afterwards is rolled back automatically when the deployment asks for
// it: the earlier image serves again, and the failed revision, its deploy
// log and the rollback's revision say why.
func TestAutoRollback(t *testing.T) {
	f := newFixture(t, func(o *deploydocker.Options) { o.WatchInterval, o.WatchFailures = 50*time.Millisecond, 3 })
	ctx := context.Background()
	src := controlplane.SourceExternalDocker
	name, img := uniq("autorollback"), image("server:v1")
	d, err := f.cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
		SourceConfig:         &controlplane.SourceConfig{AutoRollback: new(true)},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	if first := f.wait(d.ID, *d.LatestRevisionID); first.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", first.Status, deref(first.StatusMessage))
	}
	bad := image("server:v2")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &bad},
		Secrets:              []controlplane.SecretInput{{Name: "MODE", Value: new("degrades")}, {Name: "HEALTHY_CHECKS", Value: new("2")}}})
	if err != nil {
		t.Fatal(err)
	}
	second := f.wait(d.ID, *patched.LatestRevisionID)
	if second.Status != controlplane.RevisionDeployed {
		t.Fatalf("the degrading revision %s: %s, want DEPLOYED (it passes its first check)", second.Status, deref(second.StatusMessage))
	}
	var back string
	eventually(t, "a rollback revision is made", func() bool {
		got, err := f.cp.GetDeployment(ctx, tenant, d.ID)
		if err == nil && *got.LatestRevisionID != second.ID {
			back = *got.LatestRevisionID
		}
		return back != ""
	})
	if rev := f.wait(d.ID, back); rev.Status != controlplane.RevisionDeployed ||
		!strings.Contains(deref(rev.StatusMessage), "Automatic rollback") {
		t.Fatalf("the rollback's revision: %s (%q)", rev.Status, deref(rev.StatusMessage))
	}
	got, err := f.cp.GetDeployment(ctx, tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if deref(got.ActiveRevisionID) != back || deref(got.ImageVersion) != img {
		t.Fatalf("active %s on %s, want the rollback %s on %s", deref(got.ActiveRevisionID), deref(got.ImageVersion), back, img)
	}
	eventually(t, "the url answers v1", func() bool { v, _ := get(f.proxyURL + "/" + d.ID + "/version"); return v == "v1" })
	failed, err := f.cp.GetRevision(ctx, tenant, d.ID, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if msg := deref(failed.StatusMessage); !strings.HasPrefix(msg, "Rolled back automatically: 3 looks in a row found it failing") {
		t.Fatalf("the failed revision's status_message: %q", msg)
	}
	logs, err := f.cp.ListLogs(ctx, tenant, d.ID, second.ID, &controlplane.LogQuery{Type: controlplane.LogDeploy, Order: "desc", Limit: new(50)})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range logs.Logs {
		found = found || strings.Contains(l.Message, "Rolled back automatically")
	}
	if !found {
		t.Fatalf("the failed revision's deploy log does not say it was rolled back")
	}
}
