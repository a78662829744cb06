package benchcmp_test

import (
	"testing"
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

func TestCompareReportsRatio(t *testing.T) {
	var ratio float64
	testing.Benchmark(func(b *testing.B) {
		ratio = benchcmp.Compare(b,
			func(b *testing.B) {
				for b.Loop() {
					spin(20 * time.Microsecond)
				}
			},
			func(b *testing.B) {
				for b.Loop() {
					spin(80 * time.Microsecond)
				}
			})
	})
	if ratio < 0.1 || ratio > 0.5 {
		t.Errorf("ratio = %.2f, want about 0.25 for a candidate 4x slower", ratio)
	}
}

func TestInterleaveReportsRatio(t *testing.T) {
	var ratio float64
	testing.Benchmark(func(b *testing.B) {
		ratio = benchcmp.Interleave(b,
			func(n int) {
				for range n {
					spin(20 * time.Microsecond)
				}
			},
			func(n int) {
				for range n {
					spin(80 * time.Microsecond)
				}
			})
	})
	if ratio < 0.1 || ratio > 0.5 {
		t.Errorf("ratio = %.2f, want about 0.25 for a candidate 4x slower", ratio)
	}
}
