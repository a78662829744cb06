// Package pgtest is what the PostgreSQL tests and benchmarks of several
// packages (storepg, httphandler, cmd/deployplane) share: the test
// server's DSN from the environment, throwaway schemas, and the bare
// INSERT that the create benchmarks take as their baseline.
//
// The tests need a real server: DSN reads DSNVar and skips the test,
// saying so, when it is unset. The repository's .ci/postgres.sh starts a
// throwaway cluster and sets it:
//
//	source .ci/postgres.sh && pg_start && trap pg_stop EXIT
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DSNVar is the environment variable that holds the test server's DSN.
const DSNVar = "DEPLOYPLANE_TEST_POSTGRES_DSN"

// DSN returns the test server's DSN (DSNVar), or skips tb, saying how to
// set it, when it is unset.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(DSNVar)
	if dsn == "" {
		tb.Skip(DSNVar + " is not set; set it to a PostgreSQL URL (source .ci/postgres.sh and run pg_start) to run this test")
	}
	return dsn
}

// Schema returns the name of a new schema, prefix followed by random
// letters and digits, that no one uses yet, and drops it with everything
// in it (through a connection of its own) when tb ends. Register it
// before opening stores on it, so that they are closed before the drop.
// The schema itself is not created: storepg creates its own.
func Schema(tb testing.TB, dsn, prefix string) string {
	tb.Helper()
	schema := prefix + strings.ToLower(rand.Text())
	tb.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// Inserts is the baseline of the create benchmarks: a bare INSERT of one
// row of a given size (what a create stores) into a table of its own,
// each INSERT its own transaction (autocommit, at the server's default
// isolation), through a pool of its own.
type Inserts struct {
	pool   *pgxpool.Pool
	schema string
	sql    string
	value  []byte
	next   atomic.Int64
}

// NewInserts makes the table, in a new schema (Schema), and a pool of
// conns connections for it; both go when tb ends.
func NewInserts(tb testing.TB, dsn string, conns, size int) *Inserts {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.MaxConns = int32(conns)
	schema := Schema(tb, dsn, "pgtest_bare_") // registered first: dropped after the pool closes
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	table := pgx.Identifier{schema, "bare"}.Sanitize()
	for _, stmt := range []string{"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE " + table + " (key bytea PRIMARY KEY, value bytea NOT NULL)"} {
		if _, err := pool.Exec(context.Background(), stmt); err != nil {
			tb.Fatal(err)
		}
	}
	value := make([]byte, size)
	_, _ = rand.Read(value)
	return &Inserts{pool: pool, schema: schema, sql: "INSERT INTO " + table + " (key, value) VALUES ($1, $2)", value: value}
}

// Schema is the schema of the table, "bare", that the rows go into.
func (i *Inserts) Schema() string { return i.schema }

// Insert inserts the next row.
func (i *Inserts) Insert(ctx context.Context) error {
	_, err := i.pool.Exec(ctx, i.sql, fmt.Appendf(nil, "k%012d", i.next.Add(1)), i.value)
	return err
}
