package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

const (
	tenantA = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"
	tenantB = "9a6b1c2d-3e4f-4a5b-8c7d-0e1f2a3b4c5d"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// fixture is a ControlPlane over a fresh storemem with a clock that moves one
// second per reading and sequential ids, so results are reproducible.
type fixture struct {
	t   *testing.T
	cp  *controlplane.ControlPlane
	st  *storemem.Store
	ctx context.Context
	now time.Time
	ids int
}

func newFixture(t *testing.T, opts *controlplane.Options) *fixture {
	t.Helper()
	f := &fixture{t: t, st: storemem.New(), ctx: context.Background(), now: t0}
	var o controlplane.Options
	if opts != nil {
		o = *opts
	}
	o.Clock = func() time.Time { f.now = f.now.Add(time.Second); return f.now }
	o.NewID = func() string { f.ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", f.ids) }
	if o.GitHubApp != nil && o.GitHubInstallStates == nil {
		o.GitHubInstallStates = githubapp.NewStates(f.st, &githubapp.StatesOptions{Clock: o.Clock})
	}
	f.cp = controlplane.New(f.st, &o)
	t.Cleanup(func() { f.st.Close() })
	return f
}

// drainer returns a func that has d drive the fixture's pending work
// until none is left.
func (f *fixture) drainer(d controlplane.Deployer) func() {
	return func() {
		f.t.Helper()
		for {
			ok, err := f.cp.Process(f.ctx, d)
			if err != nil {
				f.t.Fatal(err)
			}
			if !ok {
				return
			}
		}
	}
}

// tb is the part of testing.TB that *rapid.T also has.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
}

func decode[T any](t tb, body string) *T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return &v
}

// integration registers a GitHub integration for tenant and returns its id.
func (f *fixture) integration(tenant string) string {
	f.t.Helper()
	in, err := f.cp.CreateIntegration(f.ctx, tenant, &controlplane.CreateIntegrationRequest{
		InstallationID: new(int64(1000 + f.ids)), Name: new("acme")})
	if err != nil {
		f.t.Fatal(err)
	}
	return in.ID
}

// listener registers a k8s listener with the given namespaces.
func (f *fixture) listener(tenant string, namespaces ...string) string {
	f.t.Helper()
	l, err := f.cp.CreateListener(f.ctx, tenant, &controlplane.CreateListenerRequest{
		ComputeType: new("k8s"), ComputeID: new(fmt.Sprintf("cluster-%d", f.ids)),
		ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: namespaces}})
	if err != nil {
		f.t.Fatal(err)
	}
	return l.ID
}

// github creates a github deployment from a JSON body in which {{int}} is
// replaced by a fresh integration id.
func (f *fixture) create(tenant, body string) *controlplane.Deployment {
	f.t.Helper()
	d, err := f.cp.CreateDeployment(f.ctx, tenant, decode[controlplane.CreateDeploymentRequest](f.t, body))
	if err != nil {
		f.t.Fatalf("create %s: %v", body, err)
	}
	return d
}

func githubBody(name, integrationID string) string {
	return fmt.Sprintf(`{"name": %q, "source": "github",
		"source_config": {"integration_id": %q, "repo_url": "https://github.com/acme/agent"},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, name, integrationID)
}

func dockerBody(name string) string {
	return fmt.Sprintf(`{"name": %q, "source": "external_docker",
		"source_revision_config": {"image_uri": "registry.example.com/agent:1"}}`, name)
}

// problems returns the problems of a *ValidationError, or fails.
func problems(t tb, err error) []apierr.Problem {
	t.Helper()
	var ve *apierr.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error = %v, want a *ValidationError", err)
	}
	return ve.Problems
}

// locTypes reduces problems to "loc: type" lines, the part the tests pin.
func locTypes(ps []apierr.Problem) []string {
	var out []string
	for _, p := range ps {
		var parts []string
		for _, l := range p.Loc {
			parts = append(parts, fmt.Sprint(l))
		}
		out = append(out, strings.Join(parts, ".")+": "+p.Type)
	}
	return out
}

func diff(t tb, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// dump reads every record of every collection the package writes (and the
// "hook" collection of the tests' hooks): the whole store-visible state.
func dump(t testing.TB, st store.Store) map[string]map[string]string {
	t.Helper()
	out, err := storetest.Dump(context.Background(), st, append(controlplane.Collections(), "hook")...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// failDeploying is a Deployer that takes every revision to DEPLOYING,
// where an engine starts to make things, and fails it there
// (DEPLOY_FAILED); its Teardown works.
type failDeploying struct{}

func (failDeploying) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	reached, err := controlplane.Advance(ctx, r, w.Revision.Source, w.Revision.Status, controlplane.RevisionDeploying, controlplane.Step{})
	if err != nil {
		return err
	}
	return r.Report(ctx, controlplane.Step{Status: controlplane.FailureOf(reached), Message: "failed while deploying"})
}

func (failDeploying) Teardown(context.Context, string, *controlplane.Deployment) error { return nil }

// reachEngine works every pending revision with failDeploying, so that
// each deployment whose revision it was has reached an engine: deleting
// one needs a teardown (it is AWAITING_DELETE until then), where one that
// never ran is removed at once. The deployments themselves do not change.
// Call it before any deployment is AWAITING_DELETE: it would tear that
// down too.
func reachEngine(t tb, ctx context.Context, cp *controlplane.ControlPlane) {
	t.Helper()
	for {
		ok, err := cp.Process(ctx, failDeploying{})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
	}
}

// reachEngine is reachEngine over f's ControlPlane.
func (f *fixture) reachEngine() { f.t.Helper(); reachEngine(f.t, f.ctx, f.cp) }
