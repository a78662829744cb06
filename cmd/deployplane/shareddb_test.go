package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/internal/testredis"
)

// -shared-postgres-dsn and -shared-redis-url give the docker deployer a
// deploydb.Shared: the server starts with them (the start log says so),
// and refuses to start, naming the flags, when a shared server (here
// Redis) does not answer.
func TestSharedDatabasesWired(t *testing.T) {
	host, dsn := os.Getenv("DEPLOYPLANE_TEST_DOCKER"), os.Getenv("DEPLOYPLANE_TEST_POSTGRES_DSN")
	if host == "" || dsn == "" {
		t.Skip("DEPLOYPLANE_TEST_DOCKER or DEPLOYPLANE_TEST_POSTGRES_DSN is not set: this test needs a Docker daemon and PostgreSQL (.ci/run starts both)")
	}
	rs := testredis.Start(t, 16)
	// The server creates deploydb's table in the test database; no other
	// test uses that name.
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			c.Exec(context.Background(), "DROP TABLE IF EXISTS "+deploydb.DefaultTable)
			c.Close(context.Background())
		}
	})
	b := make([]byte, 6)
	rand.Read(b)
	args := []string{"-db", ":memory:", "-deployer", "docker", "-docker-host", host, "-docker-network", "host", "-build-network", "host",
		"-docker-proxy-addr", "127.0.0.1:0", "-registry-addr", "127.0.0.1:0", "-docker-instance", "cmdtest-" + hex.EncodeToString(b)}
	_, _, stderr := server(t, args, map[string]string{"DEPLOYPLANE_API_KEY": "k",
		"DEPLOYPLANE_SHARED_POSTGRES_DSN": dsn, "DEPLOYPLANE_SHARED_REDIS_URL": rs.URL()})
	if !strings.Contains(stderr.String(), "shared_databases=true") {
		t.Errorf("the start log does not say shared_databases=true:\n%s", stderr)
	}
	rs.Stop()
	err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0", "-shared-postgres-dsn", dsn, "-shared-redis-url", rs.URL()}, args...),
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-shared-redis-url") {
		t.Errorf("with the shared Redis stopped: %v, want an error naming -shared-redis-url", err)
	}
}
