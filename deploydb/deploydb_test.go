package deploydb_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/internal/testredis"
)

// A deployment gets its own database, role and Redis number; a retried
// Ensure, and one by a new Shared (a restart, another replica), answers
// the same URIs, and the data written through them is still there.
func TestEnsureCreatesAndReuses(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 16)
	s, o := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	w := work(&controlplane.ResourceSpec{DBMaxConnections: new(int64(7))})
	env, err := s.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := s.Name(w.Deployment.ID)
	if !strings.HasPrefix(name, o.Prefix) || strings.Contains(name, "-") {
		t.Errorf("name %q", name)
	}
	db := connect(t, env[deploydb.EnvDatabaseURI])
	var user, database string
	if err := db.QueryRow(ctx, "SELECT current_user, current_database()").Scan(&user, &database); err != nil {
		t.Fatal(err)
	}
	if user != name || database != name {
		t.Errorf("connected as %s to %s, want %s to %s", user, database, name, name)
	}
	// db_max_connections is the role's connection limit.
	var limit int
	if err := db.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user").Scan(&limit); err != nil || limit != 7 {
		t.Errorf("connection limit %d, %v; want db_max_connections 7", limit, err)
	}
	if _, err := db.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('row')"); err != nil {
		t.Fatal(err)
	}
	r := redisOf(t, env[deploydb.EnvRedisURI])
	if err := r.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	again, err := s.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env, again); diff != "" {
		t.Errorf("a retried Ensure answers other URIs (-first +again):\n%s", diff)
	}
	s2, err := deploydb.New(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	restarted, err := s2.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env, restarted); diff != "" {
		t.Errorf("after a restart Ensure answers other URIs (-first +restarted):\n%s", diff)
	}
	var v string
	if err := connect(t, restarted[deploydb.EnvDatabaseURI]).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "row" {
		t.Errorf("the row written before: %q, %v", v, err)
	}
	if got, err := redisOf(t, restarted[deploydb.EnvRedisURI]).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("the Redis key written before: %q, %v", got, err)
	}
}

// Two deployments are kept apart: other databases, other numbers, and a
// deployment's role may not connect to another's database.
func TestDeploymentsAreSeparate(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 16)
	s, o := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	w1, w2 := work(nil), work(nil)
	env1, err := s.Ensure(ctx, w1, nil)
	if err != nil {
		t.Fatal(err)
	}
	env2, err := s.Ensure(ctx, w2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if env1[deploydb.EnvDatabaseURI] == env2[deploydb.EnvDatabaseURI] || env1[deploydb.EnvRedisURI] == env2[deploydb.EnvRedisURI] {
		t.Fatalf("two deployments share a URI: %v %v", env1, env2)
	}
	if err := redisOf(t, env1[deploydb.EnvRedisURI]).Set(ctx, "k", "one", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisOf(t, env2[deploydb.EnvRedisURI]).Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("the other deployment's Redis sees the key: %v", err)
	}
	// w2's role, w1's database.
	cfg, err := pgx.ParseConfig(env2[deploydb.EnvDatabaseURI])
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = s.Name(w1.Deployment.ID)
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		c.Close(ctx)
		t.Error("a deployment's role connected to another deployment's database")
	} else if !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("connecting to another deployment's database: %v, want permission denied", err)
	}
	// Nor read the table of passwords, in the shared server's own database.
	admin, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = admin.Database
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		defer c.Close(ctx)
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{o.Table}.Sanitize()).Scan(&n); err == nil {
			t.Errorf("a deployment's role read the table of passwords (%d rows)", n)
		}
	}
}

// Remove drops the database and the role, empties the Redis number and
// frees it; a second Remove is no error.
func TestRemove(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 16)
	s, _ := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	w := work(nil)
	env, err := s.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := redisOf(t, env[deploydb.EnvRedisURI])
	if err := r.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	connect(t, env[deploydb.EnvDatabaseURI]) // a session still open: WITH (FORCE) ends it
	for range 2 {
		if err := s.Remove(ctx, tenant, w.Deployment.ID); err != nil {
			t.Fatal(err)
		}
	}
	admin := connect(t, dsn)
	name := s.Name(w.Deployment.ID)
	var dbs, roles int
	if err := admin.QueryRow(ctx, "SELECT (SELECT count(*) FROM pg_database WHERE datname = $1), (SELECT count(*) FROM pg_roles WHERE rolname = $1)", name).Scan(&dbs, &roles); err != nil {
		t.Fatal(err)
	}
	if dbs != 0 || roles != 0 {
		t.Errorf("after Remove: %d database(s) and %d role(s) named %s", dbs, roles, name)
	}
	if n, err := r.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("the Redis number holds %d keys after Remove (%v)", n, err)
	}
	// The number is free again: the next deployment gets it.
	next, err := s.Ensure(ctx, work(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if next[deploydb.EnvRedisURI] != env[deploydb.EnvRedisURI] {
		t.Errorf("the next deployment got %s, want the freed %s", next[deploydb.EnvRedisURI], env[deploydb.EnvRedisURI])
	}
}

// When every number of the shared Redis (CONFIG GET databases) is taken,
// Ensure refuses at once with ErrRedisFull.
func TestRedisFull(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 2)
	s, _ := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	seen := map[string]bool{}
	for range 2 {
		env, err := s.Ensure(ctx, work(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[env[deploydb.EnvRedisURI]] = true
	}
	if len(seen) != 2 {
		t.Errorf("two deployments got %d numbers", len(seen))
	}
	// A generous deadline: ErrRedisFull must not wait for it.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := s.Ensure(ctx, work(nil), nil)
	if !errors.Is(err, deploydb.ErrRedisFull) || !errors.Is(err, deploydb.ErrPermanent) {
		t.Fatalf("a third deployment on a Redis with 2 databases: %v, want ErrRedisFull", err)
	}
	if ctx.Err() != nil {
		t.Error("ErrRedisFull came only at the deadline")
	}
	if !strings.Contains(err.Error(), "all 2 are taken") {
		t.Errorf("message %q does not say how many", err)
	}
}

// Replicas allocating at once never hand out a number twice, and
// replicas ensuring the same deployment at once agree.
func TestConcurrentReplicas(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 16)
	a, o := newShared(t, dsn, rs.URL(), nil)
	b, err := deploydb.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	same := work(nil)
	type result struct {
		env map[string]string
		err error
	}
	var mu sync.Mutex
	results := map[string][]result{}
	var wg sync.WaitGroup
	for _, s := range []*deploydb.Shared{a, b, a, b, a, b} {
		for _, w := range []*controlplane.Work{work(nil), same} {
			wg.Go(func() {
				env, err := s.Ensure(ctx, w, nil)
				mu.Lock()
				results[w.Deployment.ID] = append(results[w.Deployment.ID], result{env, err})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	numbers := map[string]string{}
	for id, rs := range results {
		for _, r := range rs {
			if r.err != nil {
				t.Fatalf("Ensure of %s: %v", id, r.err)
			}
			if diff := cmp.Diff(rs[0].env, r.env); diff != "" {
				t.Errorf("replicas disagree on %s:\n%s", id, diff)
			}
		}
		u := rs[0].env[deploydb.EnvRedisURI]
		if other, ok := numbers[u]; ok {
			t.Errorf("%s and %s both got %s", id, other, u)
		}
		numbers[u] = id
	}
	if len(numbers) != 7 {
		t.Errorf("%d distinct numbers for 7 deployments", len(numbers))
	}
}

// A shared Redis that stops answering makes Ensure wait, saying so in
// the log, and fail when ctx is done, naming what did not answer.
func TestEnsureWaitsThenFails(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 16)
	s, _ := newShared(t, dsn, rs.URL(), nil)
	w := work(nil)
	if _, err := s.Ensure(context.Background(), w, nil); err != nil { // the database exists: what follows waits for Redis only
		t.Fatal(err)
	}
	rs.Stop()
	var mu sync.Mutex
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Ensure(ctx, w, func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() })
	if err == nil {
		t.Fatal("Ensure succeeded with Redis stopped")
	}
	if !strings.Contains(err.Error(), "Redis database") || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("error %q does not say Redis did not answer", err)
	}
	mu.Lock()
	defer mu.Unlock()
	waiting := false
	for _, l := range lines {
		waiting = waiting || strings.HasPrefix(l, "waiting for the deployment's Redis database")
	}
	if !waiting {
		t.Errorf("no progress line in %q", lines)
	}
}

// New refuses what it cannot use, saying why.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    deploydb.Options
		want string
	}{
		{"no dsn", deploydb.Options{}, "PostgresDSN is required"},
		{"keyword dsn", deploydb.Options{PostgresDSN: "host=localhost user=x"}, "as a URL"},
		{"bad prefix", deploydb.Options{PostgresDSN: "postgres://x@localhost/db", Prefix: "Bad-Prefix"}, "prefix"},
		{"bad redis", deploydb.Options{PostgresDSN: "postgres://x@localhost/db", RedisURL: "http://x"}, "Redis URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deploydb.New(context.Background(), &tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func connect(t testing.TB, uri string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func redisOf(t testing.TB, uri string) *redis.Client {
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
