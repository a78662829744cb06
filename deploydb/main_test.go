package deploydb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
)

// needPostgres answers the test cluster's DSN, or skips.
func needPostgres(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("DEPLOYPLANE_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("DEPLOYPLANE_TEST_POSTGRES_DSN is not set: these tests need a PostgreSQL server (.ci/run starts one; see .ci/postgres.sh)")
	}
	return dsn
}

// redisServer is a redis-server this test started, on a free loopback
// port, from its own directory.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts Debian's redis-server with the given number of
// databases, or skips when it is not installed. It is stopped (by its
// PID) when the test ends.
func startRedis(t testing.TB, databases int) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server; .ci/run does): the shared Redis tests need it")
	}
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		dir := t.TempDir()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(databases), "--daemonize", "no", "--logfile", "")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
		go func() { cmd.Wait(); close(r.done) }()
		t.Cleanup(r.stop)
		if r.waitUp(t) {
			return r
		}
		if attempt == 3 {
			t.Fatal("redis-server did not start")
		}
		// Another process took the port in the meantime: try another.
	}
}

// waitUp waits until the server answers PING (true) or exits (false).
func (r *redisServer) waitUp(t testing.TB) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if deploydb.PingRedis(context.Background(), "redis://"+r.addr) == nil {
			return true
		}
		select {
		case <-r.done:
			return false
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s does not answer after a minute", r.addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server (by the PID this test started) and waits for it.
func (r *redisServer) stop() {
	select {
	case <-r.done:
	default:
		r.cmd.Process.Kill()
		<-r.done
	}
}

func (r *redisServer) url() string { return "redis://" + r.addr }

// client is a client of database n of the server.
func (r *redisServer) client(t testing.TB, n int) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: r.addr, DB: n, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// uniq is a name prefix no other test run has: lower-case, as deploydb
// wants.
func uniq(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b) + "_"
}

// newShared makes a Shared with a prefix and table of the test's own,
// which are dropped (with every database and role of the prefix) when
// the test ends.
func newShared(t testing.TB, dsn, redisURL string, tweak func(*deploydb.Options)) (*deploydb.Shared, *deploydb.Options) {
	t.Helper()
	prefix := uniq("t")
	o := &deploydb.Options{PostgresDSN: dsn, RedisURL: redisURL, Prefix: prefix, Table: prefix + "databases", Interval: 20 * time.Millisecond}
	if tweak != nil {
		tweak(o)
	}
	s, err := deploydb.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Cleanup(func() { cleanPrefix(t, dsn, o.Prefix, o.Table) })
	return s, o
}

// cleanPrefix drops what a test left on the shared server.
func cleanPrefix(t testing.TB, dsn, prefix, table string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(ctx)
	for _, k := range []struct{ query, drop, with string }{
		{"SELECT datname FROM pg_database WHERE starts_with(datname, $1)", "DATABASE", " WITH (FORCE)"},
		{"SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)", "ROLE", ""},
	} {
		rows, err := conn.Query(ctx, k.query, prefix)
		if err != nil {
			t.Error(err)
			return
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Error(err)
			return
		}
		for _, n := range names {
			if _, err := conn.Exec(ctx, "DROP "+k.drop+" IF EXISTS "+pgx.Identifier{n}.Sanitize()+k.with); err != nil {
				t.Error(err)
			}
		}
	}
	conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize())
}

const tenant = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"

// work is a deployment's Work, with a fresh id.
func work(spec *controlplane.ResourceSpec) *controlplane.Work {
	b := make([]byte, 16)
	rand.Read(b)
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	return &controlplane.Work{Tenant: tenant, Deployment: controlplane.Deployment{ID: id}, ResourceSpec: spec}
}
