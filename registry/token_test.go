package registry_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-containerregistry/pkg/v1/random"

	_ "github.com/distribution/distribution/v3/registry/auth/token" // the registry's auth: token

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/registry"
)

// extEnv is a control plane and its realm (a TokenServer on a loopback
// httptest.Server) and an external registry: a second CNCF Distribution
// registry, configured as an operator would (auth: token, realm our
// TokenPath, trusting our key), on its own loopback server.
type extEnv struct {
	*env
	ts    *registry.TokenServer
	realm string // http://host:port of the realm's server
	ext   *registry.External
	host  string // the external registry's host:port
}

const extService = "ext-registry"

// newExtEnv starts both; trust is "rootcertbundle" or "jwks": which file
// the registry trusts the key through.
func newExtEnv(t *testing.T, trust string) *extEnv {
	t.Helper()
	e := &extEnv{env: newEnv(t)}
	// The registry checks the tokens' times against its own clock: the
	// test's clock starts at the real time and moves only forward.
	e.now = time.Now().UTC().Truncate(time.Second)
	ts, err := registry.NewTokenServer(e.tokens, &registry.TokenOptions{Key: registry.SigningKey([]byte("test secret")),
		Service: extService, Clock: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = ts
	mux := http.NewServeMux()
	mux.Handle(registry.TokenPath, ts)
	mux.Handle(registry.JWKSPath, ts)
	realm := httptest.NewServer(mux)
	t.Cleanup(realm.Close)
	// By name: go-containerregistry refuses a realm at a loopback or
	// private IP literal on another host:port than the registry's (SSRF).
	e.realm = strings.Replace(realm.URL, "127.0.0.1", "localhost", 1)

	dir := t.TempDir()
	params := configuration.Parameters{"realm": e.realm + registry.TokenPath, "service": extService, "issuer": ts.Issuer()}
	switch trust {
	case "rootcertbundle":
		cert, err := ts.CertificatePEM()
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "token.crt"), cert)
		params["rootcertbundle"] = filepath.Join(dir, "token.crt")
	case "jwks":
		// As an operator would: saved from GET JWKSPath.
		writeFile(t, filepath.Join(dir, "jwks.json"), get(t, e.realm+registry.JWKSPath))
		params["jwks"] = filepath.Join(dir, "jwks.json")
	}
	cfg := &configuration.Configuration{}
	cfg.Storage = configuration.Storage{"filesystem": configuration.Parameters{"rootdirectory": filepath.Join(dir, "images")}}
	cfg.Auth = configuration.Auth{"token": params}
	app := handlers.NewApp(context.Background(), cfg)
	t.Cleanup(func() { _ = app.Shutdown() })
	srv := httptest.NewServer(app)
	t.Cleanup(srv.Close)
	e.host = strings.TrimPrefix(srv.URL, "http://")
	e.env.host = e.host // push and pull go to the external registry
	if e.ext, err = registry.NewExternal(&registry.ExternalOptions{Host: e.host, Tokens: ts, Insecure: true}); err != nil {
		t.Fatal(err)
	}
	return e
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s %v", u, resp.StatusCode, b, err)
	}
	return b
}

// TestExternalRegistryScope: a CNCF Distribution registry configured with
// token auth against our realm takes a push into the deployment's
// repository prefix with its push token, and refuses one into another
// deployment's or another tenant's repository, an expired token and a
// deleted deployment's token; a pull token pulls and does not push; tags
// resolve to digests through it. Once with the key trusted through the
// certificate bundle, once through the JWKS.
func TestExternalRegistryScope(t *testing.T) {
	for _, trust := range []string{"rootcertbundle", "jwks"} {
		t.Run(trust, func(t *testing.T) {
			e := newExtEnv(t, trust)
			a := e.deployment(t, tenantA, "a", "internal_docker")
			a2 := e.deployment(t, tenantA, "a2", "internal_docker")
			b := e.deployment(t, tenantB, "b", "internal_docker")
			tokA, err := e.tokens.IssuePushToken(e.ctx, tenantA, a)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := e.ext.URL(a), e.host+"/deployments/"+a; got != want {
				t.Errorf("URL = %s, want %s", got, want)
			}
			img, err := random.Image(512, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.push(img, "deployments/"+a+"/agent:v1", tokA.Token); err != nil {
				t.Fatalf("push into its own prefix: %v", err)
			}
			e.refusesForeignPushes(t, img, a, a2, b, tokA.Token)
			e.pullTokenPulls(t, img, tenantA, a, a2)
			wd, _ := img.Digest()

			// The tag resolves to the digest pushed; a tag never pushed and
			// another deployment's repository are ErrImageNotFound.
			repo := e.host + "/deployments/" + a + "/agent"
			if r, err := e.ext.ResolveImage(e.ctx, tenantA, a, repo+":v1"); err != nil || r != repo+"@"+wd.String() {
				t.Errorf("ResolveImage(:v1) = %s, %v; want %s@%s", r, err, repo, wd)
			}
			if r, err := e.ext.ResolveImage(e.ctx, tenantA, a, "ghcr.io/acme/agent:v1"); err != nil || r != "ghcr.io/acme/agent:v1" {
				t.Errorf("ResolveImage of another registry = %s, %v", r, err)
			}
			for _, image := range []string{repo + ":v9", e.host + "/deployments/" + a2 + "/agent:v1"} {
				if _, err := e.ext.ResolveImage(e.ctx, tenantA, a, image); !errors.Is(err, controlplane.ErrImageNotFound) {
					t.Errorf("ResolveImage(%s): %v, want ErrImageNotFound", image, err)
				}
			}

			// A deleted deployment's token is refused at once.
			tokA2, err := e.tokens.IssuePushToken(e.ctx, tenantA, a2)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.cp.DeleteDeployment(e.ctx, tenantA, a2); err != nil {
				t.Fatal(err)
			}
			if err := e.push(img, "deployments/"+a2+"/agent:v1", tokA2.Token); !unauthorized(err) {
				t.Errorf("push with a deleted deployment's token: %v, want 401", err)
			}
			// An hour later (the test's clock) the token is refused.
			e.now = e.now.Add(registry.TokenTTL)
			if err := e.push(img, "deployments/"+a+"/agent:v5", tokA.Token); !unauthorized(err) {
				t.Errorf("push with an expired token: %v, want 401", err)
			}
		})
	}
}

// realmReply is one answer of the realm.
type realmReply struct {
	status int
	header http.Header
	body   map[string]any
}

func (e *extEnv) ask(t *testing.T, method, query, user, password string, form url.Values) realmReply {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.realm+registry.TokenPath+query, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if password != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := realmReply{status: resp.StatusCode, header: resp.Header}
	if err := json.NewDecoder(resp.Body).Decode(&r.body); err != nil {
		t.Fatalf("%s %s: not JSON: %v", method, query, err)
	}
	return r
}

// claims verifies a token the realm issued with the JWKS it publishes
// and answers its claims.
func (e *extEnv) claims(t *testing.T, raw string) (jwt.Claims, []registry.Access) {
	t.Helper()
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(get(t, e.realm+registry.JWKSPath), &set); err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	if len(tok.Headers) != 1 || tok.Headers[0].KeyID != e.ts.KeyID() || len(set.Key(e.ts.KeyID())) != 1 {
		t.Fatalf("kid %v, published keys %v", tok.Headers, set.Keys)
	}
	var std jwt.Claims
	var priv struct {
		Access []registry.Access `json:"access"`
	}
	if err := tok.Claims(set.Key(e.ts.KeyID())[0].Key, &std, &priv); err != nil {
		t.Fatal(err)
	}
	return std, priv.Access
}

// TestRealmWire: the realm's answers on the wire (Docker Registry v2 token
// authentication, and its OAuth2 password grant): token and access_token
// the same JWT, expires_in and issued_at; the JWT's access claim only
// ever the deployment's prefix, with the actions its token allows; 401
// with a Basic challenge and the registry's error list for missing or bad
// credentials; the OAuth2 errors for POST.
func TestRealmWire(t *testing.T) {
	e := newExtEnv(t, "rootcertbundle")
	a := e.deployment(t, tenantA, "a", "internal_docker")
	b := e.deployment(t, tenantB, "b", "internal_docker")
	push, err := e.tokens.IssuePushToken(e.ctx, tenantA, a)
	if err != nil {
		t.Fatal(err)
	}
	pull, err := e.tokens.IssuePullToken(e.ctx, tenantA, a)
	if err != nil {
		t.Fatal(err)
	}
	own, other := "deployments/"+a+"/agent", "deployments/"+b+"/agent"
	q := func(scopes ...string) string {
		v := url.Values{"service": {extService}, "scope": scopes}
		return "?" + v.Encode()
	}
	type want struct {
		status int
		access []registry.Access // for 200
		code   string            // errors[0].code, or the OAuth2 error
	}
	repo := func(name string, actions ...string) registry.Access {
		return registry.Access{Type: "repository", Name: name, Actions: actions}
	}
	for _, tt := range []struct {
		name, method, query, password string
		form                          url.Values
		want                          want
	}{
		{"push and pull of its own repository", "GET", q("repository:" + own + ":push,pull"), push.Token, nil,
			want{200, []registry.Access{repo(own, "push", "pull")}, ""}},
		{"the prefix itself and a nested repository", "GET", q("repository:deployments/"+a+":pull", "repository:"+own+"/x/y:push"), push.Token, nil,
			want{200, []registry.Access{repo("deployments/"+a, "pull"), repo(own+"/x/y", "push")}, ""}},
		{"another tenant's repository: nothing granted", "GET", q("repository:" + other + ":push,pull"), push.Token, nil,
			want{200, []registry.Access{}, ""}},
		{"only what is inside, of a mixed request", "GET", q("repository:"+other+":pull repository:"+own+":pull", "registry:catalog:*"), push.Token, nil,
			want{200, []registry.Access{repo(own, "pull")}, ""}},
		{"* is what the token allows", "GET", q("repository:" + own + ":*"), push.Token, nil,
			want{200, []registry.Access{repo(own, "pull", "push")}, ""}},
		{"delete is never granted", "GET", q("repository:" + own + ":delete,pull"), push.Token, nil,
			want{200, []registry.Access{repo(own, "pull")}, ""}},
		{"a pull token: pull only", "GET", q("repository:" + own + ":push,pull"), pull.Token, nil,
			want{200, []registry.Access{repo(own, "pull")}, ""}},
		{"docker login: no scope", "GET", "?service=" + extService + "&account=oauth2accesstoken", push.Token, nil,
			want{200, []registry.Access{}, ""}},
		{"no service named: ours", "GET", "?scope=repository:" + own + ":pull", push.Token, nil,
			want{200, []registry.Access{repo(own, "pull")}, ""}},
		{"no credentials", "GET", q("repository:" + own + ":pull"), "", nil, want{401, nil, "UNAUTHORIZED"}},
		{"an unknown token", "GET", q("repository:" + own + ":pull"), "dpr_" + strings.Repeat("y", 52), nil, want{401, nil, "UNAUTHORIZED"}},
		{"not a registry token", "GET", q("repository:" + own + ":pull"), "hunter2", nil, want{401, nil, "UNAUTHORIZED"}},
		{"another service", "GET", "?service=docker.io&scope=repository:" + own + ":pull", push.Token, nil, want{400, nil, "DENIED"}},
		{"POST password grant", "POST", "", "", url.Values{"grant_type": {"password"}, "username": {"u"}, "password": {push.Token},
			"service": {extService}, "client_id": {"containerd-client"}, "scope": {"repository:" + own + ":pull,push repository:" + other + ":pull"}},
			want{200, []registry.Access{repo(own, "pull", "push")}, ""}},
		{"POST bad password", "POST", "", "", url.Values{"grant_type": {"password"}, "username": {"u"}, "password": {"dpr_nope"},
			"service": {extService}, "client_id": {"c"}}, want{400, nil, "invalid_grant"}},
		{"POST refresh token", "POST", "", "", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"r"}, "service": {extService}},
			want{400, nil, "unsupported_grant_type"}},
		{"POST without grant_type", "POST", "", "", url.Values{"password": {push.Token}}, want{400, nil, "invalid_request"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.ask(t, tt.method, tt.query, "oauth2accesstoken", tt.password, tt.form)
			if r.status != tt.want.status {
				t.Fatalf("status %d, want %d: %v", r.status, tt.want.status, r.body)
			}
			if r.header.Get("Content-Type") != "application/json" || r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("headers %v", r.header)
			}
			if r.status != 200 {
				code := r.body["error"]
				if errs, ok := r.body["errors"].([]any); ok && len(errs) == 1 {
					code = errs[0].(map[string]any)["code"]
				}
				if code != tt.want.code {
					t.Errorf("error %v, want %s", r.body, tt.want.code)
				}
				if r.status == 401 && r.header.Get("WWW-Authenticate") != `Basic realm="deployplane registry"` {
					t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
				return
			}
			tok, _ := r.body["token"].(string)
			if tok == "" || r.body["access_token"] != tok {
				t.Fatalf("token and access_token: %v", r.body)
			}
			if r.body["expires_in"] != float64(registry.DefaultBearerTTL/time.Second) || r.body["issued_at"] != e.now.Format(time.RFC3339) {
				t.Errorf("expires_in %v issued_at %v, want %v and %s", r.body["expires_in"], r.body["issued_at"],
					registry.DefaultBearerTTL/time.Second, e.now.Format(time.RFC3339))
			}
			std, access := e.claims(t, tok)
			if std.Issuer != registry.DefaultIssuer || len(std.Audience) != 1 || std.Audience[0] != extService ||
				!std.IssuedAt.Time().Equal(e.now) || !std.Expiry.Time().Equal(e.now.Add(registry.DefaultBearerTTL)) {
				t.Errorf("claims %+v", std)
			}
			diffAccess(t, tt.want.access, access)
		})
	}
}

func diffAccess(t *testing.T, want, got []registry.Access) {
	t.Helper()
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	if string(w) != string(g) {
		t.Errorf("access %s, want %s", g, w)
	}
}

// TestBearerEndsWithItsToken: a bearer token never outlives the registry
// token it was issued for.
func TestBearerEndsWithItsToken(t *testing.T) {
	e := newExtEnv(t, "jwks")
	a := e.deployment(t, tenantA, "a", "internal_docker")
	tok, err := e.tokens.IssuePushToken(e.ctx, tenantA, a)
	if err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(registry.TokenTTL - 2*time.Minute)
	bt, err := e.ts.Issue(e.ctx, tok.Token, "", []string{"repository:deployments/" + a + ":pull"})
	if err != nil {
		t.Fatal(err)
	}
	if !bt.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Errorf("bearer expires %s, its token %s", bt.ExpiresAt, tok.ExpiresAt)
	}
}

// TestSigningKeys: PEM keys of every kind the registry accepts, the same
// key derived from the same secret, and keys it cannot use refused.
func TestSigningKeys(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(ec)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	for _, p := range []*pem.Block{{Type: "PRIVATE KEY", Bytes: der}, {Type: "EC PRIVATE KEY", Bytes: sec1}} {
		k, err := registry.ParseSigningKey(pem.EncodeToMemory(p))
		if err != nil {
			t.Fatalf("%s: %v", p.Type, err)
		}
		if _, err := registry.NewTokenServer(nil, &registry.TokenOptions{Key: k, Service: "s"}); err != nil {
			t.Errorf("%s: %v", p.Type, err)
		}
	}
	ed := registry.SigningKey([]byte("s"))
	edDer, _ := x509.MarshalPKCS8PrivateKey(ed)
	k, err := registry.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edDer}))
	if err != nil || !ed.Equal(k) || !ed.Equal(registry.SigningKey([]byte("s"))) || ed.Equal(registry.SigningKey([]byte("t"))) {
		t.Errorf("Ed25519 round trip or derivation: %v", err)
	}
	small, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	smallDer, _ := x509.MarshalPKCS8PrivateKey(small)
	for _, bad := range [][]byte{nil, []byte("not pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: smallDer}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("garbage")})} {
		if _, err := registry.ParseSigningKey(bad); err == nil {
			t.Errorf("ParseSigningKey(%q) succeeded", bad)
		}
	}
	if _, err := registry.NewTokenServer(nil, &registry.TokenOptions{Key: ed}); err == nil {
		t.Error("NewTokenServer without a service succeeded")
	}
}

// FuzzScopes: whatever scopes a client asks for, a bearer token grants
// only repositories in the deployment's prefix, only pull (and push for
// a push grant), each repository once, and never an empty action list.
func FuzzScopes(f *testing.F) {
	for _, s := range []string{"repository:deployments/d/agent:push,pull", "repository:deployments/d:*", "registry:catalog:*",
		"repository:deployments/dx/a:pull repository:deployments/d/a:delete,pull", "repository::", ":::", "repository:a:b:c:pull",
		"repository:deployments/d/a:pull repository:deployments/d/a:push"} {
		f.Add(s, true)
	}
	ts, err := registry.NewTokenServer(nil, &registry.TokenOptions{Key: registry.SigningKey([]byte("f")), Service: "s"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, scope string, push bool) {
		g := &registry.Grant{DeploymentID: "d", Repository: "deployments/d", Push: push}
		b, err := ts.Mint(g, strings.Split(scope, "\n"))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range b.Access {
			if a.Type != "repository" || seen[a.Name] || len(a.Actions) == 0 {
				t.Fatalf("access %+v of %q", b.Access, scope)
			}
			seen[a.Name] = true
			if a.Name != "deployments/d" && !strings.HasPrefix(a.Name, "deployments/d/") {
				t.Fatalf("granted %s outside the prefix, for %q", a.Name, scope)
			}
			for _, act := range a.Actions {
				if act != "pull" && (act != "push" || !push) {
					t.Fatalf("granted %s on %s (push grant %v), for %q", act, a.Name, push, scope)
				}
			}
		}
	})
}
