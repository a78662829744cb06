package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/deployplane/deployplane/store"
	"github.com/google/go-cmp/cmp"
)

// scanKeys are stored by the Scan checks: keys that are prefixes of each
// other, bytes above 0x7f (which sort after ASCII), a NUL byte, and keys just
// outside the prefixes the checks use ("a", "ab").
var scanKeys = []string{
	"a", "a\x00", "a\x7f", "a\x80", "a\xff", "aa", "ab", "ab\x00", "abc", "abd", "ac",
	"b", "\x00", "\x7f", "\x80", "\x80\x00", "\xff", "\xff\xff", "A", "Z", "`", "{",
}

// sortedScanKeys is scanKeys in byte order, computed with the standard
// library's string comparison, which is byte-wise.
func sortedScanKeys() []string {
	keys := slices.Clone(scanKeys)
	slices.Sort(keys)
	return keys
}

// scanAll runs one Scan in a View and returns the keys it visits. The values
// are checked against the key (each record's value is "v"+key).
func scanAll(t *testing.T, s store.Store, prefix string, opts *store.ScanOptions) []string {
	t.Helper()
	var keys []string
	view(t, s, func(r store.Reader) error {
		keys = []string{} // reset: the closure may run more than once
		return r.Scan("c", prefix, opts, func(k string, v []byte) (bool, error) {
			if string(v) != "v"+k {
				t.Errorf("Scan(%q, %+v) gave key %q the value %q, want %q", prefix, opts, k, v, "v"+k)
			}
			keys = append(keys, k)
			return true, nil
		})
	})
	return keys
}

// expectScan is the reference for Scan over sorted keys, written from the
// contract.
func expectScan(sorted []string, prefix string, opts store.ScanOptions) []string {
	out := []string{}
	for _, k := range sorted {
		if len(k) < len(prefix) || k[:len(prefix)] != prefix {
			continue
		}
		if opts.Start != "" && !opts.Reverse && k < opts.Start {
			continue
		}
		if opts.Start != "" && opts.Reverse && k > opts.Start {
			continue
		}
		out = append(out, k)
	}
	if opts.Reverse {
		slices.Reverse(out)
	}
	return out
}

func openScanStore(t *testing.T, h Harness) store.Store {
	s := open(t, h)
	update(t, s, func(tx store.Tx) error {
		for _, k := range scanKeys {
			if err := tx.Put("c", k, []byte("v"+k)); err != nil {
				return err
			}
		}
		// Neighbouring collections, which a scan of "c" must not reach.
		if err := tx.Put("b", "a", []byte("other")); err != nil {
			return err
		}
		return tx.Put("d", "a", []byte("other"))
	})
	return s
}

func testScan(t *testing.T, h Harness) {
	sorted := sortedScanKeys()
	t.Run("ByteOrder", func(t *testing.T) {
		s := openScanStore(t, h)
		if diff := cmp.Diff(sorted, scanAll(t, s, "", nil)); diff != "" {
			t.Errorf("ascending Scan, nil options (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(sorted, scanAll(t, s, "", &store.ScanOptions{})); diff != "" {
			t.Errorf("ascending Scan, zero options (-want +got):\n%s", diff)
		}
		want := slices.Clone(sorted)
		slices.Reverse(want)
		if diff := cmp.Diff(want, scanAll(t, s, "", &store.ScanOptions{Reverse: true})); diff != "" {
			t.Errorf("descending Scan (-want +got):\n%s", diff)
		}
	})
	t.Run("Prefix", func(t *testing.T) {
		s := openScanStore(t, h)
		for _, prefix := range []string{"", "a", "ab", "abc", "a\x80", "\x80", "\xff", "\x00", "aaa", "zz"} {
			for _, reverse := range []bool{false, true} {
				opts := store.ScanOptions{Reverse: reverse}
				if diff := cmp.Diff(expectScan(sorted, prefix, opts), scanAll(t, s, prefix, &opts)); diff != "" {
					t.Errorf("Scan(prefix %q, reverse %v) (-want +got):\n%s", prefix, reverse, diff)
				}
			}
		}
	})
	starts := []string{
		"\x00\x00", // before every key
		"a",        // equal to the prefix
		"a\x00",    // on a key
		"a\x01",    // between keys
		"a\x90",    // between keys, above 0x7f
		"ab",       // on a key that is a prefix of others
		"ab\x01",   // between keys
		"abz",      // after the last key of prefix "ab"
		"aa",       // on a key
		"b",        // after prefix "a", on a key
		"\xff\xff\xff",
		"A",  // below prefix "a"
		"`",  // just below "a"
		"az", // above every key of prefix "a"
	}
	for _, dir := range []struct {
		name    string
		reverse bool
	}{{"Start", false}, {"StartReverse", true}} {
		t.Run(dir.name, func(t *testing.T) {
			s := openScanStore(t, h)
			for _, prefix := range []string{"", "a", "ab"} {
				for _, start := range starts {
					opts := store.ScanOptions{Reverse: dir.reverse, Start: start}
					if diff := cmp.Diff(expectScan(sorted, prefix, opts), scanAll(t, s, prefix, &opts)); diff != "" {
						t.Errorf("Scan(prefix %q, start %q, reverse %v) (-want +got):\n%s", prefix, start, dir.reverse, diff)
					}
				}
			}
		})
	}
	for _, dir := range []struct {
		name    string
		reverse bool
	}{{"StopEarly", false}, {"StopEarlyReverse", true}} {
		t.Run(dir.name, func(t *testing.T) {
			s := openScanStore(t, h)
			for _, c := range []struct {
				prefix, start string
				limit         int
			}{
				{"", "", 1}, {"", "", 3}, {"a", "", 2}, {"a", "a\x80", 2}, {"ab", "", 1}, {"", "b", 4},
				{"ab", "", 100}, // more than the prefix holds: every key, once
			} {
				opts := store.ScanOptions{Reverse: dir.reverse, Start: c.start}
				want := expectScan(sorted, c.prefix, opts)
				if len(want) > c.limit {
					want = want[:c.limit]
				}
				var got []string
				view(t, s, func(r store.Reader) error {
					got = []string{}
					return r.Scan("c", c.prefix, &opts, func(k string, v []byte) (bool, error) {
						got = append(got, k)
						return len(got) < c.limit, nil
					})
				})
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Scan(prefix %q, start %q, reverse %v) stopping after %d (-want +got):\n%s", c.prefix, c.start, dir.reverse, c.limit, diff)
				}
			}
		})
	}
	t.Run("CallbackError", func(t *testing.T) {
		s := openScanStore(t, h)
		stop := &customError{"stop here"}
		for _, reverse := range []bool{false, true} {
			var (
				scanErr error
				calls   int
			)
			err := s.View(t.Context(), func(r store.Reader) error {
				calls = 0
				scanErr = r.Scan("c", "", &store.ScanOptions{Reverse: reverse}, func(k string, v []byte) (bool, error) {
					calls++
					if calls == 3 {
						return true, stop // more=true: the error alone must stop the scan
					}
					return true, nil
				})
				return scanErr
			})
			if scanErr != stop {
				t.Errorf("Scan (reverse %v) returned %v, want the callback's error unchanged", reverse, scanErr)
			}
			if err != stop {
				t.Errorf("View returned %v, want the callback's error unchanged", err)
			}
			if calls != 3 {
				t.Errorf("callback ran %d times after returning an error on call 3 (reverse %v), want 3", calls, reverse)
			}
			// The same inside an Update, which rolls back.
			err = s.Update(t.Context(), func(tx store.Tx) error {
				if err := tx.Put("c", "written", []byte("x")); err != nil {
					return err
				}
				return tx.Scan("c", "", &store.ScanOptions{Reverse: reverse}, func(string, []byte) (bool, error) {
					return false, stop
				})
			})
			if err != stop || !errors.Is(err, stop) {
				t.Errorf("Update returned %v, want the callback's error unchanged", err)
			}
			if _, ok := get(t, s, "c", "written"); ok {
				t.Errorf("a write survived an Update that failed with the Scan callback's error")
			}
		}
	})
}

// customError is an error type the checks return from closures and
// callbacks, to check that stores return errors unchanged (errors.As).
type customError struct{ msg string }

func (e *customError) Error() string { return e.msg }
