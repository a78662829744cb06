package deploydocker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
)

// A secret reference is the value the operator maps to its secret and key,
// read from a file or the deployer's environment when a container starts;
// one mapped to nothing fails the revision, naming it.
func TestSecretReferences(t *testing.T) {
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEPLOYDOCKER_TEST_REF", "from the environment")
	f := newFixture(t, func(o *deploydocker.Options) {
		o.SecretRefs = map[string]string{"db-creds/password": "file:" + file, "api/key": "env:DEPLOYDOCKER_TEST_REF"}
	})
	ctx := context.Background()
	create := func(name string, refs ...controlplane.SecretReference) *controlplane.Deployment {
		t.Helper()
		src, img := controlplane.SourceExternalDocker, image("server:v1")
		d, err := f.cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}, SecretReferences: refs})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := create(uniq("refs"), controlplane.SecretReference{Name: "DB_PASSWORD", SecretName: "db-creds", SecretKey: "password"},
		controlplane.SecretReference{Name: "API_KEY", SecretName: "api", SecretKey: "key"})
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	url := f.proxyURL + "/" + d.ID
	eventually(t, "url answers", func() bool { _, err := get(url + "/version"); return err == nil })
	for name, want := range map[string]string{"DB_PASSWORD": "from a file", "API_KEY": "from the environment"} {
		if v, err := get(url + "/env?name=" + name); err != nil || v != want {
			t.Errorf("%s in the container = %q, %v; want %q", name, v, err, want)
		}
	}

	unmapped := create(uniq("unmapped"), controlplane.SecretReference{Name: "TOKEN", SecretName: "nope", SecretKey: "token"})
	rev := f.wait(unmapped.ID, *unmapped.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployFailed || !strings.Contains(deref(rev.StatusMessage), "secret reference TOKEN") ||
		!strings.Contains(deref(rev.StatusMessage), "-docker-secret-ref nope/token") {
		t.Fatalf("revision of an unmapped reference: %s %q", rev.Status, deref(rev.StatusMessage))
	}
	if got := f.containers(deploydocker.LabelDeployment + "=" + unmapped.ID); len(got) != 0 {
		t.Errorf("%d containers of the failed revision", len(got))
	}
	if p := f.d.SecretReferenceProblem(controlplane.SecretReference{Name: "X", SecretName: "db-creds", SecretKey: "password"}); p != "" {
		t.Errorf("a mapped reference: %q", p)
	}
	if _, err := deploydocker.New(&deploydocker.Options{SecretRefs: map[string]string{"db-creds": "file:/x"}}); err == nil {
		t.Error("New accepted a key without /")
	}
	if _, err := deploydocker.New(&deploydocker.Options{SecretRefs: map[string]string{"a/b": "vault:/x"}}); err == nil {
		t.Error("New accepted a source that is neither file: nor env:")
	}
}
