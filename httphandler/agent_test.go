package httphandler_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/internal/testclock"
	"github.com/deployplane/deployplane/storemem"
)

// The listener tokens and the agent routes (agent.go), over a real
// server and a ControlPlane whose own Deployer drives no listener of
// compute_id "edge-...": those are served by agents, which the tests play
// over HTTP.

// agentDrives is the Options.Drives of the tests: the listeners of
// compute_id "edge-..." are served by agents.
func agentDrives(l *controlplane.Listener) bool { return !strings.HasPrefix(l.ComputeID, "edge-") }

// agentSecret is the secret of the agents' deployments: the claim answers
// it, and no log may show it.
const agentSecret = "s3cret-value-only-agents-see"

// agentEnv is a server over a ControlPlane with agent-served listeners
// and a clock the test moves (leases expire by it).
type agentEnv struct {
	t     *testing.T
	s     *server
	cp    *controlplane.ControlPlane
	clock *testclock.Clock
}

func newAgentEnv(t *testing.T, opts *httphandler.Options) *agentEnv {
	t.Helper()
	clock := testclock.New(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), time.Microsecond)
	cp := controlplane.New(storemem.New(), &controlplane.Options{Clock: clock.Now, Drives: agentDrives, LeaseDuration: 30 * time.Second})
	return &agentEnv{t: t, s: newServerCP(t, cp, opts), cp: cp, clock: clock}
}

// listener registers a listener of tenant key's and makes a token for it.
func (e *agentEnv) listener(key, computeID string) (controlplane.Listener, string) {
	e.t.Helper()
	return registerAgentListener(e.t, e.s, key, computeID)
}

func registerAgentListener(t testing.TB, s *server, key, computeID string) (controlplane.Listener, string) {
	t.Helper()
	l := must[controlplane.Listener](t, s, key, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "`+computeID+`"}`, 201)
	tok := must[controlplane.NewListenerToken](t, s, key, "POST", "/v2/listeners/"+l.ID+"/tokens", "", 201)
	return l, tok.Token
}

// agentDeploymentBody is an external_docker deployment on a listener,
// with agentSecret.
func agentDeploymentBody(name, listenerID string) string {
	return `{"name": "` + name + `", "source": "external_docker",
		"source_config": {"listener_id": "` + listenerID + `"},
		"source_revision_config": {"image_uri": "registry.example/agent:1"},
		"secrets": [{"name": "OPENAI_API_KEY", "value": "` + agentSecret + `"}]}`
}

func (e *agentEnv) deployment(key, name, listenerID string) controlplane.Deployment {
	e.t.Helper()
	return must[controlplane.Deployment](e.t, e.s, key, "POST", "/v2/deployments", agentDeploymentBody(name, listenerID), 201)
}

// bearer are the headers of a request with a token.
func bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// agent sends an agent's request with its listener token.
func (e *agentEnv) agent(token, method, path, body string) reply {
	e.t.Helper()
	return e.s.do(method, path, body, bearer(token)...)
}

// want sends an agent's request and checks its status; a 204 has no body.
func (e *agentEnv) want(token, method, path, body string, status int) reply {
	e.t.Helper()
	r := e.agent(token, method, path, body)
	if r.status != status {
		e.t.Fatalf("%s %s %s: %d, want %d: %s", method, path, body, r.status, status, r.body)
	}
	if status == http.StatusNoContent && (len(r.body) != 0 || r.header.Get("Content-Type") != "") {
		e.t.Errorf("%s %s: a 204 with a body: %q %q", method, path, r.header.Get("Content-Type"), r.body)
	}
	return r
}

// claim claims with wait_seconds 0 and decodes the work (nil for a 204).
func (e *agentEnv) claim(token, listenerID string) *controlplane.AgentWork {
	e.t.Helper()
	r := e.agent(token, "POST", "/v2/listeners/"+listenerID+"/agent/claim", `{"wait_seconds": 0, "version": "1.2.3"}`)
	switch r.status {
	case http.StatusNoContent:
		return nil
	case http.StatusOK:
		var w controlplane.AgentWork
		if err := json.Unmarshal(r.body, &w); err != nil {
			e.t.Fatalf("claim: %v: %s", err, r.body)
		}
		return &w
	}
	e.t.Fatalf("claim: %d %s", r.status, r.body)
	return nil
}

func leaseBody(lease string, more ...string) string {
	b, _ := json.Marshal(lease)
	return `{"lease": ` + string(b) + strings.Join(more, "") + `}`
}

// TestListenerTokens: tokens are created, listed (without the token,
// with last_used_at once used) and revoked over HTTP; a revoked token is
// refused at its next call, as are the tokens of a deleted listener;
// another tenant's listener is not found.
func TestListenerTokens(t *testing.T) {
	e := newAgentEnv(t, nil)
	l := must[controlplane.Listener](t, e.s, keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "edge-1"}`, 201)
	tokens := "/v2/listeners/" + l.ID + "/tokens"
	first := must[controlplane.NewListenerToken](t, e.s, keyA, "POST", tokens, "", 201)
	second := must[controlplane.NewListenerToken](t, e.s, keyA, "POST", tokens, "", 201)
	if !strings.HasPrefix(first.Token, "dpl_lt_") || first.ID == "" || first.Token == second.Token {
		t.Fatalf("tokens %+v %+v", first, second)
	}
	r := e.s.as(keyA, "GET", tokens, "")
	if r.status != 200 || strings.Contains(string(r.body), first.Token) || strings.Contains(string(r.body), `"token"`) {
		t.Fatalf("the list shows a token: %d %s", r.status, r.body)
	}
	page := must[controlplane.ListenerTokenPage](t, e.s, keyA, "GET", tokens, "", 200)
	diff(t, "the tokens, newest first", []string{second.ID, first.ID}, []string{page.Resources[0].ID, page.Resources[1].ID})
	diff(t, "offset", 2, page.Offset)
	if page.Resources[1].LastUsedAt != nil {
		t.Errorf("a token never used has last_used_at %v", page.Resources[1].LastUsedAt)
	}
	heartbeat := "/v2/listeners/" + l.ID + "/agent/heartbeat"
	e.want(first.Token, "POST", heartbeat, `{"version": "1.0.0"}`, 204)
	page = must[controlplane.ListenerTokenPage](t, e.s, keyA, "GET", tokens+"?limit=1&offset=1", "", 200)
	if len(page.Resources) != 1 || page.Resources[0].ID != first.ID || page.Resources[0].LastUsedAt == nil {
		t.Errorf("the used token's page: %+v", page)
	}

	// Revoked: refused at the next call, the other token still works.
	if r := e.s.as(keyA, "DELETE", tokens+"/"+first.ID, ""); r.status != 204 {
		t.Fatalf("DELETE token: %d %s", r.status, r.body)
	}
	r = e.agent(first.Token, "POST", heartbeat, `{}`)
	if r.status != 401 || detail(t, r) != "Invalid authentication credentials." {
		t.Errorf("a revoked token: %d %s", r.status, r.body)
	}
	e.want(second.Token, "POST", heartbeat, `{}`, 204)
	if r := e.s.as(keyA, "DELETE", tokens+"/"+first.ID, ""); r.status != 404 || !strings.HasSuffix(detail(t, r), " not found.") {
		t.Errorf("DELETE of a revoked token: %d %s", r.status, r.body)
	}

	// Another tenant, an unknown listener, a malformed id.
	for _, tt := range []struct {
		key, method, path string
		status            int
	}{
		{keyB, "POST", tokens, 404},
		{keyB, "GET", tokens, 404},
		{keyB, "DELETE", tokens + "/" + second.ID, 404},
		{keyA, "POST", "/v2/listeners/00000000-0000-7000-8000-0000000000ff/tokens", 404},
		{keyA, "DELETE", tokens + "/not-an-id", 422},
		{keyA, "GET", tokens + "?limit=0", 422},
	} {
		if r := e.s.as(tt.key, tt.method, tt.path, ""); r.status != tt.status {
			t.Errorf("%s %s with %s: %d %s, want %d", tt.method, tt.path, tt.key, r.status, r.body, tt.status)
		}
	}
	diff(t, "tenant A's tokens after tenant B's requests", 1, len(must[controlplane.ListenerTokenPage](t, e.s, keyA, "GET", tokens, "", 200).Resources))

	// A deleted listener's tokens go with it.
	if r := e.s.as(keyA, "DELETE", "/v2/listeners/"+l.ID, ""); r.status != 204 {
		t.Fatalf("DELETE listener: %d %s", r.status, r.body)
	}
	if r := e.agent(second.Token, "POST", heartbeat, `{}`); r.status != 401 {
		t.Errorf("a token of a deleted listener: %d %s", r.status, r.body)
	}
}

// TestListenerTokenReach: a listener token reaches the agent routes of
// its own listener only. On every other route of the API it is a 403
// saying so; on another listener's agent routes (of its tenant or
// another) a 403; through its own routes another listener's deployments
// are not found; revoked, it is a 401 everywhere. A tenant's API key
// reaches the agent routes of its listeners, not another tenant's.
func TestListenerTokenReach(t *testing.T) {
	s := newServer(t, nil)
	f := newFixture(t, s)
	other, _ := registerAgentListener(t, s, keyA, "edge-2")
	elsewhere, _ := registerAgentListener(t, s, keyB, "edge-1")
	ops := operations(t, s)
	for _, op := range ops {
		if op.public {
			continue
		}
		path := f.fill(op.path)
		body := ""
		if op.hasBody {
			body = `{"wait_seconds": 0}`
		}
		t.Run(op.method+" "+op.path, func(t *testing.T) {
			r := s.do(op.method, path, body, bearer(f.token.Token)...)
			if !strings.HasPrefix(op.path, "/v2/listeners/{listener_id}/agent/") {
				if r.status != 403 || detail(t, r) != "A listener token is accepted only by its listener's agent routes." {
					t.Errorf("a listener token on a route not an agent's: %d %s", r.status, r.body)
				}
				return
			}
			if r.status == 401 || r.status == 403 || r.status >= 500 {
				t.Errorf("a listener token on its listener's agent route: %d %s", r.status, r.body)
			}
			for _, l := range []string{other.ID, elsewhere.ID} {
				r := s.do(op.method, strings.Replace(path, f.listener.ID, l, 1), body, bearer(f.token.Token)...)
				if r.status != 403 || !strings.Contains(detail(t, r), "not for this listener") {
					t.Errorf("a listener token on another listener's agent route: %d %s", r.status, r.body)
				}
			}
			// The API keys: tenant A's reaches its listener, tenant B's
			// does not find it.
			if r := s.as(keyA, op.method, path, body); r.status == 401 || r.status == 403 || r.status >= 500 {
				t.Errorf("tenant A's key on its listener's agent route: %d %s", r.status, r.body)
			}
			if r := s.as(keyB, op.method, path, body); r.status != 404 || !strings.HasPrefix(detail(t, r), "Listener ID ") {
				t.Errorf("tenant B's key on A's listener's agent route: %d %s", r.status, r.body)
			}
		})
	}
	// Through its own listener's routes, the deployment of another
	// listener (or of none) is not found.
	base := "/v2/listeners/" + f.listener.ID + "/agent/deployments/" + f.github.ID
	for _, path := range []string{base, base + "/revisions/" + *f.github.LatestRevisionID, base + "/revisions/" + *f.github.LatestRevisionID + "/logs?type=build"} {
		if r := s.do("GET", path, "", bearer(f.token.Token)...); r.status != 404 || !strings.HasSuffix(detail(t, r), " not found.") {
			t.Errorf("GET %s: %d %s, want 404", path, r.status, r.body)
		}
	}
	// Revoked: 401 everywhere.
	if r := s.as(keyA, "DELETE", "/v2/listeners/"+f.listener.ID+"/tokens/"+f.token.ID, ""); r.status != 204 {
		t.Fatalf("DELETE token: %d %s", r.status, r.body)
	}
	for _, op := range ops {
		if op.public {
			continue
		}
		if r := s.do(op.method, f.fill(op.path), "", bearer(f.token.Token)...); r.status != 401 {
			t.Errorf("%s %s with a revoked token: %d %s", op.method, op.path, r.status, r.body)
		}
	}
}

// TestAgentFlow: an agent, with its token, heartbeats, claims the work of
// a deployment created on its listener (secrets included), reports it to
// DEPLOYED with its logs, and the deployment is READY at the agent's
// url; a repeated report changes nothing; the agent reads its listener's
// deployments, writes and reads logs outside the lease; a delete is torn
// down through the agent (a failed teardown recorded on the deployment and
// offered again after its backoff) and removes the deployment. The secret is in the
// claim's answer and in no log of the server.
func TestAgentFlow(t *testing.T) {
	e := newAgentEnv(t, nil)
	l, token := e.listener(keyA, "edge-1")
	agent := "/v2/listeners/" + l.ID + "/agent"

	e.want(token, "POST", agent+"/heartbeat", `{"version": "1.0.0"}`, 204)
	got := must[controlplane.Listener](t, e.s, keyA, "GET", "/v2/listeners/"+l.ID, "", 200)
	if got.Status != controlplane.ListenerConnected || got.Version != "1.0.0" || got.LastHeartbeatAt == nil {
		t.Errorf("the listener after a heartbeat: %+v", got)
	}
	if w := e.claim(token, l.ID); w != nil {
		t.Fatalf("work before any deployment: %+v", w)
	}

	d := e.deployment(keyA, "remote", l.ID)
	rev := *d.LatestRevisionID
	revPath := "/v2/deployments/" + d.ID + "/revisions/" + rev
	queued := must[controlplane.Revision](t, e.s, keyA, "GET", revPath, "", 200)
	if !d.RemoteReconciled || queued.Status != controlplane.RevisionQueued {
		t.Fatalf("a deployment on an agent's listener: remote_reconciled %v, revision %s", d.RemoteReconciled, queued.Status)
	}

	r := e.want(token, "POST", agent+"/claim", `{"wait_seconds": 0, "version": "1.2.3"}`, 200)
	if !strings.Contains(string(r.body), agentSecret) {
		t.Errorf("the claim does not carry the secret: %s", r.body)
	}
	var w controlplane.AgentWork
	if err := json.Unmarshal(r.body, &w); err != nil {
		t.Fatal(err)
	}
	if w.Kind != controlplane.AgentDeploy || w.Work == nil || w.Work.Revision.ID != rev || w.LeaseSeconds != 30 || w.Lease == "" ||
		w.Work.Tenant != tenantA || len(w.Work.Secrets) != 1 || w.Work.Secrets[0].Value != agentSecret {
		t.Fatalf("the claimed work: %s", r.body)
	}
	if got := must[controlplane.Listener](t, e.s, keyA, "GET", "/v2/listeners/"+l.ID, "", 200); got.Version != "1.2.3" {
		t.Errorf("the claim's version: %q", got.Version)
	}
	if w := e.claim(token, l.ID); w != nil {
		t.Errorf("work held by a lease claimed again: %+v", w)
	}

	e.want(token, "POST", agent+"/renew", leaseBody(w.Lease), 204)
	e.want(token, "POST", agent+"/logs", leaseBody(w.Lease, `, "lines": [{"type": "deploy", "message": "pulling registry.example/agent:1"},
		{"type": "deploy", "level": "warn", "message": "slow pull"}]`), 204)
	for _, step := range []string{`{"status": "AWAITING_DEPLOY"}`, `{"status": "DEPLOYING"}`,
		`{"status": "DEPLOYED", "url": "http://remote.internal:8000", "image_version": "sha256:abc"}`} {
		e.want(token, "POST", agent+"/report", leaseBody(w.Lease, `, "step": `+step), 204)
	}
	deployed := e.s.as(keyA, "GET", revPath, "")
	dep := must[controlplane.Deployment](t, e.s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200)
	if dep.Status != controlplane.StatusReady || dep.URL == nil || *dep.URL != "http://remote.internal:8000" ||
		dep.ActiveRevisionID == nil || *dep.ActiveRevisionID != rev {
		t.Errorf("the deployment once DEPLOYED: %+v", dep)
	}
	// A report repeated after its answer was lost: 204, nothing changes.
	e.want(token, "POST", agent+"/report", leaseBody(w.Lease, `, "step": {"status": "DEPLOYED", "url": "http://remote.internal:8000"}`), 204)
	diff(t, "the revision after a repeated report", string(deployed.body), string(e.s.as(keyA, "GET", revPath, "").body))
	diff(t, "the deployment after a repeated report", dep, must[controlplane.Deployment](t, e.s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200))
	e.want(token, "POST", agent+"/release", leaseBody(w.Lease, `, "retry": false`), 204)
	if w := e.claim(token, l.ID); w != nil {
		t.Errorf("work after DEPLOYED: %+v", w)
	}

	// What the agent reads of its listener, and the logs outside a lease.
	ids := must[controlplane.AgentDeploymentPage](t, e.s, keyA, "GET", agent+"/deployments?limit=10", "", 200)
	if !slices.Contains(ids.DeploymentIDs, d.ID) || ids.Next != nil {
		t.Errorf("the listener's deployments: %+v", ids)
	}
	r = e.want(token, "GET", agent+"/deployments/"+d.ID, "", 200)
	if !strings.Contains(string(r.body), `"status":"READY"`) {
		t.Errorf("the agent's deployment: %s", r.body)
	}
	e.want(token, "GET", agent+"/deployments/"+d.ID+"/revisions/"+rev, "", 200)
	// Its status outside a lease: scaled to zero, then serving again.
	for _, st := range []controlplane.DeploymentStatus{controlplane.StatusUnused, controlplane.StatusReady} {
		e.want(token, "POST", agent+"/deployments/"+d.ID+"/status", `{"status": "`+string(st)+`"}`, 204)
		if got := must[controlplane.Deployment](t, e.s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200); got.Status != st {
			t.Errorf("the deployment after the agent set %s: %s", st, got.Status)
		}
	}
	e.want(token, "POST", agent+"/deployments/"+d.ID+"/revisions/"+rev+"/logs",
		`{"lines": [{"type": "deploy", "level": "ERROR", "message": "server: listening on :8000"}]}`, 204)
	var page controlplane.LogPage
	r = e.want(token, "GET", agent+"/deployments/"+d.ID+"/revisions/"+rev+"/logs?type=deploy", "", 200)
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, le := range page.Logs {
		lines = append(lines, string(le.Level)+" "+le.Message)
	}
	diff(t, "the deploy log, as the agent reads it", []string{"INFO pulling registry.example/agent:1", "WARNING slow pull",
		"ERROR server: listening on :8000"}, lines)
	diff(t, "the deploy log, as the tenant reads it", string(r.body), string(e.s.as(keyA, "GET", revPath+"/logs?type=deploy", "").body))

	// A delete is the agent's to tear down; then the deployment is gone.
	if r := e.s.as(keyA, "DELETE", "/v2/deployments/"+d.ID, ""); r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	td := e.claim(token, l.ID)
	if td == nil || td.Kind != controlplane.AgentTeardown || td.Deployment == nil || td.Deployment.ID != d.ID {
		t.Fatalf("the teardown's claim: %+v", td)
	}
	e.want(token, "POST", agent+"/report", leaseBody(td.Lease, `, "step": {}`), 400)
	// A failed teardown: the deployment stays, saying why, and the
	// teardown is offered again once its backoff (2 s) has passed.
	e.want(token, "POST", agent+"/teardown-failed", leaseBody(td.Lease, `, "message": "cluster edge-1 is unreachable"`), 204)
	waiting := must[controlplane.Deployment](t, e.s, keyA, "GET", "/v2/deployments/"+d.ID, "", 200)
	if waiting.Status != controlplane.StatusAwaitingDelete || waiting.StatusMessage == nil ||
		!strings.Contains(*waiting.StatusMessage, "cluster edge-1 is unreachable") {
		t.Errorf("the deployment after teardown-failed: %s %v", waiting.Status, waiting.StatusMessage)
	}
	e.want(token, "POST", agent+"/teardown-done", leaseBody(td.Lease), 409) // the lease went with the failure
	if w := e.claim(token, l.ID); w != nil {
		t.Errorf("a failed teardown claimed again before its backoff: %+v", w)
	}
	e.clock.Advance(3 * time.Second)
	if td = e.claim(token, l.ID); td == nil || td.Kind != controlplane.AgentTeardown || td.Deployment.ID != d.ID {
		t.Fatalf("the teardown's claim after its backoff: %+v", td)
	}
	e.want(token, "POST", agent+"/teardown-done", leaseBody(td.Lease), 204)
	if r := e.s.as(keyA, "GET", "/v2/deployments/"+d.ID, ""); r.status != 404 {
		t.Errorf("the deployment after teardown-done: %d %s", r.status, r.body)
	}
	e.want(token, "POST", agent+"/teardown-done", leaseBody(td.Lease), 204) // idempotent
	e.want(token, "GET", agent+"/deployments/"+d.ID, "", 404)

	if logs := e.s.logs(); strings.Contains(logs, agentSecret) || strings.Contains(logs, token) || !strings.Contains(logs, "/agent/claim") {
		t.Errorf("the server's log shows the secret or the token, or not the requests:\n%s", logs)
	}
}

// TestAgentErrors: the answers an agent tells apart. 409 (the lease is
// lost: stop) and 400 (the step may not follow, the lease is no lease:
// stop) from 422 (the request is malformed, at its loc), 404, 403 and
// 401; every one in the contract's shapes.
func TestAgentErrors(t *testing.T) {
	e := newAgentEnv(t, &httphandler.Options{MaxBodyBytes: 4096})
	l, token := e.listener(keyA, "edge-1")
	l2, token2 := e.listener(keyA, "edge-2")
	d := e.deployment(keyA, "remote", l.ID)
	d2 := e.deployment(keyA, "other", l2.ID)
	w := e.claim(token, l.ID)
	if w == nil {
		t.Fatal("no work")
	}
	agent := "/v2/listeners/" + l.ID + "/agent"
	revLogs := agent + "/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID + "/logs"

	// The lease lost to another agent, once it expired.
	e.clock.Advance(time.Minute)
	taken := e.claim(token, l.ID)
	if taken == nil || taken.Work.Revision.ID != w.Work.Revision.ID {
		t.Fatalf("the expired lease's work was not taken over: %+v", taken)
	}

	type problem struct {
		loc []any
		typ string
	}
	for _, tt := range []struct {
		name              string
		token, path, body string
		status            int
		detail            string    // a part of the detail, for the statuses with one
		problems          []problem // for a 422
		noRetry           bool      // X-Should-Retry: false
		method, apiKeyOf  string    // default POST; a key instead of a token
	}{
		{name: "a lost lease", token: token, path: agent + "/report", body: leaseBody(w.Lease, `, "step": {"status": "AWAITING_DEPLOY"}`),
			status: 409, detail: "The lease is lost", noRetry: true},
		{name: "a lost lease's logs", token: token, path: agent + "/logs", body: leaseBody(w.Lease, `, "lines": [{"type": "deploy", "message": "m"}]`),
			status: 409, detail: "The lease is lost"},
		{name: "a lost lease's renewal", token: token, path: agent + "/renew", body: leaseBody(w.Lease), status: 409, detail: "The lease is lost"},
		{name: "a step that may not follow", token: token, path: agent + "/report", body: leaseBody(taken.Lease, `, "step": {"status": "BUILDING"}`),
			status: 400},
		{name: "an unknown status", token: token, path: agent + "/report", body: leaseBody(taken.Lease, `, "step": {"status": "DONE"}`), status: 400},
		{name: "no lease at all", token: token, path: agent + "/renew", body: `{"lease": "not-a-lease"}`, status: 400, detail: "not one this control plane issued"},
		{name: "a teardown's call with a revision's lease", token: token, path: agent + "/teardown-done", body: leaseBody(taken.Lease), status: 400},
		{name: "a teardown's failure with a revision's lease", token: token, path: agent + "/teardown-failed",
			body: leaseBody(taken.Lease, `, "message": "cluster unreachable"`), status: 400, detail: "not a teardown's"},
		{name: "a teardown's failure without a lease", token: token, path: agent + "/teardown-failed", body: `{"message": "m"}`, status: 422,
			problems: []problem{{[]any{"body", "lease"}, apierr.TypeMissing}}},
		{name: "a lease of another listener's work", token: token2, path: "/v2/listeners/" + l2.ID + "/agent/report",
			body: leaseBody(taken.Lease, `, "step": {}`), status: 404, detail: " not found."},
		{name: "another listener's deployment", token: token, path: agent + "/deployments/" + d2.ID, method: "GET", status: 404, detail: "Deployment ID "},
		{name: "another listener's deployment's status", token: token, path: agent + "/deployments/" + d2.ID + "/status",
			body: `{"status": "UNUSED"}`, status: 404, detail: "Deployment ID "},
		{name: "a status no deployer sets", token: token, path: agent + "/deployments/" + d.ID + "/status",
			body: `{"status": "AWAITING_DELETE"}`, status: 400, detail: "may not set the deployment status"},
		{name: "a status request without its status", token: token, path: agent + "/deployments/" + d.ID + "/status", body: `{}`, status: 422,
			problems: []problem{{[]any{"body", "status"}, apierr.TypeMissing}}},
		{name: "another listener's agent routes", token: token, path: "/v2/listeners/" + l2.ID + "/agent/heartbeat", body: `{}`,
			status: 403, detail: "not for this listener"},
		{name: "a route not an agent's", token: token, path: "/v2/deployments", method: "GET", status: 403, detail: "only by its listener's agent routes"},
		{name: "a listener token's own listener, not its routes", token: token, path: "/v2/listeners/" + l.ID, method: "GET", status: 403,
			detail: "only by its listener's agent routes"},
		{name: "an unknown listener token", token: "dpl_lt_00000000-0000-7000-8000-000000000001_secret", path: agent + "/heartbeat", body: `{}`,
			status: 401, detail: "Invalid authentication credentials."},
		{name: "a malformed listener token", token: "dpl_lt_", path: agent + "/heartbeat", body: `{}`, status: 401},
		{name: "another tenant's key", apiKeyOf: keyB, path: agent + "/heartbeat", body: `{}`, status: 404, detail: "Listener ID "},
		{name: "a malformed listener id", apiKeyOf: keyA, path: "/v2/listeners/nope/agent/renew", body: `{}`, status: 422,
			problems: []problem{{[]any{"path", "listener_id"}, apierr.TypeUUIDParsing}, {[]any{"body", "lease"}, apierr.TypeMissing}}},
		{name: "a malformed listener id with a token", token: token, path: "/v2/listeners/nope/agent/renew", body: `{}`, status: 403},
		{name: "no body", token: token, path: agent + "/renew", status: 422, problems: []problem{{[]any{"body"}, apierr.TypeMissing}}},
		{name: "malformed JSON", token: token, path: agent + "/renew", body: `not JSON`, status: 422,
			problems: []problem{{[]any{"body"}, apierr.TypeJSONInvalid}}},
		{name: "a report without lease and step", token: token, path: agent + "/report", body: `{}`, status: 422,
			problems: []problem{{[]any{"body", "lease"}, apierr.TypeMissing}, {[]any{"body", "step"}, apierr.TypeMissing}}},
		{name: "a mistyped lease and step", token: token, path: agent + "/report", body: `{"lease": 7, "step": {"status": 1}}`, status: 422,
			problems: []problem{{[]any{"body", "lease"}, apierr.TypeStringType}, {[]any{"body", "step", "status"}, apierr.TypeStringType}}},
		{name: "a wait too long", token: token, path: agent + "/claim", body: `{"wait_seconds": 61}`, status: 422,
			problems: []problem{{[]any{"body", "wait_seconds"}, apierr.TypeLessThanEqual}}},
		{name: "a negative wait", token: token, path: agent + "/claim", body: `{"wait_seconds": -1}`, status: 422,
			problems: []problem{{[]any{"body", "wait_seconds"}, apierr.TypeGreaterThanEqual}}},
		{name: "a wait not a number", token: token, path: agent + "/claim", body: `{"wait_seconds": "soon"}`, status: 422,
			problems: []problem{{[]any{"body", "wait_seconds"}, apierr.TypeIntType}}},
		{name: "a version too long", token: token, path: agent + "/heartbeat", body: `{"version": "` + strings.Repeat("v", 257) + `"}`, status: 422,
			problems: []problem{{[]any{"body", "version"}, apierr.TypeStringTooLong}}},
		{name: "logs without lines", token: token, path: agent + "/logs", body: leaseBody(taken.Lease), status: 422,
			problems: []problem{{[]any{"body", "lines"}, apierr.TypeMissing}}},
		{name: "lines of unknown type and level", token: token, path: agent + "/logs",
			body: leaseBody(taken.Lease, `, "lines": [{"type": "deploy"}, {"type": "stdout"}, {"type": "build", "level": "loud"}]`), status: 422,
			problems: []problem{{[]any{"body", "lines", 1, "type"}, apierr.TypeLiteralError}, {[]any{"body", "lines", 2, "level"}, apierr.TypeLiteralError}}},
		{name: "lines outside a lease of unknown type", token: token, path: revLogs, body: `{"lines": [{"message": "m"}]}`, status: 422,
			problems: []problem{{[]any{"body", "lines", 0, "type"}, apierr.TypeLiteralError}}},
		{name: "a log query without its type", token: token, path: revLogs, method: "GET", status: 422,
			problems: []problem{{[]any{"query", "type"}, apierr.TypeMissing}}},
		{name: "a page too large", token: token, path: agent + "/deployments?limit=1001", method: "GET", status: 422,
			problems: []problem{{[]any{"query", "limit"}, apierr.TypeLessThanEqual}}},
		{name: "a page's limit not a number", token: token, path: agent + "/deployments?after=zz&limit=x", method: "GET", status: 422,
			problems: []problem{{[]any{"query", "limit"}, apierr.TypeIntParsing}}},
		{name: "a body over the limit", token: token, path: agent + "/logs",
			body: leaseBody(taken.Lease, `, "lines": [{"type": "deploy", "message": "`+strings.Repeat("x", 5000)+`"}]`), status: 413},
	} {
		t.Run(tt.name, func(t *testing.T) {
			method := cmpOr(tt.method, "POST")
			var r reply
			if tt.apiKeyOf != "" {
				r = e.s.as(tt.apiKeyOf, method, tt.path, tt.body)
			} else {
				r = e.agent(tt.token, method, tt.path, tt.body)
			}
			if r.status != tt.status {
				t.Fatalf("%d %s, want %d", r.status, r.body, tt.status)
			}
			if tt.status == 422 {
				var got []problem
				for _, p := range problems(t, r) {
					got = append(got, problem{p.Loc, p.Type})
				}
				if len(got) != len(tt.problems) {
					t.Fatalf("problems %v, want %v", got, tt.problems)
				}
				for i := range got {
					if !slices.Equal(got[i].loc, tt.problems[i].loc) || got[i].typ != tt.problems[i].typ {
						t.Errorf("problem %d: %v, want %v", i, got[i], tt.problems[i])
					}
				}
				return
			}
			if d := detail(t, r); !strings.Contains(d, tt.detail) || d == "" {
				t.Errorf("detail %q, want it to contain %q", d, tt.detail)
			}
			if tt.noRetry && r.header.Get("X-Should-Retry") != "false" {
				t.Errorf("X-Should-Retry %q", r.header.Get("X-Should-Retry"))
			}
		})
	}
	// The lease holder's calls still succeed, and nothing above changed
	// its revision.
	e.want(token, "POST", agent+"/report", leaseBody(taken.Lease, `, "step": {"status": "AWAITING_DEPLOY"}`), 204)
	rev := must[controlplane.Revision](t, e.s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions/"+*d.LatestRevisionID, "", 200)
	diff(t, "the revision's status", controlplane.RevisionAwaitingDeploy, rev.Status)
	e.want(token, "POST", agent+"/fail", leaseBody(taken.Lease, `, "message": "image pull failed"`), 204)
	e.want(token, "POST", agent+"/fail", leaseBody(taken.Lease, `, "message": "image pull failed"`), 204) // idempotent
	rev = must[controlplane.Revision](t, e.s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions/"+*d.LatestRevisionID, "", 200)
	if rev.Status != controlplane.RevisionDeployFailed || rev.StatusMessage == nil || *rev.StatusMessage != "image pull failed" {
		t.Errorf("the failed revision: %s %v", rev.Status, rev.StatusMessage)
	}
	e.want(token, "POST", agent+"/report", leaseBody(taken.Lease, `, "step": {"status": "DEPLOYED"}`), 400)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestAgentClaimWait: a claim with nothing to claim answers 204 once its
// wait_seconds have passed (in the bubble's fake time), wakes at once
// when a revision is created for its listener, and answers 204 when the
// Handler closes. The claims hold long-poll places.
func TestAgentClaimWait(t *testing.T) { synctest.Test(t, agentClaimWait) }

func agentClaimWait(t *testing.T) {
	cp := controlplane.New(storemem.New(), &controlplane.Options{Drives: agentDrives})
	s := newServerWith(t, serverSetup{cp: cp, inMemory: true, opts: &httphandler.Options{Load: &httphandler.LoadLimits{
		MaxLongPolls: 1, MaxLongPollsPerTenant: -1}}})
	l, token := registerAgentListener(t, s, keyA, "edge-1")
	claim := "/v2/listeners/" + l.ID + "/agent/claim"

	start := time.Now()
	r := s.do("POST", claim, `{"wait_seconds": 5}`, bearer(token)...)
	if waited := time.Since(start); r.status != 204 || len(r.body) != 0 || waited < 5*time.Second || waited >= 5*time.Second+controlplane.AgentPollInterval {
		t.Fatalf("a claim with nothing to claim: %d %q after %v, want 204 after 5s", r.status, r.body, waited)
	}

	got := make(chan reply, 1)
	go func() { got <- claimAsync(s, claim, `{"version": "2.0.0"}`, token) }() // the default wait, 30 s
	synctest.Wait()
	// The one long-poll place is held: another claim is refused.
	if r := s.do("POST", claim, `{"wait_seconds": 0}`, bearer(token)...); r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("a claim beyond the long polls: %d %s", r.status, r.body)
	}
	start = time.Now()
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", agentDeploymentBody("remote", l.ID), 201)
	r = <-got
	if r.status != 200 || !strings.Contains(string(r.body), *d.LatestRevisionID) {
		t.Fatalf("the waiting claim: %d %s", r.status, r.body)
	}
	if waited := time.Since(start); waited != 0 {
		t.Errorf("the waiting claim answered %v after the create, want at once", waited)
	}

	go func() { got <- claimAsync(s, claim, `{"wait_seconds": 60}`, token) }()
	synctest.Wait()
	start = time.Now()
	_ = s.api.Close()
	r = <-got
	if r.status != 204 || time.Since(start) != 0 {
		t.Errorf("a claim when the Handler closes: %d %s after %v", r.status, r.body, time.Since(start))
	}
}

// claimAsync sends a claim from a goroutine of the test's own (no
// t.Fatal there): a failure is a reply of status 0 with the error.
func claimAsync(s *server, path, body, token string) reply {
	req, err := http.NewRequestWithContext(context.Background(), "POST", s.url+path, strings.NewReader(body))
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.client.Do(req)
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{body: []byte(err.Error())}
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// checkAgentRoutes answers every agent route and listener token route
// once against the document (TestOpenAPIDescribesAnswers), on a listener
// of compute_id edge-doc, which the server's ControlPlane leaves to
// agents.
func checkAgentRoutes(t *testing.T, s *server, c *docChecker) {
	t.Helper()
	at := func(pattern, method, path, body string, want int, headers ...string) reply {
		t.Helper()
		r := s.do(method, path, body, headers...)
		if r.status != want {
			t.Errorf("%s %s: %d, want %d: %s", method, path, r.status, want, r.body)
		}
		c.check(method, pattern, r)
		return r
	}
	key := []string{"X-Api-Key", keyA}
	l := must[controlplane.Listener](t, s, keyA, "POST", "/v2/listeners", `{"compute_type": "k8s", "compute_id": "edge-doc"}`, 201)
	tokens, token := "/v2/listeners/{listener_id}/tokens", "/v2/listeners/{listener_id}/tokens/{token_id}"
	at(tokens, "POST", "/v2/listeners/"+l.ID+"/tokens", "", 201, key...)
	tr := at(tokens, "POST", "/v2/listeners/"+l.ID+"/tokens", "", 201, key...)
	var tok controlplane.NewListenerToken
	_ = json.Unmarshal(tr.body, &tok)
	lr := at(tokens, "GET", "/v2/listeners/"+l.ID+"/tokens", "", 200, key...)
	var tp controlplane.ListenerTokenPage
	_ = json.Unmarshal(lr.body, &tp)
	at(token, "DELETE", "/v2/listeners/"+l.ID+"/tokens/"+tp.Resources[1].ID, "", 204, key...)
	at(token, "DELETE", "/v2/listeners/"+l.ID+"/tokens/"+tp.Resources[1].ID, "", 404, key...)
	at(tokens, "POST", "/v2/listeners/00000000-0000-7000-8000-0000000000ff/tokens", "", 404, key...)

	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", agentDeploymentBody("doc-agent", l.ID), 201)
	b := bearer(tok.Token)
	base, agent := "/v2/listeners/{listener_id}/agent", "/v2/listeners/"+l.ID+"/agent"
	at(base+"/heartbeat", "POST", agent+"/heartbeat", `{"version": "1.0.0"}`, 204, b...)
	cr := at(base+"/claim", "POST", agent+"/claim", `{"wait_seconds": 0}`, 200, b...)
	at(base+"/claim", "POST", agent+"/claim", `{"wait_seconds": 0}`, 204, b...)
	at(base+"/claim", "POST", agent+"/claim", `{"wait_seconds": 99}`, 422, b...)
	var w controlplane.AgentWork
	_ = json.Unmarshal(cr.body, &w)
	at(base+"/renew", "POST", agent+"/renew", leaseBody(w.Lease), 204, b...)
	at(base+"/logs", "POST", agent+"/logs", leaseBody(w.Lease, `, "lines": [{"type": "deploy", "message": "pulling"}]`), 204, b...)
	at(base+"/report", "POST", agent+"/report", leaseBody(w.Lease, `, "step": {"status": "AWAITING_DEPLOY"}`), 204, b...)
	at(base+"/report", "POST", agent+"/report", leaseBody(w.Lease, `, "step": {"status": "BUILDING"}`), 400, b...)
	at(base+"/fail", "POST", agent+"/fail", leaseBody("nope"), 400, b...)
	at(base+"/teardown-done", "POST", agent+"/teardown-done", leaseBody(w.Lease), 400, b...)
	at(base+"/teardown-failed", "POST", agent+"/teardown-failed", leaseBody(w.Lease, `, "message": "m"`), 400, b...)
	at(base+"/heartbeat", "POST", "/v2/listeners/00000000-0000-7000-8000-0000000000ff/agent/heartbeat", `{}`, 403, b...)
	at(base+"/deployments", "GET", agent+"/deployments", "", 200, b...)
	dep, rev := base+"/deployments/{deployment_id}", base+"/deployments/{deployment_id}/revisions/{revision_id}"
	at(dep, "GET", agent+"/deployments/"+d.ID, "", 200, b...)
	at(rev, "GET", agent+"/deployments/"+d.ID+"/revisions/"+*d.LatestRevisionID, "", 200, b...)
	at(dep+"/status", "POST", agent+"/deployments/"+d.ID+"/status", `{"status": "READY"}`, 400, b...) // no active revision
	at(dep+"/status", "POST", agent+"/deployments/"+d.ID+"/status", `{"status": "UNKNOWN"}`, 204, b...)
	at(dep+"/status", "POST", agent+"/deployments/"+d.ID+"/status", `{}`, 422, b...)
	at(rev+"/logs", "POST", agent+"/deployments/"+d.ID+"/revisions/"+*d.LatestRevisionID+"/logs", `{"lines": []}`, 204, b...)
	at(rev+"/logs", "GET", agent+"/deployments/"+d.ID+"/revisions/"+*d.LatestRevisionID+"/logs?type=deploy", "", 200, b...)
	at(base+"/release", "POST", agent+"/release", leaseBody(w.Lease, `, "retry": true`), 204, b...)
	at(base+"/heartbeat", "POST", agent+"/heartbeat", `{}`, 401, bearer("dpl_lt_x_y")...)

	// The agent bodies' schemas require what an empty body lacks.
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required []string `json:"required"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, schema string }{
		{"/renew", "AgentLeaseRequest"}, {"/report", "AgentReportRequest"}, {"/fail", "AgentFailRequest"}, {"/teardown-failed", "AgentFailRequest"},
		{"/logs", "AgentLogsRequest"}, {"/release", "AgentReleaseRequest"}, {"/heartbeat", "AgentHeartbeatRequest"},
		{"/deployments/" + d.ID + "/revisions/" + *d.LatestRevisionID + "/logs", "AgentLinesRequest"},
		{"/deployments/" + d.ID + "/status", "AgentStatusRequest"},
	} {
		r := s.do("POST", agent+tt.path, `{}`, b...)
		var missing []string
		if r.status == 422 {
			for _, p := range problems(t, r) {
				if p.Type == apierr.TypeMissing && len(p.Loc) == 2 {
					missing = append(missing, p.Loc[1].(string))
				}
			}
		}
		sch, ok := doc.Components.Schemas[tt.schema]
		if !ok {
			t.Errorf("no schema %s", tt.schema)
			continue
		}
		diff(t, tt.schema+" required, against POST "+tt.path+" {}'s missing members", slices.Sorted(slices.Values(sch.Required)), missing)
	}
}
