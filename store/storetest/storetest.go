package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/deployplane/deployplane/store"
)

// Harness tells Run how to make the stores under test.
type Harness struct {
	// Open returns a new, empty store for one test; Run closes it (Close is
	// idempotent). Open reports its own failures through t (t.Fatal).
	Open func(t testing.TB) store.Store
	// Reopen, when non-nil, marks the store persistent: it opens again the
	// data of a store that Open returned, after Run has closed it. Run then
	// checks durability.
	Reopen func(t testing.TB, closed store.Store) store.Store
}

// Run runs every conformance check as subtests of t. The subtest names are
// stable (see the package documentation), so a backend can rerun one check
// with go test -run 'TestConformance/Scan/StartReverse'.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	t.Run("Sentinels", func(t *testing.T) { testSentinels(t, h) })
	t.Run("RoundTrip", func(t *testing.T) { testRoundTrip(t, h) })
	t.Run("Aliasing", func(t *testing.T) { testAliasing(t, h) })
	t.Run("Scan", func(t *testing.T) { testScan(t, h) })
	t.Run("ReadYourWrites", func(t *testing.T) { testReadYourWrites(t, h) })
	t.Run("Rollback", func(t *testing.T) { testRollback(t, h) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, h) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, h) })
	t.Run("Context", func(t *testing.T) { testContext(t, h) })
	t.Run("Close", func(t *testing.T) { testClose(t, h) })
	t.Run("Durability", func(t *testing.T) { testDurability(t, h) })
	t.Run("Model", func(t *testing.T) { testModel(t, h) })
}

// open returns a new store from h and makes sure it is closed when t ends.
func open(t testing.TB, h Harness) store.Store {
	t.Helper()
	s := h.Open(t)
	if s == nil {
		t.Fatal("storetest: Harness.Open returned nil")
	}
	closeAtEnd(t, s)
	return s
}

// reopen closes s and opens its data again through h.Reopen.
func reopen(t testing.TB, h Harness, s store.Store) store.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close before reopening: %v", err)
	}
	s2 := h.Reopen(t, s)
	if s2 == nil {
		t.Fatal("storetest: Harness.Reopen returned nil")
	}
	closeAtEnd(t, s2)
	return s2
}

func closeAtEnd(t testing.TB, s store.Store) {
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close at the end of the test: %v", err)
		}
	})
}

// update runs fn in s.Update and fails the test if it returns an error.
func update(t testing.TB, s store.Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(context.Background(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// view runs fn in s.View and fails the test if it returns an error.
func view(t testing.TB, s store.Store, fn func(store.Reader) error) {
	t.Helper()
	if err := s.View(context.Background(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// put writes records (key, value, key, value, ...) into collection in one
// Update.
func put(t testing.TB, s store.Store, collection string, kv ...string) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := tx.Put(collection, kv[i], []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
}

// entry is one record as a scan or a dump sees it.
type entry struct {
	Key, Value string
}

// dump returns every record of collection in ascending key order.
func dump(t testing.TB, s store.Store, collection string) []entry {
	t.Helper()
	var got []entry
	view(t, s, func(r store.Reader) error {
		got = nil
		return r.Scan(collection, "", nil, func(k string, v []byte) (bool, error) {
			got = append(got, entry{k, string(v)})
			return true, nil
		})
	})
	return got
}

// get reads one key in a View. It returns the value and whether the key is
// present; any error other than ErrNotFound fails the test.
func get(t testing.TB, s store.Store, collection, key string) (string, bool) {
	t.Helper()
	var (
		v     []byte
		found bool
	)
	view(t, s, func(r store.Reader) error {
		var err error
		v, err = r.Get(collection, key)
		found = err == nil
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
	return string(v), found
}

// entries builds a []entry from key, value, key, value, ...
func entries(kv ...string) []entry {
	var out []entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, entry{kv[i], kv[i+1]})
	}
	return out
}
