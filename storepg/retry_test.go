package storepg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// readCounter returns the number stored under c/n, or 0 if there is none.
func readCounter(r store.Reader) (int, error) {
	v, err := r.Get("c", "n")
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// increment adds one to c/n.
func increment(tx store.Tx) error {
	n, err := readCounter(tx)
	if err != nil {
		return err
	}
	return tx.Put("c", "n", []byte(strconv.Itoa(n+1)))
}

// counter reads c/n in a View.
func counter(t *testing.T, s store.Store) int {
	t.Helper()
	var n int
	err := s.View(context.Background(), func(r store.Reader) error {
		var err error
		n, err = readCounter(r)
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return n
}

// TestTwoStoresLoseNoIncrement has two Stores, each with its own pool, over
// one schema, as two replicas over one database: their goroutines increment
// one counter at once, and every increment must count. Most of them
// conflict, so this passes only if serialization failures are retried.
func TestTwoStoresLoseNoIncrement(t *testing.T) {
	schema := newSchema(t, nil)
	opts := &storepg.Options{MaxConns: 4}
	stores := []*storepg.Store{openSchema(t, schema, opts), openSchema(t, schema, opts)}
	const goroutines, increments = 8, 25 // per store
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*goroutines*increments)
	for _, s := range stores {
		for range goroutines {
			wg.Go(func() {
				for range increments {
					if err := s.Update(context.Background(), increment); err != nil {
						errs <- err
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Update: %v", err)
	}
	want := len(stores) * goroutines * increments
	for i, s := range stores {
		if got := counter(t, s); got != want {
			t.Errorf("store %d reads the counter as %d; want %d", i, got, want)
		}
	}
	// Without conflicts this test would prove nothing about retries.
	retries := stores[0].Retries() + stores[1].Retries()
	t.Logf("%d increments took %d retries", want, retries)
	if retries == 0 {
		t.Errorf("no Update was retried; the test needs conflicting increments")
	}
}

// conflictOnFirstRun returns an Update closure that increments c/n, and, on
// its first run only, lets other commit c/n = 100 between its read and its
// write, which makes PostgreSQL abort that first run. runs counts the runs.
func conflictOnFirstRun(other store.Store, runs *int) func(store.Tx) error {
	return func(tx store.Tx) error {
		*runs++
		n, err := readCounter(tx)
		if err != nil {
			return err
		}
		if *runs == 1 {
			err := other.Update(context.Background(), func(tx store.Tx) error {
				return tx.Put("c", "n", []byte("100"))
			})
			if err != nil {
				return err
			}
		}
		return tx.Put("c", "n", []byte(strconv.Itoa(n+1)))
	}
}

// TestRetryRerunsClosure forces one serialization failure and checks that
// Update ran the closure again, from scratch, in a new transaction that saw
// the concurrent write.
func TestRetryRerunsClosure(t *testing.T) {
	schema := newSchema(t, nil)
	s, other := openSchema(t, schema, nil), openSchema(t, schema, nil)
	if err := s.Update(context.Background(), increment); err != nil {
		t.Fatalf("Update: %v", err)
	}
	runs := 0
	if err := s.Update(context.Background(), conflictOnFirstRun(other, &runs)); err != nil {
		t.Fatalf("Update with a conflict on its first run: %v", err)
	}
	if runs != 2 {
		t.Errorf("the closure ran %d times; want 2", runs)
	}
	if got := s.Retries(); got != 1 {
		t.Errorf("Retries() = %d; want 1", got)
	}
	if got := counter(t, s); got != 101 {
		t.Errorf("counter = %d; want 101 (the concurrent 100, plus one)", got)
	}
}

// TestNoRetries checks that with MaxRetries < 0 a serialization failure is
// returned, as a *pgconn.PgError with SQLSTATE 40001, after one run, and
// that nothing of that run was committed.
func TestNoRetries(t *testing.T) {
	schema := newSchema(t, nil)
	s := openSchema(t, schema, &storepg.Options{MaxRetries: -1})
	other := openSchema(t, schema, nil)
	runs := 0
	err := s.Update(context.Background(), conflictOnFirstRun(other, &runs))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "40001" {
		t.Fatalf("Update = %v; want a serialization failure (SQLSTATE 40001)", err)
	}
	if runs != 1 {
		t.Errorf("the closure ran %d times; want 1", runs)
	}
	if got := s.Retries(); got != 0 {
		t.Errorf("Retries() = %d; want 0", got)
	}
	if got := counter(t, s); got != 100 {
		t.Errorf("counter = %d; want 100 (the concurrent write only)", got)
	}
}

// TestIgnoredStatementError checks that a closure that ignores a failed
// statement and returns nil does not commit: PostgreSQL has aborted the
// transaction, and Update must say so rather than report success.
func TestIgnoredStatementError(t *testing.T) {
	s := openStore(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var second error
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("c", "a", []byte("1")); err != nil {
			return err
		}
		cancel()
		second = tx.Create("c", "b", []byte("2")) // sent at once (a Put is held back)
		return nil                                // ignoring second
	})
	if second == nil {
		t.Fatal("Create after cancelling the context succeeded; the test needs it to fail")
	}
	if err == nil {
		t.Fatal("Update = nil after a statement failed; want an error")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update = %v; want an error wrapping context.Canceled", err)
	}
	if diff := cmp.Diff([]string(nil), collectionKeys(t, s, "c")); diff != "" {
		t.Errorf("keys after the failed Update (-want +got):\n%s", diff)
	}
}

// TestHeldPutFails checks that a Put held back (sent with the next
// statement or before COMMIT) whose statement fails makes the Update fail
// and commit nothing, whether it fails with the next statement, which
// returns the error, or at the end of the closure.
func TestHeldPutFails(t *testing.T) {
	for _, then := range []string{"get", "commit"} {
		t.Run(then, func(t *testing.T) {
			s := openStore(t, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var getErr error
			err := s.Update(ctx, func(tx store.Tx) error {
				if err := tx.Put("c", "a", []byte("1")); err != nil {
					return err
				}
				cancel()
				if err := tx.Put("c", "b", []byte("2")); err != nil {
					t.Errorf("a Put held back failed at once: %v", err)
				}
				if then == "get" {
					_, getErr = tx.Get("c", "a")
				}
				return nil // ignoring getErr
			})
			if then == "get" && (getErr == nil || !errors.Is(getErr, context.Canceled)) {
				t.Errorf("Get after the held Puts = %v; want an error wrapping context.Canceled", getErr)
			}
			if err == nil || !errors.Is(err, context.Canceled) {
				t.Fatalf("Update = %v; want an error wrapping context.Canceled", err)
			}
			if got := collectionKeys(t, s, "c"); len(got) != 0 {
				t.Errorf("keys after the failed Update: %q", got)
			}
		})
	}
}

// TestTxKeptPastClosure checks that a Tx used after its Update returned, which
// the contract forbids, fails cleanly rather than touch a pooled connection.
func TestTxKeptPastClosure(t *testing.T) {
	s := openStore(t, nil)
	var kept store.Tx
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		kept = tx
		return tx.Put("c", "k", []byte("v"))
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if err := kept.Put("c", "k2", []byte("v")); err == nil {
		t.Error("Put through a Tx kept past its Update succeeded; want an error")
	}
	if _, err := kept.Get("c", "k"); err == nil {
		t.Error("Get through a Tx kept past its Update succeeded; want an error")
	}
}

// TestCancelBeforeCommit checks that an Update whose ctx is cancelled after
// its last statement, before the commit, commits nothing and says why.
func TestCancelBeforeCommit(t *testing.T) {
	s := openStore(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("c", "n", []byte("1")); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update = %v; want an error wrapping context.Canceled", err)
	}
	if got := counter(t, s); got != 0 {
		t.Errorf("counter = %d after the abandoned Update; want 0 (nothing committed)", got)
	}
}

// contendedUpdate has the shape of a control-plane create, which makes
// every concurrent one conflict: it reads a few records, a shared range
// (every record of "log"), rewrites one hot record (the counter c/n) and
// inserts a record of its own under log/<id>, some 16 statements. It sets
// *seen to the counter it read.
func contendedUpdate(id int, seen *int) func(store.Tx) error {
	return func(tx store.Tx) error {
		for i := range 8 {
			if _, err := tx.Get("config", strconv.Itoa(i)); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("Get of a missing record = %v; want ErrNotFound", err)
			}
		}
		entries := 0
		err := tx.Scan("log", "", nil, func(string, []byte) (bool, error) {
			entries++
			return true, nil
		})
		if err != nil {
			return err
		}
		n, err := readCounter(tx)
		if err != nil {
			return err
		}
		if entries != n {
			return fmt.Errorf("log holds %d records but the counter reads %d", entries, n)
		}
		if err := tx.Put("c", "n", []byte(strconv.Itoa(n+1))); err != nil {
			return err
		}
		*seen = n
		return tx.Create("log", fmt.Sprintf("%08d", id), []byte(strconv.Itoa(n)))
	}
}

// TestContendedUpdatesAllCommit runs 64 goroutines of Updates that all
// conflict with each other (contendedUpdate) over a pool of 16 connections
// with the default options, as 64 requests creating deployments in one
// tenant do. Every Update must succeed, whatever the contention, and the
// outcome must be a serial order: each Update read a different counter,
// 0 to N-1, and every record is there. (With AloneAfter: -1, retries alone
// cannot resolve the contention and some Updates give up after
// DefaultMaxRetries.)
func TestContendedUpdatesAllCommit(t *testing.T) {
	const goroutines, perGoroutine = 64, 16
	const total = goroutines * perGoroutine
	s := openStore(t, &storepg.Options{MaxConns: 16})
	var wg sync.WaitGroup
	var maxRuns atomic.Int64
	seen := make([]int, total)
	errs := make([]error, total)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				id := g*perGoroutine + i
				runs := 0
				f := contendedUpdate(id, &seen[id])
				errs[id] = s.Update(context.Background(), func(tx store.Tx) error { runs++; return f(tx) })
				maxRuns.Store(max(maxRuns.Load(), int64(runs)))
			}
		})
	}
	wg.Wait()
	failed := 0
	for id, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("Update %d: %v", id, err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d Updates failed", failed, total)
	}
	slices.Sort(seen)
	for i, n := range seen {
		if n != i {
			t.Fatalf("sorted, the counters the Updates read are %v...; want 0 to %d, each once", seen[:i+1], total-1)
		}
	}
	if got := counter(t, s); got != total {
		t.Errorf("counter = %d; want %d", got, total)
	}
	var keys []string
	err := s.View(context.Background(), func(r store.Reader) error {
		keys = nil
		return r.Scan("log", "", nil, func(k string, v []byte) (bool, error) {
			keys = append(keys, k)
			return true, nil
		})
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	if len(keys) != total {
		t.Errorf("log holds %d records; want %d", len(keys), total)
	}
	t.Logf("%d Updates: %d retries, %d tries alone, at most %d runs of one closure", total, s.Retries(), s.AloneRuns(), maxRuns.Load())
	// Without tries alone, this test would prove nothing about them.
	if s.AloneRuns() == 0 {
		t.Errorf("no Update ran alone; the test needs Updates that conflict")
	}
}
