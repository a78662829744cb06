package deploydocker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydocker"
)

// The tests of this file give every wait an hour (HealthTimeout,
// DatabaseTimeout, PullRetryTimeout): a revision that waited one out would
// not end before the tests' own deadline (3 minutes), so a revision that
// ends with the expected message failed at once, on the answer itself.
func patient(o *deploydocker.Options) {
	o.HealthTimeout = time.Hour
	o.DatabaseTimeout = time.Hour
	o.PullRetryTimeout = time.Hour
}

// failsWith waits for the revision to end and checks that it is
// DEPLOY_FAILED with a status_message holding every want and no "not ready
// within" or "did not answer" (the words of a wait that ran out), and that
// the deploy log ends on that message at ERROR.
func failsWith(t *testing.T, f *fixture, d *controlplane.Deployment, want ...string) string {
	t.Helper()
	rev := f.wait(d.ID, *d.LatestRevisionID)
	msg := deref(rev.StatusMessage)
	if rev.Status != controlplane.RevisionDeployFailed {
		t.Fatalf("status %s (%q), want DEPLOY_FAILED", rev.Status, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("status_message %q lacks %q", msg, w)
		}
	}
	for _, w := range []string{"not ready within", "did not answer"} {
		if strings.Contains(msg, w) {
			t.Errorf("status_message %q says %q: it waited instead of failing on the answer", msg, w)
		}
	}
	logs := logMessages(t, f.cp, d.ID, rev.ID, controlplane.LogDeploy)
	if !hasLine(logs, controlplane.LevelError, msg) {
		t.Errorf("the deploy log has no ERROR line %q:\n%s", msg, dump(logs))
	}
	return msg
}

// A pull that no retry would cure (an image or repository that does not
// exist, missing credentials, an invalid reference) ends the revision at
// once with Docker's error and the image's name, whether the image is the
// revision's or the deployment's database's or Redis's.
func TestPullErrorFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		image    string // the revision's
		services *deploydocker.Services
		want     []string
	}{
		{"revision image missing", image("nothing/here:1"), nil,
			[]string{"Pulling image " + image("nothing/here:1") + " failed", "not found"}},
		{"revision image without credentials", privateImage(), nil,
			[]string{"Pulling image " + privateImage() + " failed", "no basic auth credentials"}},
		{"database image missing", image("server:v1"),
			&deploydocker.Services{PostgresImage: image("nothing/postgres:16"), RedisImage: image("server:v1")},
			[]string{"could not be prepared", "pulling the postgres image " + image("nothing/postgres:16"), "not found"}},
		{"redis image invalid", image("server:v1"), &deploydocker.Services{RedisImage: "Not A Reference"},
			[]string{"could not be prepared", "pulling the redis image Not A Reference", "invalid reference format"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *deploydocker.Options) {
				patient(o)
				o.Services = tc.services
			})
			d := f.create(uniq("pull"), tc.image, nil)
			failsWith(t, f, d, tc.want...)
			if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 0 {
				t.Errorf("%d containers left", n)
			}
		})
	}
}

// A registry that answers 503 makes the pull fail with an error a retry
// may cure: the Deployer says so in the deploy log and tries again, and
// the revision deploys once the registry serves.
func TestPullRetriesTransientErrors(t *testing.T) {
	needDocker(t)
	var busy atomic.Bool
	busy.Store(true)
	up := &url.URL{Scheme: "http", Host: regHost}
	rp := httputil.NewSingleHostReverseProxy(up)
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy.Load() {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(flaky.Close)
	img := flaky.Listener.Addr().String() + "/server:v1"
	t.Cleanup(func() { // after the fixture's cleanup, which removes the containers
		cli, err := client.New(client.WithHost(dockerHost))
		if err == nil {
			cli.ImageRemove(context.Background(), img, client.ImageRemoveOptions{Force: true})
			cli.Close()
		}
	})
	f := newFixture(t, nil)
	d := f.create(uniq("flaky"), img, nil)
	revID := *d.LatestRevisionID
	retry := "pulling " + img + " failed (attempt 1; retrying in"
	eventually(t, "the deploy log says the pull is retried, or the revision ends", func() bool {
		if hasLine(logMessages(t, f.cp, d.ID, revID, controlplane.LogDeploy), controlplane.LevelInfo, retry) {
			return true
		}
		rev, err := f.cp.GetRevision(context.Background(), tenant, d.ID, revID)
		return err == nil && controlplane.IsTerminal(rev.Status)
	})
	busy.Store(false)
	rev := f.wait(d.ID, revID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	if logs := logMessages(t, f.cp, d.ID, revID, controlplane.LogDeploy); !hasLine(logs, controlplane.LevelInfo, "503 Service Unavailable") {
		t.Errorf("the deploy log does not name the registry's answer:\n%s", dump(logs))
	}
}

// A health check answered 404 (the server runs, but does not serve the
// health path) fails the revision at once, saying so.
func TestHealthCheckFinalAnswer(t *testing.T) {
	f := newFixture(t, func(o *deploydocker.Options) {
		patient(o)
		o.HealthPath = "/no-such-health-path"
	})
	d := f.create(uniq("health404"), image("server:v1"), nil)
	failsWith(t, f, d, "health check GET /no-such-health-path answered 404 Not Found", "404 page not found")
}

// A container that exits at once is reported at once with its exit code
// and its last output: the revision's own, or the deployment's Redis; one
// whose entrypoint does not exist, with the daemon's error.
func TestContainerExitFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		image    string // the revision's
		services *deploydocker.Services
		want     []string
	}{
		{"server exits", image("crash:1"), nil,
			[]string{"exited with code 3", "its last output: server: crashing on purpose"}},
		{"server entrypoint missing", image("noentry:1"), nil,
			[]string{"starting container", "/no/such/entrypoint"}},
		{"redis exits", image("server:v1"), &deploydocker.Services{RedisImage: image("crash:1")},
			[]string{"could not be prepared", "the deployment's Redis", "exited with code 3", "crashing on purpose"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *deploydocker.Options) {
				patient(o)
				o.Services = tc.services
			})
			d := f.create(uniq("exit"), tc.image, nil)
			failsWith(t, f, d, tc.want...)
			if n := len(f.containers(deploydocker.LabelDeployment+"="+d.ID, deploydocker.LabelRole+"="+deploydocker.RoleServer)); n != 0 {
				t.Errorf("%d server containers left", n)
			}
		})
	}
}

// A container that exits while its health check waits, and is restarted,
// is reported with the exit code of that exit (which its state no longer
// holds once it runs again) and its last output.
func TestContainerExitWhileStarting(t *testing.T) {
	f := newFixture(t, func(o *deploydocker.Options) {
		patient(o)
		o.HealthInterval = time.Second // the check mostly finds it running again
	})
	d := f.create(uniq("exit-later"), image("gated:1"), nil) // never healthy on its own
	var port string
	eventually(t, "the revision's container answers", func() bool {
		ids := f.containers(deploydocker.LabelRevision + "=" + *d.LatestRevisionID)
		if len(ids) != 1 {
			return false
		}
		res, err := f.cli.ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
		if err != nil || res.Container.Config == nil {
			return false
		}
		port = res.Container.Config.Labels[deploydocker.LabelPort]
		_, err = get("http://127.0.0.1:" + port + "/version")
		return err == nil
	})
	resp, err := http.Post("http://127.0.0.1:"+port+"/exit", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	failsWith(t, f, d, "exited with code 4", "server: exiting on request")
}
