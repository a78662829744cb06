package oauthflow_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/wiretime"
)

// Property: random sequences of provider calls over two tenants agree with
// a model map. A call that fails changes nothing; a create that succeeds
// stores what was asked; a patch changes only what it names and never id,
// organization_id, provider_id or created_at; the existence of a
// provider_id decides between ErrConflict/ErrNotFound and success.
func TestProviderModel(t *testing.T) {
	tenants := []string{tenantA, tenantB}
	ids := []string{"github", "google", "gitlab"}
	// Mostly valid values, so that most calls succeed and the later ones
	// meet existing providers.
	urls := []string{"https://a.example/authorize", "https://b.example/token", "https://c.example/t", "http://127.0.0.1:9/t", "https://localhost/x", "http://evil.example/t", "not a url"}
	strs := []string{"x", "GitHub", "GitHub Enterprise", ""}
	maybe := func(rt *rapid.T, label string, from []string) *string {
		if rapid.Bool().Draw(rt, label+"_set") {
			v := rapid.SampledFrom(from).Draw(rt, label)
			return &v
		}
		return nil
	}
	rapid.Check(t, func(rt *rapid.T) {
		e := newEnv(t, func(o *oauthflow.Options) { o.Logger = nil })
		ctx := context.Background()
		model := map[string]map[string]oauthflow.Provider{tenantA: {}, tenantB: {}}

		list := func(tn string) []oauthflow.Provider {
			got, err := e.svc.ListProviders(ctx, tn)
			if err != nil {
				rt.Fatal(err)
			}
			return got
		}
		want := func(tn string) []oauthflow.Provider {
			out := []oauthflow.Provider{}
			for _, id := range slices.Sorted(maps.Keys(model[tn])) {
				out = append(out, model[tn][id])
			}
			return out
		}

		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			tn := rapid.SampledFrom(tenants).Draw(rt, "tenant")
			pid := rapid.SampledFrom(ids).Draw(rt, "provider_id")
			cur, exists := model[tn][pid]
			e.clock.Advance(time.Second)
			switch rapid.SampledFrom([]string{"create", "patch", "delete", "get"}).Draw(rt, "op") {
			case "create":
				in := oauthflow.NewProvider{
					ProviderID:   pid,
					Name:         rapid.SampledFrom(strs).Draw(rt, "name"),
					ClientID:     rapid.SampledFrom(strs).Draw(rt, "client_id"),
					ClientSecret: oauthflow.Secret(rapid.SampledFrom(strs).Draw(rt, "secret")),
					AuthURL:      rapid.SampledFrom(urls).Draw(rt, "auth_url"),
					TokenURL:     rapid.SampledFrom(urls).Draw(rt, "token_url"),
					UsesPKCE:     rapid.Bool().Draw(rt, "pkce"),
				}
				got, err := e.svc.CreateProvider(ctx, tn, in)
				var ve *apierr.ValidationError
				switch {
				case errors.As(err, &ve):
				case exists && !errors.Is(err, apierr.ErrConflict):
					rt.Fatalf("create of an existing provider: %v, want ErrConflict", err)
				case !exists && err != nil:
					rt.Fatalf("create: %v", err)
				case err == nil:
					if got.ProviderID != pid || got.Name != in.Name || got.ClientID != in.ClientID || got.AuthURL != in.AuthURL ||
						got.TokenURL != in.TokenURL || got.UsesPKCE != in.UsesPKCE || got.OrganizationID != tn || got.CreatedAt != wiretime.New(e.clock.Now()) {
						rt.Fatalf("created %+v from %+v", got, in)
					}
					model[tn][pid] = got
				}
			case "patch":
				p := oauthflow.ProviderPatch{
					Name:     maybe(rt, "name", strs),
					ClientID: maybe(rt, "client_id", strs),
					AuthURL:  maybe(rt, "auth_url", urls),
					TokenURL: maybe(rt, "token_url", urls),
				}
				if rapid.Bool().Draw(rt, "pkce_set") {
					p.UsesPKCE = ptr(rapid.Bool().Draw(rt, "pkce"))
				}
				got, err := e.svc.UpdateProvider(ctx, tn, pid, p)
				var ve *apierr.ValidationError
				switch {
				case !exists:
					if !errors.Is(err, apierr.ErrNotFound) {
						rt.Fatalf("patch of a missing provider: %v, want ErrNotFound", err)
					}
				case errors.As(err, &ve):
				case err != nil:
					rt.Fatalf("patch: %v", err)
				default:
					next := cur
					next.Name = deref(p.Name, cur.Name)
					next.ClientID = deref(p.ClientID, cur.ClientID)
					next.AuthURL = deref(p.AuthURL, cur.AuthURL)
					next.TokenURL = deref(p.TokenURL, cur.TokenURL)
					next.UsesPKCE = deref(p.UsesPKCE, cur.UsesPKCE)
					next.CodeChallengeMethod = nil
					if next.UsesPKCE {
						next.CodeChallengeMethod = ptr("S256")
					}
					next.UpdatedAt = wiretime.New(e.clock.Now())
					if diff := cmp.Diff(next, got); diff != "" {
						rt.Fatalf("patch %+v (-want +got):\n%s", p, diff)
					}
					model[tn][pid] = got
				}
			case "delete":
				err := e.svc.DeleteProvider(ctx, tn, pid)
				if exists != (err == nil) || (!exists && !errors.Is(err, apierr.ErrNotFound)) {
					rt.Fatalf("delete (exists=%v): %v", exists, err)
				}
				delete(model[tn], pid)
			case "get":
				got, err := e.svc.GetProvider(ctx, tn, pid)
				if exists {
					if err != nil || !cmp.Equal(cur, got) {
						rt.Fatalf("get = %+v, %v; want %+v", got, err, cur)
					}
				} else if !errors.Is(err, apierr.ErrNotFound) {
					rt.Fatalf("get of a missing provider: %v", err)
				}
			}
			for _, tn := range tenants {
				if diff := cmp.Diff(want(tn), list(tn)); diff != "" {
					rt.Fatalf("tenant %s providers (-model +store):\n%s", tn, diff)
				}
			}
		}
	})
}

func deref[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}
