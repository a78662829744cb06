package index_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// benchFleet is one tenant's entries over storemem, shaped as
// controlplane's benchmark fleet: every 200th carries the term "d" (0.5%)
// and every other one the term "o", every 150th carries tag "a" (0.67%),
// and names are agent-000000, agent-000001, ..., so "agent-0001" matches
// 100 of 100k (0.1%). The counts are folded.
type benchFleet struct {
	st store.Store
	n  int
}

var (
	fleetsMu sync.Mutex
	fleets   = map[int]*benchFleet{}
)

// fleet returns the fleet of n entries, built once per process.
func fleet(b *testing.B, n int) *benchFleet {
	return buildFleet(b, n, true)
}

// recordsFleet returns the fleet of n entries with nothing folded: its
// gram index is a record per gram, place and entry, as earlier builds
// kept it (the lists below that read names only).
func recordsFleet(b *testing.B, n int) *benchFleet {
	return buildFleet(b, n, false)
}

func buildFleet(b *testing.B, n int, folded bool) *benchFleet {
	b.Helper()
	fleetsMu.Lock()
	defer fleetsMu.Unlock()
	id := n
	if !folded {
		id = -n
	}
	if f, ok := fleets[id]; ok {
		return f
	}
	f := &benchFleet{st: storemem.New(), n: n}
	const perUpdate = 1000
	for from := 0; from < n; from += perUpdate {
		update(b, f.st, func(tx store.Tx) error {
			for i := from; i < min(from+perUpdate, n); i++ {
				e := &entry{id: i, at: t0.Add(time.Duration(i) * time.Millisecond), name: fmt.Sprintf("agent-%06d", i), tags: "o"}
				if i%200 == 0 {
					e.tags = "d"
				}
				if i%150 == 0 {
					e.tags += "a"
				}
				if err := index.Put(tx, tenantA, nil, e.entry()); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if folded {
		fold(b, f.st, 1024)
	}
	fleets[id] = f
	return f
}

func (f *benchFleet) list(b *testing.B, x *index.Index, q *index.Query, want int) {
	if got := list(b, f.st, x, tenantA, q); len(got) != want {
		b.Fatalf("page of %d, want %d", len(got), want)
	}
}

// BenchmarkListPage times a page of 100 newest-first at 100k entries and
// reports its ratio to the same page at 1k.
func BenchmarkListPage(b *testing.B) {
	big, small := fleet(b, 100_000), fleet(b, 1_000)
	x := index.New(nil)
	q := &index.Query{Limit: 100}
	var tBig, tSmall time.Duration
	for b.Loop() {
		start := time.Now()
		small.list(b, x, q, 100)
		mid := time.Now()
		big.list(b, x, q, 100)
		tSmall += mid.Sub(start)
		tBig += time.Since(mid)
	}
	b.ReportMetric(float64(tBig.Nanoseconds())/float64(b.N), "ns/page@100k")
	b.ReportMetric(float64(tSmall.Nanoseconds())/float64(b.N), "ns/page@1k")
	b.ReportMetric(float64(tBig)/float64(tSmall), "ratio_100k/1k")
}

// BenchmarkListPageOffset50k times the page of 100 at offset 50,000 and
// reports its ratio to the page at offset 0 of the same fleet.
func BenchmarkListPageOffset50k(b *testing.B) {
	f := fleet(b, 100_000)
	x := index.New(nil)
	first, deep := &index.Query{Limit: 100}, &index.Query{Limit: 100, Offset: 50_000}
	var tFirst, tDeep time.Duration
	for b.Loop() {
		start := time.Now()
		f.list(b, x, first, 100)
		mid := time.Now()
		f.list(b, x, deep, 100)
		tFirst += mid.Sub(start)
		tDeep += time.Since(mid)
	}
	b.ReportMetric(float64(tDeep.Nanoseconds())/float64(b.N), "ns/page@50k")
	b.ReportMetric(float64(tDeep)/float64(tFirst), "ratio_offset50k/offset0")
}

// BenchmarkListFiltered times filtered pages at 100k entries, each
// matching under 1%.
func BenchmarkListFiltered(b *testing.B) {
	f := fleet(b, 100_000)
	x := index.New(nil)
	for _, tt := range []struct {
		name string
		q    index.Query
		want int
	}{
		{"term(0.5%)", index.Query{Terms: []string{term('d')}, Limit: 100}, 100},
		{"tag(0.67%)", index.Query{Terms: []string{term('a')}, Limit: 100}, 100},
		{"name(0.1%)", index.Query{Name: "AGENT-0001", Limit: 100}, 100},
		{"terms_merged(0.5%)", index.Query{Terms: []string{term('d'), term('x'), term('y')}, Limit: 100}, 100},
		{"keep(0.5%)", index.Query{Terms: []string{term('d')}, Keep: func([]byte) bool { return true }, Limit: 100}, 100},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				f.list(b, x, &tt.q, tt.want)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
		})
	}
}

// BenchmarkNameBlocks times name lists at 100k entries over the gram
// blocks against the same lists over a gram record per gram, place and
// entry (nothing folded), in alternating rounds: x-baseline is the
// records' time over the blocks'.
func BenchmarkNameBlocks(b *testing.B) {
	blocks, records := fleet(b, 100_000), recordsFleet(b, 100_000)
	x := index.New(nil)
	for _, tt := range []struct {
		name   string
		needle string
		want   int
	}{
		{"100-matches", "AGENT-0001", 100},
		{"no-match", "zzz", 0},
		{"no-match-common-grams", "0000000", 0},
		{"one-byte", "7", 100},
		{"deep", "agent-00", 100},
	} {
		b.Run(tt.name, func(b *testing.B) {
			q := &index.Query{Name: tt.needle, Limit: 100}
			if tt.name == "deep" {
				q.Offset = 5000
			}
			benchcmp.Interleave(b,
				func(n int) {
					for range n {
						records.list(b, x, q, tt.want)
					}
				},
				func(n int) {
					for range n {
						blocks.list(b, x, q, tt.want)
					}
				})
		})
	}
}
