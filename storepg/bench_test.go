package storepg_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storepg"
)

// The benchmarks measure View(Get) and Update(Get, Put), one goroutine at a
// time and 64 at once, and report each against the baseline measured in the
// same run: a bare "SELECT 1" round trip on a pool of the same size, at the
// same parallelism. "x-roundtrip" is how many such round trips an operation
// costs; serially a View(Get) needs three (BEGIN, SELECT, COMMIT) and an
// Update(Get, Put) four, the COMMIT waiting for the WAL flush.

// benchKeys is how many records the benchmarks read and write.
const benchKeys = 1024

// benchConns is the pool size of the parallel benchmarks.
const benchConns = 16

// benchStore opens a Store over a new schema holding benchKeys records.
func benchStore(b *testing.B, maxConns int32) *storepg.Store {
	b.Helper()
	s := openStore(b, &storepg.Options{MaxConns: maxConns})
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for i := range benchKeys {
			if err := tx.Put("bench", benchKey(i), []byte("0123456789abcdef0123456789abcdef")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatalf("Update: %v", err)
	}
	return s
}

func benchKey(i int) string { return fmt.Sprintf("tenant-0042/deployment/%08d", i%benchKeys) }

// parallelism is the b.SetParallelism argument that makes RunParallel use
// goroutines goroutines.
func parallelism(goroutines int) int { return max(1, goroutines/runtime.GOMAXPROCS(0)) }

// run calls op b.N times from goroutines goroutines (1 for a plain loop),
// each with its own worker number, and fails b if any call fails.
func run(b *testing.B, goroutines int, op func(worker int) error) {
	b.Helper()
	if goroutines == 1 {
		for b.Loop() {
			if err := op(0); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var workers atomic.Int64
	var failed atomic.Value
	b.SetParallelism(parallelism(goroutines))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		worker := int(workers.Add(1))
		for pb.Next() {
			if err := op(worker); err != nil {
				failed.Store(err)
			}
		}
	})
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// nsPerOp is b's time per operation so far.
func nsPerOp(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

// benchmark runs op serially (a pool of 4 connections) and from 64
// goroutines (a pool of benchConns), each time after the baseline: bare
// round trips over a pool of the same size at the same parallelism. op gets
// a number unique to its goroutine, for picking keys.
func benchmark(b *testing.B, op func(s *storepg.Store, worker int) error) {
	modes := []struct {
		name       string
		goroutines int
		conns      int32
	}{{"serial", 1, 4}, {"parallel64", 64, benchConns}}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			var base float64
			b.Run("roundtrip", func(b *testing.B) {
				cfg, err := pgxpool.ParseConfig(testDSN(b))
				if err != nil {
					b.Fatal(err)
				}
				cfg.MaxConns = m.conns
				pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer pool.Close()
				run(b, m.goroutines, func(int) error {
					var one int
					return pool.QueryRow(context.Background(), "SELECT 1").Scan(&one)
				})
				base = nsPerOp(b)
			})
			b.Run("storepg", func(b *testing.B) {
				if base == 0 {
					b.Skip("no baseline: the roundtrip benchmark did not run (-bench must match it)")
				}
				s := benchStore(b, m.conns)
				retries := s.Retries()
				run(b, m.goroutines, func(worker int) error { return op(s, worker) })
				b.ReportMetric(nsPerOp(b)/base, "x-roundtrip")
				b.ReportMetric(float64(s.Retries()-retries)/float64(b.N), "retries/op")
			})
		})
	}
}

// BenchmarkGet reads one record in a View.
func BenchmarkGet(b *testing.B) {
	var n atomic.Int64
	benchmark(b, func(s *storepg.Store, _ int) error {
		key := benchKey(int(n.Add(1)) * 7919)
		return s.View(context.Background(), func(r store.Reader) error {
			_, err := r.Get("bench", key)
			return err
		})
	})
}

// BenchmarkUpdate reads and rewrites one record in an Update; each
// goroutine has its own record, so the parallel runs conflict only where
// PostgreSQL's predicate locks are coarser than a row.
func BenchmarkUpdate(b *testing.B) {
	benchmark(b, func(s *storepg.Store, worker int) error {
		key := benchKey(worker)
		return s.Update(context.Background(), func(tx store.Tx) error {
			v, err := tx.Get("bench", key)
			if err != nil {
				return err
			}
			v[0]++
			return tx.Put("bench", key, v)
		})
	})
}

// BenchmarkScanEarlyStop reads the first 10 records of a 100-record
// collection (the baseline) and of a 10,000-record one, from a Start in the
// middle, in a View. A Scan that stops early must cost what it read, not
// what the collection holds: "x-small" should stay near 1.
func BenchmarkScanEarlyStop(b *testing.B) {
	var base float64
	for _, size := range []int{100, 10_000} {
		name := map[int]string{100: "small", 10_000: "large"}[size]
		b.Run(name, func(b *testing.B) {
			s := openStore(b, nil)
			err := s.Update(context.Background(), func(tx store.Tx) error {
				for i := range size {
					if err := tx.Put("scan", fmt.Sprintf("%08d", i), []byte("0123456789abcdef")); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatalf("Update: %v", err)
			}
			opts := &store.ScanOptions{Start: fmt.Sprintf("%08d", size/2)}
			run(b, 1, func(int) error {
				return s.View(context.Background(), func(r store.Reader) error {
					n := 0
					return r.Scan("scan", "", opts, func(string, []byte) (bool, error) {
						n++
						return n < 10, nil
					})
				})
			})
			if size == 100 {
				base = nsPerOp(b)
			} else if base != 0 {
				b.ReportMetric(nsPerOp(b)/base, "x-small")
			}
		})
	}
}
