package storebolt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
)

// The controlplane benchmarks measure storebolt under the domain that uses
// it: deployments as CreateDeployment writes them (the record, its first
// revision, the order record and the index records, in one Update).

const benchTenant = "3f1c9a52-6b7d-4e8f-9a0b-1c2d3e4f5a6b"

// benchSecretKey seals the fleet's secrets.
var benchSecretKey = []byte("0123456789abcdef0123456789abcdef")

// fleet is a ControlPlane with the GitHub integration its github
// deployments use.
type fleet struct {
	cp          *controlplane.ControlPlane
	integration string
}

func newFleet(b *testing.B, st store.Store) *fleet {
	b.Helper()
	// A production ControlPlane seals secrets (cmd/deployplane always
	// passes a key), which the space figures include.
	cp := controlplane.New(st, &controlplane.Options{SecretKey: benchSecretKey})
	in, err := cp.CreateIntegration(context.Background(), benchTenant, &controlplane.CreateIntegrationRequest{
		InstallationID: new(int64(1)), Name: new("acme"),
	})
	if err != nil {
		b.Fatal(err)
	}
	return &fleet{cp: cp, integration: in.ID}
}

// request is the i-th deployment of a realistic fleet: external_docker with
// a resource spec and a secret, and every 200th a github deployment.
func (f *fleet) request(i int) *controlplane.CreateDeploymentRequest {
	name := fmt.Sprintf("agent-%07d", i)
	if i%200 == 0 {
		return &controlplane.CreateDeploymentRequest{
			Name:   &name,
			Source: new(controlplane.SourceGitHub),
			SourceConfig: &controlplane.SourceConfig{
				IntegrationID:  &f.integration,
				RepoURL:        new("https://github.com/acme/agent"),
				DeploymentType: new(controlplane.DeploymentTypeDev),
			},
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")},
		}
	}
	return &controlplane.CreateDeploymentRequest{
		Name:   &name,
		Source: new(controlplane.SourceExternalDocker),
		SourceConfig: &controlplane.SourceConfig{
			ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(1)), MaxScale: new(int64(3))},
		},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(fmt.Sprintf("registry.example.com/agent-%d:1.0.0", i%50))},
		Secrets:              []controlplane.SecretInput{{Name: "OPENAI_API_KEY", Value: new("sk-0123456789abcdef")}},
	}
}

// create creates deployments next.Add(1)-1 for as long as they are
// below n, from benchWriters goroutines.
func (f *fleet) create(b *testing.B, next *atomic.Int64, n int64) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				if _, err := f.cp.CreateDeployment(ctx, benchTenant, f.request(int(i))); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkControlPlaneCreate64 pits CreateDeployment from 64 goroutines
// over storebolt against the same over storemem: the price of durability
// (goal: at least 0.5x).
func BenchmarkControlPlaneCreate64(b *testing.B) {
	mem := newFleet(b, storemem.New())
	st := openBench(b, nil)
	bolt := newFleet(b, st)
	commits := countCommits(st)
	var memNext, boltNext atomic.Int64
	benchcmp.Interleave(b,
		func(n int) { mem.create(b, &memNext, memNext.Load()+int64(n)) },
		func(n int) { bolt.create(b, &boltNext, boltNext.Load()+int64(n)) })
	b.ReportMetric(float64(b.N)/float64(commits.Load()), "creates/commit")
}

// fleetFile returns the path of a storebolt file holding n deployments
// created through the ControlPlane.
func fleetFile(b *testing.B, n int, opts *storebolt.Options) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "fleet.db")
	st, err := storebolt.Open(path, opts)
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	newFleet(b, st).create(b, &next, int64(n))
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// dropCache evicts the file's pages from the page cache, so that the next
// open reads them from disk.
func dropCache(b *testing.B, path string) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkColdOpen100k opens a file of 100k deployments with its pages
// evicted from the page cache and serves the first page of the deployment
// list (goal: under 1 s). The baseline opens and closes the same file with
// raw bbolt and reads nothing: the least a cold open can cost. It also
// reports the file's bytes per deployment.
func BenchmarkColdOpen100k(b *testing.B) {
	const n = 100_000
	path := fleetFile(b, n, nil)
	b.Logf("%d deployments: %d bytes, %.0f bytes/deployment", n, fileSize(b, path), float64(fileSize(b, path))/n)
	ctx := context.Background()
	benchcmp.CompareNamed(b,
		"bbolt-Open", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dropCache(b, path)
				b.StartTimer()
				db, err := bbolt.Open(path, 0o600, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
		},
		"storebolt+controlplane", func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				dropCache(b, path)
				b.StartTimer()
				st, err := storebolt.Open(path, nil)
				if err != nil {
					b.Fatal(err)
				}
				page, err := controlplane.New(st, nil).ListDeployments(ctx, benchTenant, nil)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Resources) != controlplane.DefaultPageLimit {
					b.Fatalf("first page holds %d deployments, want %d", len(page.Resources), controlplane.DefaultPageLimit)
				}
				if err := st.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fileSize(b, path))/n, "bytes/deployment")
		})
}

// BenchmarkSpace100k reports the file's bytes per deployment after creating
// 100k deployments, for several page sizes and fill targets. Run it with
// -benchtime=1x: each iteration builds a file.
func BenchmarkSpace100k(b *testing.B) {
	const n = 100_000
	for _, o := range []storebolt.Options{
		{PageSize: 4096, FillPercent: 0.5},
		{PageSize: 4096, FillPercent: 0.9},
		{PageSize: 4096, FillPercent: 1},
		{PageSize: 16384, FillPercent: 0.9},
		{PageSize: 16384, FillPercent: 1},
	} {
		b.Run(fmt.Sprintf("page=%d/fill=%v", o.PageSize, o.FillPercent), func(b *testing.B) {
			var size, used, events int64
			for b.Loop() {
				path := fleetFile(b, n, &o)
				size, used, events = fileSize(b, path), usedSize(b, path), bucketSize(b, path, "cp_events")
				logBuckets(b, path, n)
			}
			b.ReportMetric(float64(size)/n, "bytes/deployment")
			b.ReportMetric(float64(used)/n, "used-bytes/deployment")
			// The event log keeps a tenant's newest events (10,000 by
			// default), whatever the fleet's size: a fixed cost, not one
			// per deployment (at 1M deployments it is a tenth of this).
			b.ReportMetric(float64(events)/n, "event-log-bytes/deployment")
			b.ReportMetric(float64(used-events)/n, "used-bytes-without-event-log/deployment")
		})
	}
}

// usedSize returns the bytes of the pages in use in a bbolt file: its
// size as its last transaction sees it, less the free pages. The file
// itself grows in steps of bbolt's AllocSize (16 MiB, 168 bytes per
// deployment at 100k), so its size is a coarse measure of what the
// records take.
func usedSize(b *testing.B, path string) int64 {
	b.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var size int64
	if err := db.View(func(tx *bbolt.Tx) error { size = tx.Size(); return nil }); err != nil {
		b.Fatal(err)
	}
	st := db.Stats()
	return size - int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize)
}

// logBuckets logs, for each bucket of the bbolt file at path, its bytes
// per deployment (pages in use, as bucketSize counts them), its bytes of
// keys and values, and how full its leaf pages are: what takes the space.
func logBuckets(b *testing.B, path string, n int) {
	b.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ps := int64(db.Info().PageSize)
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bbolt.Bucket) error {
			st := bk.Stats()
			pages := int64(st.BranchPageN+st.BranchOverflowN+st.LeafPageN+st.LeafOverflowN)*ps + int64(st.InlineBucketInuse)
			var kv int64
			if err := bk.ForEach(func(k, v []byte) error { kv += int64(len(k) + len(v)); return nil }); err != nil {
				return err
			}
			fill := 0.0
			if st.LeafAlloc > 0 {
				fill = float64(st.LeafInuse) / float64(st.LeafAlloc)
			}
			b.Logf("%-28s %8.1f B/deployment in pages, %8.1f of keys and values, %7d keys, leaves %3.0f%% full",
				name, float64(pages)/float64(n), float64(kv)/float64(n), st.KeyN, 100*fill)
			return nil
		})
	})
	if err != nil {
		b.Fatal(err)
	}
}

// bucketSize returns the bytes of the pages a bucket of the bbolt file at
// path holds (branch and leaf pages with their overflow; the bucket's
// part of its parent's page when it is inline).
func bucketSize(b *testing.B, path, bucket string) int64 {
	b.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var size int64
	err = db.View(func(tx *bbolt.Tx) error {
		bk := tx.Bucket([]byte(bucket))
		if bk == nil {
			return fmt.Errorf("no bucket %s", bucket)
		}
		st := bk.Stats()
		pages := st.BranchPageN + st.BranchOverflowN + st.LeafPageN + st.LeafOverflowN
		size = int64(pages)*int64(db.Info().PageSize) + int64(st.InlineBucketInuse)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

// BenchmarkHeap100k reports the heap that 100k deployments created
// through the ControlPlane keep live in storemem (record, first revision,
// tracing project and every order, summary, name and index record), and
// the bytes of keys and values per deployment in each collection, to show
// what takes the space. Run it with -benchtime=1x.
func BenchmarkHeap100k(b *testing.B) {
	const n = 100_000
	var perDep float64
	var cols map[string]int
	for b.Loop() {
		before := liveHeap()
		st := storemem.New()
		var next atomic.Int64
		newFleet(b, st).create(b, &next, n)
		perDep = float64(liveHeap()-before) / n
		cols = collectionBytes(b, st)
		runtime.KeepAlive(st)
		st.Close()
	}
	b.ReportMetric(perDep, "heap-bytes/deployment")
	names := make([]string, 0, len(cols))
	for c := range cols {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		b.ReportMetric(float64(cols[c])/n, c+"-bytes/deployment")
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// collectionBytes sums the key and value bytes of each control plane
// collection.
func collectionBytes(b *testing.B, st store.Store) map[string]int {
	b.Helper()
	out := map[string]int{}
	err := st.View(context.Background(), func(r store.Reader) error {
		for _, col := range controlplane.Collections() {
			err := r.Scan(col, "", nil, func(k string, v []byte) (bool, error) {
				out[col] += len(k) + len(v)
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return out
}
