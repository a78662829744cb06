package controlplane_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
	"pgregory.net/rapid"
)

// fakeApp is a GitHubApp whose answers the test sets: which installations
// each code's user can access, or an error.
type fakeApp struct {
	mu     sync.Mutex
	access map[string]map[int64]string // code -> installation -> account
	err    error
	calls  int
}

func (a *fakeApp) InstallURL(state string) string {
	return "https://github.example/apps/deployplane/installations/new?state=" + url.QueryEscape(state)
}

func (a *fakeApp) VerifyInstallation(_ context.Context, code string, id int64) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.err != nil {
		return "", a.err
	}
	acct, ok := a.access[code][id]
	if !ok {
		return "", fmt.Errorf("installation %d: %w", id, controlplane.ErrInstallationForbidden)
	}
	return acct, nil
}

func stateOf(t *testing.T, installURL string) string {
	t.Helper()
	u, err := url.Parse(installURL)
	if err != nil {
		t.Fatal(err)
	}
	s := u.Query().Get("state")
	if s == "" {
		t.Fatalf("install URL %s has no state", installURL)
	}
	return s
}

func TestInstallationOwnedByOneTenant(t *testing.T) {
	app := &fakeApp{access: map[string]map[int64]string{"code-a": {7: "acme"}, "code-b": {7: "acme"}}}
	f := newFixture(t, &controlplane.Options{GitHubApp: app})
	req := func(id int64) *controlplane.CreateIntegrationRequest {
		return &controlplane.CreateIntegrationRequest{InstallationID: new(id), Name: new("acme")}
	}
	a, err := f.cp.CreateIntegration(f.ctx, tenantA, req(7))
	if err != nil {
		t.Fatal(err)
	}
	before := dump(t, f.st)
	for _, tenant := range []string{tenantB, tenantA} {
		_, err := f.cp.CreateIntegration(f.ctx, tenant, req(7))
		if !errors.Is(err, apierr.ErrConflict) {
			t.Errorf("tenant %s registers installation 7, held by A: %v, want ErrConflict", tenant, err)
		}
	}
	// Not even through the verified flow, by a GitHub user who can access
	// the installation.
	u, err := f.cp.StartGitHubInstall(f.ctx, tenantB)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 7, SetupAction: "install", Code: "code-b", State: stateOf(t, u)})
	if !errors.Is(err, apierr.ErrConflict) {
		t.Errorf("tenant B completes an installation held by A: %v, want ErrConflict", err)
	}
	list, err := f.cp.ListIntegrations(f.ctx, tenantB)
	if err != nil || len(list) != 0 {
		t.Errorf("B's integrations = %v, %v; want none", list, err)
	}
	// A completing the flow for its own installation again changes nothing.
	u, err = f.cp.StartGitHubInstall(f.ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 7, SetupAction: "update", Code: "code-a", State: stateOf(t, u)})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "A's integration after a second verified install", a, again)
	diff(t, "integrations after refused claims", before["cp_integrations"], dump(t, f.st)["cp_integrations"])

	// A push of installation 7 reaches A's deployment only, although B
	// tracks the same repository through an installation of its own.
	f.create(tenantA, githubPushBody("a", a.ID))
	b, err := f.cp.CreateIntegration(f.ctx, tenantB, req(8))
	if err != nil {
		t.Fatal(err)
	}
	f.create(tenantB, githubPushBody("b", b.ID))
	pushed, err := f.cp.HandleGitHubPush(f.ctx, &controlplane.PushEvent{InstallationID: 7,
		RepoURL: "https://github.com/acme/agent", Ref: "refs/heads/main", After: "c0ffee"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pushed) != 1 || pushed[0].Tenant != tenantA {
		t.Errorf("push of A's installation reached %+v, want A's deployment only", pushed)
	}
}

func githubPushBody(name, integration string) string {
	return fmt.Sprintf(`{"name": %q, "source": "github",
		"source_config": {"integration_id": %q, "repo_url": "https://github.com/acme/agent", "build_on_push": true},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, name, integration)
}

func TestGitHubInstallFlow(t *testing.T) {
	app := &fakeApp{access: map[string]map[int64]string{"code": {7: "acme", 8: "octo"}}}
	f := newFixture(t, &controlplane.Options{GitHubApp: app})

	u, err := f.cp.StartGitHubInstall(f.ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "https://github.example/apps/deployplane/installations/new?state=") {
		t.Errorf("install URL = %s", u)
	}
	state := stateOf(t, u)
	if d := fmt.Sprint(dump(t, f.st)); strings.Contains(d, state) {
		t.Errorf("the store holds the state itself: %s", d)
	}
	in, err := f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 7, SetupAction: "install", Code: "code", State: state})
	if err != nil {
		t.Fatal(err)
	}
	if in.InstallationID != 7 || in.Name != "acme" {
		t.Errorf("integration = %+v, want installation 7 named after its account", in)
	}
	list, err := f.cp.ListIntegrations(f.ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "A's integrations", []controlplane.Integration{*in}, list)

	// The state is single use.
	calls := app.calls
	_, err = f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 8, Code: "code", State: state})
	if !errors.Is(err, controlplane.ErrUnknownInstallState) {
		t.Errorf("second use of a state: %v, want ErrUnknownInstallState", err)
	}
	if app.calls != calls {
		t.Error("GitHub was asked about a spent state")
	}

	for _, tc := range []struct {
		name    string
		setup   controlplane.GitHubSetup
		advance time.Duration
		appErr  error
		want    error
	}{
		{"unknown state", controlplane.GitHubSetup{InstallationID: 8, Code: "code", State: "made-up"}, 0, nil, controlplane.ErrUnknownInstallState},
		{"expired state", controlplane.GitHubSetup{InstallationID: 8, Code: "code"}, controlplane.GitHubInstallStateTTL, nil, controlplane.ErrUnknownInstallState},
		{"user cannot access", controlplane.GitHubSetup{InstallationID: 9, Code: "code"}, 0, nil, controlplane.ErrInstallationForbidden},
		{"github down", controlplane.GitHubSetup{InstallationID: 8, Code: "code"}, 0, errors.New("dial tcp: connection refused"), controlplane.ErrGitHubUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := f.cp.StartGitHubInstall(f.ctx, tenantB)
			if err != nil {
				t.Fatal(err)
			}
			s := tc.setup
			if s.State == "" {
				s.State = stateOf(t, u)
			}
			f.now = f.now.Add(tc.advance)
			app.err = tc.appErr
			defer func() { app.err = nil }()
			before := dump(t, f.st)["cp_integrations"]
			_, err = f.cp.CompleteGitHubInstall(f.ctx, &s)
			if !errors.Is(err, tc.want) {
				t.Errorf("CompleteGitHubInstall = %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "connection refused") {
				t.Errorf("the error %q shows GitHub's failure (it belongs in the log)", err)
			}
			diff(t, "integrations", before, dump(t, f.st)["cp_integrations"])
		})
	}

	// Input problems are 422s, before the state is spent.
	u, err = f.cp.StartGitHubInstall(f.ctx, tenantB)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{SetupAction: "install"})
	diff(t, "setup without anything", []string{"query.state: missing", "query.installation_id: greater_than", "query.code: missing"},
		locTypes(problems(t, err)))
	_, err = f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{SetupAction: "request", State: stateOf(t, u)})
	diff(t, "setup of a requested installation", []string{"query.setup_action: literal_error"}, locTypes(problems(t, err)))
	if _, err := f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 8, Code: "code", State: stateOf(t, u)}); err != nil {
		t.Errorf("the state after refused inputs: %v, want it still valid", err)
	}
}

func TestGitHubInstallNotConfigured(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.cp.StartGitHubInstall(f.ctx, tenantA); !errors.Is(err, controlplane.ErrGitHubAppNotConfigured) {
		t.Errorf("StartGitHubInstall without an App: %v, want ErrGitHubAppNotConfigured", err)
	}
	if _, err := f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 1, Code: "c", State: "s"}); !errors.Is(err, controlplane.ErrGitHubAppNotConfigured) {
		t.Errorf("CompleteGitHubInstall without an App: %v, want ErrGitHubAppNotConfigured", err)
	}
	// An App but nowhere to keep installation states.
	cp := controlplane.New(storemem.New(), &controlplane.Options{GitHubApp: &fakeApp{}})
	if _, err := cp.StartGitHubInstall(f.ctx, tenantA); !errors.Is(err, controlplane.ErrGitHubAppNotConfigured) {
		t.Errorf("StartGitHubInstall without InstallStates: %v, want ErrGitHubAppNotConfigured", err)
	}
	if _, err := cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: 1, Code: "c", State: "s"}); !errors.Is(err, controlplane.ErrGitHubAppNotConfigured) {
		t.Errorf("CompleteGitHubInstall without InstallStates: %v, want ErrGitHubAppNotConfigured", err)
	}
}

// TestPushDeliveredOnce replays one signed delivery: only the first creates
// a revision, whether a repeat brings the same delivery id or the same
// body under a new id, across a reopened bbolt store, until the delivery
// has been forgotten after DeliveryRetention.
func TestPushDeliveredOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bolt.db")
	st, err := storebolt.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	opts := &controlplane.Options{Clock: func() time.Time { now = now.Add(time.Second); return now }}
	cp := controlplane.New(st, opts)
	ctx := context.Background()
	in, err := cp.CreateIntegration(ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(7)), Name: new("acme")})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cp.CreateDeployment(ctx, tenantA, decode[controlplane.CreateDeploymentRequest](t, githubPushBody("a", in.ID)))
	if err != nil {
		t.Fatal(err)
	}
	push := func(delivery, digest string) int {
		t.Helper()
		pushed, err := cp.HandleGitHubPush(ctx, &controlplane.PushEvent{InstallationID: 7, RepoURL: "https://github.com/acme/agent",
			Ref: "refs/heads/main", After: "c0ffee", DeliveryID: delivery, BodyDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		return len(pushed)
	}
	revisions := func() int {
		t.Helper()
		page, err := cp.ListRevisions(ctx, tenantA, d.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Resources)
	}
	for i, want := range []int{1, 0, 0} {
		if got := push("delivery-1", "digest-1"); got != want {
			t.Errorf("delivery sent the %d. time created %d revisions, want %d", i+1, got, want)
		}
	}
	if got := push("delivery-2", "digest-1"); got != 0 {
		t.Errorf("the same body under a new delivery id created %d revisions, want 0", got)
	}
	if got := push("delivery-1", "digest-2"); got != 0 {
		t.Errorf("the same delivery id with another body created %d revisions, want 0", got)
	}

	// A restart (or another replica over the store) remembers.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = storebolt.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { st.Close() }()
	cp = controlplane.New(st, opts)
	if got := push("delivery-3", "digest-1"); got != 0 {
		t.Errorf("after reopening the store, a replayed body created %d revisions, want 0", got)
	}
	if got := revisions(); got != 2 {
		t.Errorf("revisions = %d, want 2 (create and one push)", got)
	}

	// After the retention, the deliveries recorded then are removed as new
	// ones come in.
	now = now.Add(controlplane.DeliveryRetention + time.Hour)
	if got := push("delivery-4", "digest-4"); got != 1 {
		t.Errorf("a new delivery created %d revisions, want 1", got)
	}
	recs := dump(t, st)["cp_webhook_deliveries"]
	for k := range recs {
		if strings.Contains(k, digestHex("delivery-1")) || strings.Contains(k, digestHex("digest-1")) {
			t.Errorf("delivery record %s older than the retention was kept", k)
		}
	}
	if len(recs) != 4 {
		t.Errorf("delivery records = %v, want the 4 of the last delivery", recs)
	}
}

func digestHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestInstallationOwnershipProperty: whatever sequence of claims (verified
// or not, by either tenant) and pushes, an installation has the owner of
// its first successful claim, every later claim by another tenant is
// ErrConflict, and a push reaches the owner's deployments only.
func TestInstallationOwnershipProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		app := &fakeApp{access: map[string]map[int64]string{}}
		f := newFixture(t, &controlplane.Options{GitHubApp: app})
		owner := map[int64]string{}     // installation -> tenant
		integ := map[int64]string{}     // installation -> integration id
		tracked := map[int64][]string{} // installation -> deployment ids with build_on_push
		tenants := []string{tenantA, tenantB}
		for i := range rapid.IntRange(1, 25).Draw(rt, "steps") {
			tenant := rapid.SampledFrom(tenants).Draw(rt, "tenant")
			inst := rapid.Int64Range(1, 3).Draw(rt, "installation")
			switch rapid.SampledFrom([]string{"claim", "verified", "push"}).Draw(rt, "op") {
			case "claim", "verified":
				var in *controlplane.Integration
				var err error
				verified := false
				if rapid.Bool().Draw(rt, "verified") {
					verified = true
					u, serr := f.cp.StartGitHubInstall(f.ctx, tenant)
					if serr != nil {
						rt.Fatal(serr)
					}
					code := fmt.Sprint("code-", i)
					app.access[code] = map[int64]string{inst: "acct"}
					in, err = f.cp.CompleteGitHubInstall(f.ctx, &controlplane.GitHubSetup{InstallationID: inst, Code: code, State: stateOf(t, u)})
				} else {
					in, err = f.cp.CreateIntegration(f.ctx, tenant, &controlplane.CreateIntegrationRequest{InstallationID: new(inst), Name: new("acct")})
				}
				o, owned := owner[inst]
				switch {
				case !owned:
					if err != nil {
						rt.Fatalf("first claim of %d by %s: %v", inst, tenant, err)
					}
					owner[inst], integ[inst] = tenant, in.ID
					d := f.create(tenant, githubPushBody(fmt.Sprint("d", i), in.ID))
					tracked[inst] = append(tracked[inst], d.ID)
				case o == tenant && verified:
					if err != nil || in.ID != integ[inst] {
						rt.Fatalf("verified claim by the owner: %+v, %v; want integration %s", in, err, integ[inst])
					}
				default:
					if !errors.Is(err, apierr.ErrConflict) {
						rt.Fatalf("claim of %d (owner %s) by %s: %+v, %v; want ErrConflict", inst, o, tenant, in, err)
					}
				}
			case "push":
				pushed, err := f.cp.HandleGitHubPush(f.ctx, &controlplane.PushEvent{InstallationID: inst,
					RepoURL: "https://github.com/acme/agent", Ref: "refs/heads/main", After: fmt.Sprint("sha", i)})
				if err != nil {
					rt.Fatal(err)
				}
				var got []string
				for _, p := range pushed {
					if p.Tenant != owner[inst] {
						rt.Fatalf("push of %d reached tenant %s, owner %s", inst, p.Tenant, owner[inst])
					}
					got = append(got, p.DeploymentID)
				}
				slices.Sort(got)
				want := slices.Sorted(slices.Values(tracked[inst]))
				if !slices.Equal(want, got) {
					rt.Fatalf("push of %d reached %v, want %v", inst, got, want)
				}
			}
		}
	})
}
