package httphandler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/storemem"
)

// FuzzGitHubWebhookBody sends arbitrary bodies, correctly signed, as push
// deliveries to POST /v1/integrations/github/webhook, where tenant A has a
// build_on_push deployment of acme/agent's main branch through installation
// 42 (so that well-formed pushes create revisions). The checks are those of
// every fuzz target: no panic, no 5xx, and every rejection a well-formed
// JSON error. The seed corpus runs in every `go test`.
func FuzzGitHubWebhookBody(f *testing.F) {
	main := pushBody(42, "refs/heads/main", pushed, "https://github.com/acme/agent.git")
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"ref": `, `{"a":1}{}`, "{\"ref\": \"refs/heads/\xff\"}",
		main,
		pushBody(42, "refs/tags/v1", pushed, "https://github.com/acme/agent.git"),
		pushBody(42, "refs/heads/main", strings.Repeat("0", 40), "https://github.com/acme/agent.git"),
		strings.Replace(main, `"deleted":false`, `"deleted":true`, 1),
		pushBody(-1, "refs/heads/main", pushed, "git@github.com:ACME/agent.git/"),
		pushBody(9007199254740993, "refs/heads/", "", ""),
		`{"ref": "refs/heads/main", "ref": "refs/heads/other"}`,
		`{"ref": "refs/heads/main", "after": "x", "installation": {"id": 42.5}, "repository": {"clone_url": 1}}`,
		`{"ref": "refs/heads/main", "after": "x", "installation": {"id": "42"}, "repository": []}`,
		`{"ref": "refs/heads/main", "after": "x", "installation": null, "repository": {"ssh_url": "git@github.com:acme/agent.git"}}`,
		`{"ref": "refs/heads/main", "after": "` + strings.Repeat("a", 5000) + `", "installation": {"id": 42},
		  "repository": {"html_url": "https://github.com/acme/agent"}}`,
		`{"REF": "refs/heads/main", "Installation": {"ID": 42}, "deleted": "no"}`,
		`{"ref": "refs/heads/main", "installation": {"id": 1e400}}`,
	} {
		f.Add([]byte(s))
	}
	cp := controlplane.New(storemem.New(), nil)
	ft := &fuzzTarget{webhookSecret: webhookSecret, h: httphandler.New(cp,
		&httphandler.Options{Authenticator: keyTable(f), MaxBodyBytes: 64 << 10, GitHubWebhookSecret: []byte(webhookSecret)})}
	ctx := context.Background()
	in, err := cp.CreateIntegration(ctx, tenantA, &controlplane.CreateIntegrationRequest{InstallationID: new(int64(42)), Name: new("acme")})
	if err != nil {
		f.Fatal(err)
	}
	_, err = cp.CreateDeployment(ctx, tenantA, &controlplane.CreateDeploymentRequest{
		Name: new("tracks"), Source: new(controlplane.SourceGitHub),
		SourceConfig: &controlplane.SourceConfig{IntegrationID: new(in.ID), RepoURL: new("https://github.com/acme/agent"),
			BuildOnPush: new(true)},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ft.check(t, "POST", "/v1/integrations/github/webhook", "", body)
	})
}
