package storebolt_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
)

// holdWriter occupies the store's writer with an Update whose closure waits
// until release is called, so that the Updates queued meanwhile join its
// transaction. release returns the held Update's error.
func holdWriter(t *testing.T, s *storebolt.Store) (release func() error) {
	t.Helper()
	running := make(chan struct{})
	var once sync.Once
	unblock := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx store.Tx) error {
			once.Do(func() { close(running) }) // the closure may run again
			<-unblock
			return tx.Put("held", "k", []byte("v"))
		})
	}()
	<-running
	return func() error {
		close(unblock)
		return <-done
	}
}

// waitQueued waits until n Updates are queued behind the writer.
func waitQueued(t *testing.T, s *storebolt.Store, n int) {
	t.Helper()
	for storebolt.QueueLen(s) < n {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if got := storebolt.QueueLen(s); got != n {
		t.Fatalf("queue holds %d Updates, want %d", got, n)
	}
}

// countCommits makes s count its commits.
func countCommits(s *storebolt.Store) *atomic.Int64 {
	var n atomic.Int64
	storebolt.SetCommit(s, func(tx *bbolt.Tx) error {
		n.Add(1)
		return tx.Commit()
	})
	return &n
}

// readAll returns every record of collection as key -> value.
func readAll(t testing.TB, s store.Store, collection string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := s.View(context.Background(), func(r store.Reader) error {
		clear(got)
		return r.Scan(collection, "", nil, func(k string, v []byte) (bool, error) {
			got[k] = string(v)
			return true, nil
		})
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return got
}

func TestGroupCommitSharesOneCommit(t *testing.T) {
	s := openTemp(t, nil)
	commits := countCommits(s)
	release := holdWriter(t, s)

	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				return tx.Create("c", fmt.Sprintf("k%02d", i), []byte("v"))
			})
		}()
	}
	waitQueued(t, s, n)
	if err := release(); err != nil {
		t.Fatalf("held Update: %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Update: %v", err)
		}
	}
	// The 64 queued while the writer ran the held Update joined its
	// transaction: one commit for all.
	if got := commits.Load(); got != 1 {
		t.Errorf("%d Updates queued together took %d commits, want 1", n, got)
	}
	if got := len(readAll(t, s, "c")); got != n {
		t.Errorf("collection holds %d records, want %d", got, n)
	}
}

func TestGroupCommitLoneWriterCommitsAtOnce(t *testing.T) {
	// No timer: each sequential Update is its own commit.
	s := openTemp(t, nil)
	commits := countCommits(s)
	for i := range 5 {
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			return tx.Put("c", fmt.Sprint(i), []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
		if got := commits.Load(); got != int64(i+1) {
			t.Fatalf("after %d sequential Updates, %d commits; want %d", i+1, got, i+1)
		}
	}
}

type closureError struct{ id int }

func (e *closureError) Error() string { return fmt.Sprintf("closure %d failed", e.id) }

func TestGroupCommitFailureIsolation(t *testing.T) {
	// One batch of closures that succeed, return an error or panic, each
	// after writing. Later closures in the batch read what earlier ones left:
	// they must see the successful writes and none of the failed ones.
	s := openTemp(t, nil)
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("c", "shared", []byte("base"))
	}); err != nil {
		t.Fatal(err)
	}
	commits := countCommits(s)
	release := holdWriter(t, s)

	type outcome struct {
		err      error
		panicked any
		seen     string // the value of "shared" the closure read
	}
	const n = 30
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { outcomes[i].panicked = recover() }()
			outcomes[i].err = s.Update(context.Background(), func(tx store.Tx) error {
				v, err := tx.Get("c", "shared")
				if err != nil {
					return err
				}
				outcomes[i].seen = string(v)
				mine := fmt.Sprintf("w%02d", i)
				if err := tx.Put("c", "shared", []byte(mine)); err != nil {
					return err
				}
				if err := tx.Create("c", mine, []byte("x")); err != nil {
					return err
				}
				if err := tx.Put(mine, "k", []byte("new collection")); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return &closureError{i}
				case 2:
					panic(&closureError{i})
				}
				return nil
			})
		}()
		waitQueued(t, s, i+1) // fix the order of the batch: 0, 1, 2, ...
	}
	if err := release(); err != nil {
		t.Fatalf("held Update: %v", err)
	}
	wg.Wait()

	lastOK := "base"
	wantRecords := map[string]string{}
	for i, o := range outcomes {
		switch i % 3 {
		case 0:
			if o.err != nil || o.panicked != nil {
				t.Errorf("closure %d: Update = %v, panic %v; want success", i, o.err, o.panicked)
			}
		case 1:
			var ce *closureError
			if !errors.As(o.err, &ce) || ce.id != i || o.panicked != nil {
				t.Errorf("closure %d: Update = %v, panic %v; want its own error", i, o.err, o.panicked)
			}
		case 2:
			ce, ok := o.panicked.(*closureError)
			if !ok || ce.id != i {
				t.Errorf("closure %d: panic %v, Update = %v; want its own panic re-raised", i, o.panicked, o.err)
			}
		}
		if o.seen != lastOK {
			t.Errorf("closure %d read shared = %q, want %q (the last successful write before it)", i, o.seen, lastOK)
		}
		if i%3 == 0 {
			lastOK = fmt.Sprintf("w%02d", i)
			wantRecords[lastOK] = "x"
		}
		got := readAll(t, s, fmt.Sprintf("w%02d", i))
		if want := map[string]string{}; i%3 == 0 {
			want["k"] = "new collection"
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("collection written by successful closure %d (-want +got):\n%s", i, diff)
			}
		} else if len(got) != 0 {
			t.Errorf("collection written by failed closure %d holds %v, want nothing", i, got)
		}
	}
	wantRecords["shared"] = lastOK
	if diff := cmp.Diff(wantRecords, readAll(t, s, "c")); diff != "" {
		t.Errorf("records after the batch (-want +got):\n%s", diff)
	}
	if got := commits.Load(); got != 1 {
		t.Errorf("commits = %d, want 1 (the held Update and the batch together)", got)
	}
}

func TestCommitFailureFailsTheWholeBatch(t *testing.T) {
	// A commit that fails must reach every caller whose closure succeeded;
	// none is told "done", and nothing of the batch is on disk.
	path := t.TempDir() + "/db"
	s, err := storebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("c", "before", []byte("1"))
	}); err != nil {
		t.Fatal(err)
	}
	injected := errors.New("injected commit failure")
	release := holdWriter(t, s)
	storebolt.SetCommit(s, func(tx *bbolt.Tx) error {
		_ = tx.Rollback()
		return injected
	})
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(context.Background(), func(tx store.Tx) error {
				if err := tx.Put("c", fmt.Sprintf("k%02d", i), []byte("v")); err != nil {
					return err
				}
				if i%4 == 3 {
					return &closureError{i}
				}
				return nil
			})
		}()
	}
	waitQueued(t, s, n)
	if err := release(); !errors.Is(err, injected) {
		t.Errorf("held Update committed with the failing commit = %v, want the commit error", err)
	}
	wg.Wait()
	for i, err := range errs {
		var ce *closureError
		switch {
		case i%4 == 3 && !(errors.As(err, &ce) && ce.id == i):
			t.Errorf("failed closure %d: Update = %v, want its own error", i, err)
		case i%4 != 3 && !errors.Is(err, injected):
			t.Errorf("closure %d: Update = %v, want the commit error", i, err)
		}
	}

	// The store carries on once commits work again, and the file holds
	// exactly what was acknowledged.
	storebolt.SetCommit(s, (*bbolt.Tx).Commit)
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("c", "after", []byte("2"))
	}); err != nil {
		t.Fatalf("Update after the failed commit: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openPath(t, path, nil)
	if diff := cmp.Diff(map[string]string{"before": "1", "after": "2"}, readAll(t, s2, "c")); diff != "" {
		t.Errorf("records after reopening (-want +got):\n%s", diff)
	}
	if err := s2.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestCommitFailureWhenTheFileMayNotGrow(t *testing.T) {
	// A real bbolt commit failure, not an injected one: MaxSize stops the
	// file from growing. Every Update that returned nil is on disk after
	// reopening, and every one that returned an error is not.
	path := t.TempDir() + "/db"
	s, err := storebolt.Open(path, &storebolt.Options{MaxSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	value := []byte(strings.Repeat("v", 2000))
	const writers, each = 8, 40
	acked := make([][]string, writers)
	failed := make([][]string, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("w%d-%03d", w, i)
				err := s.Update(context.Background(), func(tx store.Tx) error {
					return tx.Create("c", key, value)
				})
				if err == nil {
					acked[w] = append(acked[w], key)
				} else {
					failed[w] = append(failed[w], key)
				}
			}
		}()
	}
	wg.Wait()
	nFailed := 0
	for _, f := range failed {
		nFailed += len(f)
	}
	if nFailed == 0 {
		t.Fatalf("no Update failed: the %d-byte file limit did not bite", 256<<10)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, openPath(t, path, nil), "c")
	for w := range writers {
		for _, k := range acked[w] {
			if _, ok := got[k]; !ok {
				t.Errorf("acknowledged key %s is missing after reopening", k)
			}
		}
		for _, k := range failed[w] {
			if _, ok := got[k]; ok {
				t.Errorf("key %s whose Update failed is present after reopening", k)
			}
		}
	}
}

func TestContextWhileQueued(t *testing.T) {
	s := openTemp(t, nil)
	release := holdWriter(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	errc := make(chan error, 1)
	go func() {
		errc <- s.Update(ctx, func(tx store.Tx) error {
			ran.Store(true)
			return tx.Put("c", "cancelled", []byte("v"))
		})
	}()
	waitQueued(t, s, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Update cancelled while queued = %v, want context.Canceled", err)
	}
	if got := storebolt.QueueLen(s); got != 0 {
		t.Errorf("queue after the cancel holds %d Updates, want 0", got)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	// Run one more Update so that a closure left in the queue would have run.
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Put("c", "next", nil) }); err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Error("the closure of an Update withdrawn from the queue ran")
	}
	if _, ok := readAll(t, s, "c")["cancelled"]; ok {
		t.Error("the withdrawn Update's write is in the store")
	}
}

func TestContextOncePickedUp(t *testing.T) {
	// Once the writer runs the closure, Update waits for the commit: a
	// cancel then changes nothing, and nil means committed.
	s := openTemp(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	err := s.Update(ctx, func(tx store.Tx) error {
		cancel()
		return tx.Put("c", "k", []byte("v"))
	})
	if err != nil {
		t.Fatalf("Update whose context was cancelled while it ran = %v, want nil (it committed)", err)
	}
	if diff := cmp.Diff(map[string]string{"k": "v"}, readAll(t, s, "c")); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestCloseCommitsQueuedUpdates(t *testing.T) {
	path := t.TempDir() + "/db"
	s, err := storebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	const n = 10
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- s.Update(context.Background(), func(tx store.Tx) error {
				return tx.Put("c", fmt.Sprint(i), []byte("v"))
			})
		}()
	}
	waitQueued(t, s, n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close stops new Updates at once, even before the queue drains.
	// (A probe that gets queued before Close starts is withdrawn when its
	// context expires, since the writer is held.)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		err := s.Update(ctx, func(store.Tx) error { return nil })
		cancel()
		if errors.Is(err, store.ErrClosed) {
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("probe Update during Close = %v, want ErrClosed or a withdrawn request", err)
		}
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Update queued before Close = %v, want nil", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := s.View(context.Background(), func(store.Reader) error { return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close = %v, want ErrClosed", err)
	}
	if got := len(readAll(t, openPath(t, path, nil), "c")); got != n {
		t.Errorf("after reopening, %d records, want %d", got, n)
	}
}

func TestGoexitInClosure(t *testing.T) {
	// A closure that calls runtime.Goexit (t.FailNow does) ends its caller's
	// goroutine like it would without a store, and the Updates batched with
	// it still commit.
	s := openTemp(t, nil)
	release := holdWriter(t, s)
	returned := make(chan bool, 1)
	go func() {
		ok := false
		defer func() { returned <- ok }()
		_ = s.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.Put("c", "goexit", []byte("v")); err != nil {
				return err
			}
			runtime.Goexit()
			return nil
		})
		ok = true
	}()
	waitQueued(t, s, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- s.Update(context.Background(), func(tx store.Tx) error { return tx.Put("c", "other", []byte("v")) })
	}()
	waitQueued(t, s, 2)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if <-returned {
		t.Error("Update returned to a caller whose closure called runtime.Goexit")
	}
	if err := <-errc; err != nil {
		t.Errorf("Update batched with a Goexit = %v, want nil", err)
	}
	if diff := cmp.Diff(map[string]string{"other": "v"}, readAll(t, s, "c")); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	// The writer still serves.
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Put("c", "later", nil) }); err != nil {
		t.Errorf("Update after a Goexit = %v", err)
	}
}

func TestScanWhileWriting(t *testing.T) {
	// A Scan callback that writes to the collection it walks: the walk goes
	// on from where it was, in order, over the live contents.
	s := openTemp(t, nil)
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := range 200 {
			if err := tx.Put("c", fmt.Sprintf("k%03d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, reverse := range []bool{false, true} {
		var visited []string
		err := s.Update(context.Background(), func(tx store.Tx) error {
			visited = nil
			return tx.Scan("c", "k", &store.ScanOptions{Reverse: reverse}, func(k string, v []byte) (bool, error) {
				visited = append(visited, k)
				// Delete the key just visited, overwrite it under a key
				// outside the prefix, and grow a neighbour.
				if err := tx.Delete("c", k); err != nil {
					return false, err
				}
				if err := tx.Put("c", "moved/"+k, []byte(strings.Repeat("x", 500))); err != nil {
					return false, err
				}
				return true, nil
			})
		})
		if err != nil {
			t.Fatalf("reverse=%v: %v", reverse, err)
		}
		if len(visited) != 200 {
			t.Errorf("reverse=%v: visited %d keys, want 200", reverse, len(visited))
		}
		for i := 1; i < len(visited); i++ {
			if (visited[i-1] >= visited[i]) != reverse {
				t.Errorf("reverse=%v: visited %q then %q", reverse, visited[i-1], visited[i])
				break
			}
		}
		// Put the records back for the other direction.
		if err := s.Update(context.Background(), func(tx store.Tx) error {
			for _, k := range visited {
				if err := tx.Delete("c", "moved/"+k); err != nil {
					return err
				}
				if err := tx.Put("c", k, []byte("v")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenLockedFile(t *testing.T) {
	path := t.TempDir() + "/db"
	openPath(t, path, nil)
	// bbolt's flock belongs to the open file, so a second Open in this
	// process waits like another process would.
	_, err := storebolt.Open(path, &storebolt.Options{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, storebolt.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another process") {
		t.Errorf("error %q does not name the path and the cause", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := storebolt.Open(dir, nil); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open of a directory = %v, want an error naming it", err)
	}
	if _, err := storebolt.Open(dir+"/db", &storebolt.Options{FillPercent: 2}); err == nil {
		t.Error("Open with FillPercent 2 succeeded, want an error")
	}
}

func TestTxUnusableAfterClosure(t *testing.T) {
	s := openTemp(t, nil)
	var kept store.Tx
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		kept = tx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := kept.Put("c", "k", []byte("v")); err == nil {
		t.Error("Put through a Tx kept past its closure succeeded, want an error")
	}
	if _, err := kept.Get("c", "k"); err == nil || errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get through a Tx kept past its closure = %v, want a usage error", err)
	}
}

func TestContextCancelUnderLoad(t *testing.T) {
	// Many Updates whose contexts expire at random moments, queued, running
	// or committing: each returns nil and is stored, or returns its
	// context's error and is not, and the writer keeps serving throughout.
	s := openTemp(t, nil)
	const writers, each = 64, 30
	type result struct {
		key string
		err error
	}
	results := make(chan result, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("w%02d-%02d", w, i)
				timeout := time.Duration((w*each+i)%7) * 100 * time.Microsecond
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				err := s.Update(ctx, func(tx store.Tx) error { return tx.Create("c", key, []byte("v")) })
				cancel()
				results <- result{key, err}
			}
		}()
	}
	wg.Wait()
	close(results)
	got := readAll(t, s, "c")
	var stored, withdrawn int
	for r := range results {
		_, present := got[r.key]
		switch {
		case r.err == nil && present:
			stored++
		case errors.Is(r.err, context.DeadlineExceeded) && !present:
			withdrawn++
		default:
			t.Errorf("Update of %s = %v, and the key present = %v", r.key, r.err, present)
		}
	}
	t.Logf("%d stored, %d withdrawn", stored, withdrawn)
	if err := s.Update(context.Background(), func(tx store.Tx) error { return tx.Put("c", "final", nil) }); err != nil {
		t.Errorf("Update after the load = %v", err)
	}
}
