// Package controlplanetest is the state-machine test of package
// controlplane: random sequences of ControlPlane calls, checked against an
// independent model after every step, over any store.Store.
//
// # An independent model
//
// The model states the rules itself (policy.go), from wire contract
// section 6 and the seed, instead of reading controlplane.FieldRules: a
// table of which field is required, optional, not applicable, read-only or
// ignored on create and immutable, changed in place, revision-triggering,
// not applicable or read-only on PATCH, per source, and the value rules
// (the name pattern, tags are refs/tags/ refs, build_on_push false with a
// tag, secrets named by unique environment variable names with a value,
// resource_spec ranges and orderings with the documented defaults, the
// Kubernetes sub-objects, listener namespaces). A rule the control plane
// gets wrong therefore shows as a difference; had the model read the
// table under test, it would have copied the mistake. (TestModelTableAgrees
// compares the two tables, so that a change to either is a decision.) The
// lifecycle has its own copy of the transition rules too (lifecycle.go).
//
// The generators draw varied values, valid and invalid: names (pooled so
// that they clash, any valid name, the longest, and invalid ones), GitHub
// URLs spelled several ways, refs (branches with slashes, tags with and
// without a "v", branches that look like tags), graph config paths and the
// langgraph_config_path alias, image URIs, references to the tenant's own,
// another tenant's and unknown integrations and listeners, listener
// namespaces, secrets (empty, unicode and multi-line values, bad and
// duplicate names, missing values) and resource specs (scales, cpu and
// memory requests and limits, volumes, mounts, init containers and
// sidecars with env and resources), and tag value ids. Two requests in
// three are drawn clean; the others carry one fault of a kind drawn first
// (a bad name or source, a required field left out, a refused field sent,
// a bad value or reference, a bad secret, a resource_spec out of its
// rules, a conflicting alias, a bad tag id), so that the rule that fault
// breaks alone decides the outcome.
//
// The model predicts each call's outcome (success, not found, invalid
// state, conflict or validation failure) and the whole expected wire shape
// of every deployment. Invariants checked after every step: every
// deployment equals the model (so immutable fields never change), the
// revision count and order (latest_revision_id is the newest),
// newest-first lists, every deployment's source_revision_config equal to
// its latest revision's as the ControlPlane answers both (repo_commit_sha
// included: the mirror of the seed), and a rejected call changes nothing
// in the store (every collection compared before and after).
// GetDeploymentJSON must answer the bytes json.Marshal gives of
// GetDeployment. "list" draws ListDeployments queries with every filter
// (name_contains in any case, status, deployment_type, remote_reconciled,
// deployment_ids, tag_value_ids, image_version, limit and offset, and bad
// values of each) and compares the page with the model's.
//
// The lifecycle is in the machine too (lifecycle.go): "work" runs
// ControlPlane.Process with a scripted Deployer whose reports are drawn
// (mostly the next happy status, sometimes any status, UNKNOWN, a
// deployment status, a commit sha or an image version) and ends with or
// without an error; every report's outcome must be the model's (a refused
// one must leave the store unchanged), and Process must find work exactly
// when the model has some (a revision not final, a deployment
// AWAITING_DELETE). The model follows SKIPPED on every new revision,
// INTERRUPTED on delete, the failure of the phase when Deploy fails,
// active_revision_id as the newest DEPLOYED revision, the commit a report
// gives the latest revision mirrored on the deployment, teardown removing
// every record, a delete removing them at once when no revision of the
// deployment ever reached an engine (BUILDING, DEPLOYING, DEPLOYED,
// UNKNOWN) and a forced one (refused but for a deployment
// AWAITING_DELETE), the tracing project kept when a delete asked, and a
// failed teardown's status_message. "interrupt" names revisions of any
// status (and others' and unknown ones): one not final becomes
// INTERRUPTED and is no longer pending, a final one is refused, and the
// deployment keeps its active revision (an UNKNOWN one is READY again, or
// AWAITING_DATABASE without one). "delete_many" deletes several ids at
// once (own, another tenant's, unknown, malformed, repeated; none or too
// many refuse the request), each with the outcome and the effect of a
// delete of it alone. "push" sends GitHub push events (each tenant owns
// its own installation; URLs spelled several ways, branches with slashes,
// tags, other refs) and the model predicts which deployments get a
// revision.
//
// # The model catches a wrong rule
//
// Package controlplane's mutation tests prove it: each builds
// ControlPlanes with one deliberate defect (through an unexported,
// per-ControlPlane test hook that RunWith passes on in its Options) and
// runs the machine in a child process, which must fail. Among the defects:
// resource_spec changed in place without a revision, tags recognized only
// when they start with refs/tags/v, build_on_push accepted with a tag, an
// immutable field changed by PATCH, a read-only field set on create.
//
// # Running it
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
	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/apierr"
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
	RunWith(t, nil, opens...)
}

// RunWith is Run with ControlPlanes built from a copy of opts (nil means
// defaults). The machine sets Clock, NewID and CustomURLTemplate, and
// clears Sources and Limits (the model knows the defaults only); the other
// fields, unexported ones included, pass through. Package controlplane's
// mutation tests use it to run the machine against deliberately broken
// rules.
func RunWith(t *testing.T, opts *controlplane.Options, opens ...Opener) {
	t.Helper()
	if len(opens) == 0 {
		t.Fatal("controlplanetest.Run: no opener")
	}
	rapid.Check(t, func(rt *rapid.T) {
		m := newMachine(rt, opts, opens)
		defer m.close()
		rt.Repeat(map[string]func(*rapid.T){
			"create":          m.create,
			"patch":           func(rt *rapid.T) { m.patch(rt, false) },
			"create_revision": func(rt *rapid.T) { m.patch(rt, true) },
			"redeploy":        m.redeploy,
			"rollback":        m.rollback,
			"delete":          m.delete,
			"delete_many":     m.deleteMany,
			"interrupt":       m.interrupt,
			"push":            m.push,
			"work":            m.work,
			"list":            m.list,
			"":                m.check,
		})
		m.checkAll(rt)
	})
}

var (
	tenants   = []string{"0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b", "9a6b1c2d-3e4f-4a5b-8c7d-0e1f2a3b4c5d"}
	unknownID = "00000000-0000-4000-8000-00000000abcd"
	t0        = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

const (
	urlTemplate = "https://{id}.{tenant}.example"
	// installationID is tenant 0's GitHub App installation; tenant 1 owns
	// installationID+1 (an installation belongs to one tenant).
	installationID = 7
)

// Listener namespaces: each tenant's first listener lists these, its
// second lists none (any namespace goes).
var listenerNamespaces = []string{"ns-a", "ns-b"}

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
	id                 string
	src, secrets, spec any
	refs               any // secret_references, as answered ([] for none)
	tracked            any // tracked_packages: nil or a list (section 10)
	status             string
	msg                any   // nil or the status_message
	image              any   // nil or the image version reported
	history            []any // the statuses it entered, oldest first (status_history without the times)
	// held: its report of DEPLOYING was refused while its deployment was
	// pinned; nobody claims it until the pin is removed.
	held bool
}

// enter moves the model revision to status s, as status_history records.
func (r *mRev) enter(s, msg any) {
	r.status = s.(string)
	r.history = append(r.history, s)
	if msg != nil {
		r.msg = msg
	}
}

// mDep is the model of a deployment: its expected wire shape as decoded
// JSON, its tag value ids, and its revisions, oldest first.
type mDep struct {
	tenant string
	exp    map[string]any
	tags   []string
	revs   []mRev
	// backoff: its teardown failed, and waits for its backoff (the
	// model does not follow the clock: Process may find it or not).
	backoff bool
	// keepTracing: the delete that made it AWAITING_DELETE asked to keep
	// its tracing project.
	keepTracing bool
}

func (d *mDep) id() string     { return d.exp["id"].(string) }
func (d *mDep) source() string { return d.exp["source"].(string) }
func (d *mDep) deleted() bool  { return d.exp["status"] == string(controlplane.StatusAwaitingDelete) }

// ran reports whether the deployment may have left something in an
// engine, so that its delete needs a teardown: it has an active revision,
// or a revision entered BUILDING, DEPLOYING, DEPLOYED or UNKNOWN (the
// statuses a Deployer reports before it makes anything, or after).
func (d *mDep) ran() bool {
	if d.exp["active_revision_id"] != nil {
		return true
	}
	for _, r := range d.revs {
		for _, s := range r.history {
			if slices.Contains([]any{"BUILDING", "DEPLOYING", "DEPLOYED", "UNKNOWN"}, s) {
				return true
			}
		}
	}
	return false
}

type machine struct {
	ctx     context.Context
	systems []*system
	integ   map[string]string    // tenant -> integration id
	lis     map[string][2]string // tenant -> listener ids: with namespaces ns-a, ns-b; with none
	deps    []*mDep              // creation order
	pushes  int                  // commits drawn so far
	fault   string               // the kind of fault of the request being drawn, or "" (gen.go)
	fired   bool                 // the fault has fired
	touched map[*mDep]bool       // deployments changed since the last check
}

func newMachine(rt *rapid.T, opts *controlplane.Options, opens []Opener) *machine {
	m := &machine{ctx: context.Background(), integ: map[string]string{}, lis: map[string][2]string{}, touched: map[*mDep]bool{}}
	for _, open := range opens {
		st, err := open()
		if err != nil {
			rt.Fatalf("open store: %v", err)
		}
		s := &system{st: st, now: t0}
		var o controlplane.Options
		if opts != nil {
			o = *opts
		}
		o.Clock = func() time.Time { s.now = s.now.Add(time.Second); return s.now }
		o.NewID = func() string { s.ids++; return fmt.Sprintf("00000000-0000-7000-8000-%012x", s.ids) }
		o.CustomURLTemplate = urlTemplate
		o.Sources, o.Limits = nil, controlplane.Limits{}
		if o.Uploads == nil {
			// The model draws tarball paths without uploading them: the
			// upload rules are tested in package uploads, not here.
			o.Uploads = controlplane.AnyUpload{}
		}
		s.cp = controlplane.New(st, &o)
		m.systems = append(m.systems, s)
	}
	for i, tenant := range tenants {
		in, err := m.call(rt, "create integration", func(cp *controlplane.ControlPlane) (any, error) {
			return cp.CreateIntegration(m.ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(installationID + i)), Name: new(fmt.Sprint("acme", i))})
		})
		if err != nil {
			rt.Fatal(err)
		}
		m.integ[tenant] = in.(*controlplane.Integration).ID
		var ids [2]string
		for j, nss := range [][]string{listenerNamespaces, {}} {
			l, err := m.call(rt, "create listener", func(cp *controlplane.ControlPlane) (any, error) {
				return cp.CreateListener(m.ctx, tenant, &controlplane.CreateListenerRequest{ComputeType: new("k8s"),
					ComputeID: new(fmt.Sprint("cluster-", j)), ComputeConfig: &controlplane.ComputeConfig{K8sNamespaces: nss}})
			})
			if err != nil {
				rt.Fatal(err)
			}
			ids[j] = l.(*controlplane.Listener).ID
		}
		m.lis[tenant] = ids
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
		if d := diff(res0, res); d != "" {
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
	held         = "held by the pin"
	leaseLost    = "lease lost"
)

func classify(err error) string {
	var ve *apierr.ValidationError
	switch {
	case err == nil:
		return okay
	case errors.Is(err, controlplane.ErrRevisionHeld):
		return held
	case errors.Is(err, apierr.ErrNotFound):
		return notFound
	case errors.Is(err, apierr.ErrInvalidState):
		return invalidState
	case errors.Is(err, apierr.ErrConflict):
		return conflict
	case errors.As(err, &ve):
		return invalid
	case errors.Is(err, controlplane.ErrLeaseLost):
		return leaseLost
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

// expectOutcome runs a call that the model says ends in want (or in alt,
// when alt is not ""); when it is an error, the store must be unchanged.
// It returns the result and the outcome.
func (m *machine) expectOutcome(rt *rapid.T, what, want, alt string, f func(cp *controlplane.ControlPlane) (any, error)) (any, string) {
	rt.Helper()
	var before map[string]map[string]string
	if want != okay || alt != "" {
		before = m.dump(rt)
	}
	res, err := m.call(rt, what, f)
	got := classify(err)
	if got != want && (alt == "" || got != alt) {
		rt.Fatalf("%s: outcome %s (%v), model says %s", what, got, err, want)
	}
	if got != okay {
		if d := diff(before, m.dump(rt)); d != "" {
			rt.Fatalf("%s: a rejected call changed the store (-before +after):\n%s", what, d)
		}
	}
	return res, got
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
	answerAlias(rt, out)
	return out
}

// answerAlias checks the rule of section 9 on every source_revision_config
// of an answer (decoded JSON): it carries langgraph_config_path equal to
// graph_config_path (null together). The model keeps graph_config_path
// alone, so the alias is removed once checked (its presence is pinned by
// the wire tests and the OpenAPI document's required lists). A map with
// only one of the two (a request body, or the model's own) is left as it
// is.
func answerAlias(rt *rapid.T, v any) {
	switch v := v.(type) {
	case map[string]any:
		g, okG := v["graph_config_path"]
		a, okA := v["langgraph_config_path"]
		_, isSRC := v["repo_commit_sha"]
		if okG && okA && isSRC {
			if !reflect.DeepEqual(g, a) {
				rt.Fatalf("source_revision_config answers graph_config_path %v and langgraph_config_path %v: they must be equal", g, a)
			}
			delete(v, "langgraph_config_path")
		}
		for _, x := range v {
			answerAlias(rt, x)
		}
	case []any:
		for _, x := range v {
			answerAlias(rt, x)
		}
	}
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

// verdict collects the model's judgement of a request body.
type verdict struct {
	bad bool // a problem the contract names
}

func (v *verdict) fail(ok bool) { v.bad = v.bad || !ok }

// secrets judges a secrets list.
func (v *verdict) secrets(list any) { v.fail(secretsOK(list)) }

// want is the outcome the model predicts when the body passes every other
// check with outcome pass, and an outcome it also accepts ("" for none).
func (v *verdict) want(pass string) (want, alt string) {
	if v.bad {
		return invalid, ""
	}
	return pass, ""
}

// normSecrets is a secrets list as the control plane answers it: values
// kept, a missing value read as "" (see verdict.want).
func normSecrets(v any) []any {
	out := []any{}
	for _, s := range asSlice(v) {
		sm := s.(map[string]any)
		val, _ := sm["value"].(string)
		out = append(out, map[string]any{"name": sm["name"], "value": val})
	}
	return out
}

// normSpec is a resource_spec in its wire shape (every field, null when
// not given).
func normSpec(rt *rapid.T, v any) any {
	if v == nil {
		return nil
	}
	return jsonValue(rt, decodeAs[controlplane.ResourceSpec](rt, v.(map[string]any)))
}

// graphAlias sometimes sends source_revision_config.graph_config_path as
// its alias langgraph_config_path (wire contract section 1), or both, equal
// or not.
func (m *machine) graphAlias(rt *rapid.T, body map[string]any, v *verdict) {
	src, _ := body["source_revision_config"].(map[string]any)
	g, ok := src["graph_config_path"]
	if !ok {
		return
	}
	if m.oops(rt, "alias", 1) {
		src["langgraph_config_path"] = "other/langgraph.json"
		v.fail(false)
		return
	}
	switch rapid.IntRange(0, 3).Draw(rt, "alias") {
	case 0:
		delete(src, "graph_config_path")
		src["langgraph_config_path"] = g
	case 1:
		src["langgraph_config_path"] = g
	}
}

// graphOf reads graph_config_path from a body, alias included.
func graphOf(body map[string]any) any {
	if g := getPath(body, loc("source_revision_config.graph_config_path")); g != nil {
		return g
	}
	return getPath(body, loc("source_revision_config.langgraph_config_path"))
}

// listenerConfig judges a listener_config against the listener named
// beside it: a DNS label, a listener of the tenant, and one of its
// namespaces when it lists any.
// agentHeld says whether another deployment of the tenant than self (the
// model's, nil on create) holds agent's environment (section 11).
func (m *machine) agentHeld(tenant string, self *mDep, agent any) bool {
	a, _ := agent.(map[string]any)
	if a == nil {
		return false
	}
	return slices.ContainsFunc(m.deps, func(d *mDep) bool {
		o, _ := d.exp["agent"].(map[string]any)
		return d != self && d.tenant == tenant && o != nil && o["agent_id"] == a["agent_id"] && o["environment"] == a["environment"]
	})
}

func (m *machine) listenerConfig(tenant string, sc map[string]any, v *verdict) {
	lc, ok := sc["listener_config"].(map[string]any)
	if !ok {
		return
	}
	ns, _ := lc["k8s_namespace"].(string)
	v.fail(dnsLabelOK(ns))
	switch lid := sc["listener_id"]; lid {
	case nil:
		v.fail(false) // a namespace needs a listener
	case m.lis[tenant][0]:
		v.fail(slices.Contains(listenerNamespaces, ns))
	}
}

func (m *machine) create(rt *rapid.T) {
	tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
	src := pick(rt, "source", sources...)
	m.startRequest(rt)
	var v verdict
	body := map[string]any{"source": src}
	if m.oops(rt, "source", 1) {
		body["source"] = pick(rt, "bad source", "gitlab", "")
		v.fail(false)
	}
	si := srcIndex(src)
	name := m.genName(rt, false)
	body["name"] = name
	v.fail(nameOK(name))
	for _, f := range modelFields {
		if f.key() == "name" || f.key() == "source" {
			continue
		}
		var include bool
		switch pol := f.create[si]; pol {
		case cRequired:
			include = !m.oops(rt, "drop", 4)
			v.fail(include)
		case cOptional, cIgnored:
			include = rapid.Bool().Draw(rt, "include optional") || m.faultIn(f.key())
		case cNA, cReadOnly:
			include = m.oops(rt, "refused", 5)
			v.fail(!include)
		}
		if !include {
			continue
		}
		val, ok := m.gen(rt, tenant, f.key())
		if f.key() == "secrets" {
			v.secrets(val)
		} else {
			v.fail(ok)
		}
		setPath(body, f.loc, val)
	}
	m.graphAlias(rt, body, &v)
	sc, _ := body["source_config"].(map[string]any)
	if src == github && sc["build_on_push"] == true && isTag(getPath(body, loc("source_revision_config.repo_ref"))) {
		v.fail(false) // build_on_push must be false with a tag
	}
	if src == externalDocker {
		m.listenerConfig(tenant, sc, &v)
	}
	v.fail(namesApart(body["secrets"], body["secret_references"]))
	if src != externalDocker && src != "" {
		dtype := sc["deployment_type"]
		if dtype == nil {
			dtype = defaultType(src)
		}
		v.fail(zeroScaleOK(src, dtype, sc["resource_spec"]))
	}
	tags, ok := m.genTagIDs(rt)
	v.fail(ok)
	if tags != nil {
		body["tag_value_ids"] = tags
	}
	pass := okay
	if slices.ContainsFunc(m.deps, func(d *mDep) bool { return d.tenant == tenant && d.exp["name"] == name }) ||
		m.agentHeld(tenant, nil, body["agent"]) {
		pass = conflict
	}
	want, alt := v.want(pass)
	req := decodeAs[controlplane.CreateDeploymentRequest](rt, body)
	res, got := m.expectOutcome(rt, "create "+fmt.Sprint(body), want, alt, func(cp *controlplane.ControlPlane) (any, error) {
		return cp.CreateDeployment(m.ctx, tenant, req)
	})
	if got != okay {
		return
	}
	gotD := toMap(rt, res)
	id := gotD["id"].(string)
	exp := map[string]any{
		"id": id, "name": name, "tenant_id": tenant, "source": src, "status": string(controlplane.StatusAwaitingDatabase),
		"created_at": gotD["created_at"], "updated_at": gotD["created_at"],
		"latest_revision_id": gotD["latest_revision_id"], "active_revision_id": nil, "image_version": nil,
		"remote_reconciled":  src == externalDocker, // external_docker is; no agent serves anything: the system's Options.Drives is nil
		"status_message":     nil,
		"pinned_revision_id": nil,
	}
	for _, f := range modelFields {
		if f.key() == "name" || f.key() == "source" {
			continue
		}
		val := getPath(body, f.loc)
		switch {
		case f.create[si] == cIgnored:
			val = nil
		case f.key() == "secrets":
			val = normSecrets(val)
		case f.key() == "secret_references":
			val = jsonValue(rt, val)
			if val == nil {
				val = []any{}
			}
		case f.key() == "source_config.resource_spec":
			val = normSpec(rt, val)
		case f.key() == "source_revision_config.graph_config_path":
			val = graphOf(body)
		}
		setPath(exp, f.loc, val)
	}
	exp["is_preview"] = false // read-only: a client's value is ignored
	if src == internalSource || src == internalDocker {
		// Section 10: dev by default; internal_source reads langgraph.json
		// unless told otherwise; no revision until what it comes from
		// arrives.
		if getPath(exp, loc("source_config.deployment_type")) == nil {
			setPath(exp, loc("source_config.deployment_type"), "dev")
		}
		if src == internalSource && getPath(exp, loc("source_revision_config.graph_config_path")) == nil {
			setPath(exp, loc("source_revision_config.graph_config_path"), "langgraph.json")
		}
		if !hasRevisionFrom(exp) {
			exp["latest_revision_id"] = nil
		}
	}
	if src == github {
		if getPath(exp, loc("source_config.deployment_type")) == nil {
			setPath(exp, loc("source_config.deployment_type"), "prod")
		}
		if getPath(exp, loc("source_config.build_on_push")) == nil {
			setPath(exp, loc("source_config.build_on_push"), false)
		}
		setPath(exp, loc("source_config.custom_url"), strings.NewReplacer("{id}", id, "{tenant}", tenant).Replace(urlTemplate))
	}
	if d := diff(exp, gotD); d != "" {
		rt.Fatalf("created deployment differs from the model (-model +got):\n%s", d)
	}
	d := &mDep{tenant: tenant, exp: exp}
	for _, t := range tags {
		d.tags = append(d.tags, t.(string))
	}
	if hasRevisionFrom(exp) {
		m.addRevision(rt, d, gotD["latest_revision_id"], nil)
	}
	m.deps = append(m.deps, d)
	m.touched[d] = true
}

// addRevision records a new revision of d, a snapshot of d.exp (whose
// repo_commit_sha the caller has set: nil for a create or a PATCH, the
// pushed commit, or the redeployed revision's).
func (m *machine) addRevision(rt *rapid.T, d *mDep, id, tracked any) {
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
			r.enter("SKIPPED", "Superseded by revision "+sid+".")
		}
	}
	d.revs = append(d.revs, mRev{id: sid, src: src, secrets: jsonValue(rt, d.exp["secrets"]), refs: jsonValue(rt, d.exp["secret_references"]), tracked: tracked,
		spec:   jsonValue(rt, getPath(d.exp, []string{"source_config", "resource_spec"})),
		status: "CREATING", history: []any{"CREATING"}})
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

// patch sends a PATCH (or, with force, a create-revision) whose body the
// model's table draws under the deployment's source.
func (m *machine) patch(rt *rapid.T, force bool) {
	tenant, id, d := m.target(rt)
	source := pick(rt, "assumed source", sources...)
	var exp map[string]any
	if d != nil {
		source = d.source()
		exp = deepCopy(rt, d.exp)
	}
	si := srcIndex(source)
	body := map[string]any{}
	m.startRequest(rt)
	var v verdict
	trigger := force
	for _, f := range modelFields {
		pol := f.patch[si]
		include := rarely(rt, 3, "include "+f.key()) || m.faultIn(f.key())
		if include && f.key() == "pinned_revision_id" {
			include = rarely(rt, 4, "pin") // most PATCHes change something else
		}
		if pol == pNA || pol == pReadOnly {
			include = m.oops(rt, "refused", 5)
		}
		if !include {
			continue
		}
		var val any
		ok := true
		switch {
		case pol == pImmutable && exp != nil && (m.clean() || rapid.Bool().Draw(rt, "send stored value")):
			val = getPath(exp, f.loc)
		case f.key() == "name":
			// Not "": today's control plane reads an empty name in a PATCH as
			// absent, where the contract would have 422 immutable_field.
			val = m.genName(rt, true)
		case f.key() == "source":
			val = choose(m, rt, "patch source", sources, "gitlab")
		case f.key() == "pinned_revision_id":
			// The active revision mostly; else the latest, or one unknown.
			val = unknownID
			if d != nil && len(d.revs) > 0 {
				ids := []string{d.revs[len(d.revs)-1].id, unknownID}
				if a, ok := d.exp["active_revision_id"].(string); ok {
					ids = append(ids, a, a, a, a)
				}
				val = pick(rt, "pin", ids...)
			}
		default:
			val, ok = m.gen(rt, tenant, f.key())
		}
		if val == nil {
			continue
		}
		setPath(body, f.loc, val)
		if (f.key() == "secrets" || f.key() == "secret_references") && len(val.([]any)) == 0 {
			continue // [] means "no change"
		}
		switch pol {
		case pNA, pReadOnly:
			v.fail(false)
		case pImmutable:
			// Only a value equal to the stored one is accepted (it needs
			// no further check: the stored value is valid).
			v.fail(exp == nil || reflect.DeepEqual(jsonValue(rt, val), getPath(exp, f.loc)))
		case pInPlace, pRevision:
			if f.key() == "secrets" {
				v.secrets(val)
				val = normSecrets(val)
			} else {
				v.fail(ok)
			}
			if f.key() == "source_config.resource_spec" {
				val = normSpec(rt, val)
			}
			trigger = trigger || pol == pRevision
			if exp != nil {
				setPath(exp, f.loc, jsonValue(rt, val))
			}
		case pIgnored:
		}
	}
	if source == github || source == internalSource {
		m.graphAlias(rt, body, &v)
		if exp != nil {
			if g := graphOf(body); g != nil {
				setPath(exp, loc("source_revision_config.graph_config_path"), g)
			}
		}
	} else if m.oops(rt, "refused", 5) {
		setPath(body, loc("source_revision_config.langgraph_config_path"), "langgraph.json")
		v.fail(false) // not applicable, like graph_config_path
	}
	if exp != nil && source == github && getPath(exp, loc("source_config.build_on_push")) == true &&
		isTag(getPath(exp, loc("source_revision_config.repo_ref"))) {
		v.fail(false) // build_on_push must be false with a tag
	}
	if exp != nil && (len(asSlice(body["secrets"])) > 0) != (len(asSlice(body["secret_references"])) > 0) {
		v.fail(namesApart(exp["secrets"], exp["secret_references"])) // one list replaced, checked against the other
	} else {
		v.fail(namesApart(body["secrets"], body["secret_references"]))
	}
	if spec := getPath(body, loc("source_config.resource_spec")); exp != nil && spec != nil && si < len(sources) {
		v.fail(zeroScaleOK(source, getPath(exp, loc("source_config.deployment_type")), spec))
	}
	// Section 10: revision_source is null or the deployment's source;
	// tracked_packages is kept on the revision the request makes.
	rs, ok := m.genRevisionSource(rt, source)
	v.fail(ok)
	if rs != nil {
		body["revision_source"] = rs
	}
	tracked, ok := m.genTrackedPackages(rt)
	v.fail(ok)
	if tracked != nil {
		body["tracked_packages"] = tracked
	}
	// Section 11: a JSON merge patch's null removes the pin.
	unpin := d != nil && d.exp["pinned_revision_id"] != nil && rarely(rt, 2, "unpin")
	if unpin {
		v.fail(body["pinned_revision_id"] == nil) // both given and removed: 422
		exp["pinned_revision_id"] = nil
	}
	want, alt := v.want(okay)
	sourceless := exp != nil && !hasRevisionFrom(exp)
	switch {
	case d == nil:
		want, alt = notFound, ""
	case d.deleted():
		want, alt = invalidState, ""
	case force && sourceless:
		// Nothing a revision comes from, in the deployment or the body.
		want, alt = invalid, ""
	case want == okay && !pinOK(d, exp):
		want = invalidState // section 11: only the active revision is pinned, and none is DEPLOYING
	case want == okay && m.agentHeld(tenant, d, body["agent"]):
		want = conflict // section 11: one deployment per agent and environment
	}
	if sourceless {
		trigger = false // a PATCH changes the deployment in place
	}
	req := decodeAs[controlplane.UpdateDeploymentRequest](rt, body)
	if unpin {
		req.Remove = []string{"pinned_revision_id"}
	}
	what := fmt.Sprintf("patch (force %v, unpin %v) %v", force, unpin, body)
	res, got := m.expectOutcome(rt, what, want, alt, func(cp *controlplane.ControlPlane) (any, error) {
		if force {
			return cp.CreateRevision(m.ctx, tenant, id, req)
		}
		return cp.UpdateDeployment(m.ctx, tenant, id, req)
	})
	if got != okay {
		return
	}
	gotD := m.get(rt, d)
	m.touched[d] = true
	if trigger {
		if gotD["latest_revision_id"] == d.exp["latest_revision_id"] {
			rt.Fatalf("%s: made no new revision; the model says a revision-triggering field makes one", what)
		}
		if force && toMap(rt, res)["id"] != gotD["latest_revision_id"] {
			rt.Fatalf("CreateRevision returned %v, latest_revision_id is %v", toMap(rt, res)["id"], gotD["latest_revision_id"])
		}
		exp["latest_revision_id"] = gotD["latest_revision_id"]
		// The new revision builds its ref anew: no commit yet.
		setPath(exp, loc("source_revision_config.repo_commit_sha"), nil)
	}
	changed := trigger || !reflect.DeepEqual(exp, d.exp)
	if changed {
		m.checkLater(rt, d.exp["updated_at"], gotD["updated_at"])
		exp["updated_at"] = gotD["updated_at"]
	}
	if diff := diff(exp, gotD); diff != "" {
		rt.Fatalf("%s: deployment differs from the model (-model +got):\n%s", what, diff)
	}
	if d.exp["pinned_revision_id"] != nil && exp["pinned_revision_id"] == nil {
		for i := range d.revs {
			if r := &d.revs[i]; r.held {
				r.held, r.msg = false, nil // deploys now
			}
		}
	}
	d.exp = exp
	if trigger {
		m.addRevision(rt, d, gotD["latest_revision_id"], jsonValue(rt, tracked))
	}
}

// pinOK says whether a PATCH of d that leaves it as exp may pin what exp
// names (section 11): a new pin names d's active revision, while none of
// its revisions is DEPLOYING.
func pinOK(d *mDep, exp map[string]any) bool {
	pin := exp["pinned_revision_id"]
	if pin == nil || pin == d.exp["pinned_revision_id"] {
		return true
	}
	return pin == d.exp["active_revision_id"] &&
		!slices.ContainsFunc(d.revs, func(r mRev) bool { return r.status == "DEPLOYING" })
}

// rollback goes back to an earlier DEPLOYED revision (section 11): the one
// named, or the newest DEPLOYED one older than the active one. A new
// revision copies its snapshot, as a redeploy's does, and its image, and
// starts AWAITING_DEPLOY when the source builds.
func (m *machine) rollback(rt *rapid.T) {
	tenant, id, d := m.target(rt)
	var rev *mRev
	var req *controlplane.RollbackRequest
	want := okay
	if rapid.Bool().Draw(rt, "name the revision") {
		revID, r := m.targetRevision(rt, d, func() string { return unknownID })
		req, rev = &controlplane.RollbackRequest{RevisionID: &revID}, r
	}
	builds := d != nil && slices.Contains([]string{github, internalSource}, d.source())
	switch {
	case d == nil:
		want = notFound
	case d.deleted():
		want = invalidState
	case req != nil && rev == nil:
		want = notFound
	case req != nil && (rev.status != "DEPLOYED" || d.exp["active_revision_id"] == rev.id):
		want = invalidState
	case req == nil && d.exp["active_revision_id"] == nil:
		want = invalidState
	case req == nil:
		active := slices.IndexFunc(d.revs, func(r mRev) bool { return r.id == d.exp["active_revision_id"] })
		for i := active - 1; i >= 0 && rev == nil; i-- {
			if d.revs[i].status == "DEPLOYED" {
				rev = &d.revs[i]
			}
		}
		if rev == nil {
			want = invalidState
		}
	}
	if want == okay && builds && rev.image == nil {
		want = invalidState // the image it ran is not known
	}
	if want == okay && d.exp["pinned_revision_id"] != nil {
		want = invalidState // pinned: unpin first
	}
	if _, got := m.expectOutcome(rt, fmt.Sprintf("rollback %+v", req), want, "", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.Rollback(m.ctx, tenant, id, req)
	}); got != okay {
		return
	}
	target := *rev // addRevision may move d.revs
	m.restored(rt, "rollback", d, &target)
	r := &d.revs[len(d.revs)-1]
	r.image = target.image
	if builds {
		r.enter("AWAITING_DEPLOY", nil)
	}
}

// targetRevision draws the revision a call on the target deployment d
// names: mostly one of d's own (rev is then its model), sometimes another
// deployment's (rev nil unless that is d), else an id of unknown. rev is
// nil when the control plane must answer that the revision is not d's.
func (m *machine) targetRevision(rt *rapid.T, d *mDep, unknown func() string) (revID string, rev *mRev) {
	withRevs := slices.DeleteFunc(slices.Clone(m.deps), func(o *mDep) bool { return len(o.revs) == 0 })
	switch {
	case d != nil && len(d.revs) > 0 && !rarely(rt, 5, "not own revision"):
		rev = &d.revs[rapid.IntRange(0, len(d.revs)-1).Draw(rt, "revision")]
		return rev.id, rev
	case len(withRevs) > 0 && rapid.Bool().Draw(rt, "another deployment's revision"):
		o := rapid.SampledFrom(withRevs).Draw(rt, "other")
		if d != nil && o == d {
			rev = &d.revs[0]
		}
		return o.revs[0].id, rev
	}
	return unknown(), nil
}

// redeploy names a revision: one of the deployment's, another's, or an
// unknown id. The new revision copies the named one's snapshot
// (source_revision_config, secrets, resource_spec); the deployment's
// in-place fields keep their current values (wire contract section 7).
func (m *machine) redeploy(rt *rapid.T) {
	tenant, id, d := m.target(rt)
	revID, rev := m.targetRevision(rt, d, func() string { return unknownID })
	want := okay
	switch {
	case d == nil || rev == nil:
		want = notFound
	case d.deleted():
		want = invalidState
	}
	if _, got := m.expectOutcome(rt, "redeploy "+revID, want, "", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.RedeployRevision(m.ctx, tenant, id, revID)
	}); got != okay {
		return
	}
	m.restored(rt, "redeploy", d, rev)
}

// restored checks d after a redeploy or a rollback (what) of rev: the
// deployment has rev's snapshot (its commit too, when it has one) and a
// new latest revision, which the model adds.
func (m *machine) restored(rt *rapid.T, what string, d *mDep, rev *mRev) {
	exp := deepCopy(rt, d.exp)
	exp["source_revision_config"] = jsonValue(rt, rev.src)
	exp["secrets"] = jsonValue(rt, rev.secrets)
	exp["secret_references"] = jsonValue(rt, rev.refs)
	setPath(exp, loc("source_config.resource_spec"), jsonValue(rt, rev.spec))
	got := m.get(rt, d)
	m.touched[d] = true
	m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
	exp["updated_at"], exp["latest_revision_id"] = got["updated_at"], got["latest_revision_id"]
	if diff := diff(exp, got); diff != "" {
		rt.Fatalf("%s: deployment differs from the model (-model +got):\n%s", what, diff)
	}
	d.exp = exp
	m.addRevision(rt, d, got["latest_revision_id"], rev.tracked)
}

// list draws a ListDeployments query, with any of its filters and
// sometimes a bad value, and compares the page with the model's.
func (m *machine) list(rt *rapid.T) {
	tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
	q := &controlplane.ListDeploymentsQuery{}
	bad := false
	if rarely(rt, 2, "limit") {
		l := rapid.IntRange(1, 4).Draw(rt, "limit")
		if rarely(rt, 15, "bad limit") {
			l = pick(rt, "bad limit", 0, controlplane.MaxPageLimit+1)
			bad = true
		}
		q.Limit = &l
	}
	if rarely(rt, 3, "offset") {
		q.Offset = rapid.IntRange(0, 3).Draw(rt, "offset")
		if rarely(rt, 15, "bad offset") {
			q.Offset, bad = -1, true
		}
	}
	if rarely(rt, 3, "name_contains") {
		q.NameContains = pick(rt, "needle kind", "zz-none", "A", "x")
		if len(m.deps) > 0 {
			name := rapid.SampledFrom(m.deps).Draw(rt, "needle from").exp["name"].(string)
			i := rapid.IntRange(0, len(name)-1).Draw(rt, "needle start")
			j := rapid.IntRange(i+1, len(name)).Draw(rt, "needle end")
			q.NameContains = pick(rt, "needle case", name[i:j], strings.ToUpper(name[i:j]), strings.ToLower(name[i:j]))
		}
	}
	if rarely(rt, 4, "status") {
		s := pick(rt, "status", "AWAITING_DATABASE", "READY", "UNUSED", "AWAITING_DELETE", "UNKNOWN", "BOGUS")
		q.Status, bad = controlplane.DeploymentStatus(s), bad || s == "BOGUS"
	}
	if rarely(rt, 4, "deployment_type") {
		s := pick(rt, "deployment type", "dev_free", "dev", "prod", "dev_zero", "dev_free_zero", "huge")
		q.DeploymentType, bad = controlplane.DeploymentType(s), bad || s == "huge"
	}
	if rarely(rt, 4, "remote_reconciled") {
		q.RemoteReconciled = new(rapid.Bool().Draw(rt, "remote"))
	}
	if rarely(rt, 5, "deployment_ids") {
		q.DeploymentIDs = []string{unknownID}
		for _, d := range m.deps {
			if rapid.Bool().Draw(rt, "include id") {
				q.DeploymentIDs = append(q.DeploymentIDs, d.id())
			}
		}
		if rarely(rt, 10, "bad id") {
			q.DeploymentIDs, bad = append(q.DeploymentIDs, "x"), true
		}
	}
	if rarely(rt, 5, "tag_value_ids") {
		q.TagValueIDs = rapid.SliceOfNDistinct(rapid.SampledFrom(tagPool), 1, 2, rapid.ID).Draw(rt, "filter tags")
		if rarely(rt, 10, "bad tag") {
			q.TagValueIDs, bad = append(q.TagValueIDs, "t"), true
		}
	}
	if rarely(rt, 5, "name") {
		// Exact and case-sensitive (section 11): a model name, that name
		// in another case, or none.
		q.Name = "zz-none"
		if len(m.deps) > 0 {
			name := rapid.SampledFrom(m.deps).Draw(rt, "name from").exp["name"].(string)
			q.Name = pick(rt, "name case", name, name, strings.ToUpper(name), strings.ToLower(name))
		}
	}
	if rarely(rt, 4, "agent_id") {
		q.AgentID = pick(rt, "agent id", "agent-1", "agent-2", "7a0e0000-0000-4000-8000-00000000000a", "agent-none")
	}
	if rarely(rt, 4, "agent_environment") {
		e := pick(rt, "agent environment", "development", "staging", "production", "qa")
		q.AgentEnvironment, bad = controlplane.AgentEnvironment(e), bad || e == "qa"
	}
	if rarely(rt, 6, "image_version") {
		q.ImageVersion = "img-none"
		for _, d := range m.deps {
			if iv, ok := d.exp["image_version"].(string); ok && rapid.Bool().Draw(rt, "this image") {
				q.ImageVersion = iv
			}
		}
	}
	want := okay
	if bad {
		want = invalid
	}
	res, got := m.expectOutcome(rt, fmt.Sprintf("list %+v", q), want, "", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.ListDeployments(m.ctx, tenant, q)
	})
	if got != okay {
		return
	}
	var match []any // newest first
	for _, d := range slices.Backward(m.deps) {
		if d.tenant == tenant && m.matches(d, q) {
			match = append(match, d.exp)
		}
	}
	limit := controlplane.DefaultPageLimit
	if q.Limit != nil {
		limit = *q.Limit
	}
	page := []any{}
	if q.Offset < len(match) {
		page = match[q.Offset:min(len(match), q.Offset+limit)]
	}
	if d := diff(map[string]any{"resources": page, "offset": float64(q.Offset + len(page))}, toMap(rt, res)); d != "" {
		rt.Fatalf("list %+v of %s differs from the model (-model +got):\n%s", q, tenant, d)
	}
}

// matches is the model of the list filters (wire contract section 5): all
// of them, combined with AND.
func (m *machine) matches(d *mDep, q *controlplane.ListDeploymentsQuery) bool {
	name := d.exp["name"].(string)
	switch {
	case q.NameContains != "" && !strings.Contains(strings.ToLower(name), strings.ToLower(q.NameContains)):
		return false
	case q.Status != "" && d.exp["status"] != string(q.Status):
		return false
	case q.DeploymentType != "" && getPath(d.exp, loc("source_config.deployment_type")) != string(q.DeploymentType):
		return false
	case q.RemoteReconciled != nil && *q.RemoteReconciled != (d.source() == externalDocker):
		return false
	case q.DeploymentIDs != nil && !slices.Contains(q.DeploymentIDs, d.id()):
		return false
	case q.TagValueIDs != nil && !slices.ContainsFunc(d.tags, func(t string) bool { return slices.Contains(q.TagValueIDs, t) }):
		return false
	case q.ImageVersion != "" && d.exp["image_version"] != q.ImageVersion:
		return false
	case q.Name != "" && name != q.Name:
		return false
	}
	a, _ := d.exp["agent"].(map[string]any)
	if q.AgentID != "" || q.AgentEnvironment != "" {
		return a != nil && (q.AgentID == "" || a["agent_id"] == q.AgentID) && (q.AgentEnvironment == "" || a["environment"] == string(q.AgentEnvironment))
	}
	return true
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

func (m *machine) delete(rt *rapid.T) {
	tenant, id, d := m.target(rt)
	opts := &controlplane.DeleteDeploymentOptions{Force: rapid.IntRange(0, 3).Draw(rt, "force") == 0,
		KeepTracingProject: rapid.Bool().Draw(rt, "keep tracing project")}
	want := deleteOutcome(d, opts)
	var before map[string]map[string]string
	if d != nil && d.deleted() && !opts.Force {
		before = m.dump(rt)
	}
	if _, got := m.expectOutcome(rt, "delete", want, "", func(cp *controlplane.ControlPlane) (any, error) {
		return nil, cp.DeleteDeploymentWith(m.ctx, tenant, id, opts)
	}); got != okay {
		return
	}
	if before != nil && !opts.Force {
		if diff := diff(before, m.dump(rt)); diff != "" {
			rt.Fatalf("deleting a deployment being deleted changed the store:\n%s", diff)
		}
	}
	m.deleted(rt, d, opts)
}

// deleteOutcome is the model's outcome of a delete of d (nil: not the
// tenant's) with opts.
func deleteOutcome(d *mDep, opts *controlplane.DeleteDeploymentOptions) string {
	switch {
	case d == nil:
		return notFound
	case opts.Force && !d.deleted():
		return invalidState
	}
	return okay
}

// deleted follows a delete of d with opts that succeeded: removed at once
// when forced or when nothing of it ran, unchanged when it was being
// deleted already, else AWAITING_DELETE with its unfinished revisions
// INTERRUPTED.
func (m *machine) deleted(rt *rapid.T, d *mDep, opts *controlplane.DeleteDeploymentOptions) {
	if opts.Force || !d.deleted() && !d.ran() {
		// Removed at once: forced, or nothing to tear down.
		m.checkRemoved(rt, d, !opts.KeepTracingProject)
		return
	}
	if d.deleted() {
		m.touched[d] = true // compared with the model, unchanged
		return
	}
	got := m.get(rt, d)
	m.touched[d] = true
	m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
	d.exp["status"] = string(controlplane.StatusAwaitingDelete)
	d.exp["updated_at"] = got["updated_at"]
	d.keepTracing = opts.KeepTracingProject
	for i := range d.revs {
		if r := &d.revs[i]; !modelFinal(r.status) {
			r.enter("INTERRUPTED", "The deployment is being deleted.")
		}
	}
}

// deleteMany sends a bulk delete of some ids of a tenant: its own
// deployments, another tenant's, unknown ids, ids that are no UUIDs, ids
// in upper case, and repeats; sometimes none or too many. The model says
// each distinct id's outcome, in the order of first appearance, as a
// delete of it alone with the same options, and follows each.
func (m *machine) deleteMany(rt *rapid.T) {
	tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
	opts := &controlplane.DeleteDeploymentOptions{Force: rapid.IntRange(0, 3).Draw(rt, "force") == 0,
		KeepTracingProject: rapid.Bool().Draw(rt, "keep tracing project")}
	var ids []string
	for range rapid.IntRange(0, 4).Draw(rt, "ids") {
		switch kind := rapid.IntRange(0, 9).Draw(rt, "id kind"); {
		case kind < 5 && len(m.deps) > 0:
			id := rapid.SampledFrom(m.deps).Draw(rt, "deployment").id()
			if rarely(rt, 4, "upper case") {
				id = strings.ToUpper(id)
			}
			ids = append(ids, id)
		case kind < 7 && len(ids) > 0:
			ids = append(ids, rapid.SampledFrom(ids).Draw(rt, "repeat"))
		case kind < 8:
			ids = append(ids, unknownID)
		default:
			ids = append(ids, pick(rt, "bad id", "x", "", unknownID+"0"))
		}
	}
	if rarely(rt, 20, "too many ids") {
		for len(ids) <= controlplane.MaxDeleteIDs {
			ids = append(ids, unknownID)
		}
	}
	what := fmt.Sprintf("delete many %v (%+v)", ids, opts)
	if len(ids) == 0 || len(ids) > controlplane.MaxDeleteIDs {
		m.expectOutcome(rt, what, invalid, "", func(cp *controlplane.ControlPlane) (any, error) {
			return cp.DeleteDeployments(m.ctx, tenant, ids, opts)
		})
		return
	}
	var want []string
	var then []*mDep // the deployments deleted, in order
	seen := map[string]bool{}
	for _, id := range ids {
		cid := strings.ToLower(id)
		if seen[cid] {
			continue
		}
		seen[cid] = true
		if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
			want = append(want, id+": "+invalid)
			continue
		}
		d := m.find(tenant, cid)
		out := deleteOutcome(d, opts)
		want = append(want, cid+": "+out)
		if out == okay {
			then = append(then, d)
		}
	}
	res, _ := m.expectOutcome(rt, what, okay, "", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.DeleteDeployments(m.ctx, tenant, ids, opts)
	})
	var got []string
	for _, r := range res.([]controlplane.DeleteResult) {
		got = append(got, r.ID+": "+classify(r.Err))
	}
	if d := diff(want, got); d != "" {
		rt.Fatalf("%s: results differ from the model (-model +got):\n%s", what, d)
	}
	for _, d := range then {
		m.deleted(rt, d, opts)
	}
}

// interrupt names a revision: one of the deployment's (any status),
// another deployment's, or an unknown id. A revision not final becomes
// INTERRUPTED with its message and is no longer pending; a final one is
// refused. The deployment keeps its active and latest revisions; only a
// deployment UNKNOWN changes: READY with an active revision, else
// AWAITING_DATABASE.
func (m *machine) interrupt(rt *rapid.T) {
	tenant, id, d := m.target(rt)
	revID, rev := m.targetRevision(rt, d, func() string { return pick(rt, "unknown revision", unknownID, "x") })
	want := okay
	switch {
	case d == nil || rev == nil:
		want = notFound
	case modelFinal(rev.status):
		want = invalidState
	}
	res, got := m.expectOutcome(rt, "interrupt "+revID, want, "", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.InterruptRevision(m.ctx, tenant, id, revID)
	})
	if got != okay {
		return
	}
	rev.enter("INTERRUPTED", "The revision was interrupted.")
	wantRev := map[string]any{"id": rev.id, "source": d.source(), "source_revision_config": rev.src,
		"status": rev.status, "status_message": rev.msg, "status_history": rev.history, "tracked_packages": rev.tracked}
	if diff := diff(wantRev, revisionMap(rt, *res.(*controlplane.Revision))); diff != "" {
		rt.Fatalf("interrupt: revision differs from the model (-model +got):\n%s", diff)
	}
	m.touched[d] = true
	if d.exp["status"] != string(controlplane.StatusUnknown) {
		return // compared with the model, unchanged
	}
	gotD := m.get(rt, d)
	m.checkLater(rt, d.exp["updated_at"], gotD["updated_at"])
	d.exp["updated_at"] = gotD["updated_at"]
	d.exp["status"] = string(controlplane.StatusAwaitingDatabase)
	if d.exp["active_revision_id"] != nil {
		d.exp["status"] = string(controlplane.StatusReady)
	}
	if diff := diff(d.exp, gotD); diff != "" {
		rt.Fatalf("interrupt: deployment differs from the model (-model +got):\n%s", diff)
	}
}

// check, after every step, compares the stores with each other, and the
// deployments the step changed, with their revisions, with the model
// (each step has compared what it answered already); checkAll, at the
// end, compares every deployment of every tenant as listed, and every
// deployment's revisions.
func (m *machine) check(rt *rapid.T) { m.checkDeployments(rt, false) }

func (m *machine) checkAll(rt *rapid.T) { m.checkDeployments(rt, true) }

func (m *machine) checkDeployments(rt *rapid.T, all bool) {
	if len(m.systems) > 1 {
		// The sequencer lease names its holder, a ControlPlane of its
		// own in each system.
		want := m.dump(rt)
		delete(want, "cp_sequencer")
		for i, s := range m.systems[1:] {
			got := m.dumpStore(rt, s.st)
			delete(got, "cp_sequencer")
			if d := diff(want, got); d != "" {
				rt.Fatalf("store %d holds other records than store 0 (-0 +%d):\n%s", i+1, i+1, d)
			}
		}
	}
	for _, tenant := range tenants {
		if !all {
			break // "list" compares pages every few steps
		}
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
		if d := diff(map[string]any{"resources": want, "offset": float64(len(want))}, got); d != "" {
			rt.Fatalf("deployments of %s differ from the model (-model +got):\n%s", tenant, d)
		}
	}
	for _, d := range m.deps {
		if !all && !m.touched[d] {
			continue
		}
		m.checkMirror(rt, d)
		var want []any
		for _, r := range slices.Backward(d.revs) {
			want = append(want, map[string]any{"id": r.id, "source": d.source(), "source_revision_config": r.src,
				"status": r.status, "status_message": r.msg, "status_history": r.history, "tracked_packages": r.tracked})
		}
		page, err := m.call(rt, "list revisions", func(cp *controlplane.ControlPlane) (any, error) {
			return cp.ListRevisions(m.ctx, d.tenant, d.id(), &controlplane.ListRevisionsQuery{Limit: new(controlplane.MaxPageLimit)})
		})
		if err != nil {
			rt.Fatal(err)
		}
		var got []any
		for _, r := range page.(*controlplane.RevisionPage).Resources {
			got = append(got, revisionMap(rt, r))
		}
		if diff := diff(want[:min(len(want), controlplane.MaxPageLimit)], got); diff != "" {
			rt.Fatalf("revisions of %s differ from the model (-model +got):\n%s", d.id(), diff)
		}
		if rarely(rt, 3, "revision status filter") {
			m.checkRevisionFilter(rt, d, want)
		}
		if len(d.revs) == 0 {
			// langgraph deploy's sources before a source arrives.
			if d.exp["latest_revision_id"] != nil || hasRevisionFrom(d.exp) {
				rt.Fatalf("deployment %s has no revision, yet latest_revision_id %v, source given %v", d.id(), d.exp["latest_revision_id"], hasRevisionFrom(d.exp))
			}
			continue
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
	clear(m.touched)
}

// checkRevisionFilter lists d's revisions with a status filter and a
// small page, and compares with all (the model's revisions, newest first).
func (m *machine) checkRevisionFilter(rt *rapid.T, d *mDep, all []any) {
	statuses := rapid.SliceOfNDistinct(rapid.SampledFrom(allStatuses), 1, 3, rapid.ID).Draw(rt, "revision statuses")
	q := &controlplane.ListRevisionsQuery{Limit: new(rapid.IntRange(1, 3).Draw(rt, "revision limit")),
		Offset: rapid.IntRange(0, 2).Draw(rt, "revision offset")}
	for _, s := range statuses {
		q.Status = append(q.Status, controlplane.RevisionStatus(s))
	}
	want := []any{}
	for _, r := range all {
		if slices.Contains(statuses, r.(map[string]any)["status"].(string)) {
			want = append(want, r)
		}
	}
	want = want[min(q.Offset, len(want)):min(q.Offset+*q.Limit, len(want))]
	page, err := m.call(rt, "list revisions by status", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.ListRevisions(m.ctx, d.tenant, d.id(), q)
	})
	if err != nil {
		rt.Fatal(err)
	}
	got := []any{}
	for _, r := range page.(*controlplane.RevisionPage).Resources {
		got = append(got, revisionMap(rt, r))
	}
	if diff := diff(want, got); diff != "" {
		rt.Fatalf("revisions of %s with status in %v, offset %d, limit %d differ from the model (-model +got):\n%s", d.id(), statuses, q.Offset, *q.Limit, diff)
	}
}

// checkMirror checks, on what the ControlPlane answers, that a deployment's
// source_revision_config is its latest revision's, repo_commit_sha
// included, and that the model says so too.
func (m *machine) checkMirror(rt *rapid.T, d *mDep) {
	got := m.get(rt, d)
	if len(d.revs) == 0 {
		if got["latest_revision_id"] != nil {
			rt.Fatalf("deployment %s: latest_revision_id %v, the model has no revision", d.id(), got["latest_revision_id"])
		}
		return
	}
	latest, _ := got["latest_revision_id"].(string)
	rev, err := m.call(rt, "get latest revision", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.GetRevision(m.ctx, d.tenant, d.id(), latest)
	})
	if err != nil {
		rt.Fatalf("latest revision %q of %s: %v", latest, d.id(), err)
	}
	want := jsonValue(rt, rev.(*controlplane.Revision).SourceRevisionConfig)
	if diff := diff(want, got["source_revision_config"]); diff != "" {
		rt.Fatalf("deployment %s does not mirror its latest revision %s (-revision +deployment):\n%s", d.id(), latest, diff)
	}
	if diff := diff(d.revs[len(d.revs)-1].src, d.exp["source_revision_config"]); diff != "" {
		rt.Fatalf("model: deployment %s does not mirror its latest revision (-revision +deployment):\n%s", d.id(), diff)
	}
}

// diff is cmp.Diff(want, got), computed only when they differ: the machine
// compares after every step, and reflect.DeepEqual is far cheaper.
func diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return cmp.Diff(want, got)
}

// revisionMap is a revision's wire JSON as the model sees it: without its
// times, and with status_history as the list of statuses. The times are
// checked here: updated_at is not before created_at, and status_history's
// run from created_at, never backwards, to at most updated_at (a report of
// a commit or an image alone moves updated_at, not the status).
func revisionMap(rt *rapid.T, r controlplane.Revision) map[string]any {
	rm := toMap(rt, r)
	if r.UpdatedAt.Before(r.CreatedAt) {
		rt.Fatalf("revision %v (%s): created_at %v, updated_at %v", rm["id"], r.Status, rm["created_at"], rm["updated_at"])
	}
	statuses := []any{}
	for i, h := range r.StatusHistory {
		statuses = append(statuses, string(h.Status))
		first, last := i == 0, i == len(r.StatusHistory)-1
		if first && !h.At.Equal(r.CreatedAt) || last && h.At.After(r.UpdatedAt) || !first && h.At.Before(r.StatusHistory[i-1].At) {
			rt.Fatalf("revision %v: status_history %v does not run from created_at %v to (at most) updated_at %v",
				rm["id"], rm["status_history"], rm["created_at"], rm["updated_at"])
		}
	}
	rm["status_history"] = statuses
	delete(rm, "created_at")
	delete(rm, "updated_at")
	return rm
}
