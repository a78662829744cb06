package storemem_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storemem"
)

var resident1M = flag.Bool("resident1m", false, "run BenchmarkResident at 1M deployments too")

const residentTenant = "3f1c9a52-6b7d-4e8f-9a0b-1c2d3e4f5a6b"

// BenchmarkResident creates n deployments in one tenant through the
// ControlPlane over storemem (100k, and 1M with -resident1m; the fleet of
// storebolt's benchmarks: external_docker with a resource_spec and a
// sealed secret, every 200th github) and reports what the process holds
// afterwards: resident-MiB (VmRSS, after a full collection that returns
// freed pages to the OS: what the store holds), peak-resident-MiB (VmHWM,
// the most the process held while loading, garbage not yet collected
// included), and the live heap per deployment against the live heap
// before (baseline: an empty store). The target is 1M deployments in at
// most 2 GB resident. Run it with -benchtime 1x:
//
//	go test -run '^$' -bench Resident -benchtime 1x ./storemem/ -args -resident1m
func BenchmarkResident(b *testing.B) {
	sizes := []int{100_000}
	if *resident1M {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			for b.Loop() {
				before := liveHeap()
				st := storemem.New()
				loadResidentFleet(b, st, n)
				after := liveHeap()
				debug.FreeOSMemory()
				b.ReportMetric(float64(procStatus(b, "VmRSS"))/(1<<20), "resident-MiB")
				b.ReportMetric(float64(procStatus(b, "VmHWM"))/(1<<20), "peak-resident-MiB")
				b.ReportMetric(float64(after-before)/float64(n), "heap-bytes/deployment")
				runtime.KeepAlive(st)
				st.Close()
			}
		})
	}
}

// loadResidentFleet creates n deployments from 64 goroutines.
func loadResidentFleet(b *testing.B, st *storemem.Store, n int) {
	ctx := context.Background()
	cp := controlplane.New(st, &controlplane.Options{SecretKey: []byte("0123456789abcdef0123456789abcdef")})
	in, err := cp.CreateIntegration(ctx, residentTenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(1)), Name: new("acme")})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				name := fmt.Sprintf("agent-%07d", i)
				req := &controlplane.CreateDeploymentRequest{
					Name:   &name,
					Source: new(controlplane.SourceExternalDocker),
					SourceConfig: &controlplane.SourceConfig{
						ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(1)), MaxScale: new(int64(3))},
					},
					SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(fmt.Sprintf("registry.example.com/agent-%d:1.0.0", i%50))},
					Secrets:              []controlplane.SecretInput{{Name: "OPENAI_API_KEY", Value: new("sk-0123456789abcdef")}},
				}
				if i%200 == 0 {
					req = &controlplane.CreateDeploymentRequest{
						Name:   &name,
						Source: new(controlplane.SourceGitHub),
						SourceConfig: &controlplane.SourceConfig{
							IntegrationID: &in.ID, RepoURL: new("https://github.com/acme/agent"),
							DeploymentType: new(controlplane.DeploymentTypeDev),
						},
						SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")},
					}
				}
				if _, err := cp.CreateDeployment(ctx, residentTenant, req); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
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

// procStatus returns a field of /proc/self/status in bytes (its kB
// figure).
func procStatus(b *testing.B, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/self/status", field)
	return 0
}
