package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/internal/benchcmp"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/wiretime"
)

// benchFleet is one tenant's deployments over storemem: every 200th is a
// github "dev" deployment (0.5%), every 150th carries benchTag (0.67%), and
// names are agent-000000, agent-000001, ..., so "agent-0001" matches 100 of
// 100k (0.1%).
type benchFleet struct {
	cp      *controlplane.ControlPlane
	ids     []string
	n       int
	created int // deployments BenchmarkCreateDeployment added, for unique names
}

const benchTag = "44444444-4444-4444-8444-444444444444"

var (
	fleetsMu sync.Mutex
	fleets   = map[int]*benchFleet{}
)

// fleet returns the fleet of n deployments, built once per process.
func fleet(b *testing.B, n int) *benchFleet {
	b.Helper()
	fleetsMu.Lock()
	defer fleetsMu.Unlock()
	if f, ok := fleets[n]; ok {
		return f
	}
	ctx := context.Background()
	f := &benchFleet{cp: controlplane.New(storemem.New(), nil), n: n}
	in, err := f.cp.CreateIntegration(ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(1)), Name: new("acme")})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("agent-%06d", i)
		var req *controlplane.CreateDeploymentRequest
		if i%200 == 0 {
			req = &controlplane.CreateDeploymentRequest{Name: &name, Source: new(controlplane.SourceGitHub),
				SourceConfig: &controlplane.SourceConfig{IntegrationID: &in.ID, RepoURL: new("https://github.com/acme/agent"),
					DeploymentType: new(controlplane.DeploymentTypeDev)},
				SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")}}
		} else {
			req = &controlplane.CreateDeploymentRequest{Name: &name, Source: new(controlplane.SourceExternalDocker),
				SourceConfig:         &controlplane.SourceConfig{ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(1)), MaxScale: new(int64(3))}},
				SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.0.0")},
				Secrets:              []controlplane.SecretInput{{Name: "OPENAI_API_KEY", Value: new("sk-0123456789")}}}
		}
		if i%150 == 0 {
			req.TagValueIDs = []string{benchTag}
		}
		d, err := f.cp.CreateDeployment(ctx, tenantA, req)
		if err != nil {
			b.Fatal(err)
		}
		f.ids = append(f.ids, d.ID)
	}
	fleets[n] = f
	return f
}

func (f *benchFleet) list(b *testing.B, q *controlplane.ListDeploymentsQuery, want int) {
	page, err := f.cp.ListDeployments(context.Background(), tenantA, q)
	if err != nil {
		b.Fatal(err)
	}
	if len(page.Resources) != want {
		b.Fatalf("page of %d, want %d", len(page.Resources), want)
	}
}

func BenchmarkCreateDeployment(b *testing.B) {
	f := fleet(b, 100_000)
	ctx := context.Background()
	for b.Loop() {
		f.created++
		_, err := f.cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new(fmt.Sprintf("bench-create-%d", f.created)),
			Source:               new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.0.0")}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdateDeploymentNewRevision(b *testing.B) {
	f := fleet(b, 100_000)
	ctx := context.Background()
	req := &controlplane.UpdateDeploymentRequest{SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.1.0")}}
	i := 0
	for b.Loop() {
		i++
		if _, err := f.cp.UpdateDeployment(ctx, tenantA, f.ids[(i*7919+1)%len(f.ids)], req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetDeployment(b *testing.B) {
	f := fleet(b, 100_000)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := f.cp.GetDeployment(ctx, tenantA, f.ids[(i*7919)%len(f.ids)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListPage times a page of 100 newest-first at 100k deployments
// and reports its ratio to the same page at 1k (goal: within 1.5x).
func BenchmarkListPage(b *testing.B) {
	big, small := fleet(b, 100_000), fleet(b, 1_000)
	q := &controlplane.ListDeploymentsQuery{Limit: new(100)}
	var tBig, tSmall time.Duration
	for b.Loop() {
		start := time.Now()
		small.list(b, q, 100)
		mid := time.Now()
		big.list(b, q, 100)
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
	first, deep := &controlplane.ListDeploymentsQuery{Limit: new(100)}, &controlplane.ListDeploymentsQuery{Limit: new(100), Offset: 50_000}
	var tFirst, tDeep time.Duration
	for b.Loop() {
		start := time.Now()
		f.list(b, first, 100)
		mid := time.Now()
		f.list(b, deep, 100)
		tFirst += mid.Sub(start)
		tDeep += time.Since(mid)
	}
	b.ReportMetric(float64(tDeep.Nanoseconds())/float64(b.N), "ns/page@50k")
	b.ReportMetric(float64(tDeep)/float64(tFirst), "ratio_offset50k/offset0")
}

// BenchmarkListFiltered times filtered lists at 100k deployments, each
// matching under 1% (goal: under 10 ms).
func BenchmarkListFiltered(b *testing.B) {
	f := fleet(b, 100_000)
	for _, tt := range []struct {
		name string
		q    controlplane.ListDeploymentsQuery
		want int
	}{
		{"deployment_type=dev(0.5%)", controlplane.ListDeploymentsQuery{DeploymentType: controlplane.DeploymentTypeDev, Limit: new(100)}, 100},
		{"tag_value_ids(0.67%)", controlplane.ListDeploymentsQuery{TagValueIDs: []string{benchTag}, Limit: new(100)}, 100},
		{"name_contains(0.1%)", controlplane.ListDeploymentsQuery{NameContains: "AGENT-0001", Limit: new(100)}, 100},
		{"remote_reconciled=false(0.5%)", controlplane.ListDeploymentsQuery{RemoteReconciled: new(false), Limit: new(100)}, 100},
		{"deployment_ids(100)", controlplane.ListDeploymentsQuery{DeploymentIDs: f.ids[5000:5100], Limit: new(100)}, 100},
	} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				f.list(b, &tt.q, tt.want)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/list")
		})
	}
}

// BenchmarkGetDeploymentJSON: what an HTTP GET needs, the deployment's wire
// JSON, through GetDeploymentJSON (decode the storage form, encode the wire)
// against GetDeployment plus json.Marshal (decode, then encode). One
// deployment with a resource_spec and secrets, over storemem.
func BenchmarkGetDeploymentJSON(b *testing.B) {
	ctx := context.Background()
	cp := controlplane.New(storemem.New(), nil)
	d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new("agent"),
		Source:               new(controlplane.SourceExternalDocker),
		SourceConfig:         &controlplane.SourceConfig{ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(1)), MaxScale: new(int64(3)), CPU: new(0.5)}},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.0.0")},
		Secrets:              []controlplane.SecretInput{{Name: "OPENAI_API_KEY", Value: new("sk-0123456789")}}})
	if err != nil {
		b.Fatal(err)
	}
	benchcmp.CompareNamed(b,
		"GetDeployment+Marshal", func(b *testing.B) {
			for b.Loop() {
				got, err := cp.GetDeployment(ctx, tenantA, d.ID)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(got); err != nil {
					b.Fatal(err)
				}
			}
		},
		"GetDeploymentJSON", func(b *testing.B) {
			for b.Loop() {
				if _, err := cp.GetDeploymentJSON(ctx, tenantA, d.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
}

// plainDeployment is Deployment's shape with plain time.Time timestamps
// (encoding/json's own RFC 3339 encoding): the baseline of the wire
// encoding's cost.
type plainDeployment struct {
	ID                   string                            `json:"id"`
	Name                 string                            `json:"name"`
	Source               controlplane.Source               `json:"source"`
	SourceConfig         controlplane.SourceConfig         `json:"source_config"`
	SourceRevisionConfig controlplane.SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []controlplane.Secret             `json:"secrets"`
	CreatedAt            time.Time                         `json:"created_at"`
	UpdatedAt            time.Time                         `json:"updated_at"`
	Status               controlplane.DeploymentStatus     `json:"status"`
	LatestRevisionID     *string                           `json:"latest_revision_id"`
	ActiveRevisionID     *string                           `json:"active_revision_id"`
	ImageVersion         *string                           `json:"image_version"`
}

// wireAndPlain returns BenchmarkGetDeploymentJSON's deployment (with a
// microsecond fraction) and its plainDeployment.
func wireAndPlain() (controlplane.Deployment, plainDeployment) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 123_456_000, time.UTC)
	d := controlplane.Deployment{ID: "019a6b1c-2d3e-7f40-8a5b-6c7d8e9f0a1b", Name: "agent", Source: controlplane.SourceExternalDocker,
		SourceConfig:         controlplane.SourceConfig{ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(1)), MaxScale: new(int64(3)), CPU: new(0.5)}},
		SourceRevisionConfig: controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/agent:1.0.0")},
		Secrets:              []controlplane.Secret{{Name: "OPENAI_API_KEY", Value: "sk-0123456789"}},
		CreatedAt:            wiretime.New(at), UpdatedAt: wiretime.New(at), Status: controlplane.StatusAwaitingDatabase,
		LatestRevisionID: new("019a6b1c-2d3e-7f40-8a5b-6c7d8e9f0a1c")}
	return d, plainDeployment{ID: d.ID, Name: d.Name, Source: d.Source, SourceConfig: d.SourceConfig, SourceRevisionConfig: d.SourceRevisionConfig,
		Secrets: d.Secrets, CreatedAt: at, UpdatedAt: at, Status: d.Status, LatestRevisionID: d.LatestRevisionID}
}

// BenchmarkMarshalDeployment: what an embedder pays for the wire's
// timestamps. json.Marshal of a Deployment, and of a page of 100 of them,
// against json.Marshal of the same shape with time.Time timestamps, in
// alternating rounds of one run (benchcmp.Interleave: the machine's load
// drifts on both alike). The goal is x-baseline >= 1.0 within noise:
// wiretime.Time costs no more than time.Time.
func BenchmarkMarshalDeployment(b *testing.B) {
	d, plain := wireAndPlain()
	type plainPage struct {
		Resources []plainDeployment `json:"resources"`
		Offset    int               `json:"offset"`
	}
	page := controlplane.DeploymentPage{Offset: 100}
	pp := plainPage{Offset: 100}
	for range 100 {
		page.Resources = append(page.Resources, d)
		pp.Resources = append(pp.Resources, plain)
	}
	run := func(b *testing.B, v any) func(n int) {
		return func(n int) {
			for range n {
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("one", func(b *testing.B) { benchcmp.Interleave(b, run(b, plain), run(b, d)) })
	b.Run("page100", func(b *testing.B) { benchcmp.Interleave(b, run(b, pp), run(b, page)) })
}

// TestMarshalAllocs: json.Marshal of a Deployment allocates no more than
// json.Marshal of the same shape with time.Time timestamps, the part of
// BenchmarkMarshalDeployment's claim that load does not blur. (With the
// mirror structs before wiretime.Time, -benchmem counted 7 allocations to
// the plain shape's 3.)
func TestMarshalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector (sync.Pool drops items)")
	}
	d, plain := wireAndPlain()
	wire := testing.AllocsPerRun(100, func() { _, _ = json.Marshal(d) })
	base := testing.AllocsPerRun(100, func() { _, _ = json.Marshal(plain) })
	if wire > base {
		t.Errorf("json.Marshal(Deployment): %v allocations, the time.Time shape %v", wire, base)
	}
	t.Logf("allocations: Deployment %v, time.Time shape %v", wire, base)
}

// quick walks a revision along its happy path with no delay.
type quick struct{}

func (quick) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	path := controlplane.HappyPath(w.Revision.Source)
	for _, s := range path[1:] {
		if err := r.Report(ctx, controlplane.Step{Status: s}); err != nil {
			return err
		}
	}
	return nil
}

func (quick) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

// BenchmarkProcessRevision: creating a revision and driving it to DEPLOYED
// with Process (one claim, four reports) beside 10,000 deployments already
// DEPLOYED, against the same beside 10: claiming walks the pending work,
// not the revisions stored, so the ratio stays near 1.
func BenchmarkProcessRevision(b *testing.B) {
	ctx := context.Background()
	setup := func(n int) (*controlplane.ControlPlane, string) {
		cp := controlplane.New(storemem.New(), nil)
		var id string
		for i := range n {
			d, err := cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{Name: new(fmt.Sprint("agent-", i)),
				Source: new(controlplane.SourceExternalDocker), SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/a:1")}})
			if err != nil {
				b.Fatal(err)
			}
			id = d.ID
		}
		for {
			ok, err := cp.Process(ctx, quick{})
			if err != nil {
				b.Fatal(err)
			}
			if !ok {
				return cp, id
			}
		}
	}
	run := func(cp *controlplane.ControlPlane, id string) func(b *testing.B) {
		return func(b *testing.B) {
			for b.Loop() {
				if _, err := cp.CreateRevision(ctx, tenantA, id, nil); err != nil {
					b.Fatal(err)
				}
				if ok, err := cp.Process(ctx, quick{}); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		}
	}
	small, smallID := setup(10)
	big, bigID := setup(10_000)
	benchcmp.CompareNamed(b, "10 deployments", run(small, smallID), "10k deployments", run(big, bigID))
}
