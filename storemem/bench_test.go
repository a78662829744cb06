package storemem_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"syscall"
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

// benchRecord is the value of key i in the Records benchmarks: like a
// deployment's stored JSON, with its name, times, ids and 88 bytes of
// sealed secret its own, as the controlplane writes them (storemem
// encodes such values against a neighbour's, codec.go).
func benchRecord(i int) []byte {
	secret := make([]byte, 66)
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	for j := range secret {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		secret[j] = byte(x)
	}
	return fmt.Appendf(nil, `{"v":1,"n":"agent-%07d","s":"external_docker","rs":{"min_scale":1,"max_scale":3},`+
		`"rc":{"img":"registry.example.com/agent-%d:1.0.0"},"sx":"%s","c":%d,"u":%d,"st":"AWAITING_DATABASE","lr":"01a20dd8-b3e6-7a8b-a166-%012x"}`,
		i, i%50, base64.StdEncoding.EncodeToString(secret), 1795528635366686+int64(i)*1733, 1795528635366686+int64(i)*1733, x>>16)
}

var benchRecords = func() [][]byte {
	vs := make([][]byte, benchKeys)
	for i := range vs {
		vs[i] = benchRecord(i)
	}
	return vs
}()

// zeros is the value of every key in the first benchmarks.
func zeros(int) []byte { return benchValue }

// records is benchRecord, from a table.
func records(i int) []byte { return benchRecords[i] }

func loadedStore(b *testing.B) *storemem.Store { return loadedStoreOf(b, zeros) }

func loadedStoreOf(b *testing.B, value func(int) []byte) *storemem.Store {
	b.Helper()
	st := storemem.New()
	err := st.Update(context.Background(), func(tx store.Tx) error {
		for i := range benchKeys {
			if err := tx.Put("d", benchKey(i), value(i)); err != nil {
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

func loadedBaseline() *baseline { return loadedBaselineOf(zeros) }

func loadedBaselineOf(value func(int) []byte) *baseline {
	bl := &baseline{t: btree.NewG(32, func(a, b kv) bool { return a.k < b.k })}
	for i := range benchKeys {
		bl.t.ReplaceOrInsert(kv{benchKey(i), append([]byte(nil), value(i)...)})
	}
	return bl
}

func BenchmarkGet(b *testing.B) { benchGet(b, zeros) }

// BenchmarkGetRecords is BenchmarkGet over values like a deployment's
// stored JSON (benchRecord) instead of zeros.
func BenchmarkGetRecords(b *testing.B) { benchGet(b, records) }

func benchGet(b *testing.B, value func(int) []byte) {
	ctx := context.Background()
	st, bl := loadedStoreOf(b, value), loadedBaselineOf(value)
	benchcmp.CompareNamed(b, "baseline", func(b *testing.B) {
		timed(b, func(i int) {
			bl.mu.RLock()
			it, _ := bl.t.Get(kv{k: benchKey(i % benchKeys)})
			_ = append([]byte(nil), it.v...)
			bl.mu.RUnlock()
		})
	}, "storemem", func(b *testing.B) {
		timed(b, func(i int) {
			err := st.View(ctx, func(r store.Reader) error {
				_, err := r.Get("d", benchKey(i%benchKeys))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}

func BenchmarkPut(b *testing.B) {
	ctx := context.Background()
	st, bl := loadedStore(b), loadedBaseline()
	benchcmp.CompareNamed(b, "baseline", func(b *testing.B) {
		timed(b, func(i int) {
			bl.mu.Lock()
			bl.t.ReplaceOrInsert(kv{benchKey(i % benchKeys), append([]byte(nil), benchValue...)})
			bl.mu.Unlock()
		})
	}, "storemem", func(b *testing.B) {
		timed(b, func(i int) {
			err := st.Update(ctx, func(tx store.Tx) error {
				return tx.Put("d", benchKey(i%benchKeys), benchValue)
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkScanPage reads a page of 100 keys, newest first, from the middle
// of 100k keys.
func BenchmarkScanPage(b *testing.B) { benchScanPage(b, zeros) }

// BenchmarkScanPageRecords is BenchmarkScanPage over values like a
// deployment's stored JSON (benchRecord).
func BenchmarkScanPageRecords(b *testing.B) { benchScanPage(b, records) }

func benchScanPage(b *testing.B, value func(int) []byte) {
	ctx := context.Background()
	st, bl := loadedStoreOf(b, value), loadedBaselineOf(value)
	const page = 100
	benchcmp.CompareNamed(b, "baseline", func(b *testing.B) {
		timed(b, func(i int) {
			n := 0
			bl.mu.RLock()
			bl.t.DescendLessOrEqual(kv{k: benchKey((i * 7919) % benchKeys)}, func(it kv) bool {
				_ = append([]byte(nil), it.v...)
				n++
				return n < page
			})
			bl.mu.RUnlock()
		})
	}, "storemem", func(b *testing.B) {
		timed(b, func(i int) {
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
		})
	})
}

// timed runs body b.N times and reports cpu-ns/op: the process's CPU time
// (user and system, garbage collection included) per call, which other
// processes on a loaded machine change less than the wall time.
func timed(b *testing.B, body func(i int)) {
	cpu := processCPU()
	for i := 0; b.Loop(); i++ {
		body(i)
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
