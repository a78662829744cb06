package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/store"
	"github.com/google/go-cmp/cmp"
)

func testSentinels(t *testing.T, h Harness) {
	t.Run("GetMissing", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "present", "v")
		for _, c := range []struct{ collection, key string }{
			{"c", "absent"},
			{"c", "presen"},   // a prefix of a present key
			{"c", "present0"}, // a present key is a prefix of it
			{"never", "present"},
		} {
			var err error
			view(t, s, func(r store.Reader) error {
				_, err = r.Get(c.collection, c.key)
				return nil
			})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("View Get(%q, %q) = %v, want ErrNotFound", c.collection, c.key, err)
			}
			update(t, s, func(tx store.Tx) error {
				_, err = tx.Get(c.collection, c.key)
				return nil
			})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Update Get(%q, %q) = %v, want ErrNotFound", c.collection, c.key, err)
			}
		}
	})
	t.Run("DeleteMissing", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "present", "v")
		for _, c := range []struct{ collection, key string }{
			{"c", "absent"},
			{"never", "present"},
		} {
			var err error
			update(t, s, func(tx store.Tx) error {
				err = tx.Delete(c.collection, c.key)
				return nil
			})
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Delete(%q, %q) = %v, want ErrNotFound", c.collection, c.key, err)
			}
		}
		// Deleting twice in one transaction: the second finds nothing.
		var first, second error
		update(t, s, func(tx store.Tx) error {
			first = tx.Delete("c", "present")
			second = tx.Delete("c", "present")
			return nil
		})
		if first != nil || !errors.Is(second, store.ErrNotFound) {
			t.Errorf("Delete, Delete of one key = %v, %v; want nil, ErrNotFound", first, second)
		}
		if diff := cmp.Diff([]entry(nil), dump(t, s, "c")); diff != "" {
			t.Errorf("collection after deletes (-want +got):\n%s", diff)
		}
	})
	t.Run("Discard", func(t *testing.T) {
		// store.Discard: the store's own Discard (store.Discarder) or
		// Delete ignoring ErrNotFound, in order with the Puts around it.
		s := open(t, h)
		put(t, s, "c", "present", "v")
		var missing, present error
		var inTx []byte
		var inTxErr error
		update(t, s, func(tx store.Tx) error {
			missing = store.Discard(tx, "c", "absent")
			present = store.Discard(tx, "c", "present")
			if err := tx.Put("c", "again", []byte("1")); err != nil {
				return err
			}
			if err := store.Discard(tx, "c", "again"); err != nil {
				return err
			}
			if err := tx.Put("c", "again", []byte("2")); err != nil {
				return err
			}
			_, inTxErr = tx.Get("c", "present")
			inTx, _ = tx.Get("c", "again")
			return nil
		})
		if missing != nil || present != nil {
			t.Errorf("Discard of an absent key, of a present one = %v, %v; want nil, nil", missing, present)
		}
		if !errors.Is(inTxErr, store.ErrNotFound) || string(inTx) != "2" {
			t.Errorf("in the Update after the Discards: Get(present) = %v, Get(again) = %q; want ErrNotFound, \"2\"", inTxErr, inTx)
		}
		if diff := cmp.Diff([]entry{{"again", "2"}}, dump(t, s, "c")); diff != "" {
			t.Errorf("collection after the Discards (-want +got):\n%s", diff)
		}
	})
	t.Run("DiscardRun", func(t *testing.T) {
		// A run of Discards (storepg sends it as one statement): across
		// collections, a key discarded twice, an absent one; the Puts
		// before and after the run keep their places.
		s := open(t, h)
		put(t, s, "c", "a", "1")
		put(t, s, "c", "b", "2")
		put(t, s, "d", "a", "3")
		var got []byte
		update(t, s, func(tx store.Tx) error {
			if err := tx.Put("c", "b", []byte("changed")); err != nil {
				return err
			}
			for _, k := range [][2]string{{"c", "b"}, {"d", "a"}, {"c", "a"}, {"c", "absent"}, {"c", "b"}} {
				if err := store.Discard(tx, k[0], k[1]); err != nil {
					return err
				}
			}
			if err := tx.Put("d", "a", []byte("back")); err != nil {
				return err
			}
			var err error
			got, err = tx.Get("d", "a")
			return err
		})
		if string(got) != "back" {
			t.Errorf("Get in the Update after the run of Discards and a Put = %q; want \"back\"", got)
		}
		if diff := cmp.Diff([]entry(nil), dump(t, s, "c")); diff != "" {
			t.Errorf("collection c after the run of Discards (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]entry{{"a", "back"}}, dump(t, s, "d")); diff != "" {
			t.Errorf("collection d after the run of Discards (-want +got):\n%s", diff)
		}
	})
	t.Run("Insert", func(t *testing.T) {
		// store.Insert: the store's own Insert (store.Inserter) or
		// Create. New keys are stored, in order with the Puts and
		// Discards around them, and read back in the same Update.
		s := open(t, h)
		put(t, s, "c", "present", "v")
		var inTx []byte
		update(t, s, func(tx store.Tx) error {
			if err := store.Insert(tx, "c", "b", []byte("1")); err != nil {
				return err
			}
			if err := store.Insert(tx, "c", "a", nil); err != nil {
				return err
			}
			if err := tx.Put("c", "b", []byte("2")); err != nil {
				return err
			}
			if err := store.Discard(tx, "c", "present"); err != nil {
				return err
			}
			if err := store.Insert(tx, "c", "present", []byte("again")); err != nil {
				return err
			}
			var err error
			inTx, err = tx.Get("c", "b")
			return err
		})
		if string(inTx) != "2" {
			t.Errorf("Get in the Update after Insert and Put = %q; want \"2\"", inTx)
		}
		if diff := cmp.Diff([]entry{{"a", ""}, {"b", "2"}, {"present", "again"}}, dump(t, s, "c")); diff != "" {
			t.Errorf("collection after the Inserts (-want +got):\n%s", diff)
		}
	})
	t.Run("InsertExisting", func(t *testing.T) {
		// An Insert of a key that is there fails the Update with
		// ErrAlreadyExists, whenever the store tells it, and nothing of
		// the Update commits: a key present before the Update, or one
		// inserted twice in it.
		for _, twice := range []bool{false, true} {
			s := open(t, h)
			put(t, s, "c", "k", "old")
			err := s.Update(context.Background(), func(tx store.Tx) error {
				if err := tx.Put("c", "other", []byte("x")); err != nil {
					return err
				}
				key := "k"
				if twice {
					key = "new"
					if err := store.Insert(tx, "c", key, []byte("1")); err != nil {
						return err
					}
				}
				return store.Insert(tx, "c", key, []byte("2"))
			})
			if !errors.Is(err, store.ErrAlreadyExists) {
				t.Errorf("Update with an Insert of a present key (inserted twice: %v) = %v; want ErrAlreadyExists", twice, err)
			}
			if diff := cmp.Diff([]entry{{"k", "old"}}, dump(t, s, "c")); diff != "" {
				t.Errorf("collection after the failed Update (inserted twice: %v) (-want +got):\n%s", twice, diff)
			}
		}
	})
	t.Run("CreateExisting", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "k", "old")
		var err error
		update(t, s, func(tx store.Tx) error {
			err = tx.Create("c", "k", []byte("new"))
			return nil
		})
		if !errors.Is(err, store.ErrAlreadyExists) {
			t.Errorf("Create of a committed key = %v, want ErrAlreadyExists", err)
		}
		var first, second error
		update(t, s, func(tx store.Tx) error {
			first = tx.Create("c", "fresh", []byte("1"))
			second = tx.Create("c", "fresh", []byte("2"))
			return nil
		})
		if first != nil || !errors.Is(second, store.ErrAlreadyExists) {
			t.Errorf("Create, Create of one key in one transaction = %v, %v; want nil, ErrAlreadyExists", first, second)
		}
		if diff := cmp.Diff(entries("fresh", "1", "k", "old"), dump(t, s, "c")); diff != "" {
			t.Errorf("collection after creates (-want +got):\n%s", diff)
		}
	})
	t.Run("InvalidKey", func(t *testing.T) {
		s := open(t, h)
		long := strings.Repeat("k", store.MaxKeyLen+1)
		for _, c := range []struct{ name, collection, key string }{
			{"EmptyKey", "c", ""},
			{"EmptyCollection", "", "k"},
			{"LongKey", "c", long},
			{"LongCollection", long, "k"},
		} {
			ops := map[string]func(store.Tx) error{
				"Get":    func(tx store.Tx) error { _, err := tx.Get(c.collection, c.key); return err },
				"Create": func(tx store.Tx) error { return tx.Create(c.collection, c.key, []byte("v")) },
				"Put":    func(tx store.Tx) error { return tx.Put(c.collection, c.key, []byte("v")) },
				"Delete": func(tx store.Tx) error { return tx.Delete(c.collection, c.key) },
			}
			if c.key != "" && len(c.key) <= store.MaxKeyLen { // Scan takes a collection and a prefix, which may be anything
				ops["Scan"] = func(tx store.Tx) error {
					return tx.Scan(c.collection, "", nil, func(string, []byte) (bool, error) { return true, nil })
				}
			}
			for op, fn := range ops {
				var err error
				update(t, s, func(tx store.Tx) error {
					err = fn(tx)
					return nil // commit: an invalid write must not have written anything
				})
				if !errors.Is(err, store.ErrInvalidKey) {
					t.Errorf("%s with %s = %v, want ErrInvalidKey", op, c.name, err)
				}
			}
			var err error
			view(t, s, func(r store.Reader) error {
				_, err = r.Get(c.collection, c.key)
				return nil
			})
			if !errors.Is(err, store.ErrInvalidKey) {
				t.Errorf("View Get with %s = %v, want ErrInvalidKey", c.name, err)
			}
		}
		for _, col := range []string{"c", "k"} {
			if got := dump(t, s, col); len(got) != 0 {
				t.Errorf("collection %q after invalid writes holds %d records, want none", col, len(got))
			}
		}
	})
	t.Run("MaxKeyLen", func(t *testing.T) {
		// Keys and collection names of exactly MaxKeyLen bytes are valid.
		s := open(t, h)
		longKey := strings.Repeat("k", store.MaxKeyLen)
		longCol := strings.Repeat("c", store.MaxKeyLen)
		put(t, s, "c", longKey, "v1")
		put(t, s, longCol, "k", "v2")
		if v, ok := get(t, s, "c", longKey); !ok || v != "v1" {
			t.Errorf("Get of a %d-byte key = %q, %v; want \"v1\", true", store.MaxKeyLen, v, ok)
		}
		if v, ok := get(t, s, longCol, "k"); !ok || v != "v2" {
			t.Errorf("Get in a %d-byte collection = %q, %v; want \"v2\", true", store.MaxKeyLen, v, ok)
		}
	})
}

func testRoundTrip(t *testing.T, h Harness) {
	t.Run("Values", func(t *testing.T) {
		s := open(t, h)
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
		values := map[string][]byte{
			"empty":    {},
			"nil":      nil,
			"bytes":    all,
			"zeros":    make([]byte, 17),
			"text":     []byte("hello, world"),
			"big":      big,
			"\xff\x00": []byte("binary key"),
		}
		update(t, s, func(tx store.Tx) error {
			for k, v := range values {
				if err := tx.Put("c", k, v); err != nil {
					return err
				}
			}
			return nil
		})
		for k, want := range values {
			var got []byte
			view(t, s, func(r store.Reader) error {
				var err error
				got, err = r.Get("c", k)
				return err
			})
			if !bytes.Equal(got, want) {
				t.Errorf("Get(%q) = %d bytes %.40q, want %d bytes %.40q", k, len(got), got, len(want), want)
			}
		}
	})
	t.Run("CreatePutDelete", func(t *testing.T) {
		s := open(t, h)
		update(t, s, func(tx store.Tx) error { return tx.Create("c", "a", []byte("1")) })
		update(t, s, func(tx store.Tx) error { return tx.Put("c", "a", []byte("2")) })
		update(t, s, func(tx store.Tx) error { return tx.Put("c", "b", []byte("3")) })
		if diff := cmp.Diff(entries("a", "2", "b", "3"), dump(t, s, "c")); diff != "" {
			t.Errorf("after Create, Put over it, Put (-want +got):\n%s", diff)
		}
		update(t, s, func(tx store.Tx) error { return tx.Delete("c", "a") })
		if diff := cmp.Diff(entries("b", "3"), dump(t, s, "c")); diff != "" {
			t.Errorf("after Delete (-want +got):\n%s", diff)
		}
		// A deleted key can be created again.
		update(t, s, func(tx store.Tx) error { return tx.Create("c", "a", []byte("4")) })
		if diff := cmp.Diff(entries("a", "4", "b", "3"), dump(t, s, "c")); diff != "" {
			t.Errorf("after Create of a deleted key (-want +got):\n%s", diff)
		}
	})
	t.Run("Collections", func(t *testing.T) {
		// The same key in many collections holds independent values, and a
		// collection whose name is a prefix of another's does not see its
		// records.
		s := open(t, h)
		cols := []string{"a", "ab", "b", "a/b", "a\x00", "\xff", "users", "users2", "Users"}
		update(t, s, func(tx store.Tx) error {
			for i, c := range cols {
				for j := 0; j < 3; j++ {
					if err := tx.Put(c, fmt.Sprintf("k%d", j), []byte(fmt.Sprintf("%d/%d", i, j))); err != nil {
						return err
					}
				}
			}
			return nil
		})
		update(t, s, func(tx store.Tx) error { return tx.Delete("ab", "k1") })
		for i, c := range cols {
			want := entries("k0", fmt.Sprintf("%d/0", i), "k1", fmt.Sprintf("%d/1", i), "k2", fmt.Sprintf("%d/2", i))
			if c == "ab" {
				want = append(want[:1], want[2])
			}
			if diff := cmp.Diff(want, dump(t, s, c)); diff != "" {
				t.Errorf("collection %q (-want +got):\n%s", c, diff)
			}
		}
	})
	t.Run("UnwrittenCollection", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "written", "k", "v")
		for _, c := range []string{"never", "writte", "written2"} {
			if got := dump(t, s, c); len(got) != 0 {
				t.Errorf("Scan of never-written collection %q = %v, want nothing", c, got)
			}
			if _, ok := get(t, s, c, "k"); ok {
				t.Errorf("Get in never-written collection %q found a record", c)
			}
		}
		// A collection emptied by deletes reads as empty too.
		update(t, s, func(tx store.Tx) error { return tx.Delete("written", "k") })
		if got := dump(t, s, "written"); len(got) != 0 {
			t.Errorf("Scan of emptied collection = %v, want nothing", got)
		}
	})
}

func testAliasing(t *testing.T, h Harness) {
	t.Run("PutArgument", func(t *testing.T) {
		s := open(t, h)
		buf := []byte("original")
		update(t, s, func(tx store.Tx) error {
			copy(buf, "original") // the closure may run more than once
			if err := tx.Put("c", "k", buf); err != nil {
				return err
			}
			copy(buf, "MUTATED!") // inside the transaction, after the call
			return nil
		})
		copy(buf, "mutated2") // after the commit
		if v, _ := get(t, s, "c", "k"); v != "original" {
			t.Errorf("after mutating the slice passed to Put, Get = %q, want \"original\"", v)
		}
	})
	t.Run("CreateArgument", func(t *testing.T) {
		s := open(t, h)
		buf := []byte("original")
		update(t, s, func(tx store.Tx) error {
			copy(buf, "original")
			if err := tx.Create("c", "k", buf); err != nil {
				return err
			}
			copy(buf, "MUTATED!")
			return nil
		})
		copy(buf, "mutated2")
		if v, _ := get(t, s, "c", "k"); v != "original" {
			t.Errorf("after mutating the slice passed to Create, Get = %q, want \"original\"", v)
		}
	})
	t.Run("ArgumentReadInTransaction", func(t *testing.T) {
		// The transaction's own reads must not see a mutation of the slice
		// passed to Put either.
		s := open(t, h)
		var got []byte
		update(t, s, func(tx store.Tx) error {
			buf := []byte("original")
			if err := tx.Put("c", "k", buf); err != nil {
				return err
			}
			copy(buf, "MUTATED!")
			var err error
			got, err = tx.Get("c", "k")
			return err
		})
		if string(got) != "original" {
			t.Errorf("Get in the transaction after mutating the Put slice = %q, want \"original\"", got)
		}
	})
	t.Run("GetResult", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "k", "original")
		view(t, s, func(r store.Reader) error {
			v, err := r.Get("c", "k")
			if err != nil {
				return err
			}
			copy(v, "MUTATED!")
			return nil
		})
		update(t, s, func(tx store.Tx) error {
			v, err := tx.Get("c", "k")
			if err != nil {
				return err
			}
			copy(v, "MUTATED!")
			v2, err := tx.Get("c", "k")
			if err != nil {
				return err
			}
			if string(v2) != "original" {
				t.Errorf("second Get in the Update after mutating the first's result = %q, want \"original\"", v2)
			}
			return nil
		})
		if v, _ := get(t, s, "c", "k"); v != "original" {
			t.Errorf("after mutating slices returned by Get, Get = %q, want \"original\"", v)
		}
	})
	t.Run("ScanResult", func(t *testing.T) {
		s := open(t, h)
		put(t, s, "c", "a", "original", "b", "original")
		mutate := func(k string, v []byte) (bool, error) {
			copy(v, "MUTATED!")
			return true, nil
		}
		view(t, s, func(r store.Reader) error { return r.Scan("c", "", nil, mutate) })
		update(t, s, func(tx store.Tx) error {
			if err := tx.Scan("c", "", &store.ScanOptions{Reverse: true}, mutate); err != nil {
				return err
			}
			v, err := tx.Get("c", "a")
			if err == nil && string(v) != "original" {
				t.Errorf("Get in the Update after mutating Scan's values = %q, want \"original\"", v)
			}
			return err
		})
		if diff := cmp.Diff(entries("a", "original", "b", "original"), dump(t, s, "c")); diff != "" {
			t.Errorf("after mutating values passed to Scan callbacks (-want +got):\n%s", diff)
		}
	})
	t.Run("ResultsOutliveTransaction", func(t *testing.T) {
		// Slices returned inside a transaction keep their contents after it
		// ends, even once the records are overwritten and deleted.
		s := open(t, h)
		put(t, s, "c", "a", "value-a", "b", "value-b")
		var fromView, fromUpdate []byte
		var scanned [][]byte
		view(t, s, func(r store.Reader) error {
			var err error
			fromView, err = r.Get("c", "a")
			return err
		})
		update(t, s, func(tx store.Tx) error {
			var err error
			fromUpdate, err = tx.Get("c", "b")
			if err != nil {
				return err
			}
			scanned = nil
			return tx.Scan("c", "", nil, func(k string, v []byte) (bool, error) {
				scanned = append(scanned, v)
				return true, nil
			})
		})
		// Churn: overwrite with longer and shorter values, then delete, so a
		// store handing out its own buffers would reuse or free them.
		for i := 0; i < 20; i++ {
			put(t, s, "c", "a", strings.Repeat("x", i*50), "b", strings.Repeat("y", 3), fmt.Sprintf("k%03d", i), "filler")
		}
		update(t, s, func(tx store.Tx) error {
			if err := tx.Delete("c", "a"); err != nil {
				return err
			}
			return tx.Delete("c", "b")
		})
		if string(fromView) != "value-a" || string(fromUpdate) != "value-b" {
			t.Errorf("Get results after the transactions = %q, %q; want \"value-a\", \"value-b\"", fromView, fromUpdate)
		}
		if len(scanned) != 2 || string(scanned[0]) != "value-a" || string(scanned[1]) != "value-b" {
			t.Errorf("Scan values kept after the transaction = %q, want [value-a value-b]", scanned)
		}
	})
}
