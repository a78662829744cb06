package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/registry"
	"github.com/deployplane/deployplane/storemem"
)

const (
	tenantA = "0b7f3c52-5d8e-4e33-9c1a-6f0e8a1d2c3b"
	tenantB = "9a6b1c2d-3e4f-4a5b-8c7d-0e1f2a3b4c5d"
)

// env is a control plane (with a clock the test moves) and a registry
// served on a loopback httptest.Server, filesystem storage in a temp dir.
type env struct {
	ctx context.Context
	cp  *controlplane.ControlPlane
	// tokens are the registry tokens of cp's deployments, on the same clock.
	tokens *registry.TokenStore
	reg    *registry.Registry
	host   string
	dir    string // the registry's storage
	now    time.Time
	// later moves the registry's clock (Options.Clock) ahead of the
	// machine's.
	later time.Duration
}

// lateTokens lets the registry be built before the ControlPlane that
// resolves images through it.
type lateTokens struct{ *registry.TokenStore }

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, &registry.Options{})
}

// newEnvWith is newEnv with opts (Host and Dir are the env's).
func newEnvWith(t *testing.T, opts *registry.Options) *env {
	t.Helper()
	e := &env{ctx: context.Background(), now: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewUnstartedServer(nil)
	e.host = srv.Listener.Addr().String()
	e.dir = t.TempDir()
	opts.Host, opts.Dir = e.host, e.dir
	if opts.Clock == nil {
		// The collector's clock: the storage's times are the machine's,
		// and a test moves the registry's clock past the grace by hand.
		opts.Clock = func() time.Time { return time.Now().Add(e.later) }
	}
	tokens := &lateTokens{}
	if opts.Ledger == nil {
		opts.Ledger = tokens
	}
	reg, err := registry.New(e.ctx, tokens, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	e.reg = reg
	e.cp = controlplane.New(st, &controlplane.Options{Clock: func() time.Time { return e.now }, Images: reg})
	e.tokens = registry.NewTokenStore(e.cp, &registry.TokenStoreOptions{Clock: func() time.Time { return e.now }})
	tokens.TokenStore = e.tokens
	srv.Config.Handler = reg
	srv.Start()
	t.Cleanup(srv.Close)
	return e
}

func (e *env) deployment(t *testing.T, tenant, name, source string) string {
	t.Helper()
	body := `{"name": "` + name + `", "source": "` + source + `"}`
	if source == "external_docker" {
		body = `{"name": "` + name + `", "source": "external_docker", "source_revision_config": {"image_uri": "r/x:1"}}`
	}
	var req controlplane.CreateDeploymentRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	d, err := e.cp.CreateDeployment(e.ctx, tenant, &req)
	if err != nil {
		t.Fatal(err)
	}
	return d.ID
}

func (e *env) push(img v1.Image, repo, token string) error {
	ref, err := name.ParseReference(e.host+"/"+repo, name.Insecure)
	if err != nil {
		return err
	}
	var opts []remote.Option
	if token != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: "oauth2accesstoken", Password: token}))
	}
	return remote.Write(ref, img, opts...)
}

// pushRandom pushes a random image as deployments/<dep>/<ref> with a push
// token of the deployment and answers its digest.
func (e *env) pushRandom(t *testing.T, tenant, dep, ref string) v1.Hash {
	t.Helper()
	tok, err := e.tokens.IssuePushToken(e.ctx, tenant, dep)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(256, 1)
	if err := e.push(img, "deployments/"+dep+"/"+ref, tok.Token); err != nil {
		t.Fatal(err)
	}
	dg, _ := img.Digest()
	return dg
}

func (e *env) pull(repo, token string) (v1.Image, error) {
	ref, err := name.ParseReference(e.host+"/"+repo, name.Insecure)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(ref, remote.WithAuth(&authn.Basic{Username: "any", Password: token}))
	if err != nil {
		return nil, err
	}
	_, err = img.RawManifest()
	return img, err
}

func unauthorized(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}

// TestPushScope: a push token pushes into its deployment's repository
// prefix and nowhere else: not another deployment's of its tenant, not
// another tenant's; no credential, an unknown one, an expired one and a
// pull token cannot push; a pull token pulls.
func TestPushScope(t *testing.T) {
	e := newEnv(t)
	a := e.deployment(t, tenantA, "a", "internal_docker")
	a2 := e.deployment(t, tenantA, "a2", "internal_docker")
	b := e.deployment(t, tenantB, "b", "internal_docker")
	tokA, err := e.tokens.IssuePushToken(e.ctx, tenantA, a)
	if err != nil {
		t.Fatal(err)
	}
	if tokA.Repository != "deployments/"+a || e.reg.URL(a) != e.host+"/deployments/"+a {
		t.Fatalf("repository %s, url %s", tokA.Repository, e.reg.URL(a))
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
	// An hour later the token is refused.
	e.now = e.now.Add(registry.TokenTTL)
	if err := e.push(img, "deployments/"+a+"/agent:v5", tokA.Token); !unauthorized(err) {
		t.Errorf("push with an expired token: %v, want 401", err)
	}
}

// TestPushTokenRules: only internal_docker deployments get push tokens,
// with the contract's sentence; a deployment being deleted gets none and
// its tokens stop working.
func TestPushTokenRules(t *testing.T) {
	e := newEnv(t)
	ext := e.deployment(t, tenantA, "ext", "external_docker")
	_, err := e.tokens.IssuePushToken(e.ctx, tenantA, ext)
	if !errors.Is(err, apierr.ErrInvalidState) || err.Error() != "push token is only available for 'internal_docker' source deployments" {
		t.Errorf("push token of external_docker: %v", err)
	}
	var nf *apierr.NotFoundError
	if _, err := e.tokens.IssuePushToken(e.ctx, tenantB, ext); !errors.As(err, &nf) {
		t.Errorf("push token of another tenant's deployment: %v, want not found", err)
	}
	a := e.deployment(t, tenantA, "a", "internal_docker")
	tok, err := e.tokens.IssuePushToken(e.ctx, tenantA, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cp.DeleteDeployment(e.ctx, tenantA, a); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tokens.CheckRegistryToken(e.ctx, tok.Token); !errors.Is(err, registry.ErrTokenInvalid) {
		t.Errorf("token of a deployment being deleted: %v, want ErrTokenInvalid", err)
	}
	if _, err := e.tokens.IssuePushToken(e.ctx, tenantA, a); err == nil {
		t.Error("a push token was issued for a deployment being deleted")
	}
}

// TestResolveImage: a tag of the deployment's repository resolves to the
// digest pushed; a digest that was pushed stays; unknown tags, digests
// never pushed and another deployment's repository are ErrImageNotFound;
// images of other registries are kept as they are.
func TestResolveImage(t *testing.T) {
	e := newEnv(t)
	a := e.deployment(t, tenantA, "a", "internal_docker")
	b := e.deployment(t, tenantA, "b", "internal_docker")
	dg := e.pushRandom(t, tenantA, a, "agent:v1")
	repo := e.host + "/deployments/" + a + "/agent"
	for _, tt := range []struct{ image, want string }{
		{repo + ":v1", repo + "@" + dg.String()},
		{repo + "@" + dg.String(), repo + "@" + dg.String()},
		{"ghcr.io/acme/agent:v1", "ghcr.io/acme/agent:v1"},
		{"agent:v1", "agent:v1"},
	} {
		got, err := e.reg.ResolveImage(e.ctx, tenantA, a, tt.image)
		if err != nil || got != tt.want {
			t.Errorf("ResolveImage(%s) = %s, %v; want %s", tt.image, got, err, tt.want)
		}
	}
	for _, image := range []string{repo + ":v2", repo, repo + "@sha256:" + strings.Repeat("0", 64), e.host + "/deployments/" + b + "/agent:v1"} {
		if _, err := e.reg.ResolveImage(e.ctx, tenantA, a, image); !errors.Is(err, controlplane.ErrImageNotFound) {
			t.Errorf("ResolveImage(%s): %v, want ErrImageNotFound", image, err)
		}
	}
	// As the control plane's resolver, a PATCH by tag records the digest.
	if _, err := e.reg.ResolveImage(e.ctx, tenantA, b, repo+":v1"); !errors.Is(err, controlplane.ErrImageNotFound) {
		t.Errorf("deployment b resolving a's image: %v, want ErrImageNotFound", err)
	}
}

// TestNewNeedsStorageAndHost: the options the registry cannot run without.
func TestNewNeedsStorageAndHost(t *testing.T) {
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	for _, o := range []*registry.Options{nil, {Dir: t.TempDir()}, {Host: "127.0.0.1:1"}} {
		if r, err := registry.New(context.Background(), registry.NewTokenStore(cp, nil), o); err == nil {
			_ = r.Close()
			t.Errorf("New(%+v) succeeded", o)
		}
	}
}

// TestS3NeedsTheTag: Options.S3 in a program built without the s3 build
// tag is refused by New with ErrS3NotBuilt (the driver is not in the
// binary); with the tag (go test -tags s3) New gets past that check.
func TestS3NeedsTheTag(t *testing.T) {
	st := storemem.New()
	defer st.Close()
	cp := controlplane.New(st, nil)
	o := &registry.Options{Host: "127.0.0.1:1", S3: &registry.S3{Bucket: "images", Region: "eu-west-1", Endpoint: "http://127.0.0.1:1",
		AccessKey: "a", SecretKey: "s"}}
	r, err := registry.New(context.Background(), registry.NewTokenStore(cp, nil), o)
	if r != nil {
		defer r.Close()
	}
	switch {
	case registry.S3Built && errors.Is(err, registry.ErrS3NotBuilt):
		t.Errorf("New with the s3 tag: %v", err)
	case !registry.S3Built && !errors.Is(err, registry.ErrS3NotBuilt):
		t.Errorf("New without the s3 tag: %v, want ErrS3NotBuilt", err)
	case !registry.S3Built && !strings.Contains(err.Error(), "build with -tags s3"):
		t.Errorf("New without the s3 tag: %v, want the tag named", err)
	}
}

// TestParseS3URL: the -registry-storage form.
func TestParseS3URL(t *testing.T) {
	s, err := registry.ParseS3URL("s3://images/prod?region=eu-west-1&endpoint=http://127.0.0.1:9000")
	if err != nil || *s != (registry.S3{Bucket: "images", RootDirectory: "/prod", Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000"}) {
		t.Errorf("ParseS3URL: %+v, %v", s, err)
	}
	for _, bad := range []string{"images", "s3:///x", "gs://b"} {
		if _, err := registry.ParseS3URL(bad); err == nil {
			t.Errorf("ParseS3URL(%s) succeeded", bad)
		}
	}
}

// refusesForeignPushes checks that tokA, a push token of deployment a of
// tenant A, pushes nowhere but into a's prefix (not a2's, another of A's
// deployments, nor b's, a deployment of tenant B), that b's push token does
// not push into a's, and that no credential or an unknown token pushes
// nowhere: each is a 401 or a 403.
func (e *env) refusesForeignPushes(t *testing.T, img v1.Image, a, a2, b, tokA string) {
	t.Helper()
	tokB, err := e.tokens.IssuePushToken(e.ctx, tenantB, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ what, repo, token string }{
		{"another deployment of the tenant", "deployments/" + a2 + "/agent:v1", tokA},
		{"another tenant's deployment", "deployments/" + b + "/agent:v1", tokA},
		{"a repository outside every prefix", "agent:v1", tokA},
		{"a prefix that only starts like it", "deployments/" + a + "x/agent:v1", tokA},
		{"tenant B's token into A's repository", "deployments/" + a + "/agent:v3", tokB.Token},
		{"no credential", "deployments/" + a + "/agent:v2", ""},
		{"an unknown token", "deployments/" + a + "/agent:v2", "dpr_" + strings.Repeat("x", 52)},
	} {
		if err := e.push(img, tt.repo, tt.token); !unauthorized(err) {
			t.Errorf("push into %s (%s): %v, want 401 or 403", tt.repo, tt.what, err)
		}
	}
}

// pullTokenPulls checks that a pull token of deployment a pulls img, which
// was pushed as a's agent:v1, but pushes nothing and pulls nothing of a2.
func (e *env) pullTokenPulls(t *testing.T, img v1.Image, tenant, a, a2 string) {
	t.Helper()
	pull, err := e.tokens.IssuePullToken(e.ctx, tenant, a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.pull("deployments/"+a+"/agent:v1", pull.Token)
	if err != nil {
		t.Fatalf("pull with a pull token: %v", err)
	}
	gd, _ := got.Digest()
	wd, _ := img.Digest()
	if gd != wd {
		t.Errorf("pulled %s, pushed %s", gd, wd)
	}
	if err := e.push(img, "deployments/"+a+"/agent:v4", pull.Token); !unauthorized(err) {
		t.Errorf("push with a pull token: %v, want 401 or 403", err)
	}
	if _, err := e.pull("deployments/"+a2+"/agent:v1", pull.Token); !unauthorized(err) {
		t.Errorf("pull of another deployment's image with its pull token: %v, want 401 or 403", err)
	}
}

// TestResolveImageOtherNames: every other spelling of the registry's
// address is the registry: another deployment's repository named through
// it is refused, whichever tenant asks, and the deployment's own image
// named through it is recorded under Host.
func TestResolveImageOtherNames(t *testing.T) {
	e := newEnv(t)
	a := e.deployment(t, tenantA, "a", "internal_docker")
	b := e.deployment(t, tenantB, "b", "internal_docker")
	dg := e.pushRandom(t, tenantA, a, "agent:v1")
	_, port, _ := strings.Cut(e.host, ":")
	for _, host := range []string{"localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "127.0.0.2:" + port,
		"0.0.0.0:" + port, "[0:0::1]:" + port} {
		for _, ref := range []string{":v1", "@" + dg.String()} {
			image := host + "/deployments/" + a + "/agent" + ref
			if got, err := e.reg.ResolveImage(e.ctx, tenantB, b, image); !errors.Is(err, controlplane.ErrImageNotFound) {
				t.Errorf("tenant B resolving %s = %s, %v; want ErrImageNotFound", image, got, err)
			}
			want := e.host + "/deployments/" + a + "/agent@" + dg.String()
			if got, err := e.reg.ResolveImage(e.ctx, tenantA, a, image); err != nil || got != want {
				t.Errorf("tenant A resolving %s = %s, %v; want %s", image, got, err, want)
			}
		}
	}
}

// TestNamesMatch: which domains are one registry's names.
func TestNamesMatch(t *testing.T) {
	for _, tt := range []struct {
		host    string
		aliases []string
		domain  string
		want    bool
	}{
		{"127.0.0.1:8126", nil, "127.0.0.1:8126", true},
		{"127.0.0.1:8126", nil, "localhost:8126", true},
		{"127.0.0.1:8126", nil, "[::1]:8126", true},
		{"127.0.0.1:8126", nil, "127.1.2.3:8126", true},
		{"127.0.0.1:8126", nil, "localhost:8127", false},
		{"127.0.0.1:8126", nil, "localhost", false},
		{"127.0.0.1:8126", nil, "10.0.0.1:8126", false},
		{"registry.example.com", nil, "Registry.Example.COM.", true},
		{"registry.example.com", nil, "registry.example.com:443", true},
		{"registry.example.com", nil, "registry.example.com:5000", false},
		{"registry.example.com", nil, "localhost:443", false},
		{"registry.example.com", []string{"0.0.0.0:8126"}, "localhost:8126", true},
		{"registry.example.com", []string{"10.1.2.3:8126"}, "10.1.2.3:8126", true},
		{"registry.example.com", []string{"[2001:db8::1]:8126"}, "[2001:0db8:0:0::1]:8126", true},
		{"registry.example.com", []string{"10.1.2.3:8126"}, "10.1.2.4:8126", false},
		{"registry.example.com", nil, "", false},
	} {
		if got := registry.NewNames(tt.host, tt.aliases...).Match(tt.domain); got != tt.want {
			t.Errorf("NewNames(%q, %q).Match(%q) = %v, want %v", tt.host, tt.aliases, tt.domain, got, tt.want)
		}
	}
}

// TestListenAliases: a listener on every address is reached by the
// loopback names, the host name and each interface address.
func TestListenAliases(t *testing.T) {
	got := registry.ListenAliases("0.0.0.0:8126", "builder")
	n := registry.NewNames("registry.example.com", got...)
	for _, d := range []string{"localhost:8126", "builder:8126", "127.0.0.1:8126"} {
		if !n.Match(d) {
			t.Errorf("ListenAliases(0.0.0.0:8126) = %q: %s is not among them", got, d)
		}
	}
	if n := registry.NewNames("registry.example.com", registry.ListenAliases("10.1.2.3:8126", "builder")...); n.Match("localhost:8126") || n.Match("builder:8126") {
		t.Error("a listener on one address answers to the loopback names or the host name")
	}
}
