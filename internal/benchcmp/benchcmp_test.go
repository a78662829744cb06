package benchcmp_test

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/internal/benchcmp"
)

// spin busy-waits for d: time.Sleep has about 1 ms granularity on Linux
// hosts, too coarse for microsecond bodies.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// A candidate that does twice the work of its baseline reports about 0.5.
func BenchmarkCompare(b *testing.B) {
	benchcmp.Compare(b,
		func(b *testing.B) {
			for b.Loop() {
				spin(time.Microsecond)
			}
		},
		func(b *testing.B) {
			for b.Loop() {
				spin(2 * time.Microsecond)
			}
		})
}

// The ratio tests run on synctest's fake clock, where a time.Sleep takes
// exactly its duration and the benchmark's own timing reads the same
// clock, so the ratio is exact however loaded the machine is (spinning on
// the wall clock, as the benchmarks above do, is not: a preempted spin
// takes longer, on either side).

func TestCompareReportsRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ratio float64
		testing.Benchmark(func(b *testing.B) {
			ratio = benchcmp.Compare(b,
				func(b *testing.B) {
					for b.Loop() {
						time.Sleep(20 * time.Microsecond)
					}
				},
				func(b *testing.B) {
					for b.Loop() {
						time.Sleep(80 * time.Microsecond)
					}
				})
		})
		if math.Abs(ratio-0.25) > 0.01 {
			t.Errorf("ratio = %.3f, want 0.25 for a candidate 4x slower", ratio)
		}
	})
}

func TestInterleaveReportsRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ratio float64
		testing.Benchmark(func(b *testing.B) {
			ratio = benchcmp.Interleave(b,
				func(n int) {
					for range n {
						time.Sleep(20 * time.Microsecond)
					}
				},
				func(n int) {
					for range n {
						time.Sleep(80 * time.Microsecond)
					}
				})
		})
		if math.Abs(ratio-0.25) > 0.01 {
			t.Errorf("ratio = %.3f, want 0.25 for a candidate 4x slower", ratio)
		}
	})
}
