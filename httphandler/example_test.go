package httphandler_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

// Example mounts the API under a prefix of an existing mux and creates a
// deployment with an API key of the built-in key table.
func Example() {
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{
		SHA256:  httphandler.HashKey("my-key"),
		Tenants: []string{"0194c0de-0000-7000-8000-000000000001"},
	}})
	if err != nil {
		panic(err)
	}
	n := 0
	cp := controlplane.New(storemem.New(), &controlplane.Options{NewID: func() string {
		n++
		return fmt.Sprintf("0194c0de-0000-7000-8000-%012d", n)
	}})
	api := httphandler.New(cp, &httphandler.Options{Authenticator: keys})
	mux := http.NewServeMux()
	mux.Handle("/api-host/", http.StripPrefix("/api-host", api))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(method, path, key, body string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if len(b) > 60 {
			b = append(b[:60], "..."...)
		}
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(b)))
	}
	send("POST", "/api-host/v2/deployments", "my-key",
		`{"name": "agent", "source": "external_docker", "source_revision_config": {"image_uri": "registry.example/agent:1"}}`)
	send("POST", "/api-host/v2/deployments", "my-key", `{"name": "agent", "name": "again"}`)
	send("GET", "/api-host/v2/deployments", "wrong-key", "")
	send("PUT", "/api-host/v2/deployments", "my-key", "")
	// Output:
	// 201 {"id":"0194c0de-0000-7000-8000-000000000001","name":"agent",...
	// 422 {"detail":[{"loc":["body","name"],"msg":"Invalid JSON: dupli...
	// 401 {"detail":"Invalid authentication credentials."}
	// 405 {"detail":"Method Not Allowed"}
}

// tokenAuth is an Authenticator of bearer tokens issued elsewhere (here a
// fixed map standing in for an identity provider).
type tokenAuth map[string][]string

func (a tokenAuth) Authenticate(_ context.Context, c httphandler.Credentials) (*httphandler.Principal, error) {
	tenants, ok := a[c.BearerToken]
	if !ok {
		return nil, httphandler.ErrUnauthenticated
	}
	return &httphandler.Principal{ID: "token-user", Tenants: tenants}, nil
}

// ExampleAuthenticator plugs in an Authenticator of one's own. The handler
// picks the tenant: a principal with several tenants must name one with
// X-Tenant-Id.
func ExampleAuthenticator() {
	auth := tokenAuth{"token-1": {"0194c0de-0000-7000-8000-000000000001", "0194c0de-0000-7000-8000-000000000002"}}
	h := httphandler.New(controlplane.New(storemem.New(), nil), &httphandler.Options{Authenticator: auth})

	for _, tenant := range []string{"", "0194c0de-0000-7000-8000-000000000002", "0194c0de-0000-7000-8000-000000000003"} {
		req := httptest.NewRequest("GET", "/v2/listeners", nil)
		req.Header.Set("Authorization", "Bearer token-1")
		if tenant != "" {
			req.Header.Set("X-Tenant-Id", tenant)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 403 {"detail":"This API key is org-scoped and requires workspace specification. Please provide the 'X-Tenant-Id' header."}
	// 200 {"resources":[],"offset":0}
	// 403 {"detail":"The credentials are not authorized for the requested workspace."}
}

// ExampleNewKeyTable: the table keeps digests only; a key is checked by
// hashing it.
func ExampleNewKeyTable() {
	keys, err := httphandler.NewKeyTable([]httphandler.Key{
		{SHA256: httphandler.HashKey("key-1"), Tenants: []string{"0194C0DE-0000-7000-8000-000000000001"}},
	})
	if err != nil {
		panic(err)
	}
	p, err := keys.Authenticate(context.Background(), httphandler.Credentials{APIKey: "key-1"})
	fmt.Println(p.Tenants, err)
	_, err = keys.Authenticate(context.Background(), httphandler.Credentials{BearerToken: "key-2"})
	fmt.Println(errors.Is(err, httphandler.ErrUnauthenticated))
	fmt.Println(httphandler.Credentials{APIKey: "key-1"})
	// Output:
	// [0194c0de-0000-7000-8000-000000000001] <nil>
	// true
	// Credentials{APIKey:[redacted] BearerToken:""}
}

// ExampleOptions_oAuth serves the OAuth helpers (/v2/auth/*) by giving the
// handler an oauthflow.Service, here over the same store as the control
// plane. Its PublicURL is where browsers reach the handler: providers send
// them back to PublicURL/v2/auth/callback/{provider_id}.
func ExampleOptions_oAuth() {
	st := storemem.New()
	secretKey := make([]byte, 32) // in production: 32 random bytes, kept safe
	oauth, err := oauthflow.New(st, &oauthflow.Options{SecretKey: secretKey, PublicURL: "https://deploy.example.com"})
	if err != nil {
		panic(err)
	}
	keys, err := httphandler.NewKeyTable([]httphandler.Key{{
		SHA256: httphandler.HashKey("my-key"), Tenants: []string{"0194c0de-0000-7000-8000-000000000001"}}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(httphandler.New(controlplane.New(st, nil), &httphandler.Options{Authenticator: keys, OAuth: oauth}))
	defer srv.Close()

	send := func(method, path, body string) map[string]any {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Api-Key", "my-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		if strings.HasPrefix(path, "/v2/auth/wait/") {
			path = "/v2/auth/wait/{auth_id}?timeout=0"
		}
		fmt.Println(method, path, resp.StatusCode)
		return v
	}
	p := send("POST", "/v2/auth/providers", `{"provider_id": "github", "name": "GitHub", "client_id": "my-client",
		"client_secret": "my-secret", "auth_url": "https://github.com/login/oauth/authorize",
		"token_url": "https://github.com/login/oauth/access_token"}`)
	_, shown := p["client_secret"]
	fmt.Println("client_secret shown:", shown)
	a := send("POST", "/v2/auth/authenticate", `{"user_id": "user-1", "provider": "github", "scopes": ["repo"]}`)
	u, _ := url.Parse(a["url"].(string))
	fmt.Println(a["status"], u.Host+u.Path, u.Query().Get("redirect_uri"))
	w := send("GET", "/v2/auth/wait/"+a["auth_id"].(string)+"?timeout=0", "")
	fmt.Println(w["status"], w["token"])
	// Output:
	// POST /v2/auth/providers 200
	// client_secret shown: false
	// POST /v2/auth/authenticate 200
	// pending github.com/login/oauth/authorize https://deploy.example.com/v2/auth/callback/github
	// GET /v2/auth/wait/{auth_id}?timeout=0 200
	// pending <nil>
}

// ExampleOptions_gitHubWebhook enables build_on_push: GitHub signs each
// webhook delivery with the App's webhook secret, and a push to the branch a
// build_on_push deployment tracks creates a revision of the pushed commit.
func ExampleOptions_gitHubWebhook() {
	const tenant = "0194c0de-0000-7000-8000-000000000001"
	secret := []byte("the GitHub App's webhook secret")
	cp := controlplane.New(storemem.New(), nil)
	ctx := context.Background()
	in, _ := cp.CreateIntegration(ctx, tenant, &controlplane.CreateIntegrationRequest{
		InstallationID: new(int64(42)), Name: new("acme")})
	d, err := cp.CreateDeployment(ctx, tenant, &controlplane.CreateDeploymentRequest{
		Name: new("agent"), Source: new(controlplane.SourceGitHub),
		SourceConfig: &controlplane.SourceConfig{IntegrationID: new(in.ID),
			RepoURL: new("https://github.com/acme/agent"), BuildOnPush: new(true)},
		SourceRevisionConfig: &controlplane.SourceRevisionConfig{RepoRef: new("main"), GraphConfigPath: new("langgraph.json")}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(httphandler.New(cp, &httphandler.Options{GitHubWebhookSecret: secret}))
	defer srv.Close()

	deliver := func(body string, signed bool) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/integrations/github/webhook", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		if signed {
			mac := hmac.New(sha256.New, secret)
			mac.Write([]byte(body))
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(b)))
	}
	push := `{"ref": "refs/heads/main", "after": "9fceb02d0ae598e95dc970b74767f19372d61af8",
		"installation": {"id": 42}, "repository": {"clone_url": "https://github.com/acme/agent.git"}}`
	deliver(push, false)
	deliver(push, true)
	deliver(strings.Replace(push, "refs/heads/main", "refs/tags/v1", 1), true)

	d, _ = cp.GetDeployment(ctx, tenant, d.ID)
	rev, _ := cp.GetRevision(ctx, tenant, d.ID, *d.LatestRevisionID)
	fmt.Println(rev.Status, *rev.SourceRevisionConfig.RepoCommitSHA)
	// Output:
	// 401 {"detail":"Missing X-Hub-Signature-256 header."}
	// 202 {"message":"1 revision created.","revisions_created":1}
	// 202 {"message":"0 revisions created.","revisions_created":0}
	// CREATING 9fceb02d0ae598e95dc970b74767f19372d61af8
}
