package storebolt_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storebolt"
)

// The scale benchmarks list one tenant of 100k deployments, and of 1M with
// -scale1m, over storebolt: name_contains, a deep page and every other
// filter, each against the first page of the same fleet in the same run
// (x-first-page: the first page's time over the operation's), and, with
// -scale1m, each 1M figure against the same operation at 100k
// (x-100k: the 100k time over the 1M time; the target is a cost that
// grows at most 1.5x, x-100k >= 0.67). Each also reports cpu-ns/op, the
// process's CPU time per operation, steadier than wall time on a loaded
// machine. Loading 1M deployments takes
// minutes; -fleetdir keeps the files between runs:
//
//	go test -run '^$' -bench Scale -benchtime 200x -count 3 ./storebolt/
//	go test -run '^$' -bench Scale -benchtime 200x -count 3 ./storebolt/ -args -scale1m -fleetdir /tmp/fleets
var (
	scale1M  = flag.Bool("scale1m", false, "run BenchmarkScale at 1M deployments too")
	fleetDir = flag.String("fleetdir", "", "keep BenchmarkScale's fleet files in this directory and reuse them")
)

// scaleLoaders is how many goroutines create the fleet: more than
// benchWriters, so that storebolt's group commits are larger.
const scaleLoaders = 256

// scaleTag is carried by every 150th deployment of a scale fleet.
const scaleTag = "44444444-4444-4444-8444-444444444444"

// scaleFleetFile returns the path of a storebolt file holding n
// deployments created through the ControlPlane (names agent-0000000, ...;
// fleet.request's mix, every 150th tagged), reusing the file under
// -fleetdir when there is one.
func scaleFleetFile(b *testing.B, n int) string {
	b.Helper()
	dir := *fleetDir
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, fmt.Sprintf("scale-fleet-%d-v2.db", n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	start := time.Now()
	st, err := storebolt.Open(path+".tmp", nil)
	if err != nil {
		b.Fatal(err)
	}
	f := newFleet(b, st)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range scaleLoaders {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				req := f.request(int(i))
				if i%150 == 0 {
					req.TagValueIDs = []string{scaleTag}
				}
				if _, err := f.cp.CreateDeployment(ctx, benchTenant, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	if b.Failed() {
		b.FailNow()
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %d deployments in %v", n, time.Since(start).Round(time.Second))
	return path
}

// scaleQuery is one list of BenchmarkScale and the page size it answers
// at 100k (the offset scales with the fleet).
type scaleQuery struct {
	name string
	q    func(n int) *controlplane.ListDeploymentsQuery
	want int
}

var scaleQueries = []scaleQuery{
	{"first-page", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{Limit: new(100)}
	}, 100},
	{"offset-half", func(n int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{Limit: new(100), Offset: n / 2}
	}, 100},
	// agent-0001200 ... agent-0001299: 100 matches at any size.
	{"name-100-matches", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{NameContains: "AGENT-00012", Limit: new(100)}
	}, 100},
	// A trigram no name holds.
	{"name-no-match", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{NameContains: "agent-x", Limit: new(100)}
	}, 0},
	// Every trigram common ("100", "000"), the needle in no name: the
	// trigram lists agree on every name holding both.
	{"name-no-match-common-grams", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{NameContains: "1000000", Limit: new(100)}
	}, 0},
	// One byte: the union of the grams it starts.
	{"name-1-byte", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{NameContains: "7", Limit: new(100)}
	}, 100},
	{"status", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{Status: controlplane.StatusAwaitingDatabase, Limit: new(100)}
	}, 100},
	{"deployment_type", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{DeploymentType: controlplane.DeploymentTypeDev, Limit: new(100)}
	}, 100},
	{"remote_reconciled", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{RemoteReconciled: new(false), Limit: new(100)}
	}, 100},
	{"tag_value_ids", func(int) *controlplane.ListDeploymentsQuery {
		return &controlplane.ListDeploymentsQuery{TagValueIDs: []string{scaleTag}, Limit: new(100)}
	}, 100},
}

// BenchmarkScale lists the scale fleets (see above).
func BenchmarkScale(b *testing.B) {
	sizes := []int{100_000}
	if *scale1M {
		sizes = append(sizes, 1_000_000)
	}
	ctx := context.Background()
	times := map[string]float64{} // size/query -> ns/op
	for _, n := range sizes {
		st, err := storebolt.Open(scaleFleetFile(b, n), nil)
		if err != nil {
			b.Fatal(err)
		}
		cp := controlplane.New(st, &controlplane.Options{SecretKey: benchSecretKey})
		label := fmt.Sprintf("%dk", n/1000)
		for _, sq := range scaleQueries {
			q := sq.q(n)
			b.Run(label+"/"+sq.name, func(b *testing.B) {
				cpu := processCPU()
				for b.Loop() {
					page, err := cp.ListDeployments(ctx, benchTenant, q)
					if err != nil {
						b.Fatal(err)
					}
					if len(page.Resources) != sq.want {
						b.Fatalf("page of %d, want %d", len(page.Resources), sq.want)
					}
				}
				b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				times[label+"/"+sq.name] = ns
				if first := times[label+"/first-page"]; first > 0 {
					b.ReportMetric(first/ns, "x-first-page")
				}
				if small := times["100k/"+sq.name]; label != "100k" && small > 0 {
					b.ReportMetric(small/ns, "x-100k")
				}
			})
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU returns the CPU time (user and system) the process has used,
// in nanoseconds: on a machine shared with other work, the CPU an
// operation takes says more than its wall time (which includes waiting
// for a core). It counts the garbage collector's work too.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
