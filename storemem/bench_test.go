package storemem_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/btree"

	"github.com/deployplane/deployplane/internal/benchcmp"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// The benchmarks compare storemem with a baseline measured in the same run: a
// bare google/btree behind a sync.RWMutex, which is the least an ordered,
// concurrency-safe in-memory map can cost. The storemem sub-benchmark reports
// benchcmp's "x-baseline": baseline ns/op over storemem ns/op.

const benchKeys = 100_000

var benchKeyList = func() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant/%08d", i)
	}
	return keys
}()

func benchKey(i int) string { return benchKeyList[i] }

var benchValue = make([]byte, 512)

func loadedStore(b *testing.B) *storemem.Store {
	b.Helper()
	st := storemem.New()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for i := range benchKeys {
			if err := tx.Put("d", benchKey(i), benchValue); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

type kv struct {
	k string
	v []byte
}

type baseline struct {
	mu sync.RWMutex
	t  *btree.BTreeG[kv]
}

func loadedBaseline() *baseline {
	bl := &baseline{t: btree.NewG(32, func(a, b kv) bool { return a.k < b.k })}
	for i := range benchKeys {
		bl.t.ReplaceOrInsert(kv{benchKey(i), append([]byte(nil), benchValue...)})
	}
	return bl
}

func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	st, bl := loadedStore(b), loadedBaseline()
	benchcmp.CompareNamed(b, "baseline", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			bl.mu.RLock()
			it, _ := bl.t.Get(kv{k: benchKey(i % benchKeys)})
			_ = append([]byte(nil), it.v...)
			bl.mu.RUnlock()
		}
	}, "storemem", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			err := st.View(ctx, func(r store.Reader) error {
				_, err := r.Get("d", benchKey(i%benchKeys))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	st, bl := loadedStore(b), loadedBaseline()
	benchcmp.CompareNamed(b, "baseline", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			bl.mu.Lock()
			bl.t.ReplaceOrInsert(kv{benchKey(i % benchKeys), append([]byte(nil), benchValue...)})
			bl.mu.Unlock()
		}
	}, "storemem", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			err := st.Update(ctx, func(tx store.Tx) error {
				return tx.Put("d", benchKey(i%benchKeys), benchValue)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScanPage reads a page of 100 keys, newest first, from the middle
// of 100k keys.
func BenchmarkScanPage(b *testing.B) {
	ctx := context.Background()
	st, bl := loadedStore(b), loadedBaseline()
	const page = 100
	benchcmp.CompareNamed(b, "baseline", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			n := 0
			bl.mu.RLock()
			bl.t.DescendLessOrEqual(kv{k: benchKey((i * 7919) % benchKeys)}, func(it kv) bool {
				_ = append([]byte(nil), it.v...)
				n++
				return n < page
			})
			bl.mu.RUnlock()
		}
	}, "storemem", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			n := 0
			err := st.View(ctx, func(r store.Reader) error {
				return r.Scan("d", "tenant/", &store.ScanOptions{Reverse: true, Start: benchKey((i * 7919) % benchKeys)},
					func(string, []byte) (bool, error) {
						n++
						return n < page, nil
					})
			})
			if err != nil {
				b.Fatal(err)
			}
			if n != page && (i*7919)%benchKeys >= page {
				b.Fatalf("scanned %d keys, want %d", n, page)
			}
		}
	})
}
