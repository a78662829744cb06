package storebolt_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
)

// The write benchmarks compare storebolt with raw bbolt doing the same
// writes in the same run (see internal/benchcmp): each op puts one 512-byte
// record under a fresh, time-ordered 16-byte key into one bucket, durably.
// Both run in the same benchmark, in alternating rounds (see benchcmp.Interleave),
// and the benchmark reports "x-baseline" = raw time / storebolt time.

const benchWriters = 64

var benchRecord = make([]byte, 512)

// benchKeys hands out increasing keys, like UUIDv7s.
type benchKeys struct{ n atomic.Uint64 }

func (k *benchKeys) next() []byte {
	var key [16]byte
	binary.BigEndian.PutUint64(key[:8], uint64(time.Now().UnixNano()))
	binary.BigEndian.PutUint64(key[8:], k.n.Add(1))
	return key[:]
}

func openRawBolt(b *testing.B) *bbolt.DB {
	b.Helper()
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket([]byte("c"))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return db
}

func rawPut(keys *benchKeys) func(tx *bbolt.Tx) error {
	return func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte("c"))
		bk.FillPercent = storebolt.DefaultFillPercent // the same page layout as storebolt
		return bk.Put(keys.next(), append([]byte(nil), benchRecord...))
	}
}

func storePut(keys *benchKeys) func(tx store.Tx) error {
	return func(tx store.Tx) error {
		return tx.Put("c", string(keys.next()), benchRecord)
	}
}

// writers runs n calls of op spread over benchWriters goroutines.
func writers(b *testing.B, n int, op func() error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkUpdate64 pits 64 goroutines of storebolt Updates against 64
// goroutines of raw bbolt db.Batch with MaxBatchSize 64, so that Batch
// commits as soon as all 64 are in rather than after its 10 ms timer.
func BenchmarkUpdate64(b *testing.B) {
	db := openRawBolt(b)
	db.MaxBatchSize = benchWriters
	var rawKeys benchKeys
	rawOp := rawPut(&rawKeys)

	s := openBench(b, &storebolt.Options{MaxBatchSize: benchWriters})
	commits := countCommits(s)
	var keys benchKeys
	op := storePut(&keys)
	ctx := context.Background()

	benchcmp.Interleave(b,
		func(n int) { writers(b, n, func() error { return db.Batch(rawOp) }) },
		func(n int) { writers(b, n, func() error { return s.Update(ctx, op) }) })
	b.ReportMetric(float64(b.N)/float64(commits.Load()), "updates/commit")
}

// BenchmarkUpdate1 pits one goroutine of storebolt Updates against raw
// bbolt db.Update: the cost of the writer hand-off, with no timer to wait.
func BenchmarkUpdate1(b *testing.B) {
	db := openRawBolt(b)
	var rawKeys benchKeys
	rawOp := rawPut(&rawKeys)

	s := openBench(b, nil)
	var keys benchKeys
	op := storePut(&keys)
	ctx := context.Background()

	benchcmp.Interleave(b,
		func(n int) {
			for range n {
				if err := db.Update(rawOp); err != nil {
					b.Fatal(err)
				}
			}
		},
		func(n int) {
			for range n {
				if err := s.Update(ctx, op); err != nil {
					b.Fatal(err)
				}
			}
		})
}

func openBench(b *testing.B, opts *storebolt.Options) *storebolt.Store {
	b.Helper()
	s, err := storebolt.Open(filepath.Join(b.TempDir(), "store.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkOpenNew creates, opens and closes a new file, as tests that open
// a store per case do, against raw bbolt doing the same.
func BenchmarkOpenNew(b *testing.B) {
	dir := b.TempDir()
	var n int
	path := func() string {
		n++
		return filepath.Join(dir, fmt.Sprintf("%d.db", n))
	}
	benchcmp.CompareNamed(b,
		"bbolt-Open", func(b *testing.B) {
			for b.Loop() {
				db, err := bbolt.Open(path(), 0o600, &bbolt.Options{Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
		},
		"storebolt-Open", func(b *testing.B) {
			for b.Loop() {
				s, err := storebolt.Open(path(), nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
}
