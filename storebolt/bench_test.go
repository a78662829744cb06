package storebolt_test

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"runtime"
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
// The candidate reports "x-baseline" = raw ns/op / storebolt ns/op.

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

// runWriters runs b.N calls of op over benchWriters goroutines.
func runWriters(b *testing.B, op func() error) {
	b.SetParallelism((benchWriters + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkUpdate64 pits 64 goroutines of storebolt Updates against 64
// goroutines of raw bbolt db.Batch with MaxBatchSize 64, so that Batch
// commits as soon as all 64 are in rather than after its 10 ms timer.
func BenchmarkUpdate64(b *testing.B) {
	benchcmp.CompareNamed(b,
		"bbolt-Batch", func(b *testing.B) {
			db := openRawBolt(b)
			db.MaxBatchSize = benchWriters
			var keys benchKeys
			put := rawPut(&keys)
			runWriters(b, func() error { return db.Batch(put) })
		},
		"storebolt", func(b *testing.B) {
			s := openBench(b, &storebolt.Options{MaxBatchSize: benchWriters})
			commits := countCommits(s)
			var keys benchKeys
			put := storePut(&keys)
			ctx := context.Background()
			runWriters(b, func() error { return s.Update(ctx, put) })
			b.ReportMetric(float64(b.N)/float64(commits.Load()), "updates/commit")
		})
}

// BenchmarkUpdate1 pits one goroutine of storebolt Updates against raw
// bbolt db.Update: the cost of the writer hand-off, with no timer to wait.
func BenchmarkUpdate1(b *testing.B) {
	benchcmp.CompareNamed(b,
		"bbolt-Update", func(b *testing.B) {
			db := openRawBolt(b)
			var keys benchKeys
			put := rawPut(&keys)
			for b.Loop() {
				if err := db.Update(put); err != nil {
					b.Fatal(err)
				}
			}
		},
		"storebolt", func(b *testing.B) {
			s := openBench(b, nil)
			var keys benchKeys
			put := storePut(&keys)
			ctx := context.Background()
			for b.Loop() {
				if err := s.Update(ctx, put); err != nil {
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
