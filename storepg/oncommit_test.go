package storepg_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// TestOnCommit: every Update that writes reports its COMMIT once, as a
// group of one; Views, Updates that wrote nothing, and closures that
// failed are not reported.
func TestOnCommit(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var seen []int
	s := openStore(t, &storepg.Options{OnCommit: func(updates int, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil || took < 0 {
			t.Errorf("OnCommit(%d, %v, %v)", updates, took, err)
		}
		seen = append(seen, updates)
	}})
	take := func() []int {
		mu.Lock()
		defer mu.Unlock()
		s := seen
		seen = nil
		return s
	}
	for i := range 3 {
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.Put("c", "k", []byte{byte(i)}) }); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]int{1, 1, 1}, take()); diff != "" {
		t.Errorf("three Updates (-want +got):\n%s", diff)
	}
	if err := s.View(ctx, func(r store.Reader) error { _, err := r.Get("c", "k"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("c", "k2", []byte("v")); err != nil {
			return err
		}
		return errors.New("closure refuses")
	}); err == nil {
		t.Fatal("the failing Update succeeded")
	}
	if got := take(); got != nil {
		t.Errorf("reported without a commit: %v", got)
	}
}
