package deploydb_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
