package storepg_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// lineUp opens a Store over a pool of one connection, so that one
// Update at a time has a transaction, and returns it with a function
// that runs the given Updates as one batch: it holds the transaction with
// an Update whose closure waits, starts each Update in a goroutine of its
// own, waits until all are queued, lets the first go, and returns their
// errors (a panic's value, for a closure that panicked) in order, with
// the sizes of the batches OnCommit saw.
func lineUp(t *testing.T, opts *storepg.Options) (*storepg.Store, func(fns ...func(store.Tx) error) ([]error, []int)) {
	t.Helper()
	var mu sync.Mutex
	var commits []int
	o := storepg.Options{}
	if opts != nil {
		o = *opts
	}
	o.MaxConns = 1
	o.OnCommit = func(updates int, _ time.Duration, _ error) {
		mu.Lock()
		commits = append(commits, updates)
		mu.Unlock()
	}
	s := openStore(t, &o)
	return s, func(fns ...func(store.Tx) error) ([]error, []int) {
		t.Helper()
		mu.Lock()
		commits = nil
		mu.Unlock()
		release := holdTransaction(t, s)
		errs := make([]error, len(fns))
		var wg sync.WaitGroup
		for i, fn := range fns {
			wg.Go(func() {
				defer func() {
					if p := recover(); p != nil {
						errs[i] = fmt.Errorf("panic: %v", p)
					}
				}()
				errs[i] = s.Update(context.Background(), fn)
			})
			for storepg.QueuedUpdates(s) < i+1 {
				runtime.Gosched()
			}
		}
		release()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return errs, commits
	}
}

// holdTransaction holds s's one transaction of Updates (a pool of one
// connection) with an Update whose closure waits, until the returned
// function lets it end, which it waits for.
func holdTransaction(t *testing.T, s *storepg.Store) (release func()) {
	t.Helper()
	let, holding := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.Update(context.Background(), func(store.Tx) error {
			close(holding)
			<-let
			return nil
		})
	}()
	<-holding
	return func() {
		t.Helper()
		close(let)
		if err := <-held; err != nil {
			t.Fatalf("holding Update: %v", err)
		}
	}
}

// put is an Update's closure that puts key k with value v in "c".
func put(k, v string) func(store.Tx) error {
	return func(tx store.Tx) error { return tx.Put("c", k, []byte(v)) }
}

// value reads key k of "c" ("" when absent).
func value(t *testing.T, s store.Store, k string) string {
	t.Helper()
	var v []byte
	err := s.View(context.Background(), func(r store.Reader) error {
		var err error
		v, err = r.Get("c", k)
		if errors.Is(err, store.ErrNotFound) {
			v, err = nil, nil
		}
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return string(v)
}

// TestCombinedUpdates: Updates that queue while the pool's connections
// are busy share one transaction, each closure seeing the writes of those
// before it, and each Update learns its own outcome.
func TestCombinedUpdates(t *testing.T) {
	t.Run("all commit at once", func(t *testing.T) {
		s, batch := lineUp(t, nil)
		var fns []func(store.Tx) error
		for i := range 5 {
			fns = append(fns, put("k"+strconv.Itoa(i), "v"))
		}
		errs, commits := batch(fns...)
		for i, err := range errs {
			if err != nil {
				t.Errorf("Update %d: %v", i, err)
			}
			if got := value(t, s, "k"+strconv.Itoa(i)); got != "v" {
				t.Errorf("k%d = %q, want v", i, got)
			}
		}
		if fmt.Sprint(commits) != "[5]" {
			t.Errorf("commits of %v Updates, want [5]", commits)
		}
	})

	t.Run("each reads those before it", func(t *testing.T) {
		s, batch := lineUp(t, nil)
		incr := func(tx store.Tx) error {
			v, err := tx.Get("c", "n")
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			n, _ := strconv.Atoi(string(v))
			return tx.Put("c", "n", []byte(strconv.Itoa(n+1)))
		}
		errs, commits := batch(incr, incr, incr, incr)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if got := value(t, s, "n"); got != "4" {
			t.Errorf("n = %q after four increments, want 4", got)
		}
		if fmt.Sprint(commits) != "[4]" {
			t.Errorf("commits of %v Updates, want [4]", commits)
		}
	})

	t.Run("a closure's error takes back its held writes alone", func(t *testing.T) {
		s, batch := lineUp(t, nil)
		boom := errors.New("boom")
		var runs atomic.Int32
		errs, commits := batch(put("a", "1"), func(tx store.Tx) error {
			runs.Add(1)
			if err := tx.Put("c", "b", []byte("2")); err != nil {
				return err
			}
			return boom
		}, put("c", "3"))
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], boom) {
			t.Fatalf("errors %v, want nil, boom, nil", errs)
		}
		if a, b, c := value(t, s, "a"), value(t, s, "b"), value(t, s, "c"); a != "1" || b != "" || c != "3" {
			t.Errorf("a, b, c = %q, %q, %q; want 1, absent, 3", a, b, c)
		}
		if runs.Load() != 1 || fmt.Sprint(commits) != "[2]" {
			t.Errorf("the failing closure ran %d times, commits %v; want once, [2]", runs.Load(), commits)
		}
	})

	t.Run("a closure failing after its writes were sent", func(t *testing.T) {
		// Its Put reaches the server with its Get: the transaction cannot
		// take it back, so it and the Update before it run again alone,
		// and the one after it runs alone for the first time.
		s, batch := lineUp(t, nil)
		boom := errors.New("boom")
		var runs [3]atomic.Int32
		counted := func(i int, fn func(store.Tx) error) func(store.Tx) error {
			return func(tx store.Tx) error { runs[i].Add(1); return fn(tx) }
		}
		errs, _ := batch(counted(0, put("a", "1")), counted(1, func(tx store.Tx) error {
			if err := tx.Put("c", "b", []byte("2")); err != nil {
				return err
			}
			if _, err := tx.Get("c", "b"); err != nil {
				return err
			}
			return boom
		}), counted(2, put("c", "3")))
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], boom) {
			t.Fatalf("errors %v, want nil, boom, nil", errs)
		}
		if a, b, c := value(t, s, "a"), value(t, s, "b"), value(t, s, "c"); a != "1" || b != "" || c != "3" {
			t.Errorf("a, b, c = %q, %q, %q; want 1, absent, 3", a, b, c)
		}
		for i, want := range []int32{2, 2, 1} {
			if n := runs[i].Load(); n != want {
				t.Errorf("closure %d ran %d times, want %d", i, n, want)
			}
		}
	})

	t.Run("a panic is raised in its own caller", func(t *testing.T) {
		s, batch := lineUp(t, nil)
		errs, _ := batch(put("a", "1"), func(store.Tx) error { panic("oops") }, put("c", "3"))
		if errs[0] != nil || errs[2] != nil || errs[1] == nil || errs[1].Error() != "panic: oops" {
			t.Fatalf("errors %v, want nil, panic: oops, nil", errs)
		}
		if a, c := value(t, s, "a"), value(t, s, "c"); a != "1" || c != "3" {
			t.Errorf("a, c = %q, %q; want 1, 3", a, c)
		}
	})

	t.Run("a refused Insert fails only its own Update", func(t *testing.T) {
		// Two Inserts of one key in one batch: the server refuses the
		// second when the writes are sent, which aborts the transaction;
		// the batch runs again, each closure's writes in a savepoint, and
		// the second Insert's Update alone fails, as it would after the
		// first.
		s, batch := lineUp(t, nil)
		var runs [4]atomic.Int32
		ins := func(i int, v string) func(store.Tx) error {
			return func(tx store.Tx) error { runs[i].Add(1); return store.Insert(tx, "c", "name", []byte(v)) }
		}
		errs, commits := batch(ins(0, "1"), func(tx store.Tx) error { runs[1].Add(1); return tx.Put("c", "other", []byte("x")) },
			ins(2, "2"), ins(3, "3"))
		if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], store.ErrAlreadyExists) || !errors.Is(errs[3], store.ErrAlreadyExists) {
			t.Fatalf("errors %v, want nil, nil, ErrAlreadyExists, ErrAlreadyExists", errs)
		}
		if n, o := value(t, s, "name"), value(t, s, "other"); n != "1" || o != "x" {
			t.Errorf("name, other = %q, %q; want 1, x", n, o)
		}
		if fmt.Sprint(commits) != "[2]" {
			t.Errorf("commits of %v Updates, want [2] (the batch again, without the refused)", commits)
		}
		for i := range runs {
			if n := runs[i].Load(); n != 2 {
				t.Errorf("closure %d ran %d times, want 2 (the batch, then the batch in savepoints)", i, n)
			}
		}
	})

	t.Run("a refused Insert of a key already there", func(t *testing.T) {
		s, batch := lineUp(t, nil)
		if err := s.Update(context.Background(), put("name", "0")); err != nil {
			t.Fatal(err)
		}
		ins := func(tx store.Tx) error { return store.Insert(tx, "c", "name", []byte("1")) }
		errs, _ := batch(put("a", "1"), ins, put("b", "2"))
		if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], store.ErrAlreadyExists) {
			t.Fatalf("errors %v, want nil, ErrAlreadyExists, nil", errs)
		}
		if a, n, b := value(t, s, "a"), value(t, s, "name"), value(t, s, "b"); a != "1" || n != "0" || b != "2" {
			t.Errorf("a, name, b = %q, %q, %q; want 1, 0, 2", a, n, b)
		}
	})

	t.Run("a cancelled Update leaves the queue", func(t *testing.T) {
		s := openStore(t, &storepg.Options{MaxConns: 1})
		release := holdTransaction(t, s)
		ctx, cancel := context.WithCancel(context.Background())
		var ran atomic.Bool
		done := make(chan error, 1)
		go func() {
			done <- s.Update(ctx, func(tx store.Tx) error { ran.Store(true); return tx.Put("c", "k", []byte("v")) })
		}()
		for storepg.QueuedUpdates(s) < 1 {
			runtime.Gosched()
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Update: %v, want context.Canceled", err)
		}
		release()
		if ran.Load() || value(t, s, "k") != "" {
			t.Error("the cancelled Update's closure ran")
		}
		if n := storepg.QueuedUpdates(s); n != 0 {
			t.Errorf("%d Updates queued after all returned", n)
		}
	})

	t.Run("MaxBatchSize caps a transaction", func(t *testing.T) {
		s, batch := lineUp(t, &storepg.Options{MaxBatchSize: 2})
		errs, commits := batch(put("a", "1"), put("b", "2"), put("c", "3"))
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(commits) != "[2 1]" {
			t.Errorf("commits of %v Updates, want [2 1]", commits)
		}
		if a, b, c := value(t, s, "a"), value(t, s, "b"), value(t, s, "c"); a != "1" || b != "2" || c != "3" {
			t.Errorf("a, b, c = %q, %q, %q", a, b, c)
		}
	})

	t.Run("MaxBatchSize 1 never combines", func(t *testing.T) {
		// Nothing queues with combining off: the Updates wait for the
		// pool instead.
		s := openStore(t, &storepg.Options{MaxConns: 1, MaxBatchSize: -1})
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				if err := s.Update(context.Background(), put("k"+strconv.Itoa(i), "v")); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := storepg.QueuedUpdates(s); n != 0 {
			t.Errorf("%d Updates queued with combining off", n)
		}
	})
}

// TestCombinedUpdatesProperty lines up random mixes of Updates in one
// batch (puts, increments of one counter, Inserts of one key, Inserts of
// a key already there, closures that fail before or after their writes
// reached the server, panics) and
// checks that each Update's outcome and effects are those of running it
// alone: its writes are there exactly when it returned nil, the counter
// counts the increments that returned nil, and one Insert of the key
// wins.
func TestCombinedUpdatesProperty(t *testing.T) {
	s, batch := lineUp(t, nil)
	boom := errors.New("boom")
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		ns := fmt.Sprintf("r%d/", round)
		kinds := rapid.SliceOfN(rapid.SampledFrom([]string{"put", "incr", "insert", "insertTaken", "failHeld", "failSent", "panic"}), 1, 8).Draw(rt, "kinds")
		if err := s.Update(context.Background(), put(ns+"taken", "t")); err != nil {
			rt.Fatal(err)
		}
		fns := make([]func(store.Tx) error, len(kinds))
		for i, kind := range kinds {
			k := ns + strconv.Itoa(i)
			switch kind {
			case "put":
				fns[i] = put(k, "v")
			case "incr":
				fns[i] = func(tx store.Tx) error {
					v, err := tx.Get("c", ns+"n")
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					n, _ := strconv.Atoi(string(v))
					return tx.Put("c", ns+"n", []byte(strconv.Itoa(n+1)))
				}
			case "insert":
				fns[i] = func(tx store.Tx) error { return store.Insert(tx, "c", ns+"name", []byte(strconv.Itoa(i))) }
			case "insertTaken":
				fns[i] = func(tx store.Tx) error {
					if err := tx.Put("c", k, []byte("v")); err != nil {
						return err
					}
					return store.Insert(tx, "c", ns+"taken", []byte(strconv.Itoa(i)))
				}
			case "failHeld", "failSent":
				fns[i] = func(tx store.Tx) error {
					if err := tx.Put("c", k, []byte("v")); err != nil {
						return err
					}
					if kind == "failSent" {
						if _, err := tx.Get("c", k); err != nil {
							return err
						}
					}
					return boom
				}
			case "panic":
				fns[i] = func(tx store.Tx) error {
					if err := tx.Put("c", k, []byte("v")); err != nil {
						return err
					}
					panic("oops")
				}
			}
		}
		errs, _ := batch(fns...)
		incrs, winner := 0, -1
		for i, kind := range kinds {
			err, k := errs[i], ns+strconv.Itoa(i)
			switch kind {
			case "put":
				if err != nil || value(t, s, k) != "v" {
					rt.Fatalf("put %d: %v, value %q", i, err, value(t, s, k))
				}
			case "incr":
				if err != nil {
					rt.Fatalf("incr %d: %v", i, err)
				}
				incrs++
			case "insert":
				switch {
				case err == nil && winner < 0:
					winner = i
				case err == nil:
					rt.Fatalf("inserts %d and %d both won", winner, i)
				case !errors.Is(err, store.ErrAlreadyExists):
					rt.Fatalf("insert %d: %v", i, err)
				}
			case "insertTaken":
				if !errors.Is(err, store.ErrAlreadyExists) || value(t, s, k) != "" {
					rt.Fatalf("insertTaken %d: %v, its Put's value %q", i, err, value(t, s, k))
				}
			case "failHeld", "failSent":
				if !errors.Is(err, boom) || value(t, s, k) != "" {
					rt.Fatalf("%s %d: %v, value %q", kind, i, err, value(t, s, k))
				}
			case "panic":
				if err == nil || err.Error() != "panic: oops" || value(t, s, k) != "" {
					rt.Fatalf("panic %d: %v, value %q", i, err, value(t, s, k))
				}
			}
		}
		if got := value(t, s, ns+"n"); incrs > 0 && got != strconv.Itoa(incrs) {
			rt.Fatalf("counter %q after %d increments", got, incrs)
		}
		if got := value(t, s, ns+"taken"); got != "t" {
			rt.Fatalf("taken = %q, want t", got)
		}
		if got := value(t, s, ns+"name"); winner >= 0 && got != strconv.Itoa(winner) {
			rt.Fatalf("name %q, want the winner's %d", got, winner)
		}
		if slices.Contains(kinds, "insert") && winner < 0 {
			rt.Fatalf("no insert won")
		}
	})
}
