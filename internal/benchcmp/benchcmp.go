// Package benchcmp runs a benchmark next to its baseline in the same run and
// reports how the two compare, so figures measured on a busy or unknown
// machine still say something: the ratio holds where absolute times do not.
//
// Compare runs two sub-benchmarks, "baseline" then "candidate" (or the names
// given), and the candidate reports the metric "x-baseline": baseline ns/op
// divided by candidate ns/op. 1.0 means as fast as the baseline, 0.5 means
// twice as slow. Goals in this project are stated in that unit ("at least
// 0.8x raw bbolt").
package benchcmp

import "testing"

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
