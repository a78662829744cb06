package pgtest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deployplane/deployplane/internal/pgtest"
)

// schemaRows counts the tables of schema (-1 when the schema is absent).
func schemaRows(t *testing.T, conn *pgx.Conn, schema string) int {
	t.Helper()
	var n int
	err := conn.QueryRow(context.Background(), `SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)
		THEN (SELECT count(*) FROM pg_tables WHERE schemaname = $1) ELSE -1 END`, schema).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSchemaAndInserts: the bare INSERTs go into a table of a new schema
// that is gone, with its rows, once the test that made it has ended; and
// a Schema name is new each time.
func TestSchemaAndInserts(t *testing.T) {
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var schema string
	t.Run("inserts", func(t *testing.T) {
		ins := pgtest.NewInserts(t, dsn, 2, 100)
		for range 3 {
			if err := ins.Insert(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		schema = ins.Schema()
		var rows, bytes int
		if err := conn.QueryRow(context.Background(), `SELECT count(*), sum(length(value)) FROM `+pgx.Identifier{schema, "bare"}.Sanitize()).Scan(&rows, &bytes); err != nil {
			t.Fatal(err)
		}
		if rows != 3 || bytes != 300 {
			t.Errorf("after 3 Inserts of 100 bytes: %d rows, %d bytes; want 3, 300", rows, bytes)
		}
	})
	if n := schemaRows(t, conn, schema); n != -1 {
		t.Errorf("schema %s after its test ended: %d tables; want it dropped", schema, n)
	}
	if a, b := pgtest.Schema(t, dsn, "x_"), pgtest.Schema(t, dsn, "x_"); a == b {
		t.Errorf("two Schema names are both %q", a)
	}
}
