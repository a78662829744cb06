// Package benchcmp runs a benchmark next to its baseline in the same run and
// reports how the two compare, so figures measured on a busy or unknown
// machine still say something: the ratio holds where absolute times do not.
//
// Compare runs two sub-benchmarks, "baseline" then "candidate" (or the names
// given), and the candidate reports the metric "x-baseline": baseline ns/op
// divided by candidate ns/op. 1.0 means as fast as the baseline, 0.5 means
// twice as slow. Goals in this project are stated in that unit ("at least
// 0.8x raw bbolt").
//
// Interleave is the sturdier form for a shared machine whose load drifts
// during a run: it runs baseline and candidate in alternating rounds inside
// one benchmark, so the drift weighs on both alike.
package benchcmp

import (
	"testing"
	"time"
)

// Unit is the name of the metric Compare reports.
const Unit = "x-baseline"

// Compare runs baseline and candidate as sub-benchmarks of b, in that order,
// and reports candidate's speed relative to baseline as the metric Unit on the
// candidate. Both functions are ordinary benchmark bodies (use b.Loop or
// b.N). It returns the ratio, or 0 when a sub-benchmark was filtered out by
// -bench or failed.
func Compare(b *testing.B, baseline, candidate func(b *testing.B)) float64 {
	return CompareNamed(b, "baseline", baseline, "candidate", candidate)
}

// CompareNamed is Compare with names for the two sub-benchmarks.
func CompareNamed(b *testing.B, baseName string, baseline func(b *testing.B), candName string, candidate func(b *testing.B)) float64 {
	b.Helper()
	var base, ratio float64
	b.Run(baseName, func(b *testing.B) {
		baseline(b)
		base = nsPerOp(b)
	})
	b.Run(candName, func(b *testing.B) {
		candidate(b)
		if ns := nsPerOp(b); base > 0 && ns > 0 {
			ratio = base / ns
			b.ReportMetric(ratio, Unit)
		}
	})
	return ratio
}

func nsPerOp(b *testing.B) float64 {
	if b.N == 0 {
		return 0
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// Interleave runs b.N operations of baseline and b.N of candidate in ten
// alternating rounds (each side first in turn), so that load drifting on a
// shared machine weighs on both alike. Each function is called with the
// number of operations to do in that round. It reports the candidate's
// ns/op as the benchmark's ns/op, the baseline's as "baseline-ns/op", and
// Unit (baseline time over candidate time), and returns that ratio.
func Interleave(b *testing.B, baseline, candidate func(n int)) float64 {
	b.Helper()
	const rounds = 10
	var tb, tc time.Duration
	timed := func(d *time.Duration, f func(int), n int) {
		start := time.Now()
		f(n)
		*d += time.Since(start)
	}
	b.ResetTimer()
	for r := range rounds {
		n := b.N / rounds
		if r < b.N%rounds {
			n++
		}
		if n == 0 {
			continue
		}
		if r%2 == 0 {
			timed(&tb, baseline, n)
			timed(&tc, candidate, n)
		} else {
			timed(&tc, candidate, n)
			timed(&tb, baseline, n)
		}
	}
	b.StopTimer()
	if tc <= 0 {
		return 0
	}
	ratio := float64(tb) / float64(tc)
	b.ReportMetric(float64(tc.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(ratio, Unit)
	return ratio
}
