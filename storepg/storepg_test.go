package storepg_test

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/internal/pgtest"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storepg"
)

// testDSN returns the test database's DSN, or skips the test when none is
// configured (pgtest.DSN: .ci/postgres.sh starts a throwaway cluster and
// sets it).
func testDSN(tb testing.TB) string {
	tb.Helper()
	return pgtest.DSN(tb)
}

// newSchema returns the name of a schema that no one uses yet, and drops it
// with everything in it when the test ends. Register it before opening stores
// on it, so that they are closed before the drop. The drop goes through pool
// if it is not nil (tests that make many schemas), else through a
// connection of its own (pgtest.Schema).
func newSchema(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	if pool == nil {
		return pgtest.Schema(tb, testDSN(tb), "storepg_test_")
	}
	schema := "storepg_test_" + strings.ToLower(rand.Text())
	tb.Cleanup(func() {
		drop := `DROP SCHEMA IF EXISTS ` + pgx.Identifier{schema}.Sanitize() + ` CASCADE`
		if _, err := pool.Exec(context.Background(), drop); err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// openSchema opens a Store over schema and closes it when the test ends.
func openSchema(tb testing.TB, schema string, opts *storepg.Options) *storepg.Store {
	tb.Helper()
	o := storepg.Options{Schema: schema}
	if opts != nil {
		o = *opts
		o.Schema = schema
	}
	s, err := storepg.Open(context.Background(), testDSN(tb), &o)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// collectionKeys returns the keys of collection in s, in order.
func collectionKeys(t *testing.T, s store.Store, collection string) []string {
	t.Helper()
	var got []string
	err := s.View(context.Background(), func(r store.Reader) error {
		got = nil
		return r.Scan(collection, "", nil, func(k string, _ []byte) (bool, error) {
			got = append(got, k)
			return true, nil
		})
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return got
}

// openStore opens a Store over a new, empty schema.
func openStore(tb testing.TB, opts *storepg.Options) *storepg.Store {
	tb.Helper()
	return openSchema(tb, newSchema(tb, nil), opts)
}

// TestConformance runs the store/storetest suite. Its stores share one
// pool (OpenPool), since the suite opens hundreds of them; each gets a new
// schema, dropped at the end.
func TestConformance(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testDSN(t))
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	t.Cleanup(pool.Close)
	var mu sync.Mutex
	schemas := map[store.Store]string{}
	open := func(tb testing.TB, schema string) store.Store {
		tb.Helper()
		s, err := storepg.OpenPool(context.Background(), pool, &storepg.Options{Schema: schema})
		if err != nil {
			tb.Fatalf("OpenPool: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		schemas[s] = schema
		return s
	}
	storetest.Run(t, storetest.Harness{
		Open: func(tb testing.TB) store.Store {
			return open(tb, newSchema(tb, pool))
		},
		Reopen: func(tb testing.TB, closed store.Store) store.Store {
			mu.Lock()
			schema, ok := schemas[closed]
			mu.Unlock()
			if !ok {
				tb.Fatalf("Reopen of a store that Open did not return")
			}
			return open(tb, schema)
		},
	})
}
