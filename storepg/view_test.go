package storepg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/deployplane/deployplane/store"
)

// TestViewOneGet checks Views whose first statement is a Get, which runs
// outside a transaction: a View of one Get reads the record (or
// ErrNotFound) in one try; a View that goes on to a second statement
// runs again, in a transaction, and reads both records as one snapshot;
// and its later Views start in a transaction (one try each).
func TestViewOneGet(t *testing.T) {
	s := openStore(t, nil)
	ctx := context.Background()
	if err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("c", "a", []byte("1")); err != nil {
			return err
		}
		return tx.Put("c", "b", []byte("2"))
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}

	one := func(key string) (string, int, error) {
		var v []byte
		runs := 0
		err := s.View(ctx, func(r store.Reader) error {
			runs++
			var err error
			v, err = r.Get("c", key)
			return err
		})
		return string(v), runs, err
	}
	if v, runs, err := one("a"); err != nil || v != "1" || runs != 1 {
		t.Errorf("View of one Get = %q, %v after %d runs; want \"1\" after 1", v, err, runs)
	}
	if _, runs, err := one("missing"); !errors.Is(err, store.ErrNotFound) || runs != 1 {
		t.Errorf("View of one Get of a missing key = %v after %d runs; want ErrNotFound after 1", err, runs)
	}

	two := func() (string, int, error) {
		var got string
		runs := 0
		err := s.View(ctx, func(r store.Reader) error {
			runs++
			a, err := r.Get("c", "a")
			if err != nil {
				return err
			}
			// A closure that swallows the second statement's error
			// still has its try voided.
			b, _ := r.Get("c", "b")
			got = string(a) + string(b)
			return nil
		})
		return got, runs, err
	}
	// One call site (an inlined call is a closure of its own), so one
	// closure: the first View runs it twice, the second once.
	for i, wantRuns := range []int{2, 1} {
		if got, runs, err := two(); err != nil || got != "12" || runs != wantRuns {
			t.Errorf("View %d of two Gets = %q, %v after %d runs; want \"12\" after %d", i+1, got, err, runs, wantRuns)
		}
	}
	if s.Retries() != 0 {
		t.Errorf("Retries = %d; want 0 (a View run again in a transaction is no retry)", s.Retries())
	}
}
