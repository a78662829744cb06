package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/internal/githubtest"
)

// TestGitHubApp: with the five GitHub App flags (the client secret from the
// environment), a tenant installs the App through GitHub (a fake on
// loopback) and gets an integration; POST /v1/integrations/github is 404
// without -allow-unverified-integrations; the client secret is not logged.
func TestGitHubApp(t *testing.T) {
	gh := githubtest.New(t)
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, gh.PrivateKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _, stderr := server(t, []string{"-db", ":memory:", "-github-app-id", strconv.FormatInt(gh.AppID(), 10), "-github-app-slug", gh.Slug(),
		"-github-app-private-key-file", keyFile, "-github-client-id", gh.ClientID(),
		"-github-api-url", gh.APIURL(), "-github-url", gh.URL()},
		map[string]string{"DEPLOYPLANE_API_KEY": "k", "DEPLOYPLANE_GITHUB_CLIENT_SECRET": gh.ClientSecret()})
	gh.SetSetupURL(url + "/v1/integrations/github/setup")
	gh.WillInstall(7, "acme")

	status, body := call(t, "GET", url+"/v1/integrations/github/install", "k", "")
	installURL, _ := body["url"].(string)
	if status != 200 || !strings.HasPrefix(installURL, gh.URL()+"/apps/"+gh.Slug()+"/installations/new?state=") {
		t.Fatalf("GET /v1/integrations/github/install: %d %v", status, body)
	}
	resp, err := http.Get(installURL) // follows GitHub's redirect to the setup page
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "acme") {
		t.Fatalf("the setup page: %d %s", resp.StatusCode, page)
	}
	req, _ := http.NewRequest("GET", url+"/v1/integrations/github", nil)
	req.Header.Set("X-Api-Key", "k")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(list, []byte(`"installation_id":7`)) || !bytes.Contains(list, []byte(`"name":"acme"`)) {
		t.Errorf("integrations after the installation: %s", list)
	}

	if status, body := call(t, "POST", url+"/v1/integrations/github", "k", `{"installation_id": 8, "name": "x"}`); status != 404 {
		t.Errorf("POST /v1/integrations/github without -allow-unverified-integrations: %d %v", status, body)
	}
	logs := stderr.String()
	if strings.Contains(logs, gh.ClientSecret()) || !strings.Contains(logs, "github_app=enabled") ||
		!strings.Contains(logs, "unverified_integrations=false") {
		t.Errorf("the log holds the client secret, or does not say how integrations are registered:\n%s", logs)
	}
}

// TestGitHubAppFlags: the App needs all five settings; a partial App, two
// client secrets or an unreadable key is refused; without an App the install
// route answers 503.
func TestGitHubAppFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"-github-app-id", "1"}, nil},
		{[]string{"-github-app-id", "1", "-github-app-slug", "s", "-github-app-private-key-file", "k", "-github-client-id", "c"}, nil},
		{nil, map[string]string{"DEPLOYPLANE_GITHUB_CLIENT_SECRET": "s"}},
		{[]string{"-github-client-secret", "a"}, map[string]string{"DEPLOYPLANE_GITHUB_CLIENT_SECRET": "b"}},
	} {
		err := run(context.Background(), append([]string{"-db", ":memory:"}, c.args...), func(k string) string { return c.env[k] }, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%v %v: %v, want a usage error", c.args, c.env, err)
		}
	}
	err := run(context.Background(), []string{"-db", ":memory:", "-addr", "127.0.0.1:0", "-github-app-id", "1", "-github-app-slug", "s",
		"-github-app-private-key-file", filepath.Join(t.TempDir(), "missing.pem"), "-github-client-id", "c", "-github-client-secret", "s"},
		func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-github-app-private-key-file") {
		t.Errorf("a missing key file: %v", err)
	}

	url, _, stderr := server(t, []string{"-db", ":memory:", "-allow-unverified-integrations"}, map[string]string{"DEPLOYPLANE_API_KEY": "k"})
	if status, body := call(t, "GET", url+"/v1/integrations/github/install", "k", ""); status != 503 {
		t.Errorf("install without an App: %d %v", status, body)
	}
	if status, body := call(t, "POST", url+"/v1/integrations/github", "k", `{"installation_id": 8, "name": "x"}`); status != 201 {
		t.Errorf("POST /v1/integrations/github with -allow-unverified-integrations: %d %v", status, body)
	}
	if !strings.Contains(stderr.String(), "github_app=disabled") || !strings.Contains(stderr.String(), "unverified_integrations=true") {
		t.Errorf("the log does not say how integrations are registered:\n%s", stderr.String())
	}

	var help bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, func(string) string { return "" }, io.Discard, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	for _, want := range []string{"-github-app-id", "-github-app-slug", "-github-app-private-key-file", "-github-client-id",
		"-github-client-secret", "DEPLOYPLANE_GITHUB_CLIENT_SECRET", "-github-api-url", "-github-url", "-allow-unverified-integrations",
		"/v1/integrations/github/setup", "/v1/integrations/github/install", "Request user", "every API key holder"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h does not mention %q", want)
		}
	}
}

// TestGitHubPreview: with the GitHub App and the webhook secret, a signed
// pull_request delivery gives a deployment with source_config.preview a
// preview, and the pull request is told through the App: a Deployment of
// the head commit in preview/<name>, whose statuses end in success at the
// preview's url.
func TestGitHubPreview(t *testing.T) {
	gh := githubtest.New(t)
	gh.AddInstallation(7, "acme")
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, gh.PrivateKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _, _ := server(t, []string{"-db", ":memory:", "-github-app-id", strconv.FormatInt(gh.AppID(), 10), "-github-app-slug", gh.Slug(),
		"-github-app-private-key-file", keyFile, "-github-client-id", gh.ClientID(),
		"-github-api-url", gh.APIURL(), "-github-url", gh.URL(), "-allow-unverified-integrations", "-sim-step", "10ms"},
		map[string]string{"DEPLOYPLANE_API_KEY": "k", "DEPLOYPLANE_GITHUB_CLIENT_SECRET": gh.ClientSecret(),
			"DEPLOYPLANE_GITHUB_WEBHOOK_SECRET": "whsec"})
	status, in := call(t, "POST", url+"/v1/integrations/github", "k", `{"installation_id": 7, "name": "acme"}`)
	if status != 201 {
		t.Fatalf("POST /v1/integrations/github: %d %v", status, in)
	}
	status, d := call(t, "POST", url+"/v2/deployments", "k", `{"name": "agent", "source": "github",
		"source_config": {"integration_id": "`+in["id"].(string)+`", "repo_url": "https://github.com/acme/agent", "preview": {"mode": "all"}},
		"source_revision_config": {"repo_ref": "main", "graph_config_path": "langgraph.json"}}`)
	if status != 201 {
		t.Fatalf("POST /v2/deployments: %d %v", status, d)
	}
	body := `{"action": "opened", "number": 3, "installation": {"id": 7},
		"pull_request": {"number": 3, "labels": [],
			"head": {"ref": "feature", "sha": "c0ffee", "repo": {"full_name": "acme/agent", "clone_url": "https://github.com/acme/agent.git"}},
			"base": {"ref": "main", "sha": "b0a710ad", "repo": {"full_name": "acme/agent", "clone_url": "https://github.com/acme/agent.git"}}}}`
	mac := hmac.New(sha256.New, []byte("whsec"))
	mac.Write([]byte(body))
	status, res := call(t, "POST", url+"/v1/integrations/github/webhook", "", body, "X-GitHub-Event", "pull_request",
		"X-GitHub-Delivery", "d-1", "X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	if status != 202 || res["previews_created"] != 1.0 {
		t.Fatalf("the pull_request delivery: %d %v", status, res)
	}
	deadline := nearDeadline(t)
	for {
		ss := gh.DeploymentStatuses()
		if len(ss) > 0 && ss[len(ss)-1].State == "success" {
			if !strings.HasPrefix(ss[len(ss)-1].EnvironmentURL, "http") {
				t.Errorf("success without the preview's url: %+v", ss)
			}
			break
		}
		select {
		case <-time.After(50 * time.Millisecond): // polling GitHub's side
		case <-deadline:
			t.Fatalf("statuses at the test's deadline: %+v", ss)
		}
	}
	ds := gh.Deployments()
	if len(ds) != 1 || ds[0].Ref != "c0ffee" || ds[0].Environment != "preview/agent" || ds[0].Repo != "acme/agent" || !ds[0].Transient {
		t.Errorf("GitHub deployments: %+v", ds)
	}
}
