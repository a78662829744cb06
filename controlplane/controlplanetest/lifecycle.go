package controlplanetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane"
)

// The model's own copy of the revision lifecycle (wire contract section 7),
// written independently of controlplane.Transitions.
var (
	modelPaths = map[string][]string{
		"github":          {"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"},
		"external_docker": {"CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"},
		// Section 10: internal_source builds like github, internal_docker
		// runs its image like external_docker.
		"internal_source": {"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"},
		"internal_docker": {"CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"},
	}
	allStatuses = []string{"CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING",
		"CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "DEPLOYED", "SKIPPED", "INTERRUPTED", "UNKNOWN"}
)

func modelFinal(s string) bool {
	switch s {
	case "DEPLOYED", "SKIPPED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "INTERRUPTED":
		return true
	}
	return false
}

func modelSkippable(s string) bool {
	switch s {
	case "CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY":
		return true
	}
	return false
}

// modelFailure is the failure of the phase s is in.
func modelFailure(s string) string {
	switch s {
	case "CREATING", "QUEUED":
		return "CREATE_FAILED"
	case "AWAITING_BUILD", "BUILDING":
		return "BUILD_FAILED"
	}
	return "DEPLOY_FAILED"
}

// modelLegal says whether a revision of src may go from one status to
// another.
func modelLegal(src, from, to string) bool {
	if modelFinal(from) {
		return false
	}
	path := modelPaths[src]
	switch to {
	case "SKIPPED":
		return modelSkippable(from)
	case "INTERRUPTED":
		return true
	case "UNKNOWN":
		return from != "UNKNOWN"
	case "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED":
		return from == "UNKNOWN" || modelFailure(from) == to
	}
	if from == "UNKNOWN" {
		return slices.Index(path, to) > 0
	}
	i := slices.Index(path, from)
	return i >= 0 && i+1 < len(path) && path[i+1] == to
}

// push sends a push event; the model predicts which deployments get a
// revision: the github deployments of the tenant that owns the
// installation, not being deleted, with build_on_push true, the same
// repository (normRepo) and repo_ref equal to the pushed branch. Tags and
// other refs build nothing.
func (m *machine) push(rt *rapid.T) {
	inst := pick(rt, "installation", int64(installationID), installationID+1, 99)
	owner, repo := pick(rt, "owner", repoOwners...), pick(rt, "repo", repoNames...)
	url := pick(rt, "url form", "https://github.com/"+owner+"/"+repo, "git@github.com:"+owner+"/"+repo+".git",
		"HTTP://GitHub.com/"+owner+"/"+repo+".git/", "https://github.com/"+owner+"/"+repo+"x")
	var refs []string
	for _, b := range branches {
		refs = append(refs, "refs/heads/"+b)
	}
	ref := pick(rt, "ref", append(refs, append(slices.Clone(tags), "refs/pull/1/head", "main")...)...)
	// Mostly, aim at a build_on_push deployment, its URL spelled another way.
	var aims []*mDep
	for _, d := range m.deps {
		if getPath(d.exp, loc("source_config.build_on_push")) == true {
			aims = append(aims, d)
		}
	}
	if len(aims) > 0 && !rarely(rt, 4, "stray push") {
		d := rapid.SampledFrom(aims).Draw(rt, "aim at")
		inst = int64(installationID + slices.Index(tenants, d.tenant))
		path := strings.TrimPrefix(normRepo(getPath(d.exp, loc("source_config.repo_url")).(string)), "github.com/")
		url = pick(rt, "spelling", "https://github.com/"+path, "https://github.com/"+path+".git", "https://github.com/"+path+"/",
			"git@github.com:"+path+".git", "https://GitHub.com/"+strings.ToUpper(path))
		ref = "refs/heads/" + getPath(d.exp, loc("source_revision_config.repo_ref")).(string)
	}
	after := m.sha()
	branch, isBranch := strings.CutPrefix(ref, "refs/heads/")
	var want []string // tenant/id of the deployments that get a revision
	for _, d := range m.deps {
		if inst == int64(installationID+slices.Index(tenants, d.tenant)) && isBranch && d.source() == github && !d.deleted() &&
			getPath(d.exp, loc("source_config.build_on_push")) == true &&
			normRepo(getPath(d.exp, loc("source_config.repo_url")).(string)) == normRepo(url) &&
			getPath(d.exp, loc("source_revision_config.repo_ref")) == branch {
			want = append(want, d.tenant+"/"+d.id())
		}
	}
	ev := &controlplane.PushEvent{InstallationID: inst, RepoURL: url, Ref: ref, After: after}
	res, _ := m.expectOutcome(rt, fmt.Sprintf("push %+v", ev), okay, "", func(cp *controlplane.ControlPlane) (any, error) {
		return cp.HandleGitHubPush(m.ctx, ev)
	})
	pushed := res.([]controlplane.PushedRevision)
	var got []string
	for _, p := range pushed {
		got = append(got, p.Tenant+"/"+p.DeploymentID)
	}
	slices.Sort(want)
	slices.Sort(got)
	if d := diff(want, got); d != "" {
		rt.Fatalf("push %+v: deployments with a new revision differ from the model (-model +got):\n%s", ev, d)
	}
	for _, p := range pushed {
		d := m.find(p.Tenant, p.DeploymentID)
		got := m.get(rt, d)
		m.touched[d] = true
		m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
		d.exp["updated_at"], d.exp["latest_revision_id"] = got["updated_at"], p.Revision.ID
		setPath(d.exp, loc("source_revision_config.repo_commit_sha"), after)
		m.addRevision(rt, d, p.Revision.ID, nil)
		if diff := diff(d.exp, got); diff != "" {
			rt.Fatalf("push: deployment differs from the model (-model +got):\n%s", diff)
		}
	}
}

func (m *machine) find(tenant, id string) *mDep {
	for _, d := range m.deps {
		if d.tenant == tenant && d.id() == id {
			return d
		}
	}
	return nil
}

// planStep is one report of the scripted deployer, drawn before the call so
// that every system gets the same script.
type planStep struct {
	choice int
	image  bool
	sha    bool
}

// scripted is a Deployer that follows a drawn plan and records what it saw
// and how each report ended, for one system.
type scripted struct {
	m    *machine
	rt   *rapid.T
	sys  *system
	plan []planStep
	fail bool // Deploy or Teardown returns an error at the end

	work     *controlplane.Work
	torn     string // the deployment Teardown got
	steps    []controlplane.Step
	outcomes []string // classify(err) per report
}

var errPlanned = errors.New("planned failure")

// seen is what the deployer saw and how its reports ended.
func (s *scripted) seen() []any { return []any{s.work, s.torn, s.steps, s.outcomes} }

// step turns a plan step into a report, given the revision's status as the
// deployer believes it: mostly the next status of the happy path, sometimes
// any status, UNKNOWN, or a deployment status.
func (s *scripted) step(src, cur string, p planStep) controlplane.Step {
	var st controlplane.Step
	switch c := p.choice; {
	case c < 65:
		path := modelPaths[src]
		i := slices.Index(path, cur)
		if cur == "UNKNOWN" {
			i = c % (len(path) - 1)
		}
		if i >= 0 && i+1 < len(path) {
			st.Status = controlplane.RevisionStatus(path[i+1])
		} else {
			st.Status = controlplane.RevisionQueued
		}
	case c < 85:
		st.Status = controlplane.RevisionStatus(allStatuses[c%len(allStatuses)])
		if strings.HasSuffix(string(st.Status), "_FAILED") {
			st.Message = "failed at " + cur
		}
	case c < 90:
		st.Status = controlplane.RevisionUnknown
	default:
		st.DeploymentStatus = []controlplane.DeploymentStatus{controlplane.StatusUnused, controlplane.StatusUnknown,
			controlplane.StatusReady, controlplane.StatusAwaitingDelete}[c%4]
	}
	if p.image {
		st.ImageVersion = new(fmt.Sprint("img-", p.choice))
	}
	if p.sha {
		st.RepoCommitSHA = new(fmt.Sprint("sha-", p.choice))
	}
	return st
}

func (s *scripted) Deploy(ctx context.Context, w *controlplane.Work, r controlplane.Reporter) error {
	s.work = w
	cur := string(w.Revision.Status)
	for _, p := range s.plan {
		st := s.step(string(w.Revision.Source), cur, p)
		before := s.m.dumpStore(s.rt, s.sys.st)
		err := r.Report(ctx, st)
		s.steps = append(s.steps, st)
		s.outcomes = append(s.outcomes, classify(err))
		if err == nil && st.Status != "" {
			cur = string(st.Status)
		}
		if err != nil && !errors.Is(err, controlplane.ErrRevisionHeld) { // a hold writes the revision's wait
			if d := diff(before, s.m.dumpStore(s.rt, s.sys.st)); d != "" {
				s.rt.Fatalf("a refused report (%+v: %v) changed the store (-before +after):\n%s", st, err, d)
			}
		}
	}
	if s.fail {
		return errPlanned
	}
	return nil
}

func (s *scripted) Teardown(ctx context.Context, tenant string, d *controlplane.Deployment) error {
	s.torn = tenant + "/" + d.ID
	if s.fail {
		return errPlanned
	}
	return nil
}

// work runs Process with a scripted deployer on every system and checks the
// outcome of every report against the model.
func (m *machine) work(rt *rapid.T) {
	plan := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) planStep {
		return planStep{choice: rapid.IntRange(0, 99).Draw(t, "choice"), image: rapid.IntRange(0, 4).Draw(t, "image") == 0,
			sha: rapid.IntRange(0, 6).Draw(t, "sha") == 0}
	}), 0, 6).Draw(rt, "plan")
	fail := rapid.IntRange(0, 5).Draw(rt, "fail") == 0
	var ds []*scripted
	res, err := m.call(rt, "process", func(cp *controlplane.ControlPlane) (any, error) {
		s := &scripted{m: m, rt: rt, plan: plan, fail: fail}
		for _, sys := range m.systems {
			if sys.cp == cp {
				s.sys = sys
			}
		}
		ds = append(ds, s)
		return cp.Process(m.ctx, s)
	})
	for i, s := range ds[1:] {
		if d := diff(ds[0].seen(), s.seen()); d != "" {
			rt.Fatalf("process: the deployer of store %d saw other work than store 0's:\n%s", i+1, d)
		}
	}
	s := ds[0]
	pending := m.pending()
	if !res.(bool) {
		if err != nil {
			rt.Fatal(err)
		}
		for _, p := range pending {
			// A teardown that failed waits for its backoff, by the
			// ControlPlane's clock, which the model does not follow.
			if tenant, id, ok := strings.Cut(strings.TrimPrefix(p, "d/"), "/"); !ok || !m.find(tenant, id).backoff {
				rt.Fatalf("Process found no work; the model has pending %v", pending)
			}
		}
		return
	}
	switch {
	case s.torn != "":
		m.checkTeardown(rt, s, err, pending)
	case s.work != nil:
		if err != nil {
			rt.Fatal(err)
		}
		m.checkDeploy(rt, s, pending)
	default:
		rt.Fatalf("Process reported work but called neither Deploy nor Teardown (err %v)", err)
	}
}

// pending lists the model's pending work: "d/tenant/id" for deployments
// being deleted, "r/revision id" for revisions not final.
func (m *machine) pending() []string {
	var out []string
	for _, d := range m.deps {
		if d.deleted() {
			out = append(out, "d/"+d.tenant+"/"+d.id())
		}
		for _, r := range d.revs {
			if !modelFinal(r.status) && !r.held {
				out = append(out, "r/"+r.id)
			}
		}
	}
	return out
}

func (m *machine) checkTeardown(rt *rapid.T, s *scripted, err error, pending []string) {
	if !slices.Contains(pending, "d/"+s.torn) {
		rt.Fatalf("Teardown of %s, which the model does not have AWAITING_DELETE (pending %v)", s.torn, pending)
	}
	tenant, id, _ := strings.Cut(s.torn, "/")
	d := m.find(tenant, id)
	if s.fail {
		if !errors.Is(err, errPlanned) {
			rt.Fatalf("Process after a failed Teardown returned %v", err)
		}
		// Retried after a backoff; the deployment's status_message says
		// why it waits (written when it changes: once here, where every
		// failure is the same).
		got := m.get(rt, d)
		m.touched[d] = true
		if msg, _ := got["status_message"].(string); !strings.Contains(msg, errPlanned.Error()) {
			rt.Fatalf("status_message after a failed Teardown: %v, want one naming the failure", got["status_message"])
		}
		if d.exp["status_message"] == nil {
			m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
			d.exp["updated_at"] = got["updated_at"]
		}
		d.exp["status_message"] = got["status_message"]
		d.backoff = true
		return
	}
	if err != nil {
		rt.Fatal(err)
	}
	m.checkRemoved(rt, d, !d.keepTracing)
}

// checkRemoved removes d from the model and checks that the stores hold
// nothing of it: GetDeployment answers not found, and no record names it
// but the tracing project (when it is kept) and the event log's.
func (m *machine) checkRemoved(rt *rapid.T, d *mDep, tracingDeleted bool) {
	tenant, id := d.tenant, d.id()
	m.deps = slices.DeleteFunc(m.deps, func(o *mDep) bool { return o == d })
	delete(m.touched, d)
	_, gerr := m.call(rt, "get removed", func(cp *controlplane.ControlPlane) (any, error) { return cp.GetDeployment(m.ctx, tenant, id) })
	if classify(gerr) != notFound {
		rt.Fatalf("GetDeployment of a removed deployment: %v, want not found", gerr)
	}
	// Nothing names it any more, in any collection but the event log's
	// history (kept until pruned) and what the sequencer has not yet
	// taken: events not yet numbered, the deployment's event clock (gone
	// with its numbered deleted event) and the pending change of the
	// order counts.
	for col, recs := range m.dump(rt) {
		for k, v := range recs {
			bin := uuid.MustParse(id) // keys hold ids as their 16 bytes
			if strings.Contains(k, id) || strings.Contains(v, id) || strings.Contains(k, string(bin[:])) || strings.Contains(v, string(bin[:])) {
				if col == "cp_tracing_projects" && !tracingDeleted {
					continue // kept, as the delete asked
				}
				if !slices.Contains([]string{"cp_events", "cp_event_outbox", "cp_event_clocks", "cp_deployment_count_changes"}, col) {
					rt.Fatalf("%s/%s still names the removed deployment %s", col, k, id)
				}
			}
		}
	}
}

func (m *machine) checkDeploy(rt *rapid.T, s *scripted, pending []string) {
	w := s.work
	if !slices.Contains(pending, "r/"+w.Revision.ID) {
		rt.Fatalf("Deploy of revision %s (%s), which the model does not have pending (%v)", w.Revision.ID, w.Revision.Status, pending)
	}
	d := m.find(w.Tenant, w.Deployment.ID)
	ri := slices.IndexFunc(d.revs, func(r mRev) bool { return r.id == w.Revision.ID })
	r := &d.revs[ri]
	if string(w.Revision.Status) != r.status {
		rt.Fatalf("Deploy got revision %s in status %s, the model has %s", r.id, w.Revision.Status, r.status)
	}
	if diff := diff([]any{r.secrets, r.refs, r.spec, r.src}, []any{jsonValue(rt, w.Secrets), jsonValue(rt, w.SecretReferences),
		jsonValue(rt, w.ResourceSpec), jsonValue(rt, w.Revision.SourceRevisionConfig)}); diff != "" {
		rt.Fatalf("Deploy got another snapshot than the model's (-model +got):\n%s", diff)
	}
	exp := deepCopy(rt, d.exp)
	touched := false // some accepted report changed the deployment (each writes it, and moves updated_at, on its own)
	for i, st := range s.steps {
		want := okay
		if r.held {
			// Held by the pin: its work is no longer this Deploy's. A
			// deployment status no deployer may set is refused first.
			want := leaseLost
			switch st.DeploymentStatus {
			case "", "READY", "UNUSED", "UNKNOWN":
			default:
				want = invalidState
			}
			if s.outcomes[i] != want {
				rt.Fatalf("report %d %+v of revision %s after its hold: %s, model says %s", i, st, r.id, s.outcomes[i], want)
			}
			continue
		}
		legal := !modelFinal(r.status) && (st.Status == "" || modelLegal(d.source(), r.status, string(st.Status)))
		if legal && st.Status == "DEPLOYING" && exp["pinned_revision_id"] != nil {
			// Section 11: pinned, so it waits before DEPLOYING.
			if s.outcomes[i] != held {
				rt.Fatalf("report %d %+v of revision %s of a pinned deployment: %s, model says %s", i, st, r.id, s.outcomes[i], held)
			}
			r.held, r.msg = true, "Waiting: the deployment is pinned to revision "+exp["pinned_revision_id"].(string)+"; this revision deploys once it is unpinned."
			continue
		}
		// A revision that reaches DEPLOYED becomes active unless a newer
		// one already is.
		active := exp["active_revision_id"]
		activate := legal && st.Status == "DEPLOYED" &&
			(active == nil || slices.IndexFunc(d.revs, func(o mRev) bool { return o.id == active }) < ri)
		if activate {
			active = r.id
		}
		switch st.DeploymentStatus {
		case "":
		case "READY":
			legal = legal && active != nil
		case "UNUSED", "UNKNOWN":
		default:
			legal = false
		}
		if !legal {
			want = invalidState
		}
		if s.outcomes[i] != want {
			rt.Fatalf("report %d %+v of revision %s (%s, %s): %s, model says %s", i, st, r.id, d.source(), r.status, s.outcomes[i], want)
		}
		if !legal {
			continue
		}
		before := deepCopy(rt, exp)
		if st.Status != "" {
			r.enter(string(st.Status), nil)
		}
		if st.Message != "" {
			r.msg = st.Message
		}
		if st.ImageVersion != nil {
			r.image = *st.ImageVersion
		}
		if st.RepoCommitSHA != nil {
			r.src.(map[string]any)["repo_commit_sha"] = *st.RepoCommitSHA
			if exp["latest_revision_id"] == r.id { // the deployment mirrors its latest revision
				setPath(exp, []string{"source_revision_config", "repo_commit_sha"}, *st.RepoCommitSHA)
			}
		}
		if activate {
			exp["active_revision_id"] = r.id
			if r.image != nil {
				exp["image_version"] = r.image
			}
			if exp["status"] == "AWAITING_DATABASE" {
				exp["status"] = "READY"
			}
		}
		if st.DeploymentStatus != "" {
			exp["status"] = string(st.DeploymentStatus)
		}
		touched = touched || !cmp.Equal(before, exp)
	}
	if s.fail && !modelFinal(r.status) && !r.held {
		r.enter(modelFailure(r.status), errPlanned.Error())
	}
	got := m.get(rt, d)
	m.touched[d] = true
	if touched {
		m.checkLater(rt, d.exp["updated_at"], got["updated_at"])
		exp["updated_at"] = got["updated_at"]
	}
	if diff := diff(exp, got); diff != "" {
		rt.Fatalf("after Deploy of %s: deployment differs from the model (-model +got):\n%s", r.id, diff)
	}
	d.exp = exp
}
