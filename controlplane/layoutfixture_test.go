package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storemem"
)

// The layout fixture: a store written by the key layout of earlier builds
// (commit 7465e74, main before keys.go), and what every read and the work it
// holds answered there. TestMigrateLayoutFixture loads it, migrates it and
// checks that the answers are the same. It was made by running
//
//	DEPLOYPLANE_WRITE_LAYOUT_FIXTURE=1 go test -run TestWriteLayoutFixture ./controlplane/
//
// over that commit, with this file copied into it and nameBlockMax set
// to 16 in its nameblocks.go (so that a small fixture has several name
// blocks per tenant). Over the current code it would write the current
// layout, which is not what the files hold: do not rerun it here.
const (
	layoutRecordsFile = "controlplanetest/testdata/layout-v0-records.jsonl" // controlplanetest.LoadLayoutV0 embeds it
	layoutAnswersFile = "testdata/layout-v0-answers.jsonl"
)

var (
	layoutTenants  = []string{"zeta", "alpha"} // created in this order, named in the other
	layoutTags     = []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"}
	layoutKey      = []byte("0123456789abcdef0123456789abcdef")
	layoutEpoch    = time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	layoutLaterNow = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
)

// layoutIDs returns a NewID counting from start: canonical UUIDs.
func layoutIDs(start int) func() string {
	var mu sync.Mutex
	n := start
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("0190a000-0000-7000-8000-%012d", n)
	}
}

// layoutDeployer walks each revision along its happy path, reporting an
// image version and READY, and records what it was given.
type layoutDeployer struct {
	mu   sync.Mutex
	seen []string
}

func (d *layoutDeployer) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	d.mu.Lock()
	d.seen = append(d.seen, fmt.Sprintf("deploy %s/%s/%s from %s (%d secrets)", w.Tenant, w.Deployment.ID, w.Revision.ID, w.Revision.Status, len(w.Secrets)))
	d.mu.Unlock()
	path := controlplane.HappyPath(w.Revision.Source)
	for _, next := range path[slices.Index(path, w.Revision.Status)+1:] {
		step := controlplane.Step{Status: next}
		if next == controlplane.RevisionDeployed {
			step.ImageVersion = new("v-" + w.Revision.ID[len(w.Revision.ID)-3:])
			step.DeploymentStatus = controlplane.StatusReady
		}
		if err := r.Report(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

func (d *layoutDeployer) Teardown(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
	d.mu.Lock()
	d.seen = append(d.seen, "teardown "+tenant+"/"+dep.ID)
	d.mu.Unlock()
	return nil
}

// pauser stops after its first report, leaving the revision mid-way with
// its lease held until PollInterval has passed.
type pauser struct{}

func (pauser) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	return r.Report(ctx, controlplane.Step{Status: controlplane.RevisionQueued})
}

func (pauser) Teardown(context.Context, string, *controlplane.Deployment) error {
	return errors.New("not now")
}

// buildLayoutFixture fills st through cp: two tenants, a GitHub
// integration with build_on_push deployments, a listener, tags, image
// versions, deployed, pending, held, superseded and deleted work, and
// several name blocks per tenant (the fixture was written with
// nameBlockMax set to 16, so that few deployments make several blocks:
// blocks smaller than nameBlockMax are valid).
func buildLayoutFixture(t *testing.T, cp *controlplane.ControlPlane) {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for ti, tenant := range layoutTenants {
		integ, err := cp.CreateIntegration(ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(40 + ti)), Name: new("acme")})
		must(err)
		l, err := cp.CreateListener(ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new("cluster-" + tenant)})
		must(err)
		n := 40
		if ti > 0 {
			n = 12
		}
		var ids []string
		for i := range n {
			req := &controlplane.CreateDeploymentRequest{Name: new(fmt.Sprintf("svc-%03d", i)), Source: new(controlplane.SourceExternalDocker),
				SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new(fmt.Sprintf("registry.example.com/svc:%d", i%5))},
				Secrets:              []controlplane.SecretInput{{Name: "TOKEN", Value: new(fmt.Sprintf("secret-%d", i))}},
			}
			switch {
			case i%10 == 3:
				req.Source = new(controlplane.SourceGitHub)
				req.SourceRevisionConfig = &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")}
				req.SourceConfig = &controlplane.SourceConfig{IntegrationID: &integ.ID, RepoURL: new("https://github.com/acme/svc"),
					DeploymentType: new([]controlplane.DeploymentType{controlplane.DeploymentTypeDev, controlplane.DeploymentTypeProd}[i%2]),
					BuildOnPush:    new(i%20 == 3)}
			case i%10 == 7:
				req.SourceConfig = &controlplane.SourceConfig{ListenerID: &l.ID, ResourceSpec: &controlplane.ResourceSpec{MinScale: new(int64(1))}}
			}
			if i%4 == 1 {
				req.TagValueIDs = layoutTags[:1+i%3%2]
			}
			d, err := cp.CreateDeployment(ctx, tenant, req)
			must(err)
			ids = append(ids, d.ID)
		}
		// Deploy the first half; leave the rest pending.
		for i := 0; i < n/2; i++ {
			ok, err := cp.Process(ctx, &layoutDeployer{})
			must(err)
			if !ok {
				t.Fatal("no work")
			}
		}
		// A new revision supersedes one, another is redeployed, one
		// deployment is being deleted.
		_, err = cp.UpdateDeployment(ctx, tenant, ids[len(ids)-1], &controlplane.UpdateDeploymentRequest{
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("registry.example.com/svc:next")}})
		must(err)
		d0, err := cp.GetDeployment(ctx, tenant, ids[0])
		must(err)
		_, err = cp.RedeployRevision(ctx, tenant, ids[0], *d0.LatestRevisionID)
		must(err)
		must(cp.DeleteDeployment(ctx, tenant, ids[2]))
		must(cp.ReportDeploymentStatus(ctx, tenant, ids[4], controlplane.StatusUnused))
	}
	// Both teardowns failed once; one revision held mid-way by a lease.
	for range 3 {
		ok, err := cp.Process(ctx, pauser{})
		if err != nil && !strings.HasSuffix(err.Error(), "not now") {
			t.Fatal(err)
		}
		if !ok {
			t.Fatal("no work for the pauser")
		}
	}
}

// layoutAnswers asks cp everything a client and a worker can ask of the
// fixture and returns the answers as JSON values by question.
func layoutAnswers(t *testing.T, cp *controlplane.ControlPlane) map[string]any {
	ctx := context.Background()
	out := map[string]any{}
	ask := func(q string, v any, err error) {
		if err != nil {
			out[q] = "error: " + err.Error()
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var j any
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		out[q] = j
	}
	for _, tenant := range append(slices.Clone(layoutTenants), "nobody") {
		all, err := cp.ListDeployments(ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(controlplane.MaxPageLimit)})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range all.Resources {
			ids = append(ids, d.ID)
		}
		if len(ids) > 0 {
			ids = append(ids, "0190a000-0000-7000-8000-999999999999")
		}
		qs := map[string]controlplane.ListDeploymentsQuery{
			"all":                {Limit: new(controlplane.MaxPageLimit)},
			"page 7 at 0":        {Limit: new(7)},
			"page 7 at 7":        {Limit: new(7), Offset: 7},
			"page 20 at 30":      {Limit: new(20), Offset: 30},
			"name svc-01":        {NameContains: "svc-01", Limit: new(100)},
			"name SVC-2":         {NameContains: "SVC-2", Limit: new(100)},
			"name 9 at 5":        {NameContains: "9", Limit: new(10), Offset: 5},
			"name nothing":       {NameContains: "zzz", Limit: new(100)},
			"type dev":           {DeploymentType: controlplane.DeploymentTypeDev, Limit: new(100)},
			"type prod":          {DeploymentType: controlplane.DeploymentTypeProd, Limit: new(100)},
			"remote true":        {RemoteReconciled: new(true), Limit: new(100)},
			"remote false":       {RemoteReconciled: new(false), Limit: new(100)},
			"image":              {ImageVersion: "v-" + "005", Limit: new(100)},
			"tag 1":              {TagValueIDs: layoutTags[:1], Limit: new(100)},
			"tags 1 2 at 3":      {TagValueIDs: layoutTags, Limit: new(100), Offset: 3},
			"tag 2 and READY":    {TagValueIDs: layoutTags[1:], Status: controlplane.StatusReady, Limit: new(100)},
			"name and status":    {NameContains: "svc-1", Status: controlplane.StatusAwaitingDatabase, Limit: new(100)},
			"type and remote":    {DeploymentType: controlplane.DeploymentTypeDev, RemoteReconciled: new(false), Limit: new(100)},
			"ids":                {DeploymentIDs: ids[:min(len(ids), 12)], Limit: new(100)},
			"ids and name":       {DeploymentIDs: ids[:min(len(ids), 40)], NameContains: "3", Limit: new(100), Offset: 1},
			"ids and tag":        {DeploymentIDs: ids[:min(len(ids), 40)], TagValueIDs: layoutTags[:1], Limit: new(100)},
			"ids then none left": {DeploymentIDs: ids[:min(len(ids), 3)], Limit: new(100), Offset: 3},
		}
		for _, s := range []controlplane.DeploymentStatus{controlplane.StatusAwaitingDatabase, controlplane.StatusReady,
			controlplane.StatusUnused, controlplane.StatusAwaitingDelete, controlplane.StatusUnknown} {
			qs["status "+string(s)] = controlplane.ListDeploymentsQuery{Status: s, Limit: new(100)}
		}
		for name, q := range qs { // the pages' ids: every deployment's body is asked for below
			p, err := cp.ListDeployments(ctx, tenant, &q)
			var page []string
			if p != nil {
				for _, d := range p.Resources {
					page = append(page, d.ID)
				}
				page = append(page, fmt.Sprint("offset ", p.Offset))
			}
			ask(tenant+" list "+name, page, err)
		}
		for _, id := range ids {
			d, err := cp.GetDeployment(ctx, tenant, id)
			ask(tenant+" get "+id, d, err)
			revs, err := cp.ListRevisions(ctx, tenant, id, nil)
			ask(tenant+" revisions "+id, layoutRevisionIDs(revs), err)
			done, err := cp.ListRevisions(ctx, tenant, id, &controlplane.ListRevisionsQuery{Status: []controlplane.RevisionStatus{controlplane.RevisionDeployed, controlplane.RevisionSkipped}, Limit: new(1)})
			ask(tenant+" revisions deployed/skipped "+id, layoutRevisionIDs(done), err)
			if revs != nil {
				for _, r := range revs.Resources {
					got, err := cp.GetRevision(ctx, tenant, id, r.ID)
					ask(tenant+" revision "+id+"/"+r.ID, got, err)
				}
			}
		}
		ls, err := cp.ListListeners(ctx, tenant, nil)
		ask(tenant+" listeners", ls, err)
		ins, err := cp.ListIntegrations(ctx, tenant)
		ask(tenant+" integrations", ins, err)
	}
	return out
}

// layoutRevisionIDs is a page's ids and offset.
func layoutRevisionIDs(p *controlplane.RevisionPage) []string {
	if p == nil {
		return nil
	}
	var ids []string
	for _, r := range p.Resources {
		ids = append(ids, r.ID)
	}
	return append(ids, fmt.Sprint("offset ", p.Offset))
}

// layoutWork runs what changes the fixture: a push, creates (one with a
// name taken), deleting a listener in use, and every pending unit of work;
// it returns what each answered, the work in a sorted list.
func layoutWork(t *testing.T, cp *controlplane.ControlPlane) map[string]any {
	ctx := context.Background()
	out := map[string]any{}
	pushed, err := cp.HandleGitHubPush(ctx, &controlplane.PushEvent{InstallationID: 40, RepoURL: "https://github.com/acme/svc", Ref: "refs/heads/main", After: "0123456789abcdef0123456789abcdef01234567", DeliveryID: "delivery-1"})
	out["push"] = fmt.Sprint(len(pushed), err)
	for _, p := range pushed {
		out["push "+p.DeploymentID] = p.Tenant + " " + p.Revision.ID + " " + string(p.Revision.Status)
	}
	for _, tenant := range layoutTenants {
		_, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("svc-005"), Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/x:1")}})
		out[tenant+" create taken name"] = fmt.Sprint(err)
		d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("svc-new"), Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/x:1")}})
		out[tenant+" create"] = fmt.Sprint(d != nil, err)
		// The name freed by the deleted deployment is still taken until
		// its teardown.
		_, err = cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("svc-002"), Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/x:1")}})
		out[tenant+" create deleted name"] = fmt.Sprint(err)
		ls, err := cp.ListListeners(ctx, tenant, nil)
		if err != nil || len(ls.Resources) != 1 {
			t.Fatalf("listeners of %s: %v, %v", tenant, ls, err)
		}
		out[tenant+" delete listener in use"] = fmt.Sprint(cp.DeleteListener(ctx, tenant, ls.Resources[0].ID))
	}
	dep := &layoutDeployer{}
	for i := 0; ; i++ {
		ok, err := cp.Process(ctx, dep)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if i > 1000 {
			t.Fatal("work does not end")
		}
	}
	slices.Sort(dep.seen)
	out["work"] = dep.seen
	for _, tenant := range layoutTenants {
		_, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{Name: new("svc-002"), Source: new(controlplane.SourceExternalDocker),
			SourceRevisionConfig: &controlplane.SourceRevisionConfig{ImageURI: new("r/x:1")}})
		out[tenant+" create torn-down name"] = fmt.Sprint(err)
	}
	return out
}

// layoutOptions are the fixture's options: sealed secrets, counted ids
// from start and a clock that stands still at now.
func layoutOptions(start int, now time.Time) *controlplane.Options {
	return &controlplane.Options{SecretKey: layoutKey, NewID: layoutIDs(start), Clock: func() time.Time { return now }}
}

// layoutRecord is one line of the records file.
type layoutRecord struct {
	Collection string `json:"c"`
	Key        string `json:"k"`
	Value      string `json:"v"` // every value of that layout is text
}

func writeLayoutRecords(t *testing.T, ctx context.Context, st store.Store, path string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	err := st.View(ctx, func(r store.Reader) error {
		for _, col := range controlplane.Collections() {
			err := r.Scan(col, "", nil, func(k string, v []byte) (bool, error) {
				return true, enc.Encode(layoutRecord{col, k, string(v)})
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteLayoutFixture writes the fixture files (see above); it runs
// only when asked to.
func TestWriteLayoutFixture(t *testing.T) {
	if os.Getenv("DEPLOYPLANE_WRITE_LAYOUT_FIXTURE") == "" {
		t.Skip("writes the layout fixture when DEPLOYPLANE_WRITE_LAYOUT_FIXTURE is set")
	}
	ctx := context.Background()
	st := storemem.New()
	var mu sync.Mutex
	now := layoutEpoch
	tick := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	buildLayoutFixture(t, controlplane.New(st, &controlplane.Options{SecretKey: layoutKey, NewID: layoutIDs(0), Clock: tick}))
	writeLayoutRecords(t, ctx, st, layoutRecordsFile)
	cp := controlplane.New(st, layoutOptions(100_000, layoutLaterNow))
	writeLayoutAnswers(t, layoutAnswersFile, map[string]map[string]any{
		"before": layoutAnswers(t, cp), "work": layoutWork(t, cp), "after": layoutAnswers(t, cp)})
}

// writeLayoutAnswers writes one line per phase and question, sorted:
// {"p":phase,"q":question,"a":answer}.
func writeLayoutAnswers(t *testing.T, path string, answers map[string]map[string]any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, phase := range slices.Sorted(maps.Keys(answers)) {
		for _, q := range slices.Sorted(maps.Keys(answers[phase])) {
			if err := enc.Encode(map[string]any{"p": phase, "q": q, "a": answers[phase][q]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
