package storepg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/store"
)

// scanKeys are keys whose byte order is easy to get wrong: NUL and 0xff
// bytes, invalid UTF-8, multi-byte UTF-8 (whose byte order is not every
// collation's order), keys longer than the index holds (2048 bytes) that
// share that much, a store.MaxKeyLen key of random bytes, and enough
// similar keys to fill several Scan pages.
func scanKeys() []string {
	rng := rand.New(rand.NewPCG(1, 2))
	randomBytes := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return string(b)
	}
	head := strings.Repeat("L", 2048)
	randomHead := randomBytes(2048)
	keys := []string{
		"a", "ab", "abc", "b", "B", "Z", "z", "é", "e\u0301", "日本", "日本語", "\u00ff", "\u0100",
		"\x00", "\x00\x00", "\x00a", "\x01", "\x7f", "\x80", "\xc3", "\xc3\xa8", "\xfe", "\xff",
		"\xff\x00", "\xff\xff", "\xff\xff\xff", "\xff\xffa",
		head[:2047], head, head + "\x00", head + "a", head + "b", head + "b\xff", head + "\xff",
		head + strings.Repeat("z", 5000),
		randomHead, randomHead + "\x00", randomHead + "a" + randomBytes(30000), randomHead + "b",
		randomBytes(store.MaxKeyLen), randomBytes(store.MaxKeyLen),
	}
	for i := range 600 {
		keys = append(keys, fmt.Sprintf("k%04d", i))
	}
	return keys
}

// scanModel is what Scan must return: the keys with prefix, in order, from
// start, at most limit of them (all when limit is 0).
func scanModel(sorted []string, prefix string, opts store.ScanOptions, limit int) []string {
	var out []string
	for _, k := range sorted {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if opts.Start != "" && (!opts.Reverse && k < opts.Start || opts.Reverse && k > opts.Start) {
			continue
		}
		out = append(out, k)
	}
	if opts.Reverse {
		slices.Reverse(out)
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// valueOf is the value stored under key in the Scan tests.
func valueOf(collection, key string) string {
	return fmt.Sprintf("%s/%d/%x", collection, len(key), key[:min(len(key), 16)])
}

// TestScanByteOrder checks Get and Scan over keys whose byte order trips
// collations and long-key indexes, with every mix of prefix, start,
// direction and early stop, against a sorted slice. The keys live in three
// collections, one of them named with store.MaxKeyLen bytes, that must not
// leak into each other.
func TestScanByteOrder(t *testing.T) {
	s := openStore(t, nil)
	keys := scanKeys()
	collections := []string{"c", "c\x00", strings.Repeat("\xfe", store.MaxKeyLen)}
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for ci, c := range collections {
			// Each collection holds a different subset, so a leak shows.
			for i, k := range keys {
				if i%len(collections) == ci || i < 50 {
					if err := tx.Create(c, k, []byte(valueOf(c, k))); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}

	prefixes := []string{"", "a", "k0", "k05", "k0599", "\x00", "\xff", "\xff\xff", "\xc3", "日本", "\xff\xff\xff\xff", "nothing",
		strings.Repeat("L", 100), strings.Repeat("L", 2048), strings.Repeat("L", 2048) + "b"}
	starts := []string{"", "a", "k0300", "k03000", "\x00", "\x80", "\xff", "\xff\xff\xff", "zzzz", "",
		strings.Repeat("L", 2048), strings.Repeat("L", 2048) + "a", strings.Repeat("L", 2049)}
	limits := []int{0, 1, 16, 17, 100}

	for ci, c := range collections {
		var sorted []string
		for i, k := range keys {
			if i%len(collections) == ci || i < 50 {
				sorted = append(sorted, k)
			}
		}
		slices.Sort(sorted)
		err := s.View(context.Background(), func(r store.Reader) error {
			for _, k := range sorted {
				v, err := r.Get(c, k)
				if err != nil {
					return fmt.Errorf("Get(collection %d, key of %d bytes): %w", ci, len(k), err)
				}
				if string(v) != valueOf(c, k) {
					t.Errorf("Get(collection %d, key of %d bytes) = %q; want %q", ci, len(k), v, valueOf(c, k))
				}
			}
			for _, prefix := range prefixes {
				for _, start := range starts {
					for _, reverse := range []bool{false, true} {
						for _, limit := range limits {
							opts := store.ScanOptions{Reverse: reverse, Start: start}
							var got []string
							err := r.Scan(c, prefix, &opts, func(k string, v []byte) (bool, error) {
								if string(v) != valueOf(c, k) {
									t.Errorf("Scan gave key of %d bytes the value %q; want %q", len(k), v, valueOf(c, k))
								}
								got = append(got, k)
								return limit == 0 || len(got) < limit, nil
							})
							if err != nil {
								return err
							}
							want := scanModel(sorted, prefix, opts, limit)
							if diff := cmp.Diff(want, got); diff != "" {
								t.Errorf("collection %d, Scan(prefix %.10q (%d bytes), start %.10q (%d bytes), reverse %v), stopping after %d (-want +got):\n%.2000s",
									ci, prefix, len(prefix), start, len(start), reverse, limit, diff)
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("View: %v", err)
		}
	}
}

// TestScanCallbackUsesTransaction checks that a Scan callback may read and
// write through the same transaction while the scan crosses several pages.
func TestScanCallbackUsesTransaction(t *testing.T) {
	s := openStore(t, nil)
	const n = 300
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			if err := tx.Put("src", fmt.Sprintf("%03d", i), []byte(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	var copied []string
	err = s.Update(context.Background(), func(tx store.Tx) error {
		copied = nil
		return tx.Scan("src", "", nil, func(k string, v []byte) (bool, error) {
			again, err := tx.Get("src", k)
			if err != nil {
				return false, err
			}
			if string(again) != string(v) {
				return false, fmt.Errorf("Get(%q) = %q inside the scan; the scan gave %q", k, again, v)
			}
			copied = append(copied, k)
			return true, tx.Put("dst", k, v)
		})
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if len(copied) != n {
		t.Errorf("the scan visited %d keys; want %d", len(copied), n)
	}
	if diff := cmp.Diff(copied, collectionKeys(t, s, "dst")); diff != "" {
		t.Errorf("keys of dst (-want +got):\n%s", diff)
	}
}
