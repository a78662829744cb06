package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/wiretime"
)

func ptr[T any](v T) *T { return &v }

func validProvider() oauthflow.NewProvider {
	return oauthflow.NewProvider{
		ProviderID:   "github",
		Name:         "GitHub",
		ClientID:     "Iv1.0123",
		ClientSecret: "very-secret",
		AuthURL:      "https://github.com/login/oauth/authorize",
		TokenURL:     "https://github.com/login/oauth/access_token",
		UsesPKCE:     true,
		ProviderType: ptr("github"),
	}
}

func TestProviderLifecycle(t *testing.T) {
	e := newEnv(t, func(o *oauthflow.Options) { o.NewID = func() string { return "0194f3a0-0000-7000-8000-0000000000ff" } })
	ctx := context.Background()
	created, err := e.svc.CreateProvider(ctx, tenantA, validProvider())
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	want := oauthflow.Provider{
		ID:                  "0194f3a0-0000-7000-8000-0000000000ff",
		OrganizationID:      tenantA,
		ProviderID:          "github",
		Name:                "GitHub",
		ClientID:            "Iv1.0123",
		AuthURL:             "https://github.com/login/oauth/authorize",
		TokenURL:            "https://github.com/login/oauth/access_token",
		UsesPKCE:            true,
		CodeChallengeMethod: ptr("S256"),
		CreatedAt:           wiretime.New(now),
		UpdatedAt:           wiretime.New(now),
		ProviderType:        ptr("github"),
	}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("CreateProvider (-want +got):\n%s", diff)
	}
	got, err := e.svc.GetProvider(ctx, tenantA, "github")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GetProvider (-want +got):\n%s", diff)
	}

	_, err = e.svc.CreateProvider(ctx, tenantA, validProvider())
	if !errors.Is(err, apierr.ErrConflict) || err.Error() != "An OAuth provider with provider_id 'github' already exists." {
		t.Errorf("duplicate create: %v, want ErrConflict", err)
	}
	if _, err := e.svc.CreateProvider(ctx, tenantB, validProvider()); err != nil {
		t.Errorf("same provider_id in another tenant: %v", err)
	}

	e.clock.Advance(time.Minute)
	patched, err := e.svc.UpdateProvider(ctx, tenantA, "github", oauthflow.ProviderPatch{
		ProviderID: ptr("github"), // unchanged: allowed
		Name:       ptr("GitHub Enterprise"),
		UsesPKCE:   ptr(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	want.Name, want.UsesPKCE, want.CodeChallengeMethod, want.UpdatedAt = "GitHub Enterprise", false, nil, wiretime.New(e.clock.Now())
	if diff := cmp.Diff(want, patched); diff != "" {
		t.Errorf("UpdateProvider (-want +got):\n%s", diff)
	}

	other := validProvider()
	other.ProviderID = "gitlab"
	if _, err := e.svc.CreateProvider(ctx, tenantA, other); err != nil {
		t.Fatal(err)
	}
	list, err := e.svc.ListProviders(ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range list {
		ids = append(ids, p.OrganizationID+"/"+p.ProviderID)
	}
	if diff := cmp.Diff([]string{tenantA + "/github", tenantA + "/gitlab"}, ids); diff != "" {
		t.Errorf("ListProviders (-want +got):\n%s", diff)
	}

	if err := e.svc.DeleteProvider(ctx, tenantA, "github"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GetProvider(ctx, tenantA, "github"); !errors.Is(err, apierr.ErrNotFound) || err.Error() != "OAuth provider github not found." {
		t.Errorf("GetProvider after delete: %v", err)
	}
	if err := e.svc.DeleteProvider(ctx, tenantA, "github"); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	if _, err := e.svc.GetProvider(ctx, tenantB, "github"); err != nil {
		t.Errorf("tenant B's provider went with tenant A's: %v", err)
	}
}

func TestEmptyProviderListIsNotNil(t *testing.T) {
	e := newEnv(t, nil)
	list, err := e.svc.ListProviders(context.Background(), tenantA)
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("ListProviders = %#v, %v; want an empty non-nil slice", list, err)
	}
}

func TestProviderIsolation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if _, err := e.svc.CreateProvider(ctx, tenantA, validProvider()); err != nil {
		t.Fatal(err)
	}
	if list, err := e.svc.ListProviders(ctx, tenantB); err != nil || len(list) != 0 {
		t.Errorf("tenant B lists %v, %v", list, err)
	}
	if _, err := e.svc.GetProvider(ctx, tenantB, "github"); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("tenant B gets A's provider: %v", err)
	}
	if _, err := e.svc.UpdateProvider(ctx, tenantB, "github", oauthflow.ProviderPatch{Name: ptr("x")}); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("tenant B patches A's provider: %v", err)
	}
	if err := e.svc.DeleteProvider(ctx, tenantB, "github"); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("tenant B deletes A's provider: %v", err)
	}
	if _, err := e.svc.GetProvider(ctx, tenantA, "github"); err != nil {
		t.Errorf("tenant A's provider: %v", err)
	}
}

type problem struct {
	Loc  string
	Type string
}

func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *apierr.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	var out []problem
	for _, p := range ve.Problems {
		var loc []string
		for _, l := range p.Loc {
			loc = append(loc, strings.Trim(mustJSON(t, l), `"`))
		}
		if p.Msg == "" {
			t.Errorf("problem at %v has no message", p.Loc)
		}
		out = append(out, problem{strings.Join(loc, "."), p.Type})
	}
	return out
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCreateProviderValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*oauthflow.NewProvider)
		want   []problem
	}{
		{"valid", func(*oauthflow.NewProvider) {}, nil},
		{"everything missing", func(p *oauthflow.NewProvider) { *p = oauthflow.NewProvider{} }, []problem{
			{"body.provider_id", "missing"}, {"body.name", "missing"}, {"body.client_id", "missing"},
			{"body.auth_url", "missing"}, {"body.token_url", "missing"},
		}},
		{"public client without secret", func(p *oauthflow.NewProvider) { p.ClientSecret = "" }, nil},
		{"provider_id pattern", func(p *oauthflow.NewProvider) { p.ProviderID = "-github" }, []problem{{"body.provider_id", "string_pattern_mismatch"}}},
		{"provider_id slash", func(p *oauthflow.NewProvider) { p.ProviderID = "a/b" }, []problem{{"body.provider_id", "string_pattern_mismatch"}}},
		{"provider_id too long", func(p *oauthflow.NewProvider) { p.ProviderID = strings.Repeat("a", 64) }, []problem{{"body.provider_id", "string_too_long"}}},
		{"provider_id longest", func(p *oauthflow.NewProvider) { p.ProviderID = strings.Repeat("a", 63) }, nil},
		{"name too long", func(p *oauthflow.NewProvider) { p.Name = strings.Repeat("é", 256) }, []problem{{"body.name", "string_too_long"}}},
		{"http auth_url", func(p *oauthflow.NewProvider) { p.AuthURL = "http://github.com/authorize" }, []problem{{"body.auth_url", "url_scheme"}}},
		// Without the operator's allowance: https only, and not to an
		// address of this server or its private network.
		{"http loopback", func(p *oauthflow.NewProvider) {
			p.AuthURL, p.TokenURL = "http://localhost:9000/a", "http://127.8.9.10/t"
		}, []problem{{"body.auth_url", "url_scheme"}, {"body.token_url", "url_scheme"}}},
		{"http ::1", func(p *oauthflow.NewProvider) { p.TokenURL = "http://[::1]:8080/token" }, []problem{{"body.token_url", "url_scheme"}}},
		{"https loopback", func(p *oauthflow.NewProvider) { p.TokenURL = "https://127.0.0.1:8443/token" }, []problem{{"body.token_url", "url_host"}}},
		{"https localhost", func(p *oauthflow.NewProvider) { p.TokenURL = "https://localhost/token" }, []problem{{"body.token_url", "url_host"}}},
		{"https mapped loopback", func(p *oauthflow.NewProvider) { p.TokenURL = "https://[::ffff:127.0.0.1]/token" }, []problem{{"body.token_url", "url_host"}}},
		{"https metadata", func(p *oauthflow.NewProvider) { p.TokenURL = "https://169.254.169.254/latest/meta-data" }, []problem{{"body.token_url", "url_host"}}},
		{"https private", func(p *oauthflow.NewProvider) { p.AuthURL = "https://10.1.2.3/authorize" }, []problem{{"body.auth_url", "url_host"}}},
		{"https private v6", func(p *oauthflow.NewProvider) { p.TokenURL = "https://[fd00::1]/token" }, []problem{{"body.token_url", "url_host"}}},
		{"https CGNAT", func(p *oauthflow.NewProvider) { p.TokenURL = "https://100.64.0.1/token" }, []problem{{"body.token_url", "url_host"}}},
		{"https public literal", func(p *oauthflow.NewProvider) { p.TokenURL = "https://140.82.112.3/token" }, nil},
		{"http 127 lookalike", func(p *oauthflow.NewProvider) { p.TokenURL = "http://127.0.0.1.nip.io/token" }, []problem{{"body.token_url", "url_scheme"}}},
		{"http localhost lookalike", func(p *oauthflow.NewProvider) { p.TokenURL = "http://localhost.example.com/token" }, []problem{{"body.token_url", "url_scheme"}}},
		{"ftp", func(p *oauthflow.NewProvider) { p.TokenURL = "ftp://github.com/token" }, []problem{{"body.token_url", "url_scheme"}}},
		{"relative", func(p *oauthflow.NewProvider) { p.TokenURL = "/token" }, []problem{{"body.token_url", "url_parsing"}}},
		{"no host", func(p *oauthflow.NewProvider) { p.TokenURL = "https:///token" }, []problem{{"body.token_url", "url_parsing"}}},
		{"unparsable", func(p *oauthflow.NewProvider) { p.AuthURL = "https://exa mple.com/%zz" }, []problem{{"body.auth_url", "url_parsing"}}},
		{"credentials", func(p *oauthflow.NewProvider) { p.TokenURL = "https://user:pw@github.com/token" }, []problem{{"body.token_url", "url_parsing"}}},
		{"fragment", func(p *oauthflow.NewProvider) { p.AuthURL = "https://github.com/a#x" }, []problem{{"body.auth_url", "url_parsing"}}},
		{"query kept", func(p *oauthflow.NewProvider) { p.AuthURL = "https://login.example.com/authorize?tenant=x" }, nil},
		{"method S256", func(p *oauthflow.NewProvider) { p.CodeChallengeMethod = ptr("S256") }, nil},
		{"method plain", func(p *oauthflow.NewProvider) { p.CodeChallengeMethod = ptr("plain") }, []problem{{"body.code_challenge_method", "literal_error"}}},
		{"method without pkce", func(p *oauthflow.NewProvider) { p.UsesPKCE, p.CodeChallengeMethod = false, ptr("S256") }, []problem{{"body.code_challenge_method", "not_applicable"}}},
		{"two problems", func(p *oauthflow.NewProvider) { p.Name, p.TokenURL = "", "http://example.com" }, []problem{{"body.name", "missing"}, {"body.token_url", "url_scheme"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			in := validProvider()
			tc.change(&in)
			_, err := e.svc.CreateProvider(context.Background(), tenantA, in)
			if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if tc.want != nil && countRecords(t, e.st, "oauthflow.providers") != 0 {
				t.Errorf("an invalid provider was stored")
			}
		})
	}
}

// Hosts the operator allows (Options.Egress) may be registered with http
// and at any address; the allowance is exact (host, or host and port).
func TestProviderURLsOfAllowedHosts(t *testing.T) {
	e := newEnv(t, func(o *oauthflow.Options) { o.Egress = allowing(t, "127.0.0.1:9000", "sso.corp.example", "::1") })
	for _, tc := range []struct {
		url  string
		want []problem
	}{
		{"http://127.0.0.1:9000/token", nil},
		{"https://127.0.0.1:9000/token", nil},
		{"http://sso.corp.example/token", nil},
		{"http://SSO.corp.example:8080/token", nil},
		{"http://[::1]:1234/token", nil},
		{"http://127.0.0.1:9001/token", []problem{{"body.token_url", "url_scheme"}}},
		{"https://127.0.0.1:9001/token", []problem{{"body.token_url", "url_host"}}},
		{"http://localhost:9000/token", []problem{{"body.token_url", "url_scheme"}}},
		{"http://id.sso.corp.example/token", []problem{{"body.token_url", "url_scheme"}}},
	} {
		in := validProvider()
		in.TokenURL = tc.url
		_, err := e.svc.CreateProvider(context.Background(), tenantA, in)
		if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
			t.Errorf("token_url %s: problems (-want +got):\n%s", tc.url, diff)
		}
		if err == nil {
			if err := e.svc.DeleteProvider(context.Background(), tenantA, in.ProviderID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestUpdateProviderValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		patch oauthflow.ProviderPatch
		want  []problem
	}{
		{"empty patch", oauthflow.ProviderPatch{}, nil},
		{"provider_id changed", oauthflow.ProviderPatch{ProviderID: ptr("gitlab")}, []problem{{"body.provider_id", "immutable_field"}}},
		{"empty name", oauthflow.ProviderPatch{Name: ptr("")}, []problem{{"body.name", "string_too_short"}}},
		{"bad url and id", oauthflow.ProviderPatch{ProviderID: ptr("x"), TokenURL: ptr("http://x.org")}, []problem{{"body.token_url", "url_scheme"}, {"body.provider_id", "immutable_field"}}},
		{"method while pkce off", oauthflow.ProviderPatch{UsesPKCE: ptr(false), CodeChallengeMethod: ptr("S256")}, []problem{{"body.code_challenge_method", "not_applicable"}}},
		{"clear secret", oauthflow.ProviderPatch{ClientSecret: ptr(oauthflow.Secret(""))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			ctx := context.Background()
			before, err := e.svc.CreateProvider(ctx, tenantA, validProvider())
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.svc.UpdateProvider(ctx, tenantA, "github", tc.patch)
			if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			after, err := e.svc.GetProvider(ctx, tenantA, "github")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if diff := cmp.Diff(before, after); diff != "" {
					t.Errorf("a rejected patch changed the provider (-before +after):\n%s", diff)
				}
			}
		})
	}
}

func TestPatchedSecretIsUsed(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.prov.SetClientSecret("rotated-secret")
	if _, err := e.svc.UpdateProvider(ctx, tenantA, "fake", oauthflow.ProviderPatch{ClientSecret: ptr(oauthflow.Secret("rotated-secret"))}); err != nil {
		t.Fatal(err)
	}
	e.login(t, tenantA, "fake", "alice") // fails unless the new secret reaches the token endpoint
}

func TestDeleteProviderForgetsItsTokens(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	e.addProvider(t, tenantA, "kept", true)
	e.login(t, tenantA, "fake", "alice")
	keptToken := e.login(t, tenantA, "kept", "alice")
	if err := e.svc.DeleteProvider(ctx, tenantA, "fake"); err != nil {
		t.Fatal(err)
	}
	e.addProvider(t, tenantA, "fake", true)
	res, err := e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	if err != nil || res.Status != oauthflow.StatusPending {
		t.Errorf("Authenticate after re-creating the provider = %+v, %v; want pending", res, err)
	}
	res, err = e.svc.Authenticate(ctx, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "kept", Scopes: noScopes})
	if err != nil || string(res.Token) != keptToken {
		t.Errorf("other provider's token: %+v, %v; want kept", res, err)
	}
}

func TestCallbackAfterProviderDeleted(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	e.addProvider(t, tenantA, "fake", true)
	res := e.authenticate(t, tenantA, oauthflow.AuthRequest{UserID: "alice", Provider: "fake", Scopes: noScopes})
	cb := visit(t, res.URL)
	if err := e.svc.DeleteProvider(ctx, tenantA, "fake"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Callback(ctx, cb); !errors.Is(err, apierr.ErrNotFound) {
		t.Errorf("Callback = %v, want ErrNotFound", err)
	}
	if w, _ := e.svc.Wait(ctx, tenantA, res.AuthID, 0); w.Status != oauthflow.StatusNotFound {
		t.Errorf("Wait = %q, want not_found", w.Status)
	}
	if n := countRecords(t, e.st, "oauthflow.tokens"); n != 0 {
		t.Errorf("%d tokens stored, want 0", n)
	}
}
