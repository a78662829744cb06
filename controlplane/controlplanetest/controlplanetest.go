// Package controlplanetest is the state-machine test of package
// controlplane: random sequences of ControlPlane calls, checked against a
// model after every step, over any store.Store.
//
// The request generators read controlplane.FieldRules, so every row of the
// rules table is exercised under every policy: immutable fields sent equal
// and different, in-place and revision-triggering changes, fields that do
// not apply to the source, read-only and ignored fields. The model predicts
// each call's outcome (success, not found, invalid state, conflict or
// validation failure) and the whole expected wire shape of every
// deployment. Invariants checked after every step: every deployment equals
// the model (so immutable fields never change), the revision count and order
// (latest_revision_id is the newest), newest-first lists, every
// deployment's source_revision_config equal to its latest revision's as the
// ControlPlane answers both (repo_commit_sha included: the mirror of the
// seed), and a rejected call changes nothing in the store (every collection
// compared before and after). GetDeploymentJSON must answer the bytes
// json.Marshal gives of GetDeployment.
//
// The lifecycle is in the machine too (lifecycle.go), against the model's
// own copy of the transition rules: "work" runs ControlPlane.Process with a
// scripted Deployer whose reports are drawn (mostly the next happy status,
// sometimes any status, UNKNOWN, a deployment status, a commit sha or an
// image version) and ends with or without an error; every report's outcome
// must be the model's (a refused one must leave the store unchanged), and
// Process must find work exactly when the model has some (a revision not
// final, a deployment AWAITING_DELETE). The model follows SKIPPED on every
// new revision, INTERRUPTED on delete, the failure of the phase when Deploy
// fails, active_revision_id as the newest DEPLOYED revision, the commit a
// report gives the latest revision mirrored on the deployment, and teardown
// removing every record. "push" sends GitHub push events (both tenants
// share one installation; URLs spelled several ways, branches, tags) and
// the model predicts which deployments get a revision.
//
// With several openers, each step runs against every store and the results
// (values, errors, and the stores' whole contents) must be identical: the
// clock and the ids are deterministic. A store's test file calls
//
//	controlplanetest.Run(t, func() (store.Store, error) { return storebolt.Open(filepath.Join(t.TempDir(), "db"), nil) })
//
// and a cross-store test passes several openers.
package controlplanetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

// Opener opens a new, empty store for one test case; Run closes it.
type Opener func() (store.Store, error)

// Run checks the ControlPlane state machine over the stores opens opens.
// It needs at least one opener.
func Run(t *testing.T, opens ...Opener) {
	t.Helper()
	if len(opens) == 0 {
		t.Fatal("controlplanetest.Run: no opener")
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(rt, opens)
		defer m.close()
		rt.Repeat(map[string]func(*rapid.T){
			"create":          m.create,
			"patch":           func(rt *rapid.T) { m.patch(rt, false) },
			"create_revision": func(rt *rapid.T) { m.patch(rt, true) },
			"redeploy":        m.redeploy,
			"delete":          m.delete,
			"push":            m.push,
			"work":            m.work,
			"":                m.check,
		})
	})
}

var (
	tenants   = []string{"0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b", "9a6b1c2d-3e4f-4a5b-8c7d-0e1f2a3b4c5d"}
	unknownID = "00000000-0000-4000-8000-00000000abcd"
	t0        = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

const (
	urlTemplate    = "https://{id}.{tenant}.example"
	installationID = 7 // tenants[i] holds installationID+i
)

// installationOf is the GitHub installation that tenant holds.
func installationOf(tenant string) int64 {
	return installationID + int64(slices.Index(tenants, tenant))
}

// system is one ControlPlane over one store, with its own deterministic
// clock (one second per reading) and ids (a counter).
type system struct {
	st  store.Store
	cp  *controlplane.ControlPlane
	now time.Time
	ids int
}

// mRev is the model of a revision: its snapshot, as JSON values, and its
// lifecycle state.
type mRev struct {
	id                           string
	src, secrets, spec           any
	installCommand, buildCommand any
	status                       string
	msg                          any // nil or the status_message
	image                        any // nil or the image version reported
}

// mDep is the model of a deployment: its expected wire shape as decoded
// JSON, and its revisions, oldest first.
type mDep struct {
	tenant string
	exp    map[string]any
	revs   []mRev
}

func (d *mDep) id() string     { return d.exp["id"].(string) }
func (d *mDep) source() string { return d.exp["source"].(string) }
func (d *mDep) deleted() bool  { return d.exp["status"] == string(controlplane.StatusAwaitingDelete) }

type machine struct {
	ctx     context.Context
	systems []*system
	integ   map[string]string // tenant -> integration id
	lis     map[string]string // tenant -> listener id (namespaces ns-a, ns-b)
	deps    []*mDep           // creation order
	rules   []controlplane.FieldRule
}

func newMachine(rt *rapid.T, opens []Opener) *machine {
	m := &machine{ctx: context.Background(), integ: map[string]string{}, lis: map[string]string{}, rules: controlplane.FieldRules()}
	for _, open := range opens {
		st, err := open()
		if err != nil {
			rt.Fatalf("open store: %v", err)
		}
		s := &system{st: st, now: t0}
		s.cp = controlplane.New(st, &controlplane.Options{
			Clock:             func() time.Time { s.now = s.now.Add(time.Second); return s.now },
			NewID:             func() string { s.ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", s.ids) },
			CustomURLTemplate: urlTemplate,
		})
		m.systems = append(m.systems, s)
	}
	for i, tenant := range tenants {
		in, err := m.call(rt, "create integration", func(cp *controlplane.ControlPlane) (any, error) {
			// Each tenant holds its own installation: an installation
			// belongs to one tenant at most.
			return cp.CreateIntegration(m.ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(installationOf(tenant)), Name: new(fmt.Sprint("acme", i))})
		})
		if err != nil {
			rt.Fatal(err)
		}
		m.integ[tenant] = in.(*controlplane.Integration).ID
		l, err := m.call(rt, "create listener", func(cp *controlplane.ControlPlane) (any, error) {
			return cp.CreateListener(m.ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"),
				ComputeID: new("cluster"), ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: []string{"ns-a", "ns-b"}}})
		})
		if err != nil {
			rt.Fatal(err)
		}
		m.lis[tenant] = l.(*controlplane.Listener).ID
	}
	return m
}

func (m *machine) close() {
	for _, s := range m.systems {
		s.st.Close()
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%T: %v", err, err)
}

// call runs f against every system; results and errors must be identical.
func (m *machine) call(rt *rapid.T, what string, f func(cp *controlplane.ControlPlane) (any, error)) (any, error) {
	rt.Helper()
	var res0 any
	var err0 error
	for i, s := range m.systems {
		res, err := f(s.cp)
		if i == 0 {
			res0, err0 = res, err
			continue
		}
		if errText(err) != errText(err0) {
			rt.Fatalf("%s: store %d returned error %q, store 0 %q", what, i, errText(err), errText(err0))
		}
		if d := cmp.Diff(res0, res); d != "" {
			rt.Fatalf("%s: store %d differs from store 0 (-0 +%d):\n%s", what, i, i, d)
		}
	}
	return res0, err0
}

// outcome classes of a call.
const (
	okay         = "ok"
	notFound     = "not found"
	invalidState = "invalid state"
	conflict     = "conflict"
	invalid      = "validation"
)

func classify(err error) string {
	var ve *controlplane.ValidationError
	switch {
	case err == nil:
		return okay
	case errors.Is(err, controlplane.ErrNotFound):
		return notFound
	case errors.Is(err, controlplane.ErrInvalidState):
		return invalidState
	case errors.Is(err, controlplane.ErrConflict):
		return conflict
	case errors.As(err, &ve):
		return invalid
	}
	return "unexpected: " + err.Error()
}

// dump reads every record of every collection of system 0.
func (m *machine) dump(rt *rapid.T) map[string]map[string]string {
	return m.dumpStore(rt, m.systems[0].st)
}

// dumpStore reads every record of every collection of st.
func (m *machine) dumpStore(rt *rapid.T, st store.Store) map[string]map[string]string {
	out, err := storetest.Dump(m.ctx, st, controlplane.Collections()...)
	if err != nil {
		rt.Fatal(err)
	}
	return out
}

// expectOutcome runs a call that the model says ends in want; when it is an
// error, the store must be unchanged.
func (m *machine) expectOutcome(rt *rapid.T, what, want string, f func(cp *controlplane.ControlPlane) (any, error)) any {
	rt.Helper()
	var before map[string]map[string]string
	if want != okay {
		before = m.dump(rt)
	}
	res, err := m.call(rt, what, f)
	if got := classify(err); got != want {
		rt.Fatalf("%s: outcome %s (%v), model says %s", what, got, err, want)
	}
	if want != okay {
		if d := cmp.Diff(before, m.dump(rt)); d != "" {
			rt.Fatalf("%s: a rejected call changed the store (-before +after):\n%s", what, d)
		}
	}
	return res
}

// jsonValue round-trips v through JSON so that it compares with decoded
// responses.
func jsonValue(rt *rapid.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		rt.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		rt.Fatal(err)
	}
	return out
}

func toMap(rt *rapid.T, v any) map[string]any {
	m, _ := jsonValue(rt, v).(map[string]any)
	return m
}

func getPath(m map[string]any, loc []string) any {
	var v any = m
	for _, k := range loc {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func setPath(m map[string]any, loc []string, v any) {
	for _, k := range loc[:len(loc)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[loc[len(loc)-1]] = v
}

func deepCopy(rt *rapid.T, m map[string]any) map[string]any { return toMap(rt, m) }

// gen draws a value for the field at loc, as JSON, and whether it is valid
// for a create in tenant (references must be the tenant's).
func (m *machine) gen(rt *rapid.T, tenant string, loc []string) (any, bool) {
	l := strings.Join(loc, ".")
	pick := func(vs ...string) string { return rapid.SampledFrom(vs).Draw(rt, l) }
	// orBad returns good, or rarely bad.
	orBad := func(good, bad string) string {
		if rapid.IntRange(0, 7).Draw(rt, l+" bad") == 0 {
			return bad
		}
		return good
	}
	switch l {
	case "name":
		return pick("a", "b", "Agent.1", "x_y-2"), true
	case "source":
		return pick("github", "external_docker"), true
	case "source_config.integration_id":
		v := orBad(m.integ[tenant], unknownID)
		return v, v == m.integ[tenant]
	case "source_config.repo_url":
		return pick("https://github.com/acme/a", "https://github.com/acme/b"), true
	case "source_config.deployment_type":
		return pick("dev_free", "dev", "prod"), true
	case "source_config.build_on_push":
		return rapid.Bool().Draw(rt, l), true
	case "source_config.custom_url":
		return pick("https://a.example", "https://b.example"), true
	case "source_config.resource_spec":
		s := orBad(pick(`{}`, `{"min_scale": 1, "max_scale": 2}`, `{"cpu": 0.5, "memory_mb": 512}`,
			`{"volumes": [{"name": "v", "emptyDir": {}}], "volume_mounts": [{"name": "v", "mountPath": "/v"}]}`),
			`{"min_scale": 3, "max_scale": 1}`)
		var spec controlplane.ResourceSpec
		if err := json.Unmarshal([]byte(s), &spec); err != nil {
			rt.Fatal(err)
		}
		return jsonValue(rt, spec), !strings.Contains(s, `"min_scale": 3`)
	case "source_config.listener_id":
		v := orBad(m.lis[tenant], unknownID)
		return v, v == m.lis[tenant]
	case "source_config.listener_config":
		ns := orBad(pick("ns-a", "ns-b"), "ns-z")
		return map[string]any{"k8s_namespace": ns}, true // checked against the listener by the caller
	case "source_config.install_command", "source_config.build_command":
		return pick("npm ci", "pnpm i"), true
	case "source_revision_config.repo_ref":
		v := orBad(pick("main", "dev", "refs/tags/v1"), "")
		return v, v != ""
	case "source_revision_config.graph_config_path":
		return pick("langgraph.json", "g.json"), true
	case "source_revision_config.image_uri":
		v := orBad(pick("r/a:1", "r/a:2"), "")
		return v, v != ""
	case "source_revision_config.repo_commit_sha":
		return "abc123", true
	case "secrets":
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"A", "B", "C"}), 0, 3, rapid.ID).Draw(rt, "secret names")
		out := []any{}
		for _, n := range names {
			out = append(out, map[string]any{"name": n, "value": pick("1", "2")})
		}
		return out, true
	}
	rt.Fatalf("controlplanetest: no generator for field %s: add one", l)
	return nil, false
}

func isTag(v any) bool {
	s, ok := v.(string)
	return ok && strings.HasPrefix(s, "refs/tags/")
}

func (m *machine) create(rt *rapid.T) {
	tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
	src := rapid.SampledFrom([]string{"github", "external_docker"}).Draw(rt, "source")
	source := controlplane.Source(src)
	name, _ := m.gen(rt, tenant, []string{"name"})
	body := map[string]any{"name": name, "source": src}
	valid := true
	for _, r := range m.rules {
		if r.Loc[0] == "name" || r.Loc[0] == "source" {
			continue
		}
		var include bool
		switch r.Create[source] {
		case controlplane.CreateRequired:
			include = rapid.IntRange(0, 19).Draw(rt, "drop required") != 0
			valid = valid && include
		case controlplane.CreateOptional, controlplane.CreateIgnored:
			include = rapid.Bool().Draw(rt, "include optional")
		case controlplane.CreateNotApplicable, controlplane.CreateReadOnly:
			include = rapid.IntRange(0, 19).Draw(rt, "include refused") == 0
			valid = valid && !include
		}
		if include {
			v, ok := m.gen(rt, tenant, r.Loc)
			valid = valid && ok
			setPath(body, r.Loc, v)
		}
	}
	// Cross-field rules.
	if source == controlplane.SourceGitHub {
		if bop, _ := getPath(body, []string{"source_config", "build_on_push"}).(bool); bop && isTag(getPath(body, []string{"source_revision_config", "repo_ref"})) {
			valid = false
		}
	}
	if lc, ok := getPath(body, []string{"source_config", "listener_config"}).(map[string]any); ok && source == controlplane.SourceExternalDocker {
		lid := getPath(body, []string{"source_config", "listener_id"})
		if lid == nil || lid == m.lis[tenant] && lc["k8s_namespace"] == "ns-z" {
			valid = false
		}
	}
	want := okay
	switch {
	case !valid:
		want = invalid
	case slices.ContainsFunc(m.deps, func(d *mDep) bool { return d.tenant == tenant && d.exp["name"] == name }):
		want = conflict
	}
	req := decodeAs[controlplane.CreateDeploymentRequest](rt, body)
	res := m.expectOutcome(rt, "create "+fmt.Sprint(body), want, func(cp *controlplane.ControlPlane) (any, error) {
		return cp.CreateDeployment(m.ctx, tenant, req)
	})
	if want != okay {
		return
	}
	got := toMap(rt, res)
	id := got["id"].(string)
	exp := map[string]any{
		"id": id, "name": name, "source": src, "status": string(controlplane.StatusAwaitingDatabase),
		"created_at": got["created_at"], "updated_at": got["created_at"],
		"latest_revision_id": got["latest_revision_id"], "active_revision_id": nil, "image_version": nil,
		"secrets": []any{},
	}
	for _, r := range m.rules {
		if r.Loc[0] == "name" || r.Loc[0] == "source" {
			continue
		}
		v := getPath(body, r.Loc)
		if r.Create[source] == controlplane.CreateIgnored {
			v = nil
		}
		if r.Loc[0] == "secrets" && v == nil {
			v = []any{}
		}
		setPath(exp, r.Loc, v)
	}
	if source == controlplane.SourceGitHub {
		if getPath(exp, []string{"source_config", "deployment_type"}) == nil {
			setPath(exp, []string{"source_config", "deployment_type"}, "prod")
		}
		if getPath(exp, []string{"source_config", "build_on_push"}) == nil {
			setPath(exp, []string{"source_config", "build_on_push"}, false)
		}
		setPath(exp, []string{"source_config", "custom_url"},
			strings.NewReplacer("{id}", id, "{tenant}", tenant).Replace(urlTemplate))
	}
	if d := cmp.Diff(exp, got); d != "" {
		rt.Fatalf("created deployment differs from the model (-model +got):\n%s", d)
	}
	d := &mDep{tenant: tenant, exp: exp}
	m.addRevision(rt, d, got["latest_revision_id"])
	m.deps = append(m.deps, d)
}

// addRevision records a new revision of d, a snapshot of d.exp (whose
// repo_commit_sha the caller has set: nil for a create or a PATCH, the
// pushed commit, or the redeployed revision's).
func (m *machine) addRevision(rt *rapid.T, d *mDep, id any) {
	sid, _ := id.(string)
	for _, o := range m.deps {
		for _, r := range o.revs {
			if r.id == sid {
				rt.Fatalf("revision id %s reused", sid)
			}
		}
	}
	src := deepCopy(rt, d.exp["source_revision_config"].(map[string]any))
	// A new revision supersedes those still before DEPLOYING.
	for i := range d.revs {
		if r := &d.revs[i]; modelSkippable(r.status) {
			r.status, r.msg = "SKIPPED", "Superseded by revision "+sid+"."
		}
	}
	d.revs = append(d.revs, mRev{id: sid, src: src, secrets: jsonValue(rt, d.exp["secrets"]),
		spec:           jsonValue(rt, getPath(d.exp, []string{"source_config", "resource_spec"})),
		installCommand: getPath(d.exp, []string{"source_config", "install_command"}),
		buildCommand:   getPath(d.exp, []string{"source_config", "build_command"}),
		status:         "CREATING"})
}

// target draws the deployment a call names: usually one of the model's,
// sometimes an unknown id or another tenant's deployment.
func (m *machine) target(rt *rapid.T) (tenant, id string, d *mDep) {
	if len(m.deps) == 0 || rapid.IntRange(0, 9).Draw(rt, "stray target") == 0 {
		return rapid.SampledFrom(tenants).Draw(rt, "tenant"), unknownID, nil
	}
	d = rapid.SampledFrom(m.deps).Draw(rt, "deployment")
	if rapid.IntRange(0, 9).Draw(rt, "other tenant") == 0 {
		for _, t := range tenants {
			if t != d.tenant {
				return t, d.id(), nil
			}
		}
	}
	return d.tenant, d.id(), d
}

func decodeAs[T any](rt *rapid.T, body map[string]any) *T {
	b, err := json.Marshal(body)
	if err != nil {
		rt.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		rt.Fatal(err)
	}
	return &v
}

// patch sends a PATCH (or, with force, a create-revision) whose body is
// drawn from the rules table under the deployment's source.
func (m *machine) patch(rt *rapid.T, force bool) {
	tenant, id, d := m.target(rt)
	source := controlplane.Source(rapid.SampledFrom([]string{"github", "external_docker"}).Draw(rt, "assumed source"))
	var exp map[string]any
	if d != nil {
		source = controlplane.Source(d.source())
		exp = deepCopy(rt, d.exp)
	}
	body := map[string]any{}
	valid, trigger := true, force
	for _, r := range m.rules {
		pol := r.Patch[source]
		odds := 3 // include one field in odds
		if pol == controlplane.PatchNotApplicable || pol == controlplane.PatchReadOnly {
			odds = 20 // refused: keep most PATCHes valid
		}
		if rapid.IntRange(1, odds).Draw(rt, "include "+strings.Join(r.Loc, ".")) != 1 {
			continue
		}
		var v any
		ok := true
		if pol == controlplane.PatchImmutable && exp != nil && rapid.Bool().Draw(rt, "send stored value") {
			v = getPath(exp, r.Loc)
		} else {
			v, ok = m.gen(rt, tenant, r.Loc)
		}
		if v == nil {
			continue
		}
		if r.Loc[0] == "secrets" && len(v.([]any)) == 0 {
			setPath(body, r.Loc, v) // [] means "no change"
			continue
		}
		setPath(body, r.Loc, v)
		switch pol {
		case controlplane.PatchNotApplicable, controlplane.PatchReadOnly:
			valid = false
		case controlplane.PatchImmutable:
			// Only a value equal to the stored one is accepted (it needs
			// no further check: the stored value is valid).
			if exp != nil && !reflect.DeepEqual(jsonValue(rt, v), getPath(exp, r.Loc)) {
				valid = false
			}
		case controlplane.PatchInPlace:
			valid = valid && ok
			if exp != nil {
				setPath(exp, r.Loc, jsonValue(rt, v))
			}
		case controlplane.PatchRevision:
			valid = valid && ok
			trigger = true
			if exp != nil {
				setPath(exp, r.Loc, jsonValue(rt, v))
			}
		case controlplane.PatchIgnored:
		}
	}
	if exp != nil && source == controlplane.SourceGitHub {
		if bop, _ := getPath(exp, []string{"source_config", "build_on_push"}).(bool); bop && isTag(getPath(exp, []string{"source_revision_config", "repo_ref"})) {
			valid = false
		}
	}
	want := okay
	switch {
	case d == nil:
		want = notFound
	case d.deleted():
		want = invalidState
	case !valid:
		want = invalid
	}
	req := decodeAs[controlplane.UpdateDeploymentRequest](rt, body)
	what := fmt.Sprintf("patch (force %v) %s", force, body)
	res := m.expectOutcome(rt, what, want, func(cp *controlplane.ControlPlane) (any, error) {
		if force {
			return cp.CreateRevision(m.ctx, tenant, id, req)
		}
		return cp.UpdateDeployment(m.ctx, tenant, id, req)
	})
	if want != okay {
		return
	}
	got := m.get(rt, d)
	if trigger {
		if force && toMap(rt, res)["id"] != got["latest_revision_id"] {
			rt.Fatalf("CreateRevision returned %v, latest_revision_id is %v", toMap(rt, res)["id"], got["latest_revision_id"])
		}
		exp["latest_revision_id"] = got["latest_revision_id"]
		// The new revision builds its ref anew: no commit yet.
		setPath(exp, []string{"source_revision_config", "repo_commit_sha"}, nil)
	}
	changed := trigger || !reflect.DeepEqual(exp, d.exp)
	if changed {
		m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
		exp["updated_at"] = got["updated_at"]
	}
	if diff := cmp.Diff(exp, got); diff != "" {
		rt.Fatalf("%s: deployment differs from the model (-model +got):\n%s", what, diff)
	}
	d.exp = exp
	if trigger {
		m.addRevision(rt, d, got["latest_revision_id"])
	}
}

// get reads a deployment with GetDeployment and checks that
// GetDeploymentJSON answers the very bytes json.Marshal gives of it.
func (m *machine) get(rt *rapid.T, d *mDep) map[string]any {
	res, err := m.call(rt, "get", func(cp *controlplane.ControlPlane) (any, error) { return cp.GetDeployment(m.ctx, d.tenant, d.id()) })
	if err != nil {
		rt.Fatal(err)
	}
	raw, err := m.call(rt, "get json", func(cp *controlplane.ControlPlane) (any, error) {
		b, err := cp.GetDeploymentJSON(m.ctx, d.tenant, d.id())
		return string(b), err
	})
	if err != nil {
		rt.Fatal(err)
	}
	want, err := json.Marshal(res)
	if err != nil {
		rt.Fatal(err)
	}
	if raw != string(want) {
		rt.Fatalf("GetDeploymentJSON:\n%s\njson.Marshal(GetDeployment):\n%s", raw, want)
	}
	return toMap(rt, res)
}

func (m *machine) checkLater(rt *rapid.T, before, after any) {
	b, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(before))
	a, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(after))
	if !a.After(b) {
		rt.Fatalf("updated_at %v is not after %v", after, before)
	}
}

func (m *machine) redeploy(rt *rapid.T) {
	tenant, id, d := m.target(rt)
	var revID string
	var rev *mRev
	switch {
	case d != nil && rapid.IntRange(0, 4).Draw(rt, "own revision") != 0:
		rev = &d.revs[rapid.IntRange(0, len(d.revs)-1).Draw(rt, "revision")]
		revID = rev.id
	case len(m.deps) > 0 && rapid.Bool().Draw(rt, "another deployment's revision"):
		o := rapid.SampledFrom(m.deps).Draw(rt, "other")
		revID = o.revs[0].id
		if d != nil && o == d {
			rev = &d.revs[0]
		}
	default:
		revID = unknownID
	}
	want := okay
	switch {
	case d == nil || rev == nil:
		want = notFound
	case d.deleted():
		want = invalidState
	}
	m.expectOutcome(rt, "redeploy "+revID, want, func(cp *controlplane.ControlPlane) (any, error) {
		return cp.RedeployRevision(m.ctx, tenant, id, revID)
	})
	if want != okay {
		return
	}
	exp := deepCopy(rt, d.exp)
	exp["source_revision_config"] = jsonValue(rt, rev.src) // its commit too, when it has one
	exp["secrets"] = jsonValue(rt, rev.secrets)
	setPath(exp, []string{"source_config", "resource_spec"}, jsonValue(rt, rev.spec))
	// install_command and build_command change in place: a redeploy keeps them.
	got := m.get(rt, d)
	m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
	exp["updated_at"], exp["latest_revision_id"] = got["updated_at"], got["latest_revision_id"]
	if diff := cmp.Diff(exp, got); diff != "" {
		rt.Fatalf("redeploy: deployment differs from the model (-model +got):\n%s", diff)
	}
	d.exp = exp
	m.addRevision(rt, d, got["latest_revision_id"])
}

func (m *machine) delete(rt *rapid.T) {
	tenant, id, d := m.target(rt)
	want := okay
	if d == nil {
		want = notFound
	}
	var before map[string]map[string]string
	if d != nil && d.deleted() {
		before = m.dump(rt)
	}
	m.expectOutcome(rt, "delete", want, func(cp *controlplane.ControlPlane) (any, error) {
		return nil, cp.DeleteDeployment(m.ctx, tenant, id)
	})
	if want != okay {
		return
	}
	if before != nil {
		if diff := cmp.Diff(before, m.dump(rt)); diff != "" {
			rt.Fatalf("deleting a deployment being deleted changed the store:\n%s", diff)
		}
		return
	}
	got := m.get(rt, d)
	m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
	d.exp["status"] = string(controlplane.StatusAwaitingDelete)
	d.exp["updated_at"] = got["updated_at"]
	for i := range d.revs {
		if r := &d.revs[i]; !modelFinal(r.status) {
			r.status, r.msg = "INTERRUPTED", "The deployment is being deleted."
		}
	}
}

// check compares everything the ControlPlane shows with the model, and the
// stores with each other.
func (m *machine) check(rt *rapid.T) {
	if len(m.systems) > 1 {
		want := m.dump(rt)
		for i, s := range m.systems[1:] {
			if d := cmp.Diff(want, m.dumpStore(rt, s.st)); d != "" {
				rt.Fatalf("store %d holds other records than store 0 (-0 +%d):\n%s", i+1, i+1, d)
			}
		}
	}
	for _, tenant := range tenants {
		var want []any // newest first
		for _, d := range slices.Backward(m.deps) {
			if d.tenant == tenant {
				want = append(want, d.exp)
			}
		}
		page, err := m.call(rt, "list", func(cp *controlplane.ControlPlane) (any, error) {
			return cp.ListDeployments(m.ctx, tenant, &controlplane.ListDeploymentsQuery{Limit: new(controlplane.MaxPageLimit)})
		})
		if err != nil {
			rt.Fatal(err)
		}
		got := toMap(rt, page)
		if want == nil {
			want = []any{}
		}
		if d := cmp.Diff(map[string]any{"resources": want, "offset": float64(len(want))}, got); d != "" {
			rt.Fatalf("deployments of %s differ from the model (-model +got):\n%s", tenant, d)
		}
	}
	for _, d := range m.deps {
		m.checkMirror(rt, d)
		var want []any
		for _, r := range slices.Backward(d.revs) {
			want = append(want, map[string]any{"id": r.id, "source": d.source(), "source_revision_config": r.src,
				"status": r.status, "status_message": r.msg})
		}
		page, err := m.call(rt, "list revisions", func(cp *controlplane.ControlPlane) (any, error) {
			return cp.ListRevisions(m.ctx, d.tenant, d.id(), &controlplane.ListRevisionsQuery{Limit: new(controlplane.MaxPageLimit)})
		})
		if err != nil {
			rt.Fatal(err)
		}
		var got []any
		for _, r := range page.(*controlplane.RevisionPage).Resources {
			rm := toMap(rt, r)
			if r.UpdatedAt.Before(r.CreatedAt) {
				rt.Fatalf("revision %v (%s): created_at %v, updated_at %v", rm["id"], r.Status, rm["created_at"], rm["updated_at"])
			}
			delete(rm, "created_at")
			delete(rm, "updated_at")
			got = append(got, rm)
		}
		if diff := cmp.Diff(want[:min(len(want), controlplane.MaxPageLimit)], got); diff != "" {
			rt.Fatalf("revisions of %s differ from the model (-model +got):\n%s", d.id(), diff)
		}
		if d.exp["latest_revision_id"] != d.revs[len(d.revs)-1].id {
			rt.Fatalf("latest_revision_id %v is not the newest revision %s", d.exp["latest_revision_id"], d.revs[len(d.revs)-1].id)
		}
		// active_revision_id is the newest DEPLOYED revision.
		var active any
		for _, r := range d.revs {
			if r.status == "DEPLOYED" {
				active = r.id
			}
		}
		if d.exp["active_revision_id"] != active {
			rt.Fatalf("active_revision_id %v is not the newest DEPLOYED revision %v", d.exp["active_revision_id"], active)
		}
	}
}

// checkMirror checks, on what the ControlPlane answers, that a deployment's
// source_revision_config is its latest revision's, repo_commit_sha
// included, and that the model says so too.
func (m *machine) checkMirror(rt *rapid.T, d *mDep) {
	got := m.get(rt, d)
	latest, _ := got["latest_revision_id"].(string)
	rev, err := m.call(rt, "get latest revision", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.GetRevision(m.ctx, d.tenant, d.id(), latest)
	})
	if err != nil {
		rt.Fatalf("latest revision %q of %s: %v", latest, d.id(), err)
	}
	want := jsonValue(rt, rev.(*controlplane.Revision).SourceRevisionConfig)
	if diff := cmp.Diff(want, got["source_revision_config"]); diff != "" {
		rt.Fatalf("deployment %s does not mirror its latest revision %s (-revision +deployment):\n%s", d.id(), latest, diff)
	}
	if diff := cmp.Diff(d.revs[len(d.revs)-1].src, d.exp["source_revision_config"]); diff != "" {
		rt.Fatalf("model: deployment %s does not mirror its latest revision (-revision +deployment):\n%s", d.id(), diff)
	}
}
