package deploydocker_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
)

// A create ends DEPLOYED with min_scale containers that carry the secrets,
// the memory limit (memory_mb's default limit, 2x) and the labels; the url
// answers from the containers, in turn.
func TestCreateServesURL(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	spec := &controlplane.ResourceSpec{MinScale: new(int64(2)), MemoryMB: new(int64(48)), CPU: new(0.5),
		Labels: map[string]string{"team": "agents"}}
	secret := "s3cret value"
	d := f.create(uniq("serve"), image("server:v1"), spec, controlplane.SecretInput{Name: "API_KEY", Value: &secret})
	if d.URL != nil {
		t.Errorf("url before deploying = %q, want null", *d.URL)
	}
	rev := f.wait(d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	got, err := f.cp.GetDeployment(ctx, tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL == nil || *got.URL != f.proxyURL+"/"+d.ID {
		t.Fatalf("url = %v, want %s/%s", got.URL, f.proxyURL, d.ID)
	}
	if got.Status != controlplane.StatusReady || deref(got.ImageVersion) != image("server:v1") {
		t.Errorf("deployment %s, image_version %v", got.Status, deref(got.ImageVersion))
	}
	url := *got.URL
	// The proxy switches right after the report: wait for it, then ask.
	eventually(t, "url answers", func() bool { _, err := get(url + "/version"); return err == nil })
	if v, err := get(url + "/version"); err != nil || v != "v1" {
		t.Errorf("GET url/version = %q, %v", v, err)
	}
	if v, err := get(url + "/env?name=API_KEY"); err != nil || v != secret {
		t.Errorf("secret in the container's environment = %q, %v", v, err)
	}
	if v, err := get(url + "/memlimit"); err != nil || v != strconv.Itoa(96<<20) {
		t.Errorf("cgroup memory limit = %q, %v; want %d (2 x memory_mb)", v, err, 96<<20)
	}
	ports := map[string]bool{}
	for range 6 {
		p, err := get(url + "/port")
		if err != nil {
			t.Fatal(err)
		}
		ports[p] = true
	}
	if len(ports) != 2 {
		t.Errorf("requests reached %d containers, want both replicas: %v", len(ports), ports)
	}

	ids := f.containers(deploydocker.LabelDeployment + "=" + d.ID)
	if len(ids) != 2 {
		t.Fatalf("%d containers, want min_scale 2", len(ids))
	}
	for _, id := range ids {
		res, err := f.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Container
		for k, want := range map[string]string{"team": "agents", deploydocker.LabelTenant: tenant,
			deploydocker.LabelDeployment: d.ID, deploydocker.LabelRevision: rev.ID} {
			if c.Config.Labels[k] != want {
				t.Errorf("label %s = %q, want %q", k, c.Config.Labels[k], want)
			}
		}
		if c.HostConfig.Memory != 96<<20 || c.HostConfig.MemoryReservation != 48<<20 ||
			c.HostConfig.NanoCPUs != 1e9 || c.HostConfig.CPUShares != 512 {
			t.Errorf("limits: memory %d reservation %d nanocpus %d shares %d", c.HostConfig.Memory,
				c.HostConfig.MemoryReservation, c.HostConfig.NanoCPUs, c.HostConfig.CPUShares)
		}
	}
}

// A PATCH of the image while a client asks the url every 50 ms: no request
// fails, the url ends on the new image, and the old containers are gone.
func TestPatchWithoutGap(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	d := f.create(uniq("patch"), image("server:v1"), nil)
	first := f.wait(d.ID, *d.LatestRevisionID)
	if first.Status != controlplane.RevisionDeployed {
		t.Fatalf("first revision %s: %s", first.Status, deref(first.StatusMessage))
	}
	url := f.proxyURL + "/" + d.ID
	eventually(t, "url answers v1", func() bool { v, _ := get(url + "/version"); return v == "v1" })

	poll := pollVersions(url)
	img := image("server:v2")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	second := f.wait(d.ID, *patched.LatestRevisionID)
	if second.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", second.Status, deref(second.StatusMessage))
	}
	eventually(t, "the old revision's containers are removed", func() bool {
		return len(f.containers(deploydocker.LabelRevision+"="+first.ID)) == 0
	})
	eventually(t, "the client sees v2 a few times", func() bool { return poll.saw("v2") >= 3 })
	seen, failures := poll.end()
	if len(failures) > 0 {
		t.Errorf("%d requests failed during the switch, first: %s", len(failures), failures[0])
	}
	if seen["v1"] == 0 {
		t.Errorf("the client never saw v1 (seen %v): the switch was not observed", seen)
	}
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 1 {
		t.Errorf("%d containers left, want the new revision's 1", n)
	}
	got, _ := f.cp.GetDeployment(ctx, tenant, d.ID)
	if deref(got.ActiveRevisionID) != second.ID || deref(got.URL) != url {
		t.Errorf("active %v url %v", deref(got.ActiveRevisionID), deref(got.URL))
	}
}

// A missing image, a crashing container and a health check that never
// passes each end DEPLOY_FAILED saying why, with no container left.
func TestDeployFailures(t *testing.T) {
	for _, tc := range []struct {
		name, image, want string
		timeout           time.Duration
	}{
		{"missing", image("nothing/here:1"), "Pulling image", 0},
		{"crash", image("crash:1"), "crashing on purpose", 0},
		// The unhealthy image never answers 200, so a short timeout only
		// bounds the test; it cannot make a healthy container fail.
		{"unhealthy", image("unhealthy:1"), "did not answer its health check", 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *deploydocker.Options) {
				if tc.timeout > 0 {
					o.HealthTimeout = tc.timeout
				}
			})
			d := f.create(uniq(tc.name), tc.image, nil)
			rev := f.wait(d.ID, *d.LatestRevisionID)
			if rev.Status != controlplane.RevisionDeployFailed {
				t.Fatalf("status %s, want DEPLOY_FAILED", rev.Status)
			}
			if msg := deref(rev.StatusMessage); !strings.Contains(msg, tc.want) {
				t.Errorf("status_message %q, want it to contain %q", msg, tc.want)
			}
			if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 0 {
				t.Errorf("%d containers left", n)
			}
			got, _ := f.cp.GetDeployment(context.Background(), tenant, d.ID)
			if got.URL != nil {
				t.Errorf("url %q after a failure, want null", *got.URL)
			}
		})
	}
}

// A revision still starting when a newer one becomes active is superseded:
// its half-started containers are removed and it ends DEPLOY_FAILED saying
// so, while the newer one serves.
func TestSupersededWhileStarting(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	d := f.create(uniq("superseded"), image("gated:1"), nil) // never healthy on its own
	first := *d.LatestRevisionID
	// Running, not only there: a container may be created while its
	// revision's image is pulled, before DEPLOYING.
	eventually(t, "the first revision's container runs", func() bool {
		ids := f.containers(deploydocker.LabelRevision + "=" + first)
		if len(ids) != 1 {
			return false
		}
		res, err := f.cli.ContainerInspect(ctx, ids[0], client.ContainerInspectOptions{})
		return err == nil && res.Container.State != nil && res.Container.State.Running
	})
	img := image("server:v1")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	second := f.wait(d.ID, *patched.LatestRevisionID)
	if second.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", second.Status, deref(second.StatusMessage))
	}
	rev := f.wait(d.ID, first)
	if rev.Status != controlplane.RevisionDeployFailed || !strings.Contains(deref(rev.StatusMessage), "Superseded by revision "+second.ID) {
		t.Errorf("first revision %s %q, want DEPLOY_FAILED superseded", rev.Status, deref(rev.StatusMessage))
	}
	eventually(t, "the first revision's containers are removed", func() bool {
		return len(f.containers(deploydocker.LabelRevision+"="+first)) == 0
	})
	if v, err := get(f.proxyURL + "/" + d.ID + "/version"); err != nil || v != "v1" {
		t.Errorf("url answers %q, %v; want v1", v, err)
	}
}

// Credentials reach the registry: a private image pulls with them and
// fails without.
func TestRegistryCredentials(t *testing.T) {
	f := newFixture(t, func(o *deploydocker.Options) {
		o.Credentials = func(ctx context.Context, w *controlplane.Work, img string) (*deploydocker.Credentials, error) {
			if strings.HasPrefix(w.Deployment.Name, "with-creds") {
				return &deploydocker.Credentials{Username: regUser, Password: regPass}, nil
			}
			return nil, nil
		}
	})
	without := f.create(uniq("anon"), privateImage(), nil)
	with := f.create(uniq("with-creds"), privateImage(), nil)
	if rev := f.wait(without.ID, *without.LatestRevisionID); rev.Status != controlplane.RevisionDeployFailed {
		t.Errorf("without credentials: %s", rev.Status)
	}
	if rev := f.wait(with.ID, *with.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Errorf("with credentials: %s %s", rev.Status, deref(rev.StatusMessage))
	}
	eventually(t, "private image answers", func() bool { v, _ := get(f.proxyURL + "/" + with.ID + "/version"); return v == "private" })
}

// DELETE removes every container before the records go, and the url
// stops answering.
func TestDeleteLeavesNoContainer(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	d := f.create(uniq("delete"), image("server:v1"), &controlplane.ResourceSpec{MinScale: new(int64(2))})
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 2 {
		t.Fatalf("%d containers before DELETE, want 2", n)
	}
	if err := f.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deployment's records are removed", func() bool {
		_, err := f.cp.GetDeployment(ctx, tenant, d.ID)
		return isNotFound(err)
	})
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 0 {
		t.Errorf("%d containers left after DELETE", n)
	}
	if _, err := get(f.proxyURL + "/" + d.ID + "/version"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("url after DELETE: %v, want 404", err)
	}
}

// builder is the test's image builder: it "builds" by naming a test image
// and logs a line.
type builder struct {
	image string
	calls atomic.Int32
}

func (b *builder) Build(ctx context.Context, w *controlplane.Work, log func(string)) (string, string, error) {
	b.calls.Add(1)
	log("step 1/1: FROM scratch")
	return b.image, "0123456789abcdef0123456789abcdef01234567", nil
}

// The Builder seam: a github revision goes through the build states with
// a Builder and deploys its image; without one it ends BUILD_FAILED.
func TestBuilderSeam(t *testing.T) {
	b := &builder{image: image("server:v2")}
	f := newFixture(t, func(o *deploydocker.Options) { o.Builder = b })
	d := createGitHub(t, f.cp, uniq("gh"))
	rev := f.wait(d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	if deref(rev.SourceRevisionConfig.RepoCommitSHA) != "0123456789abcdef0123456789abcdef01234567" {
		t.Errorf("repo_commit_sha %v", deref(rev.SourceRevisionConfig.RepoCommitSHA))
	}
	if b.calls.Load() != 1 {
		t.Errorf("Build called %d times", b.calls.Load())
	}
	eventually(t, "the built image answers", func() bool { v, _ := get(f.proxyURL + "/" + d.ID + "/version"); return v == "v2" })

	g := newFixture(t, nil) // no Builder
	d2 := createGitHub(t, g.cp, uniq("gh-nobuilder"))
	rev2 := g.wait(d2.ID, *d2.LatestRevisionID)
	if rev2.Status != controlplane.RevisionBuildFailed || !strings.Contains(deref(rev2.StatusMessage), "no image builder") {
		t.Errorf("without a Builder: %s %q", rev2.Status, deref(rev2.StatusMessage))
	}
}

func createGitHub(t *testing.T, cp *controlplane.ControlPlane, name string) *controlplane.Deployment {
	t.Helper()
	ctx := context.Background()
	inst := int64(time.Now().UnixNano() % 1e9)
	iname := "test-installation"
	integ, err := cp.CreateIntegration(ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: &inst, Name: &iname})
	if err != nil {
		t.Fatal(err)
	}
	src := controlplane.SourceGitHub
	repo, ref, path := "https://github.com/acme/agent", "main", "langgraph.json"
	d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{
		Name: &name, Source: &src,
		SourceConfig:         &controlplane.SourceConfig{IntegrationID: &integ.ID, RepoURL: &repo},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: &ref, GraphConfigPath: &path},
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// A deployment with a custom_url answers it as its url (wire contract
// section 10); the proxy still serves it at ProxyURL/<id>.
func TestCustomURL(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	name, src, img, custom := uniq("custom"), controlplane.SourceExternalDocker, image("server:v1"), "https://agent.example.com"
	d, err := f.cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{
		Name: &name, Source: &src,
		SourceConfig:         &controlplane.SourceConfig{CustomURL: &custom},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	got, _ := f.cp.GetDeployment(ctx, tenant, d.ID)
	if deref(got.URL) != custom {
		t.Errorf("url %q, want the custom_url %q", deref(got.URL), custom)
	}
	eventually(t, "the proxy serves it", func() bool { v, _ := get(f.proxyURL + "/" + d.ID + "/version"); return v == "v1" })
}

// An internal_docker deployment (langgraph deploy --image) answers the
// proxy's address as its url and custom_url (wire contract section 10),
// and its containers learn where they are mounted: X-Forwarded-Prefix is
// the url's path, X-Forwarded-Host and -Proto the proxy's, whatever the
// client sent.
func TestInternalDockerURLAndForwardedHeaders(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	name, src, img := uniq("lg"), controlplane.SourceInternalDocker, image("server:v1")
	d, err := f.cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: &name, Source: &src,
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	got, err := f.cp.GetDeployment(ctx, tenant, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := f.proxyURL + "/" + d.ID
	if deref(got.URL) != want || deref(got.SourceConfig.CustomURL) != want {
		t.Fatalf("url %q, custom_url %q; want both %s", deref(got.URL), deref(got.SourceConfig.CustomURL), want)
	}
	eventually(t, "url answers", func() bool { _, err := get(want + "/version"); return err == nil })
	header := func(name string) string {
		t.Helper()
		req, err := http.NewRequest("GET", want+"/header?name="+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-Host", "evil.example")
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-Prefix", "/evil")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", req.URL, resp.Status, b)
		}
		return string(b)
	}
	for name, want := range map[string]string{
		"X-Forwarded-Prefix": "/" + d.ID,
		"X-Forwarded-Host":   strings.TrimPrefix(f.proxyURL, "http://"),
		"X-Forwarded-Proto":  "http",
	} {
		if got := header(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// The network containers join: Docker's default bridge unless the
// operator names another, never one the proxy could not reach, and not
// the default bridge for per-deployment database containers, which find
// nothing by name there. New does not contact the daemon.
func TestNetworkOptions(t *testing.T) {
	services := &deploydocker.Services{PostgresImage: "postgres:16-alpine", RedisImage: "redis:7-alpine"}
	for _, tc := range []struct {
		name string
		o    deploydocker.Options
		want string // "" when accepted
	}{
		{"default", deploydocker.Options{}, ""},
		{"host with services", deploydocker.Options{Network: "host", Services: services}, ""},
		{"own network with services", deploydocker.Options{Network: "deployplane", Services: services}, ""},
		{"bridge with services without images", deploydocker.Options{Network: "bridge", Services: &deploydocker.Services{}}, ""},
		{"none", deploydocker.Options{Network: "none"}, `Options.Network "none": the proxy could not reach the containers`},
		{"another container's", deploydocker.Options{Network: "container:db"}, "the proxy could not reach the containers"},
		{"services on the default network", deploydocker.Options{Services: services}, "default bridge network: containers there cannot find their database"},
		{"services on bridge", deploydocker.Options{Network: "bridge", Services: &deploydocker.Services{RedisImage: "redis"}}, "docker network create NAME"},
		{"services on default", deploydocker.Options{Network: "default", Services: services}, "default bridge network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Host = "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")
			d, err := deploydocker.New(&o)
			if err == nil {
				d.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// A tag that the registry moved while the daemon still has its old image
// under it: the container may be created from the old one while the pull
// runs, but the revision runs the image the pull left (v1 here, where the
// daemon's copy of the tag said v2).
func TestTagMovedRunsPulledImage(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ref := image(uniq("moved") + ":1")
	layer, err := binaryLayer(serverBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := push(layer, ref, []string{"VERSION=v1"}); err != nil {
		t.Fatal(err)
	}
	old := image("server:v2")
	pull, err := f.cli.ImagePull(ctx, old, client.ImagePullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pull.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli.ImageTag(ctx, client.ImageTagOptions{Source: old, Target: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })

	d := f.create(uniq("moved"), ref, nil)
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	url := f.proxyURL + "/" + d.ID
	eventually(t, "url answers", func() bool { _, err := get(url + "/version"); return err == nil })
	if v, err := get(url + "/version"); err != nil || v != "v1" {
		t.Errorf("GET url/version = %q, %v; want the pulled image's v1", v, err)
	}
	if ids := f.containers(deploydocker.LabelDeployment + "=" + d.ID); len(ids) != 1 {
		t.Errorf("%d containers, want 1", len(ids))
	}
}
