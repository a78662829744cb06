package storebolt_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
)

// commitLog records what Options.OnCommit is told.
type commitLog struct {
	mu      sync.Mutex
	commits []commitSeen
}

type commitSeen struct {
	Updates int
	Err     string
}

func (l *commitLog) onCommit(updates int, took time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if took < 0 {
		panic("negative commit time")
	}
	c := commitSeen{Updates: updates}
	if err != nil {
		c.Err = err.Error()
	}
	l.commits = append(l.commits, c)
}

func (l *commitLog) take() []commitSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.commits
	l.commits = nil
	return c
}

// TestOnCommit: each group commit is reported once, with the Updates whose
// closures succeeded; a lone Update is a group of one; a group whose
// closures all failed commits nothing and is not reported; a failed commit
// is reported with its error.
func TestOnCommit(t *testing.T) {
	ctx := context.Background()
	var log commitLog
	s := openTemp(t, &storebolt.Options{OnCommit: log.onCommit})

	if err := s.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "lone", []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]commitSeen{{Updates: 1}}, log.take()); diff != "" {
		t.Errorf("lone Update (-want +got):\n%s", diff)
	}

	// The held Update and 10 queued behind it: 3 of them fail.
	release := holdWriter(t, s)
	const n, failing = 10, 3
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- s.Update(ctx, func(tx store.Tx) error {
				if i < failing {
					return errors.New("closure refuses")
				}
				return tx.Create("c", fmt.Sprintf("k%02d", i), []byte("v"))
			})
		}()
	}
	waitQueued(t, s, n)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	for range n {
		<-errs
	}
	if diff := cmp.Diff([]commitSeen{{Updates: 1 + n - failing}}, log.take()); diff != "" {
		t.Errorf("group commit (-want +got):\n%s", diff)
	}

	if err := s.Update(ctx, func(store.Tx) error { return errors.New("nothing to commit") }); err == nil {
		t.Fatal("the failing Update succeeded")
	}
	if got := log.take(); got != nil {
		t.Errorf("a group of failed closures was reported: %v", got)
	}

	injected := errors.New("injected commit failure")
	storebolt.SetCommit(s, func(tx *bbolt.Tx) error {
		_ = tx.Rollback()
		return injected
	})
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "x", []byte("v")) }); !errors.Is(err, injected) {
		t.Fatalf("Update = %v, want the commit failure", err)
	}
	if diff := cmp.Diff([]commitSeen{{Updates: 1, Err: injected.Error()}}, log.take()); diff != "" {
		t.Errorf("failed commit (-want +got):\n%s", diff)
	}
}
