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

// A deployment gets its own database, role and Redis user; a retried
// Ensure, and one by a new Shared (a restart, another replica), answers
// the same environment, and the data written through it is still there.
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
	// REDIS_URI logs in as the deployment's user, on database 0, and
	// REDIS_KEY_PREFIX is its name and a colon.
	prefix := env[deploydb.EnvRedisKeyPrefix]
	if prefix != name+":" {
		t.Errorf("REDIS_KEY_PREFIX %q, want %q", prefix, name+":")
	}
	r := redisOf(t, env[deploydb.EnvRedisURI])
	if ro, err := redis.ParseURL(env[deploydb.EnvRedisURI]); err != nil || ro.Username != name || ro.DB != 0 {
		t.Errorf("REDIS_URI %q is not user %s on database 0 (%v)", env[deploydb.EnvRedisURI], name, err)
	}
	if err := r.Set(ctx, prefix+"k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A subscription of the running revision outlives the next Ensure,
	// which sets the user's rules anew.
	sub := r.Subscribe(ctx, prefix+"ch")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	again, err := s.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env, again); diff != "" {
		t.Errorf("a retried Ensure answers another environment (-first +again):\n%s", diff)
	}
	if err := r.Publish(ctx, prefix+"ch", "still").Err(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if m, err := sub.ReceiveMessage(rctx); err != nil || m.Payload != "still" {
		t.Errorf("the subscription opened before a retried Ensure: %v, %v", m, err)
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
		t.Errorf("after a restart Ensure answers another environment (-first +restarted):\n%s", diff)
	}
	var v string
	if err := connect(t, restarted[deploydb.EnvDatabaseURI]).QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "row" {
		t.Errorf("the row written before: %q, %v", v, err)
	}
	if got, err := redisOf(t, restarted[deploydb.EnvRedisURI]).Get(ctx, prefix+"k").Result(); err != nil || got != "v" {
		t.Errorf("the Redis key written before: %q, %v", got, err)
	}
}

// Two deployments are kept apart: other databases, other Redis users and
// prefixes, and a deployment's role may not connect to another's database
// (TestRedisIsolation tries the Redis users).
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
	for _, k := range []string{deploydb.EnvDatabaseURI, deploydb.EnvRedisURI, deploydb.EnvRedisKeyPrefix} {
		if env1[k] == env2[k] {
			t.Fatalf("two deployments share %s: %v %v", k, env1, env2)
		}
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

// Remove drops the database and the role, deletes the Redis user (its
// open connections too) and every key under its prefix, and leaves another
// deployment's user and keys alone; a second Remove is no error.
func TestRemove(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 16)
	s, _ := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	w, other := work(nil), work(nil)
	env, err := s.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	otherEnv, err := s.Ensure(ctx, other, nil)
	if err != nil {
		t.Fatal(err)
	}
	// More keys than one SCAN answers, and the other deployment's.
	r, prefix := redisOf(t, env[deploydb.EnvRedisURI]), env[deploydb.EnvRedisKeyPrefix]
	fill(t, r, prefix, 2500)
	fill(t, redisOf(t, otherEnv[deploydb.EnvRedisURI]), otherEnv[deploydb.EnvRedisKeyPrefix], 10)
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
	ra := rs.Client(t, 0)
	if keys, err := ra.Keys(ctx, prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("%d keys under %s after Remove (%v)", len(keys), prefix, err)
	}
	if err := ra.Do(ctx, "ACL", "GETUSER", name).Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("ACL GETUSER %s after Remove: %v, want no such user", name, err)
	}
	// The connection opened before is closed, and a new one refused.
	if err := r.Set(ctx, prefix+"k", "v", 0).Err(); err == nil {
		t.Error("the removed deployment's Redis client still writes")
	}
	if err := deploydb.PingRedis(ctx, env[deploydb.EnvRedisURI]); err == nil {
		t.Error("the removed deployment's REDIS_URI still logs in")
	}
	if n, err := ra.Keys(ctx, otherEnv[deploydb.EnvRedisKeyPrefix]+"*").Result(); err != nil || len(n) != 10 {
		t.Errorf("the other deployment has %d of its 10 keys after Remove (%v)", len(n), err)
	}
	if err := deploydb.PingRedis(ctx, otherEnv[deploydb.EnvRedisURI]); err != nil {
		t.Errorf("the other deployment's REDIS_URI after Remove: %v", err)
	}
}

// A Redis with one database number holds any number of deployments: they
// are kept apart by user and prefix, not by number.
func TestOneRedisDatabase(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.Start(t, 1)
	s, _ := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	for range 3 {
		env, err := s.Ensure(ctx, work(nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := redisOf(t, env[deploydb.EnvRedisURI]).Set(ctx, env[deploydb.EnvRedisKeyPrefix]+"k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Replicas ensuring deployments at once give each its own user, and
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
	users := map[string]string{}
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
		if other, ok := users[u]; ok {
			t.Errorf("%s and %s both got %s", id, other, u)
		}
		users[u] = id
		if err := deploydb.PingRedis(ctx, u); err != nil {
			t.Errorf("the Redis user of %s: %v", id, err)
		}
	}
	if len(users) != 7 {
		t.Errorf("%d distinct Redis users for 7 deployments", len(users))
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
	if !strings.Contains(err.Error(), "the shared Redis") || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("error %q does not say Redis did not answer", err)
	}
	mu.Lock()
	defer mu.Unlock()
	waiting := false
	for _, l := range lines {
		waiting = waiting || strings.HasPrefix(l, "waiting for the shared Redis")
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
