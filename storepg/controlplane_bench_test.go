package storepg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storepg"
)

// The controlplane benchmarks measure storepg under the domain that uses it,
// against storebolt (the embedded default) as the baseline in the same run:
// the candidate's "x-baseline" is storebolt's ns/op over storepg's, so 0.5
// means storepg takes twice as long.

// benchTenants are the tenants of the benchmark fleets.
var benchTenants = func() []string {
	var ts []string
	for i := range 64 {
		ts = append(ts, fmt.Sprintf("3f1c9a52-6b7d-4e8f-9a0b-1c2d3e4f%04x", i))
	}
	return ts
}()

// fleet is a ControlPlane with, in each benchmark tenant, the GitHub
// integration its github deployments use, and the number of the next
// deployment to create.
type fleet struct {
	cp           *controlplane.ControlPlane
	integrations map[string]string // tenant -> integration id
	next         atomic.Int64
}

func newFleet(b *testing.B, st store.Store) *fleet {
	b.Helper()
	f := &fleet{cp: controlplane.New(st, nil), integrations: map[string]string{}}
	for i, tenant := range benchTenants {
		// An installation belongs to one tenant: each has its own.
		in, err := f.cp.CreateIntegration(context.Background(), tenant, &controlplane.CreateIntegrationRequest{
			InstallationID: new(int64(i + 1)), Name: new("acme"),
		})
		if err != nil {
			b.Fatal(err)
		}
		f.integrations[tenant] = in.ID
	}
	return f
}

// request is the i-th deployment of a realistic fleet: external_docker with
// a resource spec and a secret, and every 200th a github deployment (the
// same fleet as storebolt's benchmarks).
func (f *fleet) request(tenant string, i int) *controlplane.CreateDeploymentRequest {
	name := fmt.Sprintf("agent-%07d", i)
	if i%200 == 0 {
		return &controlplane.CreateDeploymentRequest{
			Name:   &name,
			Source: new(controlplane.SourceGitHub),
			SourceConfig: &controlplane.SourceConfig{
				IntegrationID:  new(f.integrations[tenant]),
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

// create creates the fleet's next deployment in tenant and returns its id.
func (f *fleet) create(tenant string) (string, error) {
	d, err := f.cp.CreateDeployment(context.Background(), tenant, f.request(tenant, int(f.next.Add(1)-1)))
	if err != nil {
		return "", err
	}
	return d.ID, nil
}

// benchStores opens the two stores compared: storebolt in a temporary
// directory, and storepg over a new schema with a pool of maxConns.
func benchStores(b *testing.B, maxConns int32) (*storebolt.Store, *storepg.Store) {
	b.Helper()
	bolt, err := storebolt.Open(filepath.Join(b.TempDir(), "db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bolt.Close() })
	return bolt, openStore(b, &storepg.Options{MaxConns: maxConns})
}

// createConns are the pool sizes of the create benchmark: pgxpool's default
// on a machine of up to 4 cores, and benchConns.
var createConns = []int32{4, benchConns}

// BenchmarkControlPlaneCreate64 runs CreateDeployment from 64 goroutines,
// storepg against storebolt: into one tenant, and into 64 (one per
// goroutine), over pools of each of createConns. Each round continues the
// fleets of the round before. storepg also reports the closure re-runs per
// create (retries/op) and the tries run alone per create (alone/op).
func BenchmarkControlPlaneCreate64(b *testing.B) {
	for _, tenants := range []int{1, 64} {
		for _, conns := range createConns {
			b.Run(fmt.Sprintf("tenants=%d/conns=%d", tenants, conns), func(b *testing.B) {
				bolt, pg := benchStores(b, conns)
				boltFleet, pgFleet := newFleet(b, bolt), newFleet(b, pg)
				create := func(f *fleet) func(int) error {
					return func(worker int) error {
						_, err := f.create(benchTenants[worker%tenants])
						return err
					}
				}
				benchcmp.CompareNamed(b,
					"storebolt", func(b *testing.B) { run(b, 64, create(boltFleet)) },
					"storepg", func(b *testing.B) {
						retries, alone := pg.Retries(), pg.AloneRuns()
						run(b, 64, create(pgFleet))
						b.ReportMetric(float64(pg.Retries()-retries)/float64(b.N), "retries/op")
						b.ReportMetric(float64(pg.AloneRuns()-alone)/float64(b.N), "alone/op")
					})
			})
		}
	}
}

// BenchmarkControlPlaneGet runs GetDeployment on a fleet of 1024
// deployments in one tenant, from one goroutine and from 64, storepg (a
// pool of benchConns) against storebolt.
func BenchmarkControlPlaneGet(b *testing.B) {
	const n = 1024
	tenant := benchTenants[0]
	bolt, pg := benchStores(b, benchConns)
	fleets := map[string]*fleet{"storebolt": newFleet(b, bolt), "storepg": newFleet(b, pg)}
	ids := map[string][]string{}
	for name, f := range fleets {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range n / 4 {
					id, err := f.create(tenant)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					ids[name] = append(ids[name], id)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if b.Failed() {
		return
	}
	get := func(name string, goroutines int) func(*testing.B) {
		return func(b *testing.B) {
			var next atomic.Int64
			run(b, goroutines, func(int) error {
				_, err := fleets[name].cp.GetDeployment(context.Background(), tenant, ids[name][next.Add(7919)%n])
				return err
			})
		}
	}
	for _, m := range []struct {
		name       string
		goroutines int
	}{{"serial", 1}, {"parallel64", 64}} {
		b.Run(m.name, func(b *testing.B) {
			benchcmp.CompareNamed(b, "storebolt", get("storebolt", m.goroutines), "storepg", get("storepg", m.goroutines))
		})
	}
}
