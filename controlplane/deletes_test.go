package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
)

// logRecords is a slog.Handler that keeps every record's level and
// message, and the value of its "err" attribute.
type logRecords struct {
	mu   sync.Mutex
	recs []string // "LEVEL message: err"
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }

func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			line += ": " + a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, line)
	h.mu.Unlock()
	return nil
}

// at returns the records of a level.
func (h *logRecords) at(level slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.recs {
		if strings.HasPrefix(r, level.String()+" ") {
			out = append(out, r)
		}
	}
	return out
}

// deleteFixture is a ControlPlane over a store of inBubbleOverStores,
// with a logger that keeps its records.
type deleteFixture struct {
	t   *testing.T
	ctx context.Context
	st  store.Store
	cp  *controlplane.ControlPlane
	log *logRecords
}

func newDeleteFixture(t *testing.T, st store.Store, opts *controlplane.Options) *deleteFixture {
	f := &deleteFixture{t: t, ctx: context.Background(), st: st, log: &logRecords{}}
	var o controlplane.Options
	if opts != nil {
		o = *opts
	}
	o.Logger = slog.New(f.log)
	f.cp = controlplane.New(st, &o)
	return f
}

func (f *deleteFixture) create(tenant, body string) *controlplane.Deployment {
	f.t.Helper()
	d, err := f.cp.CreateDeployment(f.ctx, tenant, decode[controlplane.CreateDeploymentRequest](f.t, body))
	if err != nil {
		f.t.Fatalf("create %s: %v", body, err)
	}
	return d
}

// process does one unit of work with d, which there must be.
func (f *deleteFixture) process(d controlplane.Deployer) error {
	f.t.Helper()
	ok, err := f.cp.Process(f.ctx, d)
	if !ok {
		f.t.Fatalf("Process found no work (err %v)", err)
	}
	return err
}

func (f *deleteFixture) get(id string) (*controlplane.Deployment, error) {
	return f.cp.GetDeployment(f.ctx, tenantA, id)
}

// tracingProject reports whether the deployment's tracing project record
// is stored.
func (f *deleteFixture) tracingProject(id string) bool {
	f.t.Helper()
	var err error
	if verr := f.st.View(f.ctx, func(r store.Reader) error {
		_, err = controlplane.StoreTracingProjects{}.Get(r, tenantA, id)
		return nil
	}); verr != nil {
		f.t.Fatal(verr)
	}
	if err != nil && !errors.Is(err, apierr.ErrNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

// reaching is a Deployer that takes each revision to the status its
// deployment's name maps to (through the happy path) and fails it there,
// or leaves it there when the status is not one a failure follows; its
// Teardown records its calls and fails while fail is set.
type reaching struct {
	to   map[string]controlplane.RevisionStatus // deployment name -> status
	mu   sync.Mutex
	torn []string
	fail error
}

func (r *reaching) Deploy(ctx context.Context, w *controlplane.Work, rep controlplane.Reporter) error {
	to := r.to[w.Deployment.Name]
	if to == controlplane.RevisionUnknown {
		return rep.Report(ctx, controlplane.Step{Status: to})
	}
	reached, err := controlplane.Advance(ctx, rep, w.Revision.Source, w.Revision.Status, to, controlplane.Step{})
	if err != nil {
		return err
	}
	return rep.Report(ctx, controlplane.Step{Status: controlplane.FailureOf(reached), Message: "failed at " + string(reached)})
}

func (r *reaching) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.torn = append(r.torn, d.Name)
	return r.fail
}

func (r *reaching) tornDown() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.torn)
}

// A delete removes at once, without a teardown, a deployment none of
// whose revisions reached an engine (BUILDING, DEPLOYING, DEPLOYED or
// UNKNOWN never entered), freeing its name and, unless asked to keep it,
// its tracing project; any other waits AWAITING_DELETE for its teardown.
func TestDeleteOfWhatNeverRan(t *testing.T) {
	inBubbleOverStores(t, testDeleteOfWhatNeverRan)
}

func testDeleteOfWhatNeverRan(t *testing.T, st store.Store) {
	f := newDeleteFixture(t, st, nil)
	r := &reaching{to: map[string]controlplane.RevisionStatus{
		"queued":          controlplane.RevisionQueued,         // CREATE_FAILED from QUEUED
		"awaiting-deploy": controlplane.RevisionAwaitingDeploy, // DEPLOY_FAILED from AWAITING_DEPLOY
		"awaiting-build":  controlplane.RevisionAwaitingBuild,  // BUILD_FAILED from AWAITING_BUILD
		"building":        controlplane.RevisionBuilding,       // BUILD_FAILED from BUILDING
		"deploying":       controlplane.RevisionDeploying,      // DEPLOY_FAILED from DEPLOYING
		"unknown":         controlplane.RevisionUnknown,        // left UNKNOWN
	}}
	intg, err := f.cp.CreateIntegration(f.ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(1)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	created := map[string]*controlplane.Deployment{}
	for _, name := range []string{"queued", "awaiting-deploy", "deploying", "unknown"} {
		created[name] = f.create(tenantA, dockerBody(name))
	}
	for _, name := range []string{"awaiting-build", "building"} {
		created[name] = f.create(tenantA, githubBody(name, intg.ID))
	}
	for range created {
		if err := f.process(r); err != nil {
			t.Fatal(err)
		}
	}
	// Never processed: CREATING.
	created["creating"] = f.create(tenantA, dockerBody("creating"))
	// No revision at all: an internal_docker deployment whose image never came.
	created["no-revision"] = f.create(tenantA, `{"name": "no-revision", "source": "internal_docker"}`)
	if created["no-revision"].LatestRevisionID != nil {
		t.Fatalf("internal_docker without an image made a revision")
	}
	keep := map[string]bool{"queued": true, "deploying": true}
	for name, d := range created {
		if err := f.cp.DeleteDeploymentWith(f.ctx, tenantA, d.ID, &controlplane.DeleteDeploymentOptions{KeepTracingProject: keep[name]}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	waits := []string{"building", "deploying", "unknown"}
	for name, d := range created {
		got, err := f.get(d.ID)
		switch {
		case slices.Contains(waits, name):
			if err != nil || got.Status != controlplane.StatusAwaitingDelete || got.StatusMessage != nil {
				t.Errorf("%s (reached an engine) after delete: %+v, %v; want AWAITING_DELETE", name, got, err)
			}
		default:
			if !errors.Is(err, apierr.ErrNotFound) {
				t.Errorf("%s (never ran) after delete: %v; want removed at once", name, err)
			}
			if f.tracingProject(d.ID) != keep[name] {
				t.Errorf("%s: tracing project kept %v, want %v", name, !keep[name], keep[name])
			}
			f.create(tenantA, dockerBody(name)) // the name is free
		}
	}
	var removed []string
	for _, line := range f.log.at(slog.LevelInfo) {
		if strings.Contains(line, "removed at once") {
			removed = append(removed, line)
		}
	}
	if len(removed) != 5 {
		t.Errorf("info lines %q, want one per deployment removed at once", removed)
	}
	// The teardowns: those that reached an engine, and nothing else (the
	// new deployments' revisions are deployed by the same deployer).
	for {
		ok, err := f.cp.Process(f.ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
	}
	torn := r.tornDown()
	slices.Sort(torn)
	diff(t, "teardowns", waits, torn)
	for _, name := range waits {
		if _, err := f.get(created[name].ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("%s after its teardown: %v, want removed", name, err)
		}
		if f.tracingProject(created[name].ID) != keep[name] {
			t.Errorf("%s: tracing project kept %v, want %v", name, !keep[name], keep[name])
		}
	}
	if got := f.log.at(slog.LevelError); len(got) > 0 {
		t.Errorf("errors logged: %q", got)
	}
}

// A teardown that keeps failing is retried after 2 s, then twice as long
// each time up to 5 min, by the ControlPlane's clock; the deployment's
// status_message says why it waits, and the ERROR line is logged once per
// distinct failure, not at every retry. Once it works, the deployment
// goes.
func TestTeardownBackoff(t *testing.T) {
	inBubbleOverStores(t, testTeardownBackoff)
}

func testTeardownBackoff(t *testing.T, st store.Store) {
	const poll = time.Second
	f := newDeleteFixture(t, st, &controlplane.Options{PollInterval: poll})
	var mu sync.Mutex
	var calls []time.Time
	teardownErr := errors.New("cluster east is unreachable")
	r := &reaching{to: map[string]controlplane.RevisionStatus{"agent": controlplane.RevisionDeploying}}
	d := f.create(tenantA, dockerBody("agent"))
	if err := f.process(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() {
		done <- f.cp.Run(ctx, &script{teardown: func(context.Context, string, *controlplane.Deployment) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, time.Now()) // the bubble's clock, which is the ControlPlane's
			return teardownErr
		}})
	}()
	defer func() { cancel(); <-done }()
	start := time.Now()
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(15 * time.Minute)
	synctest.Wait()
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	// Each call comes at the first poll after its backoff: 0, then 2 s,
	// 4 s, ... 256 s, then 300 s apart.
	want := []time.Duration{0}
	for wait := 2 * time.Second; ; wait = min(2*wait, 5*time.Minute) {
		next := want[len(want)-1] + wait
		if next > 15*time.Minute {
			break
		}
		want = append(want, next)
	}
	if len(got) != len(want) {
		t.Fatalf("%d teardowns in 15 min, want %d (at %v)", len(got), len(want), want)
	}
	prev := start
	for i, at := range got {
		if wait := want[i] - want[max(i-1, 0)]; at.Sub(prev) < wait || at.Sub(prev) > wait+poll {
			t.Errorf("teardown %d came %v after the one before, want %v (within a poll)", i, at.Sub(prev), wait)
		}
		prev = at
	}
	dep, err := f.get(d.ID)
	if err != nil || dep.Status != controlplane.StatusAwaitingDelete || dep.StatusMessage == nil ||
		!strings.Contains(*dep.StatusMessage, teardownErr.Error()) || !strings.Contains(*dep.StatusMessage, "force=true") {
		t.Fatalf("while the teardown fails: %+v, %v; want AWAITING_DELETE with a status_message naming the failure", dep, err)
	}
	if errs := f.log.at(slog.LevelError); len(errs) != 1 || !strings.Contains(errs[0], teardownErr.Error()) {
		t.Errorf("error lines %q, want one, for the one failure", errs)
	}
	updated := dep.UpdatedAt

	// Another failure: said and logged once more.
	mu.Lock()
	teardownErr = errors.New("cluster east refused the credentials")
	mu.Unlock()
	time.Sleep(10 * time.Minute)
	synctest.Wait()
	dep, err = f.get(d.ID)
	if err != nil || !strings.Contains(*dep.StatusMessage, "refused the credentials") || !dep.UpdatedAt.After(updated) {
		t.Fatalf("after another failure: %+v, %v", dep, err)
	}
	if errs := f.log.at(slog.LevelError); len(errs) != 2 || !strings.Contains(errs[1], "refused the credentials") {
		t.Errorf("error lines %q, want one per distinct failure", errs)
	}

	// It works again: the deployment goes at the next try.
	mu.Lock()
	teardownErr = nil
	mu.Unlock()
	time.Sleep(5*time.Minute + poll)
	synctest.Wait()
	if _, err := f.get(d.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Fatalf("after a teardown that worked: %v, want removed", err)
	}
	f.create(tenantA, dockerBody("agent")) // the name is free
	if infos := f.log.at(slog.LevelInfo); !slices.ContainsFunc(infos, func(s string) bool {
		return strings.Contains(s, "teardown succeeded after failing")
	}) {
		t.Errorf("info lines %q, want the recovery", infos)
	}
}

// A forced delete removes at once the records of a deployment
// AWAITING_DELETE, without its engine, with a WARN line saying that its
// engine's objects may remain; it is refused for a deployment not being
// deleted, and changes nothing then.
func TestForceDelete(t *testing.T) {
	inBubbleOverStores(t, testForceDelete)
}

func testForceDelete(t *testing.T, st store.Store) {
	f := newDeleteFixture(t, st, nil)
	r := &reaching{to: map[string]controlplane.RevisionStatus{"stuck": controlplane.RevisionDeploying, "kept": controlplane.RevisionDeploying},
		fail: errors.New("no such cluster")}
	stuck, kept := f.create(tenantA, dockerBody("stuck")), f.create(tenantA, dockerBody("kept"))
	for range 2 {
		if err := f.process(r); err != nil {
			t.Fatal(err)
		}
	}
	force := &controlplane.DeleteDeploymentOptions{Force: true}
	before := dump(t, st)
	err := f.cp.DeleteDeploymentWith(f.ctx, tenantA, stuck.ID, force)
	if !errors.Is(err, apierr.ErrInvalidState) || !strings.Contains(err.Error(), "is not being deleted") {
		t.Fatalf("force on a deployment not being deleted: %v, want ErrInvalidState", err)
	}
	diff(t, "store after a refused force", before, dump(t, st))
	if err := f.cp.DeleteDeploymentWith(f.ctx, tenantA, "00000000-0000-7000-8000-0000000000ff", force); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("force on an unknown deployment: %v, want not found", err)
	}
	if err := f.cp.DeleteDeploymentWith(f.ctx, tenantB, stuck.ID, force); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("force on another tenant's deployment: %v, want not found", err)
	}
	for _, d := range []*controlplane.Deployment{stuck, kept} {
		if err := f.cp.DeleteDeployment(f.ctx, tenantA, d.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.process(r); !errors.Is(err, r.fail) {
			t.Fatalf("teardown of %s: %v, want it to fail", d.Name, err)
		}
	}
	if err := f.cp.DeleteDeploymentWith(f.ctx, tenantA, stuck.ID, force); err != nil {
		t.Fatal(err)
	}
	if err := f.cp.DeleteDeploymentWith(f.ctx, tenantA, kept.ID, &controlplane.DeleteDeploymentOptions{Force: true, KeepTracingProject: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*controlplane.Deployment{stuck, kept} {
		if _, err := f.get(d.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("%s after a forced delete: %v, want removed", d.Name, err)
		}
		if got, want := f.tracingProject(d.ID), d == kept; got != want {
			t.Errorf("%s: tracing project kept %v, want %v", d.Name, got, want)
		}
	}
	if ok, err := f.cp.Process(f.ctx, r); ok || err != nil {
		t.Errorf("Process after the forced deletes = %v, %v; want no work left", ok, err)
	}
	diff(t, "teardowns", []string{"stuck", "kept"}, r.tornDown())
	warns := f.log.at(slog.LevelWarn)
	if len(warns) != 2 || !strings.Contains(warns[0], "may remain") {
		t.Errorf("warn lines %q, want one per forced delete saying what may remain", warns)
	}
	f.create(tenantA, dockerBody("stuck")) // the name is free
	if err := f.cp.DeleteDeploymentWith(f.ctx, tenantA, stuck.ID, force); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("a second forced delete: %v, want not found", err)
	}
}

// A forced delete of a listener deletes its deployments as DELETE does
// (at once those that never ran, after their teardown the others); the
// listener goes with the last of them, and meanwhile no new deployment
// may name it. Without force, a listener with deployments is refused.
func TestDeleteListenerWithItsDeployments(t *testing.T) {
	inBubbleOverStores(t, testDeleteListenerWithItsDeployments)
}

func testDeleteListenerWithItsDeployments(t *testing.T, st store.Store) {
	f := newDeleteFixture(t, st, nil)
	listener := func(computeID string) string {
		l, err := f.cp.CreateListener(f.ctx, tenantA, &controlplane.CreateListenerRequest{ComputeType: new("k8s"), ComputeID: new(computeID)})
		if err != nil {
			t.Fatal(err)
		}
		return l.ID
	}
	on := func(name, listenerID string) *controlplane.Deployment {
		return f.create(tenantA, fmt.Sprintf(`{"name": %q, "source": "external_docker", "source_config": {"listener_id": %q},
			"source_revision_config": {"image_uri": "r/a:1"}}`, name, listenerID))
	}
	r := &reaching{to: map[string]controlplane.RevisionStatus{"ran": controlplane.RevisionDeploying}}

	// Every deployment never ran: the listener goes at once with them.
	l1 := listener("east")
	a, b := on("a", l1), on("b", l1)
	if err := f.cp.DeleteListener(f.ctx, tenantA, l1); !errors.Is(err, apierr.ErrInvalidState) || !strings.Contains(err.Error(), "force=true") {
		t.Fatalf("delete of a listener in use: %v, want ErrInvalidState", err)
	}
	if err := f.cp.DeleteListenerWith(f.ctx, tenantA, l1, &controlplane.DeleteListenerOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*controlplane.Deployment{a, b} {
		if _, err := f.get(d.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("%s after the listener's forced delete: %v, want removed", d.Name, err)
		}
	}
	if _, err := f.cp.GetListener(f.ctx, tenantA, l1); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("the listener after its forced delete: %v, want removed", err)
	}
	listener("east") // its compute_id is free

	// One ran: the listener waits for its teardown.
	l2 := listener("west")
	ran := on("ran", l2)
	if err := f.process(r); err != nil {
		t.Fatal(err)
	}
	fresh := on("fresh", l2)
	if err := f.cp.DeleteListenerWith(f.ctx, tenantA, l2, &controlplane.DeleteListenerOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.get(fresh.ID); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("a deployment that never ran, after the listener's forced delete: %v, want removed", err)
	}
	if got, err := f.get(ran.ID); err != nil || got.Status != controlplane.StatusAwaitingDelete {
		t.Errorf("a deployment that ran, after the listener's forced delete: %+v, %v; want AWAITING_DELETE", got, err)
	}
	if _, err := f.cp.GetListener(f.ctx, tenantA, l2); err != nil {
		t.Errorf("the listener while its deployment's teardown waits: %v, want it still there", err)
	}
	_, err := f.cp.CreateDeployment(f.ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, fmt.Sprintf(
		`{"name": "late", "source": "external_docker", "source_config": {"listener_id": %q}, "source_revision_config": {"image_uri": "r/a:1"}}`, l2)))
	diff(t, "a new deployment on a listener being deleted", []string{"body.source_config.listener_id: unknown_reference"}, locTypes(problems(t, err)))
	if err := f.cp.DeleteListener(f.ctx, tenantA, l2); !errors.Is(err, apierr.ErrInvalidState) || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("delete without force of a listener being deleted: %v, want ErrInvalidState", err)
	}
	if err := f.cp.DeleteListenerWith(f.ctx, tenantA, l2, &controlplane.DeleteListenerOptions{Force: true}); err != nil {
		t.Errorf("a second forced delete: %v", err)
	}
	if err := f.process(r); err != nil { // the teardown
		t.Fatal(err)
	}
	diff(t, "teardowns", []string{"ran"}, r.tornDown())
	if _, err := f.cp.GetListener(f.ctx, tenantA, l2); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("the listener after its last deployment's teardown: %v, want removed", err)
	}
	listener("west") // its compute_id is free
	if err := f.cp.DeleteListenerWith(f.ctx, tenantA, l2, &controlplane.DeleteListenerOptions{Force: true}); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("a forced delete of a removed listener: %v, want not found", err)
	}
}

// reachEngine has an agent of the listener claim each revision it can
// and report it DEPLOYING, keeping the leases: the deployments reached
// an engine, so that deleting one needs its agent's teardown.
func (f *agentFixture) reachEngine(tenant, listener string) {
	f.t.Helper()
	for {
		w := f.claim(tenant, listener)
		if w == nil {
			return
		}
		if w.Kind != controlplane.AgentDeploy {
			f.t.Fatalf("claimed %s, want only revisions", w.Kind)
		}
		for _, s := range []controlplane.RevisionStatus{controlplane.RevisionAwaitingDeploy, controlplane.RevisionDeploying} {
			if err := f.cp.ReportAgent(f.ctx, tenant, listener, w.Lease, controlplane.Step{Status: s}); err != nil {
				f.t.Fatal(err)
			}
		}
	}
}

// The deletes of deployments that agents serve: one whose revision no
// agent ever took goes at once, leaving the agents nothing to do; one
// whose agent ran it is torn down by its agent, whose failures back off
// and show as for Run's (FailAgentTeardown), until it finishes.
func TestDeletesOfAgentServedDeployments(t *testing.T) {
	inBubbleOverStores(t, func(t *testing.T, st store.Store) {
		log := &logRecords{}
		o := agentOptions()
		o.Logger = slog.New(log)
		f := &agentFixture{t: t, st: st, cp: controlplane.New(st, o), ctx: context.Background()}
		edge := f.listener(tenantA, "edge-1")
		ran := f.deployment(tenantA, "ran", edge)
		f.reachEngine(tenantA, edge)
		waiting := f.deployment(tenantA, "waiting", edge) // QUEUED, waiting for an agent
		if err := f.cp.DeleteDeployment(f.ctx, tenantA, waiting.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.cp.GetDeployment(f.ctx, tenantA, waiting.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Fatalf("a deployment no agent took, after DELETE: %v, want removed at once", err)
		}
		if w := f.claim(tenantA, edge); w != nil {
			t.Fatalf("claim after the delete of what never ran = %+v, want nothing", w)
		}

		if err := f.cp.DeleteDeployment(f.ctx, tenantA, ran.ID); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var claims []time.Duration
		for range 4 {
			var w *controlplane.AgentWork
			for w == nil {
				if w = f.claim(tenantA, edge); w == nil {
					time.Sleep(100 * time.Millisecond)
				}
			}
			claims = append(claims, time.Since(start).Round(100*time.Millisecond))
			if w.Kind != controlplane.AgentTeardown || w.Deployment.ID != ran.ID {
				t.Fatalf("claim = %+v, want the teardown", w)
			}
			if err := f.cp.FailAgentTeardown(f.ctx, tenantA, edge, w.Lease, "cluster edge-1 is unreachable"); err != nil {
				t.Fatal(err)
			}
			start = time.Now()
		}
		diff(t, "waits before each claim of the failing teardown", []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second}, claims)
		got := f.get(tenantA, ran.ID)
		if got.Status != controlplane.StatusAwaitingDelete || got.StatusMessage == nil || !strings.Contains(*got.StatusMessage, "edge-1 is unreachable") {
			t.Errorf("while its agent's teardown fails: %s %v", got.Status, got.StatusMessage)
		}
		if errs := log.at(slog.LevelError); len(errs) != 1 {
			t.Errorf("error lines %q, want one for the one failure", errs)
		}
		time.Sleep(16 * time.Second)
		w := f.claim(tenantA, edge)
		if w == nil {
			t.Fatal("no teardown to claim after its backoff")
		}
		if err := f.cp.FinishAgentTeardown(f.ctx, tenantA, edge, w.Lease); err != nil {
			t.Fatal(err)
		}
		if _, err := f.cp.GetDeployment(f.ctx, tenantA, ran.ID); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("after the agent's teardown: %v, want removed", err)
		}
		if err := f.cp.DeleteListener(f.ctx, tenantA, edge); err != nil {
			t.Errorf("delete of the listener once its deployments are gone: %v", err)
		}
	})
}

// TestDeleteDeployments: a bulk delete deletes each id as
// DeleteDeploymentWith does, with the same options, each on its own: one
// that never ran goes at once, one that ran waits AWAITING_DELETE, one
// already AWAITING_DELETE succeeds again; an unknown id, another tenant's
// and force for one not being deleted fail alone, and so does an id that
// is no UUID (a 422 at its index); an id given twice is deleted and
// answered once. No ids, or more than MaxDeleteIDs, refuse the request
// and delete nothing.
func TestDeleteDeployments(t *testing.T) {
	inBubbleOverStores(t, testDeleteDeployments)
}

func testDeleteDeployments(t *testing.T, st store.Store) {
	f := newDeleteFixture(t, st, nil)
	r := &reaching{to: map[string]controlplane.RevisionStatus{"ran": controlplane.RevisionDeploying, "deleting": controlplane.RevisionDeploying}}
	ran, deleting := f.create(tenantA, dockerBody("ran")), f.create(tenantA, dockerBody("deleting"))
	for range 2 {
		if err := f.process(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.cp.DeleteDeployment(f.ctx, tenantA, deleting.ID); err != nil {
		t.Fatal(err)
	}
	fresh := f.create(tenantA, dockerBody("fresh"))
	theirs, err := f.cp.CreateDeployment(f.ctx, tenantB, decode[controlplane.CreateDeploymentRequest](t, dockerBody("theirs")))
	if err != nil {
		t.Fatal(err)
	}
	unknown := "00000000-0000-4000-8000-00000000abcd"

	for _, bad := range [][]string{nil, {}, make([]string, controlplane.MaxDeleteIDs+1)} {
		before := dump(t, st)
		_, err := f.cp.DeleteDeployments(f.ctx, tenantA, bad, nil)
		want := "query.deployment_ids: missing"
		if len(bad) > 0 {
			want = "query.deployment_ids: too_long"
		}
		diff(t, fmt.Sprintf("problems of a bulk delete of %d ids", len(bad)), []string{want}, locTypes(problems(t, err)))
		diff(t, "the store after a refused bulk delete", before, dump(t, st))
	}

	ids := []string{fresh.ID, strings.ToUpper(ran.ID), "not-a-uuid", deleting.ID, unknown, theirs.ID, fresh.ID}
	res, err := f.cp.DeleteDeployments(f.ctx, tenantA, ids, &controlplane.DeleteDeploymentOptions{KeepTracingProject: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res {
		got = append(got, r.ID+": "+outcome(r.Err))
	}
	diff(t, "results", []string{
		fresh.ID + ": ok",
		ran.ID + ": ok",
		"not-a-uuid: 422 query.deployment_ids.2: uuid_parsing",
		deleting.ID + ": ok",
		unknown + ": 404 Deployment ID " + unknown + " not found.",
		theirs.ID + ": 404 Deployment ID " + theirs.ID + " not found.",
	}, got)
	if _, err := f.get(fresh.ID); !errors.Is(err, apierr.ErrNotFound) || !f.tracingProject(fresh.ID) {
		t.Errorf("a deployment that never ran: %v, tracing project kept %v; want removed at once, its project kept", err, f.tracingProject(fresh.ID))
	}
	if d, err := f.get(ran.ID); err != nil || d.Status != controlplane.StatusAwaitingDelete {
		t.Errorf("a deployment that ran: %+v, %v; want AWAITING_DELETE", d, err)
	}
	if _, err := f.cp.GetDeployment(f.ctx, tenantB, theirs.ID); err != nil {
		t.Errorf("another tenant's deployment after the bulk delete: %v", err)
	}

	// force applies to each: the ones being deleted go, another fails alone.
	other := f.create(tenantA, dockerBody("other"))
	res, err = f.cp.DeleteDeployments(f.ctx, tenantA, []string{ran.ID, other.ID, deleting.ID}, &controlplane.DeleteDeploymentOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, r := range res {
		got = append(got, outcome(r.Err))
	}
	diff(t, "forced results", []string{"ok", "400", "ok"}, got)
	for _, id := range []string{ran.ID, deleting.ID} {
		if _, err := f.get(id); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("a forced delete of %s: %v, want removed", id, err)
		}
	}
	if _, err := f.get(other.ID); err != nil {
		t.Errorf("a deployment a forced delete refused: %v, want it unchanged", err)
	}
}

// outcome is an error of a bulk delete's result as the tests compare it.
func outcome(err error) string {
	var ve *apierr.ValidationError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ve):
		return "422 " + strings.Join(locTypes(ve.Problems), ",")
	case errors.Is(err, apierr.ErrNotFound):
		return "404 " + err.Error()
	case errors.Is(err, apierr.ErrInvalidState):
		return "400"
	}
	return "unexpected " + err.Error()
}
