package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/store"
	"github.com/google/go-cmp/cmp"
)

// patience is how long a check lets a concurrent transaction run before it
// moves on. It only tunes how hard a check looks for a bug; a correct store
// passes whatever its value, so no check can fail because a machine is slow.
const patience = 50 * time.Millisecond

func testIsolation(t *testing.T, h Harness) {
	// An Update writes a, then blocks, then writes b. A View started while it
	// is blocked sees a and b both old or both new, whether the store makes
	// Views wait for the Update or serves them a snapshot.
	for round := 0; round < 3; round++ {
		s := open(t, h)
		put(t, s, "c", "a", "old", "b", "old")
		var (
			wroteA    = make(chan struct{})
			once      sync.Once
			release   = make(chan struct{})
			updateErr = make(chan error, 1)
		)
		go func() {
			updateErr <- s.Update(context.Background(), func(tx store.Tx) error {
				if err := tx.Put("c", "a", []byte("new")); err != nil {
					return err
				}
				once.Do(func() { close(wroteA) })
				<-release // closed once: a second run of the closure does not block
				return tx.Put("c", "b", []byte("new"))
			})
		}()
		select {
		case <-wroteA:
		case err := <-updateErr:
			t.Fatalf("Update returned %v before its closure wrote", err)
		}
		type result struct {
			Get  [2]string
			Scan []entry
			err  error
		}
		viewDone := make(chan result, 1)
		go func() {
			var r result
			r.err = s.View(context.Background(), func(rd store.Reader) error {
				r = result{}
				for i, k := range []string{"a", "b"} {
					v, err := rd.Get("c", k)
					if err != nil {
						return err
					}
					r.Get[i] = string(v)
				}
				return rd.Scan("c", "", nil, func(k string, v []byte) (bool, error) {
					r.Scan = append(r.Scan, entry{k, string(v)})
					return true, nil
				})
			})
			viewDone <- r
		}()
		var (
			r            result
			beforeCommit bool
		)
		select {
		case r = <-viewDone: // a snapshot store answers while the Update is blocked
			beforeCommit = true
		case <-time.After(patience): // a locking store makes the View wait
		}
		close(release)
		if err := <-updateErr; err != nil {
			t.Fatalf("Update: %v", err)
		}
		if !beforeCommit {
			r = <-viewDone
		}
		if r.err != nil {
			t.Fatalf("View: %v", r.err)
		}
		old := result{Get: [2]string{"old", "old"}, Scan: entries("a", "old", "b", "old")}
		committed := result{Get: [2]string{"new", "new"}, Scan: entries("a", "new", "b", "new")}
		opt := cmp.AllowUnexported(result{})
		switch {
		case beforeCommit && !cmp.Equal(r, old, opt):
			t.Errorf("a View that finished while an Update was blocked saw %+v, want all old", r)
		case !cmp.Equal(r, old, opt) && !cmp.Equal(r, committed, opt):
			t.Errorf("a View concurrent with an Update saw %+v, want all old or all new", r)
		}
		if diff := cmp.Diff(entries("a", "new", "b", "new"), dump(t, s, "c")); diff != "" {
			t.Errorf("after the Update (-want +got):\n%s", diff)
		}
	}
}

func testConcurrency(t *testing.T, h Harness) {
	t.Run("Increment", func(t *testing.T) {
		const goroutines, increments = 32, 20
		s := open(t, h)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		start := make(chan struct{})
		for g := 0; g < goroutines; g++ {
			wg.Go(func() {
				<-start
				for i := 0; i < increments; i++ {
					err := s.Update(context.Background(), func(tx store.Tx) error {
						n := 0
						v, err := tx.Get("c", "counter")
						switch {
						case errors.Is(err, store.ErrNotFound):
						case err != nil:
							return err
						default:
							if n, err = strconv.Atoi(string(v)); err != nil {
								return err
							}
						}
						return tx.Put("c", "counter", []byte(strconv.Itoa(n+1)))
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("Update: %v", err)
		}
		if v, _ := get(t, s, "c", "counter"); v != strconv.Itoa(goroutines*increments) {
			t.Errorf("after %d goroutines x %d read-increment-write Updates, counter = %q, want %d", goroutines, increments, v, goroutines*increments)
		}
	})
	t.Run("CreateRace", func(t *testing.T) {
		const goroutines, keys = 16, 8
		s := open(t, h)
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("k%d", k)
			errs := make([]error, goroutines)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for g := 0; g < goroutines; g++ {
				wg.Go(func() {
					<-start
					errs[g] = s.Update(context.Background(), func(tx store.Tx) error {
						return tx.Create("c", key, []byte(strconv.Itoa(g)))
					})
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for g, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Errorf("Create of %q succeeded in goroutines %d and %d, want exactly one", key, winner, g)
				case err == nil:
					winner = g
				case !errors.Is(err, store.ErrAlreadyExists):
					t.Errorf("losing Create of %q = %v, want ErrAlreadyExists", key, err)
				}
			}
			if winner < 0 {
				t.Errorf("no Create of %q succeeded", key)
				continue
			}
			if v, _ := get(t, s, "c", key); v != strconv.Itoa(winner) {
				t.Errorf("%q holds %q, want the winner's value %q", key, v, strconv.Itoa(winner))
			}
		}
	})
}

func testContext(t *testing.T, h Harness) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{{"Canceled", cancelled, context.Canceled}, {"DeadlineExceeded", expired, context.DeadlineExceeded}} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, h)
			runs := 0
			err := s.View(c.ctx, func(store.Reader) error { runs++; return nil })
			if !errors.Is(err, c.want) {
				t.Errorf("View with a done context = %v, want %v", err, c.want)
			}
			err = s.Update(c.ctx, func(tx store.Tx) error {
				runs++
				return tx.Put("c", "k", []byte("v"))
			})
			if !errors.Is(err, c.want) {
				t.Errorf("Update with a done context = %v, want %v", err, c.want)
			}
			if runs != 0 {
				t.Errorf("closures ran %d times with a done context, want 0", runs)
			}
			if _, ok := get(t, s, "c", "k"); ok {
				t.Errorf("an Update with a done context wrote")
			}
		})
	}
	t.Run("CanceledDuringUpdate", func(t *testing.T) {
		// A context cancelled while the closure runs either lets the Update
		// commit (nil) or abandons it (an error wrapping context.Canceled,
		// nothing written); never an error with the writes committed.
		s := open(t, h)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := s.Update(ctx, func(tx store.Tx) error {
			if err := tx.Put("c", "k", []byte("v")); err != nil {
				return err
			}
			cancel()
			return nil
		})
		_, written := get(t, s, "c", "k")
		switch {
		case err == nil && !written:
			t.Errorf("Update returned nil but its write is missing")
		case err != nil && !errors.Is(err, context.Canceled):
			t.Errorf("Update cancelled mid-way = %v, want nil or an error wrapping context.Canceled", err)
		case err != nil && written:
			t.Errorf("Update returned %v but its write was committed", err)
		}
		put(t, s, "c", "after", "ok") // the store is still usable
	})
}

func testClose(t *testing.T, h Harness) {
	t.Run("UseAfterClose", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "k", "v")
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		runs := 0
		if err := s.View(context.Background(), func(store.Reader) error { runs++; return nil }); !errors.Is(err, store.ErrClosed) {
			t.Errorf("View after Close = %v, want ErrClosed", err)
		}
		err := s.Update(context.Background(), func(tx store.Tx) error { runs++; return nil })
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("Update after Close = %v, want ErrClosed", err)
		}
		if runs != 0 {
			t.Errorf("closures ran %d times after Close, want 0", runs)
		}
	})
	t.Run("Idempotent", func(t *testing.T) {
		s := open(t, h)
		for i := 0; i < 3; i++ {
			if err := s.Close(); err != nil {
				t.Errorf("Close #%d = %v, want nil", i+1, err)
			}
		}
		if err := s.View(context.Background(), func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
			t.Errorf("View after three Closes = %v, want ErrClosed", err)
		}
	})
	t.Run("WaitsForRunning", func(t *testing.T) {
		// Close waits for a running Update, which then commits.
		s := open(t, h)
		err := closeWhileRunning(t, s, func(block func()) error {
			return s.Update(context.Background(), func(tx store.Tx) error {
				block()
				if err := tx.Put("c", "a", []byte("1")); err != nil {
					return err
				}
				return tx.Put("c", "b", []byte("1"))
			})
		})
		if err != nil {
			t.Errorf("an Update running when Close was called returned %v, want nil", err)
		}
		if h.Reopen != nil {
			s2 := h.Reopen(t, s)
			closeAtEnd(t, s2)
			if diff := cmp.Diff(entries("a", "1", "b", "1"), dump(t, s2, "c")); diff != "" {
				t.Errorf("after reopening, the Update that Close waited for (-want +got):\n%s", diff)
			}
		}
	})
	t.Run("WaitsForRunningView", func(t *testing.T) {
		// Close waits for a running View, which can still read.
		s := open(t, h)
		put(t, s, "c", "a", "1")
		var got []byte
		err := closeWhileRunning(t, s, func(block func()) error {
			return s.View(context.Background(), func(r store.Reader) error {
				block()
				var err error
				got, err = r.Get("c", "a")
				return err
			})
		})
		if err != nil || string(got) != "1" {
			t.Errorf("a View running when Close was called read %q and returned %v, want \"1\" and nil", got, err)
		}
	})
	t.Run("ConcurrentClose", func(t *testing.T) {
		// Close racing with Updates and other Closes: every Close returns
		// nil, every Update commits or returns ErrClosed.
		s := open(t, h)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Go(func() {
				for i := 0; i < 10; i++ {
					err := s.Update(context.Background(), func(tx store.Tx) error {
						return tx.Put("c", fmt.Sprintf("g%d-%d", g, i), []byte("v"))
					})
					if err != nil && !errors.Is(err, store.ErrClosed) {
						t.Errorf("Update racing with Close = %v, want nil or ErrClosed", err)
					}
				}
			})
		}
		for g := 0; g < 3; g++ {
			wg.Go(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close racing with Close = %v", err)
				}
			})
		}
		wg.Wait()
	})
}

func testDurability(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("Harness.Reopen is nil: the store is not persistent")
	}
	t.Run("Committed", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "a", "1", "b", "2", "c", "3")
		put(t, s, "d", "\xff\x00", "binary", "empty", "")
		update(t, s, func(tx store.Tx) error {
			if err := tx.Put("c", "a", []byte("overwritten")); err != nil {
				return err
			}
			return tx.Delete("c", "b")
		})
		s = reopen(t, h, s)
		check := func(when string) {
			t.Helper()
			if diff := cmp.Diff(entries("a", "overwritten", "c", "3"), dump(t, s, "c")); diff != "" {
				t.Errorf("collection c %s (-want +got):\n%s", when, diff)
			}
			if diff := cmp.Diff(entries("empty", "", "\xff\x00", "binary"), dump(t, s, "d")); diff != "" {
				t.Errorf("collection d %s (-want +got):\n%s", when, diff)
			}
		}
		check("after reopening")
		// The reopened store takes writes, and they survive another reopen.
		put(t, s, "e", "k", "v")
		s = reopen(t, h, s)
		check("after reopening twice")
		if diff := cmp.Diff(entries("k", "v"), dump(t, s, "e")); diff != "" {
			t.Errorf("write made after the first reopen (-want +got):\n%s", diff)
		}
	})
	t.Run("RolledBack", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "a", "1")
		fail := &customError{"roll back"}
		if err := s.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.Put("c", "a", []byte("error")); err != nil {
				return err
			}
			if err := tx.Put("c", "b", []byte("error")); err != nil {
				return err
			}
			return fail
		}); err != fail {
			t.Errorf("Update = %v, want the closure's error", err)
		}
		if p, _ := updatePanics(s, t, func(tx store.Tx) error {
			if err := tx.Put("c", "p", []byte("panic")); err != nil {
				return err
			}
			panic(fail)
		}); p != fail {
			t.Errorf("Update re-raised %v, want the closure's panic value", p)
		}
		s = reopen(t, h, s)
		if diff := cmp.Diff(entries("a", "1"), dump(t, s, "c")); diff != "" {
			t.Errorf("after rolled-back Updates and a reopen (-want +got):\n%s", diff)
		}
	})
}

// closeWhileRunning starts a transaction with run, whose closure calls
// block. While the closure is blocked it calls s.Close, checks that Close
// does not return before the closure is released, then releases it. It
// returns run's error.
func closeWhileRunning(t *testing.T, s store.Store, run func(block func()) error) error {
	t.Helper()
	var (
		started = make(chan struct{})
		once    sync.Once
		release = make(chan struct{})
		txErr   = make(chan error, 1)
	)
	go func() {
		txErr <- run(func() {
			once.Do(func() { close(started) })
			<-release // closed once: a second run of the closure does not block
		})
	}()
	select {
	case <-started:
	case err := <-txErr:
		t.Fatalf("the transaction returned %v before running its closure", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	var closeErr error
	select {
	case closeErr = <-closed:
		t.Errorf("Close returned while a transaction's closure was still running")
		close(release)
	case <-time.After(patience):
		close(release)
		closeErr = <-closed
	}
	if closeErr != nil {
		t.Errorf("Close: %v", closeErr)
	}
	return <-txErr
}
