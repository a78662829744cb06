package deploydocker_test

import (
	"context"
	"encoding/json"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/deploydocker"
	"github.com/deployplane/deployplane/internal/testredis"
	"github.com/deployplane/deployplane/storemem"
)

// statusLog records, from the tenant's event log, the statuses a
// deployment went through and its revisions' statuses, in order.
type statusLog struct {
	mu     sync.Mutex
	seen   []string // "deployment AWAITING_DATABASE", "revision DEPLOYED", ...
	cancel func()
	done   chan struct{}
}

func followStatuses(t testing.TB, cp *controlplane.ControlPlane) *statusLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	es, err := cp.FollowEvents(ctx, tenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &statusLog{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			evs, err := es.Next(ctx)
			if err != nil {
				return
			}
			for _, e := range evs {
				var data struct {
					Deployment *struct{ Status string } `json:"deployment"`
					Revision   *struct{ Status string } `json:"revision"`
				}
				if json.Unmarshal(e.Data, &data) != nil {
					continue
				}
				l.mu.Lock()
				switch {
				case e.Name == controlplane.EventDeployment && data.Deployment != nil:
					l.seen = append(l.seen, "deployment "+data.Deployment.Status)
				case e.Name == controlplane.EventRevision && data.Revision != nil:
					l.seen = append(l.seen, "revision "+data.Revision.Status)
				}
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-l.done })
	return l
}

func (l *statusLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.seen, s)
}

func (l *statusLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// withDBs is a fixture whose deployments get their own database and Redis
// containers of the test database image (real PostgreSQL and Redis).
func withDBs(t testing.TB, dataDir string) (*fixture, func(*deploydocker.Options)) {
	img := dbImage(t)
	tweak := func(o *deploydocker.Options) {
		o.Services = &deploydocker.Services{PostgresImage: img, RedisImage: img, DataDir: dataDir}
	}
	return newFixture(t, tweak), tweak
}

// A deployment gets its own PostgreSQL and Redis, sized by its
// resource_spec, before its first revision's containers; it is
// AWAITING_DATABASE until they answer and the revision is DEPLOYED, then
// READY. Its containers get DATABASE_URI and REDIS_URI; the data stays
// across revisions and across a restart of the control plane; DELETE
// removes the containers and their volumes.
func TestDeploymentDatabase(t *testing.T) {
	f, tweak := withDBs(t, "")
	ctx := context.Background()
	events := followStatuses(t, f.cp)
	spec := &controlplane.ResourceSpec{DBMemoryMB: new(int64(128)), DBMaxConnections: new(int64(20)), RedisMemoryMB: new(int64(32))}
	d := f.create(uniq("db"), image("server:v1"), spec)
	if d.Status != controlplane.StatusAwaitingDatabase {
		t.Errorf("a new deployment is %s", d.Status)
	}
	rev := f.wait(d.ID, *d.LatestRevisionID)
	if rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	eventually(t, "the READY event", func() bool { return events.has("deployment READY") })
	seen := events.list()
	ready, deployed := slices.Index(seen, "deployment READY"), slices.Index(seen, "revision DEPLOYED")
	if deployed < 0 || ready < deployed {
		t.Errorf("READY before the revision was DEPLOYED: %q", seen)
	}
	for _, s := range seen[:ready] {
		if strings.HasPrefix(s, "deployment ") && s != "deployment AWAITING_DATABASE" {
			t.Errorf("before READY the deployment was %s: %q", s, seen)
		}
	}
	if got, _ := f.cp.GetDeployment(ctx, tenant, d.ID); got.Status != controlplane.StatusReady {
		t.Errorf("after DEPLOYED the deployment is %s", got.Status)
	}

	url := f.proxyURL + "/" + d.ID
	eventually(t, "the url answers", func() bool { _, err := get(url + "/version"); return err == nil }) // the proxy switches just after DEPLOYED
	dbURI, err := get(url + "/env?name=DATABASE_URI")
	if err != nil || !strings.HasPrefix(dbURI, "postgres://postgres:") {
		t.Fatalf("DATABASE_URI = %q, %v", dbURI, err)
	}
	redisURI, err := get(url + "/env?name=REDIS_URI")
	if err != nil || !strings.HasPrefix(redisURI, "redis://:") {
		t.Fatalf("REDIS_URI = %q, %v", redisURI, err)
	}
	// The URIs lead to a real PostgreSQL and Redis, sized by the spec.
	db := pgConnect(t, dbURI)
	var maxConns string
	if err := db.QueryRow(ctx, "SHOW max_connections").Scan(&maxConns); err != nil || maxConns != "20" {
		t.Errorf("max_connections %q, %v; want db_max_connections 20", maxConns, err)
	}
	if _, err := db.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('row')"); err != nil {
		t.Fatal(err)
	}
	r := redisClient(t, redisURI)
	if got, err := r.ConfigGet(ctx, "maxmemory").Result(); err != nil || got["maxmemory"] != "33554432" {
		t.Errorf("maxmemory %v, %v; want redis_memory_mb 32 MB", got, err)
	}
	if err := r.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if u, err := neturl.Parse(redisURI); err != nil || deploydb.PingRedis(ctx, "redis://"+u.Host+"/0") == nil {
		t.Error("the deployment's Redis answers without its password")
	}
	services := map[string]string{}
	for _, role := range []string{deploydocker.RolePostgres, deploydocker.RoleRedis} {
		ids := f.containers(deploydocker.LabelDeployment+"="+d.ID, deploydocker.LabelRole+"="+role)
		if len(ids) != 1 {
			t.Fatalf("%d %s containers, want 1", len(ids), role)
		}
		services[role] = ids[0]
	}
	for role, want := range map[string]int64{deploydocker.RolePostgres: 256 << 20, deploydocker.RoleRedis: 64 << 20} {
		res, err := f.cli.ContainerInspect(ctx, services[role], client.ContainerInspectOptions{})
		if err != nil || res.Container.HostConfig.Memory != want {
			t.Errorf("%s memory limit %v, %v; want %d", role, res.Container.HostConfig.Memory, err, want)
		}
	}
	if n := len(f.volumes(d.ID)); n != 2 {
		t.Errorf("%d volumes of the deployment, want 2", n)
	}
	logs, err := f.cp.ListLogs(ctx, tenant, d.ID, rev.ID, &controlplane.LogQuery{Type: controlplane.LogDeploy, Limit: new(1000)})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, l := range logs.Logs {
		msgs = append(msgs, l.Message)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"preparing the deployment's database and Redis", "the deployment's database (container", "answers", "the deployment's database and Redis are ready"} {
		if !strings.Contains(all, want) {
			t.Errorf("the deploy log lacks %q:\n%s", want, all)
		}
	}

	// A restart of the control plane: a new Deployer adopts the services,
	// and the next revision gets the same database, with its data.
	f.stopRun()
	d2, _ := newDeployer(t, f.cp, f.instance, nil, tweak)
	if err := d2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); f.cp.Run(runCtx, d2) }()
	defer func() { stop(); <-done }()
	img := image("server:v2")
	patched, err := f.cp.UpdateDeployment(ctx, tenant, d.ID, &controlplane.UpdateDeploymentRequest{
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: &img}})
	if err != nil {
		t.Fatal(err)
	}
	if rev := f.wait(d.ID, *patched.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("second revision %s: %s", rev.Status, deref(rev.StatusMessage))
	}
	url2 := d2.URL(d.ID) // served by the new Deployer's proxy
	eventually(t, "the new revision answers", func() bool { v, _ := get(url2 + "/version"); return v == "v2" })
	if v, _ := get(url2 + "/env?name=DATABASE_URI"); v != dbURI {
		t.Errorf("the new revision's DATABASE_URI %q, want the same database %q", v, dbURI)
	}
	var v string
	if err := pgConnect(t, dbURI).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "row" {
		t.Errorf("the row written before: %q, %v", v, err)
	}
	if got, err := redisClient(t, redisURI).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("the Redis key written before: %q, %v", got, err)
	}
	for role, id := range services {
		ids := f.containers(deploydocker.LabelDeployment+"="+d.ID, deploydocker.LabelRole+"="+role)
		if len(ids) != 1 || ids[0] != id {
			t.Errorf("%s after a new revision: %v, want the same container %s", role, ids, id)
		}
	}

	if err := f.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deployment is removed", func() bool { _, err := f.cp.GetDeployment(ctx, tenant, d.ID); return isNotFound(err) })
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 0 {
		t.Errorf("%d containers left after DELETE", n)
	}
	if vs := f.volumes(d.ID); len(vs) != 0 {
		t.Errorf("volumes left after DELETE: %v", vs)
	}
}

// With Services.DataDir the data lives in a directory per deployment,
// which DELETE removes.
func TestDeploymentDataDir(t *testing.T) {
	dir := t.TempDir()
	f, _ := withDBs(t, dir)
	ctx := context.Background()
	d := f.create(uniq("datadir"), image("server:v1"), nil)
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	pgVersion, _ := filepath.Glob(filepath.Join(dir, "*", "*", d.ID, "postgres", "PG_VERSION"))
	if len(pgVersion) != 1 {
		t.Fatalf("no cluster under %s: %v", dir, pgVersion)
	}
	depDir := filepath.Dir(filepath.Dir(pgVersion[0]))
	if n := len(f.volumes(d.ID)); n != 0 {
		t.Errorf("%d volumes with DataDir set", n)
	}
	if err := f.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deployment is removed", func() bool { _, err := f.cp.GetDeployment(ctx, tenant, d.ID); return isNotFound(err) })
	if _, err := os.Stat(depDir); !os.IsNotExist(err) {
		t.Errorf("the deployment's data directory after DELETE: %v", err)
	}
}

// A database that never answers, or exits, ends the revision
// DEPLOY_FAILED saying so; no server container is started and the
// deployment stays AWAITING_DATABASE.
func TestDatabaseNotReady(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services deploydocker.Services
		want     []string
	}{
		// The test server accepts connections but speaks HTTP, not the
		// PostgreSQL protocol.
		{"never answers", deploydocker.Services{PostgresImage: image("server:v1")},
			[]string{"were not ready within 15s", "the deployment's database (container", "did not answer"}},
		{"exits", deploydocker.Services{RedisImage: image("crash:1")},
			[]string{"could not be prepared", "the deployment's Redis", "crashing on purpose"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(o *deploydocker.Options) {
				o.Services = &tc.services
				o.DatabaseTimeout = 15 * time.Second // the wait, and the pull and create before it
			})
			d := f.create(uniq("nodb"), image("server:v1"), nil)
			rev := f.wait(d.ID, *d.LatestRevisionID)
			if rev.Status != controlplane.RevisionDeployFailed {
				t.Fatalf("%s, want DEPLOY_FAILED", rev.Status)
			}
			for _, w := range tc.want {
				if !strings.Contains(deref(rev.StatusMessage), w) {
					t.Errorf("status_message %q lacks %q", deref(rev.StatusMessage), w)
				}
			}
			if n := len(f.containers(deploydocker.LabelDeployment+"="+d.ID, deploydocker.LabelRole+"="+deploydocker.RoleServer)); n != 0 {
				t.Errorf("%d server containers started without a database", n)
			}
			if got, _ := f.cp.GetDeployment(context.Background(), tenant, d.ID); got.Status != controlplane.StatusAwaitingDatabase {
				t.Errorf("the deployment is %s, want AWAITING_DATABASE", got.Status)
			}
		})
	}
}

// With a deploydb.Shared as Options.Databases, deployments get a database
// and a Redis user on the shared servers (the test's PostgreSQL and a
// redis-server of its own), their containers get REDIS_KEY_PREFIX, and
// DELETE drops them.
func TestSharedDatabases(t *testing.T) {
	dsn := os.Getenv("DEPLOYPLANE_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("DEPLOYPLANE_TEST_POSTGRES_DSN is not set: this test needs a PostgreSQL server (.ci/run starts one)")
	}
	needDocker(t)
	rs := testredis.Start(t, 16)
	ctx := context.Background()
	prefix := strings.ReplaceAll(uniq("t"), "-", "") + "_"
	shared, err := deploydb.New(ctx, &deploydb.Options{PostgresDSN: dsn, RedisURL: rs.URL(), Prefix: prefix, Table: prefix + "databases"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(shared.Close)
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{prefix + "databases"}.Sanitize())
			c.Close(ctx)
		}
	})
	f := newFixture(t, func(o *deploydocker.Options) { o.Databases = shared })
	d := f.create(uniq("shared"), image("server:v1"), nil)
	t.Cleanup(func() { shared.Remove(ctx, tenant, d.ID) }) // when the test fails before DELETE
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	url := f.proxyURL + "/" + d.ID
	eventually(t, "the url answers", func() bool { _, err := get(url + "/version"); return err == nil }) // the proxy switches just after DEPLOYED
	dbURI, err := get(url + "/env?name=DATABASE_URI")
	if err != nil {
		t.Fatal(err)
	}
	var user string
	if err := pgConnect(t, dbURI).QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != shared.Name(d.ID) {
		t.Errorf("DATABASE_URI logs in as %q, %v; want %s", user, err, shared.Name(d.ID))
	}
	redisURI, err := get(url + "/env?name=REDIS_URI")
	if err != nil || deploydb.PingRedis(ctx, redisURI) != nil {
		t.Errorf("REDIS_URI %q does not answer (%v)", redisURI, err)
	}
	keyPrefix, err := get(url + "/env?name=REDIS_KEY_PREFIX")
	if err != nil || keyPrefix != shared.Name(d.ID)+":" {
		t.Errorf("REDIS_KEY_PREFIX = %q, %v; want %s:", keyPrefix, err, shared.Name(d.ID))
	}
	if err := redisClient(t, redisURI).Set(ctx, keyPrefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.DeleteDeployment(ctx, tenant, d.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deployment is removed", func() bool { _, err := f.cp.GetDeployment(ctx, tenant, d.ID); return isNotFound(err) })
	var n int
	if err := pgConnect(t, dsn).QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", shared.Name(d.ID)).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d databases of the deployment after DELETE (%v)", n, err)
	}
	if n, err := rs.Client(t, 0).Exists(ctx, keyPrefix+"k").Result(); err != nil || n != 0 {
		t.Errorf("the deployment's Redis key exists after DELETE (%d, %v)", n, err)
	}
}

// volumes lists the names of the instance's volumes of a deployment.
func (f *fixture) volumes(depID string) []string {
	f.t.Helper()
	fl := make(client.Filters).Add("label", deploydocker.LabelInstance+"="+f.instance).Add("label", deploydocker.LabelDeployment+"="+depID)
	res, err := f.cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: fl})
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, v := range res.Items {
		names = append(names, v.Name)
	}
	return names
}

func pgConnect(t testing.TB, uri string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func redisClient(t testing.TB, uri string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(uri)
	if err != nil {
		t.Fatal(err)
	}
	o.DisableIdentity = true
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// Options.Services and Options.Databases are alternatives, and DataDir
// must be absolute (no daemon needed: New does not contact it).
func TestDatabaseOptionsRefused(t *testing.T) {
	for name, o := range map[string]*deploydocker.Options{
		"both":              {Services: &deploydocker.Services{PostgresImage: "postgres"}, Databases: &deploydb.Shared{}},
		"relative data dir": {Services: &deploydocker.Services{PostgresImage: "postgres", DataDir: "data"}},
	} {
		if d, err := deploydocker.New(o); err == nil {
			d.Close()
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

// Reconcile removes the data volumes of deployments the stored state no
// longer has (deleted while this Deployer did not run), with their
// containers.
func TestReconcileRemovesDataOfDeletedDeployments(t *testing.T) {
	img := dbImage(t)
	tweak := func(o *deploydocker.Options) { o.Services = &deploydocker.Services{RedisImage: img} }
	f := newFixture(t, tweak)
	ctx := context.Background()
	d := f.create(uniq("orphan"), image("server:v1"), nil)
	if rev := f.wait(d.ID, *d.LatestRevisionID); rev.Status != controlplane.RevisionDeployed {
		t.Fatalf("%s: %s", rev.Status, deref(rev.StatusMessage))
	}
	if n := len(f.volumes(d.ID)); n != 1 {
		t.Fatalf("%d volumes, want Redis's", n)
	}
	f.stopRun()
	// A control plane whose store never had the deployment.
	d2, _ := newDeployer(t, controlplane.New(storemem.New(), nil), f.instance, nil, tweak)
	if err := d2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.containers(deploydocker.LabelDeployment + "=" + d.ID)); n != 0 {
		t.Errorf("%d containers left", n)
	}
	if vs := f.volumes(d.ID); len(vs) != 0 {
		t.Errorf("volumes left: %v", vs)
	}
}
