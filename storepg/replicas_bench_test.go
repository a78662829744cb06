package storepg_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/internal/pgtest"
	"github.com/deployplane/deployplane/storepg"
)

// replicaGoroutines is how many clients create at once in the replica
// benchmarks: 64 clients across two replicaPair.
const replicaGoroutines = 64

// replicaPair is two ControlPlanes, each over its own Store with
// pgxpool's default pool (poolConns), over one schema: two replicas of the
// control plane sharing one database, as in production.
type replicaPair struct {
	schema string
	stores [2]*storepg.Store
	fleets [2]*fleet
	// commits and updates count both Stores' COMMITs and the Updates
	// they committed (Options.OnCommit).
	commits, updates atomic.Int64
}

// poolConns is the size of pgxpool's default pool, which Open makes when
// neither Options.MaxConns nor the DSN sets one: the larger of 4 and the
// number of CPUs.
func poolConns() int { return max(4, runtime.NumCPU()) }

func newReplicaPair(b *testing.B) *replicaPair {
	b.Helper()
	r := &replicaPair{schema: newSchema(b, nil)}
	integrations := map[string]string{}
	for i := range r.stores {
		r.stores[i] = openSchema(b, r.schema, &storepg.Options{OnCommit: func(updates int, _ time.Duration, _ error) {
			r.commits.Add(1)
			r.updates.Add(int64(updates))
		}})
		r.fleets[i] = &fleet{cp: controlplane.New(r.stores[i], nil), integrations: integrations}
	}
	// The GitHub integration every 200th deployment names.
	in, err := r.fleets[0].cp.CreateIntegration(context.Background(), benchTenants[0], &controlplane.CreateIntegrationRequest{
		InstallationID: new(int64(1)), Name: new("acme"),
	})
	if err != nil {
		b.Fatal(err)
	}
	integrations[benchTenants[0]] = in.ID
	return r
}

// create creates the next deployment of the shared fleet in tenant through
// replica i.
func (r *replicaPair) create(i int, tenant string, next *atomic.Int64) error {
	f := r.fleets[i%2]
	_, err := f.cp.CreateDeployment(context.Background(), tenant, f.request(tenant, int(next.Add(1))))
	return err
}

// retries and alone sum the closure re-runs and the tries run alone of
// both replicaPair' Stores.
func (r *replicaPair) retries() int64 { return r.stores[0].Retries() + r.stores[1].Retries() }
func (r *replicaPair) alone() int64   { return r.stores[0].AloneRuns() + r.stores[1].AloneRuns() }

// bytesPerRow measures what the schema's records hold per create so far:
// the bytes of keys and values over n creates.
func bytesPerCreate(b *testing.B, schema string, n int) int {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), testDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	var total int64
	q := `SELECT coalesce(sum(length(key) + length(value)), 0) FROM ` + pgx.Identifier{schema, "records"}.Sanitize() +
		` WHERE collection NOT IN ('cp_tenants')`
	if err := conn.QueryRow(context.Background(), q).Scan(&total); err != nil {
		b.Fatal(err)
	}
	return int(total) / n
}

// parallelOps runs n calls of op from goroutines goroutines and returns
// the first error and how many calls failed.
func parallelOps(n, goroutines int, op func(worker int) error) (int64, error) {
	var next, failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := op(w); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return failed.Load(), err
}

// BenchmarkCreateTwoReplicas runs CreateDeployment into one tenant from 64
// goroutines through two ControlPlanes (replicaPair) over one schema, each
// over its own Store with the default pool (poolConns), against a bare INSERT of
// as many bytes as a create stores, from 64 goroutines over a pool of as
// many connections, in alternating rounds (benchcmp.Interleave). It
// reports creates/s, the closure re-runs and tries alone per create, the
// Updates a COMMIT holds on average (combined Updates, storepg's package
// doc), and fails the benchmark if any create fails.
func BenchmarkCreateTwoReplicas(b *testing.B) {
	r := newReplicaPair(b)
	tenant := benchTenants[0]
	var next atomic.Int64
	// Warm up: the tenant's prefix, and the bytes a create stores.
	const warm = 256
	if failed, err := parallelOps(warm, replicaGoroutines, func(w int) error { return r.create(w, tenant, &next) }); failed > 0 {
		b.Fatalf("%d of %d creates failed: %v", failed, warm, err)
	}
	size := bytesPerCreate(b, r.schema, warm)
	bare := pgtest.NewInserts(b, testDSN(b), 2*poolConns(), size) // the two replicas' connections
	retries, alone := r.retries(), r.alone()
	commits, updates := r.commits.Load(), r.updates.Load()
	var failed int64
	var firstErr error
	var spent, cpu time.Duration
	benchcmp.Interleave(b,
		func(n int) {
			if f, err := parallelOps(n, replicaGoroutines, func(int) error { return bare.Insert(context.Background()) }); f > 0 {
				b.Fatalf("%d bare INSERTs failed: %v", f, err)
			}
		},
		func(n int) {
			start, busy := time.Now(), machineBusy()
			f, err := parallelOps(n, replicaGoroutines, func(w int) error { return r.create(w, tenant, &next) })
			spent += time.Since(start)
			cpu += machineBusy() - busy
			failed += f
			if firstErr == nil {
				firstErr = err
			}
		})
	if failed > 0 {
		b.Fatalf("%d of %d creates failed: %v", failed, b.N, firstErr)
	}
	b.ReportMetric(float64(r.retries()-retries)/float64(b.N), "retries/op")
	b.ReportMetric(float64(r.alone()-alone)/float64(b.N), "alone/op")
	b.ReportMetric(float64(size), "bytes/create")
	b.ReportMetric(float64(b.N)/spent.Seconds(), "creates/s")
	if n := r.commits.Load() - commits; n > 0 {
		b.ReportMetric(float64(r.updates.Load()-updates)/float64(n), "updates/commit")
	}
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/create")
	}
}

// machineBusy is the CPU time the machine's cores have spent on anything
// but idling since boot, from /proc/stat (Linux; 0 elsewhere): over the
// creates alone, on a machine with nothing else to do, it is the CPU a
// create costs the server and the client together (cpu-ms/create), a
// steadier figure than the rate when the load drifts.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var ticks int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ, 100 on Linux
}
