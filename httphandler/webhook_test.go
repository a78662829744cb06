package httphandler_test

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
)

// sign is the X-Hub-Signature-256 GitHub sends for body.
func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// pushed is the commit of the test pushes.
const pushed = "9fceb02d0ae598e95dc970b74767f19372d61af8"

// pushBody is a push event as GitHub sends it (trimmed, with some of the
// members the webhook ignores).
func pushBody(installation int64, ref, after, cloneURL string) string {
	b, _ := json.Marshal(map[string]any{
		"ref": ref, "before": "6113728f27ae82c7b1a177c8d03f9e96e0adf246", "after": after,
		"created": false, "deleted": false, "forced": false, "compare": "https://github.com/acme/agent/compare/6113728f27ae...9fceb02d0ae5",
		"commits":      []map[string]any{{"id": after, "message": "Fix the agent", "added": []string{}, "removed": []string{}, "modified": []string{"agent.py"}}},
		"head_commit":  map[string]any{"id": after, "message": "Fix the agent"},
		"installation": map[string]any{"id": installation, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDI="},
		"repository": map[string]any{"id": 35129377, "name": "agent", "full_name": "acme/agent", "private": true,
			"owner":     map[string]any{"login": "acme", "id": 1},
			"clone_url": cloneURL, "html_url": strings.TrimSuffix(cloneURL, ".git"), "ssh_url": "git@github.com:acme/agent.git"},
		"pusher": map[string]any{"name": "octocat", "email": "octocat@example.com"},
		"sender": map[string]any{"login": "octocat", "id": 583231},
	})
	return string(b)
}

// deliver sends a signed webhook delivery, with a delivery id of its own.
func (s *server) deliver(event, body string) reply {
	s.t.Helper()
	return s.do("POST", "/v1/integrations/github/webhook", body, "X-GitHub-Event", event,
		"X-GitHub-Delivery", rand.Text(), "X-Hub-Signature-256", sign(webhookSecret, body))
}

// accepted checks a 202 answer and returns its revisions_created.
func accepted(t *testing.T, r reply) int {
	t.Helper()
	if r.status != 202 {
		t.Fatalf("webhook: %d %s, want 202", r.status, r.body)
	}
	var b struct {
		Message          string `json:"message"`
		RevisionsCreated *int   `json:"revisions_created"`
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Message == "" || b.RevisionsCreated == nil {
		t.Fatalf("webhook answer %s: %v", r.body, err)
	}
	return *b.RevisionsCreated
}

// revisionsOf lists the revision ids of every deployment of a tenant, by
// deployment name.
func (s *server) revisionsOf(t *testing.T, key string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	page := must[controlplane.DeploymentPage](t, s, key, "GET", "/v2/deployments?limit=100", "", 200)
	for _, d := range page.Resources {
		revs := must[controlplane.RevisionPage](t, s, key, "GET", "/v2/deployments/"+d.ID+"/revisions?limit=100", "", 200)
		out[d.Name] = revIDs(revs.Resources)
	}
	return out
}

// pushFixture: integrations of installations 42 and 43 in tenant A and of
// 44 in tenant B, and github deployments of which two track acme/agent's
// main branch with build_on_push (one in each tenant, through 42 and 44,
// their repo_url spelt differently); the others differ in one respect each. Every first
// revision is DEPLOYED when it returns.
func pushFixture(t *testing.T, s *server) (tracksA, tracksB controlplane.Deployment) {
	t.Helper()
	a42 := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	a43 := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 43, "name": "other"}`, 201)
	b44 := must[controlplane.Integration](t, s, keyB, "POST", "/v1/integrations/github", `{"installation_id": 44, "name": "acme"}`, 201)
	create := func(key, name, integration, repo, ref string, bop bool) controlplane.Deployment {
		body, _ := json.Marshal(map[string]any{"name": name, "source": "github",
			"source_config":          map[string]any{"integration_id": integration, "repo_url": repo, "build_on_push": bop},
			"source_revision_config": map[string]any{"repo_ref": ref, "graph_config_path": "langgraph.json"}})
		d := must[controlplane.Deployment](t, s, key, "POST", "/v2/deployments", string(body), 201)
		s.waitRevision(t, key, d.ID, *d.LatestRevisionID, controlplane.RevisionDeployed)
		return d
	}
	tracksA = create(keyA, "tracks", a42.ID, "https://github.com/Acme/Agent.git", "main", true)
	create(keyA, "other-branch", a42.ID, "https://github.com/acme/agent", "release", true)
	create(keyA, "no-build-on-push", a42.ID, "https://github.com/acme/agent", "main", false)
	create(keyA, "other-repo", a42.ID, "https://github.com/acme/agent-two", "main", true)
	create(keyA, "other-installation", a43.ID, "https://github.com/acme/agent", "main", true)
	tracksB = create(keyB, "tracks-b", b44.ID, "git@github.com:acme/agent.git", "refs/heads/main", true)
	return tracksA, tracksB
}

// TestWebhookPush: a signed push to a branch creates one revision, with
// repo_commit_sha the pushed commit, for each build_on_push deployment of
// the installation's integration (in the one tenant that holds it) that
// tracks that repository and branch, and nothing else: the other tenant's
// deployment of the same repository, through its own installation, gets
// nothing. The revision is deployed with the pushed commit and becomes
// active, and the deployment shows the commit.
func TestWebhookPush(t *testing.T) {
	s := newLiveServer(t, sim(nil), nil)
	tracksA, tracksB := pushFixture(t, s)
	for _, c := range []struct {
		key, otherKey string
		installation  int64
		d             controlplane.Deployment
	}{{keyA, keyB, 42, tracksA}, {keyB, keyA, 44, tracksB}} {
		before, otherBefore := s.revisionsOf(t, c.key), s.revisionsOf(t, c.otherKey)
		r := s.deliver("push", pushBody(c.installation, "refs/heads/main", pushed, "https://github.com/acme/agent.git"))
		diff(t, "revisions_created", 1, accepted(t, r))
		after := s.revisionsOf(t, c.key)
		diff(t, "the other tenant's revisions", otherBefore, s.revisionsOf(t, c.otherKey))
		got := after[c.d.Name]
		if len(got) != len(before[c.d.Name])+1 {
			t.Fatalf("%s: revisions %v after the push, before %v", c.d.Name, got, before[c.d.Name])
		}
		rev := must[controlplane.Revision](t, s, c.key, "GET", "/v2/deployments/"+c.d.ID+"/revisions/"+got[0], "", 200)
		diff(t, c.d.Name+": the new revision's commit", pushed, deref(rev.SourceRevisionConfig.RepoCommitSHA))
		rev = s.waitRevision(t, c.key, c.d.ID, rev.ID, controlplane.RevisionDeployed)
		diff(t, c.d.Name+": the deployed revision's commit", pushed, deref(rev.SourceRevisionConfig.RepoCommitSHA))
		dep := s.deployment(t, c.key, c.d.ID)
		checkActive(t, dep, rev, "git-"+pushed[:12])
		diff(t, c.d.Name+": the deployment's commit (the mirror of its latest revision)", pushed, deref(dep.SourceRevisionConfig.RepoCommitSHA))
		// Nothing else changed.
		after[c.d.Name] = before[c.d.Name]
		diff(t, "the other deployments' revisions", before, after)
	}
}

// TestWebhookRefusesUnsigned: a delivery whose X-Hub-Signature-256 is
// missing or wrong is a 401, and creates nothing, whatever else it carries
// (an API key included).
func TestWebhookRefusesUnsigned(t *testing.T) {
	s := newLiveServer(t, sim(nil), nil)
	pushFixture(t, s)
	before := s.revisionsOf(t, keyA)
	body := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	sha1mac := hmac.New(sha1.New, []byte(webhookSecret))
	sha1mac.Write([]byte(body))
	right := sign(webhookSecret, body)
	for _, c := range []struct {
		name, signature, detail string
	}{
		{"missing", "", "Missing X-Hub-Signature-256 header."},
		{"another secret", sign("not-the-secret", body), "Invalid X-Hub-Signature-256 signature."},
		{"another body", sign(webhookSecret, body+" "), "Invalid X-Hub-Signature-256 signature."},
		{"empty secret", sign("", body), "Invalid X-Hub-Signature-256 signature."},
		{"no sha256= prefix", strings.TrimPrefix(right, "sha256="), "Invalid X-Hub-Signature-256 signature."},
		{"sha1= prefix", "sha1=" + strings.TrimPrefix(right, "sha256="), "Invalid X-Hub-Signature-256 signature."},
		{"the SHA-1 signature", "sha1=" + hex.EncodeToString(sha1mac.Sum(nil)), "Invalid X-Hub-Signature-256 signature."},
		{"truncated", right[:len(right)-2], "Invalid X-Hub-Signature-256 signature."},
		{"not hex", right[:len(right)-1] + "g", "Invalid X-Hub-Signature-256 signature."},
		{"prefix only", "sha256=", "Invalid X-Hub-Signature-256 signature."},
	} {
		headers := []string{"X-GitHub-Event", "push", "X-Api-Key", keyA}
		if c.signature != "" {
			headers = append(headers, "X-Hub-Signature-256", c.signature)
		}
		r := s.do("POST", "/v1/integrations/github/webhook", body, headers...)
		if r.status != 401 || detail(t, r) != c.detail {
			t.Errorf("%s: %d %s, want 401 %q", c.name, r.status, r.body, c.detail)
		}
	}
	diff(t, "revisions after refused deliveries", before, s.revisionsOf(t, keyA))
	// The control: the same body, signed, is accepted (tracks).
	diff(t, "revisions_created by the signed delivery", 1, accepted(t, s.deliver("push", body)))
}

// TestWebhookIgnores: ping, other events, tag pushes and branch deletions
// are accepted (202) and change nothing.
func TestWebhookIgnores(t *testing.T) {
	s := newLiveServer(t, sim(nil), nil)
	pushFixture(t, s)
	before := s.revisionsOf(t, keyA)
	main := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	deletion := strings.Replace(pushBody(42, "refs/heads/main", strings.Repeat("0", 40), "https://github.com/acme/agent.git"),
		`"deleted":false`, `"deleted":true`, 1)
	for _, c := range []struct{ name, event, body string }{
		{"ping", "ping", `{"zen": "Design for failure.", "hook_id": 1, "hook": {"type": "App"}}`},
		{"a push body sent as another event", "pull_request", main},
		{"no event header", "", main},
		{"installation event", "installation", `{"action": "created", "installation": {"id": 42}}`},
		{"tag push", "push", pushBody(42, "refs/tags/v1.0.0", pushed, "https://github.com/acme/agent.git")},
		{"branch deletion", "push", deletion},
		{"a ref that is not a branch", "push", pushBody(42, "refs/pull/1/head", pushed, "https://github.com/acme/agent.git")},
		{"another installation's repository", "push", pushBody(45, "refs/heads/main", pushed, "https://github.com/acme/agent.git")},
		{"a branch nobody tracks", "push", pushBody(42, "refs/heads/feature", pushed, "https://github.com/acme/agent.git")},
	} {
		if n := accepted(t, s.deliver(c.event, c.body)); n != 0 {
			t.Errorf("%s: %d revisions created", c.name, n)
		}
	}
	diff(t, "revisions after ignored deliveries", before, s.revisionsOf(t, keyA))
}

// TestWebhookRejects: a signed push the webhook cannot read is a 422 with
// the problem's loc; a body over the limit is a 413; nothing is created.
func TestWebhookRejects(t *testing.T) {
	s := newServer(t, &httphandler.Options{WebhookMaxBodyBytes: 4096})
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "tracks", "source": "github",
		"source_config": {"integration_id": "`+in.ID+`", "repo_url": "https://github.com/acme/agent", "build_on_push": true},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, 201)
	for _, c := range []struct {
		name, body string
		loc        []any
		typ        string
	}{
		{"not JSON", `{"ref": `, []any{"body", "ref"}, "json_invalid"},
		{"empty", ``, []any{"body"}, "missing"},
		{"installation id a string", `{"ref": "refs/heads/main", "after": "` + pushed + `", "installation": {"id": "42"}}`,
			[]any{"body", "installation", "id"}, "int_type"},
		{"no installation", `{"ref": "refs/heads/main", "after": "` + pushed + `", "repository": {"clone_url": "https://github.com/acme/agent.git"}}`,
			[]any{"body", "installation", "id"}, "greater_than"},
		{"no repository", `{"ref": "refs/heads/main", "after": "` + pushed + `", "installation": {"id": 42}}`,
			[]any{"body", "repository", "clone_url"}, "missing"},
		{"no commit", `{"ref": "refs/heads/main", "installation": {"id": 42}, "repository": {"html_url": "https://github.com/acme/agent"}}`,
			[]any{"body", "after"}, "missing"},
	} {
		ps := problems(t, s.deliver("push", c.body))
		if len(ps) != 1 || !cmpLoc(ps[0].Loc, c.loc) || ps[0].Type != c.typ {
			t.Errorf("%s: problems %+v, want one %s at %v", c.name, ps, c.typ, c.loc)
		}
	}
	big := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	big = big[:len(big)-1] + `, "padding": "` + strings.Repeat("x", 4096) + `"}`
	r := s.deliver("push", big)
	diff(t, "a delivery over the body limit", 413, r.status)
	revs := must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions", "", 200)
	diff(t, "revisions after rejected deliveries", []string{*d.LatestRevisionID}, revIDs(revs.Resources))
}

func cmpLoc(got, want []any) bool {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	return string(g) == string(w)
}

// TestWebhookDisabled: without a secret the webhook answers 503 to every
// delivery, however it is signed, and never creates a revision.
func TestWebhookDisabled(t *testing.T) {
	s := newServerWith(t, serverSetup{noWebhook: true})
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	d := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "tracks", "source": "github",
		"source_config": {"integration_id": "`+in.ID+`", "repo_url": "https://github.com/acme/agent", "build_on_push": true},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, 201)
	body := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	for _, sig := range []string{"", sign("", body), sign(webhookSecret, body)} {
		r := s.do("POST", "/v1/integrations/github/webhook", body, "X-GitHub-Event", "push", "X-Hub-Signature-256", sig)
		if r.status != 503 || !strings.Contains(detail(t, r), "no webhook secret is configured") {
			t.Errorf("signature %q: %d %s", sig, r.status, r.body)
		}
	}
	revs := must[controlplane.RevisionPage](t, s, keyA, "GET", "/v2/deployments/"+d.ID+"/revisions", "", 200)
	diff(t, "revisions", []string{*d.LatestRevisionID}, revIDs(revs.Resources))
}

// TestWebhookOpenAPI: the document describes the webhook as public, with
// its two headers and its answers.
func TestWebhookOpenAPI(t *testing.T) {
	s := newServer(t, nil)
	var doc struct {
		Paths map[string]map[string]struct {
			Security   *[]any `json:"security"`
			Parameters []struct {
				Name     string `json:"name"`
				In       string `json:"in"`
				Required bool   `json:"required"`
			} `json:"parameters"`
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(s.do("GET", "/openapi.json", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	op, ok := doc.Paths["/v1/integrations/github/webhook"]["post"]
	if !ok {
		t.Fatal("the webhook is not documented")
	}
	if op.Security == nil || len(*op.Security) != 0 {
		t.Errorf("security %v, want [] (public)", op.Security)
	}
	var params []string
	for _, p := range op.Parameters {
		params = append(params, p.In+" "+p.Name)
	}
	diff(t, "parameters", []string{"header X-Hub-Signature-256", "header X-GitHub-Event"}, params)
	diff(t, "responses", []string{"202", "401", "408", "413", "422", "429", "503"}, keysOf(op.Responses))
}

// TestWebhookLargePush: a signed push far over the API's body limit (GitHub
// sends up to 25 MB) still creates its revision, because the webhook has
// its own, larger limit.
func TestWebhookLargePush(t *testing.T) {
	s := newServer(t, &httphandler.Options{MaxBodyBytes: 4096})
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "tracks", "source": "github",
		"source_config": {"integration_id": "`+in.ID+`", "repo_url": "https://github.com/acme/agent", "build_on_push": true},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, 201)
	big := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	big = big[:len(big)-1] + `, "padding": "` + strings.Repeat("x", 2<<20) + `"}`
	diff(t, "revisions created by a 2 MiB push", 1, accepted(t, s.deliver("push", big)))
}

// pullRequestBody is a pull_request event as GitHub sends it (trimmed,
// with some of the members the webhook ignores), against acme/agent's
// main, from headRepo's feature branch at sha.
func pullRequestBody(installation int64, action string, number int64, sha, headRepo string, labels ...string) string {
	ls := []map[string]any{}
	for _, l := range labels {
		ls = append(ls, map[string]any{"id": 1, "name": l, "color": "ededed"})
	}
	repo := func(full string) map[string]any {
		return map[string]any{"id": 35129377, "name": "agent", "full_name": full, "private": false,
			"clone_url": "https://github.com/" + full + ".git", "html_url": "https://github.com/" + full,
			"ssh_url": "git@github.com:" + full + ".git"}
	}
	b, _ := json.Marshal(map[string]any{
		"action": action, "number": number,
		"pull_request": map[string]any{"id": 1, "number": number, "state": "open", "title": "Fix the agent", "labels": ls,
			"head": map[string]any{"label": "acme:feature", "ref": "feature", "sha": sha, "repo": repo(headRepo)},
			"base": map[string]any{"label": "acme:main", "ref": "main", "sha": "6113728f27ae82c7b1a177c8d03f9e96e0adf246", "repo": repo("acme/agent")}},
		"repository":   repo("acme/agent"),
		"installation": map[string]any{"id": installation},
		"sender":       map[string]any{"login": "octocat", "id": 583231},
	})
	return string(b)
}

// TestWebhookPullRequest: the wire details of pull_request deliveries:
// what each action does to the preview of a deployment with
// source_config.preview (mode label), in the 202's counts and in the
// deployments; a repeat changes nothing; a fork gets no preview; a
// delivery without what its action needs is a 422 at the member's loc.
func TestWebhookPullRequest(t *testing.T) {
	s := newLiveServer(t, sim(nil), nil)
	in := must[controlplane.Integration](t, s, keyA, "POST", "/v1/integrations/github", `{"installation_id": 42, "name": "acme"}`, 201)
	parent := must[controlplane.Deployment](t, s, keyA, "POST", "/v2/deployments", `{"name": "tracks", "source": "github",
		"source_config": {"integration_id": "`+in.ID+`", "repo_url": "https://github.com/acme/agent",
			"preview": {"mode": "label", "label": "preview", "max_concurrent": 3}},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, 201)
	diff(t, "the parent's preview", "label", string(*parent.SourceConfig.Preview.Mode))
	sync := pullRequestBody(42, "synchronize", 7, "b2", "acme/agent", "preview")
	type counts struct{ Revisions, Created, Updated, Deleted int }
	for _, c := range []struct {
		name, body string
		want       counts
		previews   map[string]string // name -> repo_commit_sha of the previews after it
	}{
		{"opened without the label", pullRequestBody(42, "opened", 7, "a1", "acme/agent"), counts{}, map[string]string{}},
		{"labeled", pullRequestBody(42, "labeled", 7, "a1", "acme/agent", "preview"), counts{1, 1, 0, 0}, map[string]string{"tracks-pr-7": "a1"}},
		{"synchronize", sync, counts{1, 0, 1, 0}, map[string]string{"tracks-pr-7": "b2"}},
		{"the same body again", sync, counts{}, map[string]string{"tracks-pr-7": "b2"}},
		{"a fork's", pullRequestBody(42, "labeled", 8, "c3", "mallory/agent", "preview"), counts{}, map[string]string{"tracks-pr-7": "b2"}},
		{"another installation's", pullRequestBody(43, "labeled", 9, "c3", "acme/agent", "preview"), counts{}, map[string]string{"tracks-pr-7": "b2"}},
		{"edited", pullRequestBody(42, "edited", 7, "d4", "acme/agent", "preview"), counts{}, map[string]string{"tracks-pr-7": "b2"}},
		{"closed", pullRequestBody(42, "closed", 7, "b2", "acme/agent", "preview"), counts{0, 0, 0, 1}, map[string]string{}},
	} {
		r := s.deliver("pull_request", c.body)
		if r.status != 202 {
			t.Fatalf("%s: %d %s", c.name, r.status, r.body)
		}
		var got struct {
			Message          string `json:"message"`
			RevisionsCreated int    `json:"revisions_created"`
			PreviewsCreated  int    `json:"previews_created"`
			PreviewsUpdated  int    `json:"previews_updated"`
			PreviewsDeleted  int    `json:"previews_deleted"`
		}
		if err := json.Unmarshal(r.body, &got); err != nil || got.Message == "" {
			t.Fatalf("%s: answer %s: %v", c.name, r.body, err)
		}
		diff(t, c.name+": counts", c.want, counts{got.RevisionsCreated, got.PreviewsCreated, got.PreviewsUpdated, got.PreviewsDeleted})
		previews := map[string]string{}
		page := must[controlplane.DeploymentPage](t, s, keyA, "GET", "/v2/deployments?limit=100", "", 200)
		for _, d := range page.Resources {
			if d.IsPreview && d.Status != controlplane.StatusAwaitingDelete {
				previews[d.Name] = fmt.Sprint(deref(d.SourceRevisionConfig.RepoCommitSHA))
				diff(t, c.name+": the preview's branch", "feature", fmt.Sprint(deref(d.SourceRevisionConfig.RepoRef)))
			}
		}
		diff(t, c.name+": previews", c.previews, previews)
	}
	for _, c := range []struct {
		name, body string
		loc        []any
		typ        string
	}{
		{"no head commit", pullRequestBody(42, "opened", 7, "", "acme/agent"), []any{"body", "pull_request", "head", "sha"}, "missing"},
		{"no number", strings.Replace(pullRequestBody(42, "opened", 7, "a1", "acme/agent"), `"number":7`, `"number":0`, 2),
			[]any{"body", "number"}, "greater_than"},
		{"number a string", strings.Replace(pullRequestBody(42, "opened", 7, "a1", "acme/agent"), `"number":7,"p`, `"number":"7","p`, 1),
			[]any{"body", "number"}, "int_type"},
	} {
		ps := problems(t, s.deliver("pull_request", c.body))
		if len(ps) != 1 || !cmpLoc(ps[0].Loc, c.loc) || ps[0].Type != c.typ {
			t.Errorf("%s: problems %+v, want one %s at %v", c.name, ps, c.typ, c.loc)
		}
	}
}
