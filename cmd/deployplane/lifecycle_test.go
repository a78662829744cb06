package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/deployplane/deployplane/internal/pgtest"
)

// githubDeployment creates an integration of installation 42 and a github
// deployment of acme/agent's main branch with build_on_push, and returns
// the deployment.
func githubDeployment(t *testing.T, url, key string) map[string]any {
	t.Helper()
	return githubDeploymentOf(t, url, key, "gh-agent", "https://github.com/acme/agent", true)
}

// githubDeploymentOf creates an integration of installation 42 (the server
// runs with -allow-unverified-integrations) and a github deployment named
// name of repoURL's main branch, and returns the deployment.
func githubDeploymentOf(t *testing.T, url, key, name, repoURL string, buildOnPush bool) map[string]any {
	t.Helper()
	status, in := call(t, "POST", url+"/v1/integrations/github", key, `{"installation_id": 42, "name": "acme"}`)
	if status != 201 {
		t.Fatalf("create integration: %d %v", status, in)
	}
	status, d := call(t, "POST", url+"/v2/deployments", key, fmt.Sprintf(`{"name": %q, "source": "github",
		"source_config": {"integration_id": %q, "repo_url": %q, "build_on_push": %t},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`, name, in["id"], repoURL, buildOnPush))
	if status != 201 {
		t.Fatalf("create deployment: %d %v", status, d)
	}
	return d
}

const pushEvent = `{"ref": "refs/heads/main", "after": "9fceb02d0ae598e95dc970b74767f19372d61af8",
	"installation": {"id": 42}, "repository": {"clone_url": "https://github.com/acme/agent.git"}}`

// push delivers pushEvent to the webhook, signed with secret ("" sends no
// signature).
func push(t *testing.T, url, secret string) (int, map[string]any) {
	t.Helper()
	headers := []string{"X-GitHub-Event", "push"}
	if secret != "" {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(pushEvent))
		headers = append(headers, "X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	return call(t, "POST", url+"/v1/integrations/github/webhook", "", pushEvent, headers...)
}

// TestWebhookSecret: the webhook secret comes from the environment or the
// flag; a push signed with it creates a revision at the pushed commit,
// which the simulated deployer (-sim-step) deploys; without a secret the
// webhook answers 503. The secret never reaches the log.
func TestWebhookSecret(t *testing.T) {
	secret := "webhook-secret-" + rand.Text()
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"env":  {nil, map[string]string{"DEPLOYPLANE_GITHUB_WEBHOOK_SECRET": secret}},
		"flag": {[]string{"-github-webhook-secret", secret}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{"DEPLOYPLANE_API_KEY": "k"}
			for k, v := range c.env {
				env[k] = v
			}
			url, _, stderr := server(t, append([]string{"-db", ":memory:", "-sim-step", "5ms", "-allow-unverified-integrations"}, c.args...), env)
			d := githubDeployment(t, url, "k")
			waitStatus(t, url, "k", d["id"].(string), d["latest_revision_id"].(string), "DEPLOYED")
			if status, body := push(t, url, "another-secret"); status != 401 {
				t.Errorf("a push signed with another secret: %d %v", status, body)
			}
			status, body := push(t, url, secret)
			if status != 202 || body["revisions_created"] != 1.0 {
				t.Fatalf("a signed push: %d %v", status, body)
			}
			status, got := call(t, "GET", url+"/v2/deployments/"+d["id"].(string), "k", "")
			if status != 200 || got["latest_revision_id"] == d["latest_revision_id"] {
				t.Fatalf("no new revision after the push: %d %v", status, got)
			}
			rev := got["latest_revision_id"].(string)
			waitStatus(t, url, "k", d["id"].(string), rev, "DEPLOYED")
			status, r := call(t, "GET", url+"/v2/deployments/"+d["id"].(string)+"/revisions/"+rev, "k", "")
			if sha := r["source_revision_config"].(map[string]any)["repo_commit_sha"]; status != 200 || sha != "9fceb02d0ae598e95dc970b74767f19372d61af8" {
				t.Errorf("the pushed revision's commit: %d %v", status, sha)
			}
			if logs := stderr.String(); strings.Contains(logs, secret) || !strings.Contains(logs, "github_webhook=enabled") {
				t.Errorf("the log holds the secret, or does not say the webhook is enabled:\n%s", logs)
			}
		})
	}
	t.Run("none", func(t *testing.T) {
		url, _, stderr := server(t, []string{"-db", ":memory:"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
		if status, body := push(t, url, secret); status != 503 {
			t.Errorf("a push without a configured secret: %d %v", status, body)
		}
		if !strings.Contains(stderr.String(), `github_webhook="disabled (no secret)"`) {
			t.Errorf("the log does not say the webhook is disabled:\n%s", stderr.String())
		}
	})
}

// TestPostgres: with -db postgres://... two servers (replicas) share one
// database and schema: a deployment created through one is read through
// the other and reaches DEPLOYED with both reconcile loops running, and
// after both stop, a third start over the same schema still has it. The
// password of the URL is not logged. It needs DEPLOYPLANE_TEST_POSTGRES_DSN
// (source .ci/postgres.sh and run pg_start).
func TestPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	if !isPostgres(dsn) {
		t.Fatalf("%s must be a postgres:// URL to test -db", pgtest.DSNVar)
	}
	schema := pgtest.Schema(t, dsn, "cmd_test_")
	secretKey := strings.Repeat("ab", 32)
	env := map[string]string{"DEPLOYPLANE_API_KEY": "k", "DEPLOYPLANE_SECRET_KEY": secretKey}
	args := []string{"-db", dsn, "-pg-schema", schema, "-sim-step", "20ms"}

	// Without an OAuth secret key the server refuses to start: it would
	// otherwise have to generate one per replica.
	// (A server that starts anyway is stopped once it listens; run then
	// returns nil.)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := newWatcher()
	go func() {
		select {
		case <-started.addr:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...),
		func(k string) string { return map[string]string{"DEPLOYPLANE_API_KEY": "k"}[k] }, io.Discard, started)
	if err == nil || !strings.Contains(err.Error(), "DEPLOYPLANE_SECRET_KEY") {
		t.Errorf("start over PostgreSQL without a secret key: %v", err)
	}

	urlA, _, stderrA, stopA := startServer(t, args, env)
	urlB, _, _, stopB := startServer(t, args, env)
	status, d := call(t, "POST", urlA+"/v2/deployments", "k", dockerBody)
	if status != 201 {
		t.Fatalf("create through replica A: %d %v", status, d)
	}
	waitStatus(t, urlB, "k", d["id"].(string), d["latest_revision_id"].(string), "DEPLOYED")
	if status, got := call(t, "GET", urlA+"/v2/deployments/"+d["id"].(string), "k", ""); status != 200 || got["status"] != "READY" {
		t.Errorf("through replica A: %d %v", status, got)
	}
	if status, _ := call(t, "POST", urlB+"/v2/deployments", "k", dockerBody); status != 409 {
		t.Errorf("the same name through replica B: %d, want 409", status)
	}
	stopA()
	stopB()
	if pw := dsnPassword(dsn); pw != "" && strings.Contains(stderrA.String(), pw) {
		t.Errorf("the log holds the database password:\n%s", stderrA.String())
	}

	url, _, _ := server(t, args, env)
	if status, got := call(t, "GET", url+"/v2/deployments/"+d["id"].(string), "k", ""); status != 200 || got["status"] != "READY" {
		t.Errorf("after a restart: %d %v", status, got)
	}
}

// dsnPassword is the password of a PostgreSQL URL, or "".
func dsnPassword(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return ""
	}
	return cfg.Password
}
