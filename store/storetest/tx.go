package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/deployplane/deployplane/store"
	"github.com/google/go-cmp/cmp"
)

func testReadYourWrites(t *testing.T, h Harness) {
	s := open(t, h)
	put(t, s, "c", "keep", "0", "gone", "0", "over", "0")
	type seen struct {
		Created, Overwritten, Deleted, Recreated string
		DeletedErr                               error
		Scan, ScanReverse, OtherCollection       []entry
	}
	var got seen
	update(t, s, func(tx store.Tx) error {
		got = seen{} // reset: the closure may run more than once
		if err := tx.Create("c", "new", []byte("1")); err != nil {
			return err
		}
		if err := tx.Put("c", "over", []byte("1")); err != nil {
			return err
		}
		if err := tx.Delete("c", "gone"); err != nil {
			return err
		}
		if err := tx.Put("other", "k", []byte("1")); err != nil {
			return err
		}
		v, err := tx.Get("c", "new")
		if err != nil {
			return fmt.Errorf("Get of a key created in this transaction: %w", err)
		}
		got.Created = string(v)
		if v, err = tx.Get("c", "over"); err != nil {
			return err
		}
		got.Overwritten = string(v)
		_, got.DeletedErr = tx.Get("c", "gone")
		scan := func(dst *[]entry, collection string, opts *store.ScanOptions) error {
			return tx.Scan(collection, "", opts, func(k string, v []byte) (bool, error) {
				*dst = append(*dst, entry{k, string(v)})
				return true, nil
			})
		}
		if err := scan(&got.Scan, "c", nil); err != nil {
			return err
		}
		if err := scan(&got.ScanReverse, "c", &store.ScanOptions{Reverse: true}); err != nil {
			return err
		}
		if err := scan(&got.OtherCollection, "other", nil); err != nil {
			return err
		}
		// A key deleted in this transaction can be created again in it.
		if err := tx.Create("c", "gone", []byte("2")); err != nil {
			return fmt.Errorf("Create of a key deleted in this transaction: %w", err)
		}
		if v, err = tx.Get("c", "gone"); err != nil {
			return err
		}
		got.Recreated = string(v)
		return nil
	})
	want := seen{
		Created: "1", Overwritten: "1", Recreated: "2",
		Scan:            entries("keep", "0", "new", "1", "over", "1"),
		ScanReverse:     entries("over", "1", "new", "1", "keep", "0"),
		OtherCollection: entries("k", "1"),
	}
	if !errors.Is(got.DeletedErr, store.ErrNotFound) {
		t.Errorf("Get of a key deleted in this transaction = %v, want ErrNotFound", got.DeletedErr)
	}
	got.DeletedErr = nil
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("reads inside the Update (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(entries("gone", "2", "keep", "0", "new", "1", "over", "1"), dump(t, s, "c")); diff != "" {
		t.Errorf("after the commit (-want +got):\n%s", diff)
	}
}

// panicValue is what the Rollback/Panic check panics with; Run checks that
// the very same pointer comes back.
type panicValue struct{ msg string }

// updatePanics runs fn in s.Update and returns the value Update panicked
// with, or nil and Update's error if it did not panic.
func updatePanics(s store.Store, t testing.TB, fn func(store.Tx) error) (recovered any, err error) {
	defer func() { recovered = recover() }()
	return nil, s.Update(t.Context(), fn)
}

func testRollback(t *testing.T, h Harness) {
	// writeAll makes the writes both checks roll back: a Put over an
	// existing key, a Create, a Delete, and a Put in a new collection.
	writeAll := func(tx store.Tx) error {
		if err := tx.Put("c", "a", []byte("changed")); err != nil {
			return err
		}
		if err := tx.Create("c", "new", []byte("x")); err != nil {
			return err
		}
		if err := tx.Delete("c", "b"); err != nil {
			return err
		}
		return tx.Put("fresh", "k", []byte("x"))
	}
	before := entries("a", "1", "b", "2")
	checkUnchanged := func(t *testing.T, s store.Store, what string) {
		t.Helper()
		if diff := cmp.Diff(before, dump(t, s, "c")); diff != "" {
			t.Errorf("collection after %s (-want +got):\n%s", what, diff)
		}
		if got := dump(t, s, "fresh"); len(got) != 0 {
			t.Errorf("new collection after %s = %v, want empty", what, got)
		}
	}
	stillUsable := func(t *testing.T, s store.Store) {
		t.Helper()
		put(t, s, "c", "after", "ok")
		if v, ok := get(t, s, "c", "after"); !ok || v != "ok" {
			t.Errorf("after the rollback, a new Update's write reads back as %q, %v; want \"ok\", true", v, ok)
		}
	}

	t.Run("Error", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "a", "1", "b", "2")
		want := &customError{"closure failed"}
		err := s.Update(t.Context(), func(tx store.Tx) error {
			if err := writeAll(tx); err != nil {
				return err
			}
			return want
		})
		if err != want {
			t.Errorf("Update returned %v (%T), want the closure's error unchanged", err, err)
		}
		var ce *customError
		if !errors.As(err, &ce) || ce != want {
			t.Errorf("errors.As(Update's error, *customError) = %v, want the closure's error", ce)
		}
		checkUnchanged(t, s, "an Update that returned an error")

		// A wrapped store sentinel from inside the transaction comes back
		// unchanged too, and still rolls back the writes before it.
		var wrapped error
		err = s.Update(t.Context(), func(tx store.Tx) error {
			if err := writeAll(tx); err != nil {
				return err
			}
			wrapped = fmt.Errorf("create again: %w", tx.Create("c", "a", []byte("dup")))
			return wrapped
		})
		if err != wrapped || !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("Update returned %v, want the closure's wrapped ErrAlreadyExists unchanged", err)
		}
		checkUnchanged(t, s, "an Update that returned a wrapped ErrAlreadyExists")
		stillUsable(t, s)
	})
	t.Run("Panic", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "a", "1", "b", "2")
		want := &panicValue{"closure panicked"}
		got, err := updatePanics(s, t, func(tx store.Tx) error {
			if err := writeAll(tx); err != nil {
				return err
			}
			panic(want)
		})
		if got != want {
			t.Errorf("Update re-raised %v (%T), err %v; want the closure's panic value %v", got, got, err, want)
		}
		checkUnchanged(t, s, "an Update that panicked")
		stillUsable(t, s)
		// A View's panic is re-raised too, and leaves the store usable.
		got = func() (recovered any) {
			defer func() { recovered = recover() }()
			_ = s.View(t.Context(), func(store.Reader) error { panic(want) })
			return nil
		}()
		if got != want {
			t.Errorf("View re-raised %v, want the closure's panic value", got)
		}
		stillUsable(t, s)
	})
}
