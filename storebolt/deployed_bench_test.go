package storebolt_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/storebolt"
)

// BenchmarkSpaceDeployed reports the bytes of pages in use per
// deployment after creating n deployments (fleet.request's mix) and
// taking every first revision to DEPLOYED with the simulated deployer
// (its status changes, its log lines, their events): what a deployment
// that runs holds, where BenchmarkSpace100k counts one just created. The
// event log keeps a tenant's newest 10,000 events whatever the fleet's
// size (event-log-bytes): at n=500 it holds every event of every
// deployment, at n=10000 a share. Run it with -benchtime=1x -v: it logs
// each collection's share; -deployed100k adds n=100000 (about ten times
// n=10000's time).
func BenchmarkSpaceDeployed(b *testing.B) {
	sizes := []int{500, 10_000}
	if *deployed100k {
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { spaceDeployed(b, n) })
	}
}

var deployed100k = flag.Bool("deployed100k", false, "run BenchmarkSpaceDeployed at 100,000 deployments too")

func spaceDeployed(b *testing.B, n int) {
	var used, events int64
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "fleet.db")
		st, err := storebolt.Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		f := newFleet(b, st)
		var next atomic.Int64
		f.create(b, &next, int64(n))
		ctx := context.Background()
		d := deploysim.New(&deploysim.Options{Step: time.Nanosecond})
		var wg sync.WaitGroup
		for range benchWriters {
			wg.Go(func() {
				for {
					more, err := f.cp.Process(ctx, d)
					if err != nil {
						b.Error(err)
						return
					}
					if !more {
						return
					}
				}
			})
		}
		wg.Wait()
		if err := f.cp.SequenceEvents(ctx); err != nil {
			b.Fatal(err)
		}
		page, err := f.cp.ListDeployments(ctx, benchTenant, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, dep := range page.Resources {
			if dep.ActiveRevisionID == nil {
				b.Fatalf("deployment %s has no active revision", dep.ID)
			}
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		used, events = usedSize(b, path), bucketSize(b, path, "cp_events")
		logBuckets(b, path, n)
	}
	b.ReportMetric(float64(used)/float64(n), "used-bytes/deployment")
	b.ReportMetric(float64(events)/float64(n), "event-log-bytes/deployment")
	b.ReportMetric(float64(used-events)/float64(n), "used-bytes-without-event-log/deployment")
}
