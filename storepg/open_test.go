package storepg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// migrationsOf returns the versions recorded in schema's schema_migrations.
func migrationsOf(t *testing.T, schema string) []int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT version FROM `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+` ORDER BY version`)
	if err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatalf("reading schema_migrations: %v", err)
	}
	return versions
}

// TestConcurrentOpen opens one new schema from several goroutines at once,
// as replicas starting together do: every Open must succeed, the schema must
// be migrated once, and the stores must share the records.
func TestConcurrentOpen(t *testing.T) {
	schema := newSchema(t, nil)
	const n = 8
	stores := make([]*storepg.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = storepg.Open(context.Background(), testDSN(t), &storepg.Options{Schema: schema, MaxConns: 2})
		})
	}
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("Open %d: %v", i, errs[i])
		}
		t.Cleanup(func() { s.Close() })
	}
	if diff := cmp.Diff([]int{1}, migrationsOf(t, schema)); diff != "" {
		t.Errorf("schema_migrations versions (-want +got):\n%s", diff)
	}
	err := stores[0].Update(context.Background(), func(tx store.Tx) error {
		return tx.Create("c", "k", []byte("from store 0"))
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	for i, s := range stores {
		err := s.View(context.Background(), func(r store.Reader) error {
			v, err := r.Get("c", "k")
			if err == nil && string(v) != "from store 0" {
				t.Errorf("store %d: Get = %q; want %q", i, v, "from store 0")
			}
			return err
		})
		if err != nil {
			t.Errorf("store %d: View: %v", i, err)
		}
	}
}

// TestSchemasAreSeparate checks that two schemas in one database do not see
// each other's records.
func TestSchemasAreSeparate(t *testing.T) {
	a, b := openStore(t, nil), openStore(t, nil)
	err := a.Update(context.Background(), func(tx store.Tx) error { return tx.Put("c", "k", []byte("a")) })
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	err = b.View(context.Background(), func(r store.Reader) error {
		_, err := r.Get("c", "k")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get in the other schema = %v; want ErrNotFound", err)
	}
}

// TestNewerSchemaRefused checks that Open refuses a schema migrated by a
// newer storepg rather than use tables it does not know.
func TestNewerSchemaRefused(t *testing.T) {
	schema := newSchema(t, nil)
	s := openSchema(t, schema, nil)
	s.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+` (version) VALUES (1000)`); err != nil {
		t.Fatalf("recording version 1000: %v", err)
	}
	s, err = storepg.Open(ctx, testDSN(t), &storepg.Options{Schema: schema})
	if err == nil {
		s.Close()
		t.Fatal("Open of a schema at version 1000 succeeded; want an error")
	}
	if !strings.Contains(err.Error(), "version 1000") {
		t.Errorf("Open = %v; want an error that names version 1000", err)
	}
}

// TestOpenPoolLeavesPoolOpen checks that a Store over the caller's pool does
// not close it.
func TestOpenPoolLeavesPoolOpen(t *testing.T) {
	schema := newSchema(t, nil)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testDSN(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	defer pool.Close()
	s, err := storepg.OpenPool(ctx, pool, &storepg.Options{Schema: schema})
	if err != nil {
		t.Fatalf("OpenPool: %v", err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "k", []byte("v")) }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.View(ctx, func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close = %v; want ErrClosed", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "records"}.Sanitize()).Scan(&n); err != nil {
		t.Fatalf("query on the pool after the Store's Close: %v", err)
	}
	if n != 1 {
		t.Errorf("records holds %d rows; want 1", n)
	}
}

// TestOpenErrors checks that Open reports a DSN it cannot parse, a schema name
// PostgreSQL would truncate, and an unreachable server.
func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		dsn  string
		opts *storepg.Options
	}{
		"bad DSN":          {dsn: "postgres://%zz", opts: nil},
		"long schema name": {dsn: testDSN(t), opts: &storepg.Options{Schema: strings.Repeat("s", 64)}},
		"no server":        {dsn: "postgres://u:p@127.0.0.1:1/db?connect_timeout=5", opts: nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := storepg.Open(ctx, c.dsn, c.opts)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded; want an error")
			}
		})
	}
}
