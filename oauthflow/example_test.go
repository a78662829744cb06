package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/storemem"
)

// The whole flow: configure a provider, ask for a token, send the user to
// the provider, take the callback, and collect the token.
func Example() {
	// A stand-in for GitHub's token endpoint.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"gho_example","token_type":"bearer","expires_in":28800}`)
	}))
	defer provider.Close()

	st := storemem.New()
	defer st.Close()
	// The stand-in listens on loopback over http, which requests made on a
	// tenant's behalf may reach only when the operator allows the host.
	egressPolicy, err := egress.New(&egress.Options{AllowHosts: []string{provider.Listener.Addr().String()}})
	if err != nil {
		log.Fatal(err)
	}
	svc, err := oauthflow.New(st, &oauthflow.Options{
		SecretKey: make([]byte, 32), // a real server reads 32 random bytes from its configuration
		PublicURL: "https://deploy.example.com",
		Egress:    egressPolicy,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	const tenant = "0194f3a0-0000-7000-8000-000000000001"

	_, err = svc.CreateProvider(ctx, tenant, oauthflow.NewProvider{
		ProviderID:   "github",
		Name:         "GitHub",
		ClientID:     "Iv1.example",
		ClientSecret: "client-secret",
		AuthURL:      provider.URL + "/login/oauth/authorize",
		TokenURL:     provider.URL + "/login/oauth/access_token",
		UsesPKCE:     true,
	})
	if err != nil {
		log.Fatal(err)
	}

	req := oauthflow.AuthRequest{UserID: "alice", Provider: "github", Scopes: []string{"repo"}}
	res, err := svc.Authenticate(ctx, tenant, req)
	if err != nil {
		log.Fatal(err)
	}
	authURL, _ := url.Parse(res.URL)
	q := authURL.Query()
	fmt.Println(res.Status)
	fmt.Println(q.Get("redirect_uri"), q.Get("scope"), q.Get("code_challenge_method"))

	// The user signs in; the provider sends the browser back to the
	// callback route with a code and the state.
	err = svc.Callback(ctx, oauthflow.CallbackRequest{ProviderID: "github", Code: "code-from-github", State: q.Get("state")})
	if err != nil {
		log.Fatal(err)
	}

	// Meanwhile the client long-polls.
	w, err := svc.Wait(ctx, tenant, res.AuthID, oauthflow.DefaultWaitTimeout)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.Status, string(w.Token))

	// From now on the stored token answers at once (and prints redacted).
	again, err := svc.Authenticate(ctx, tenant, req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(again.Status, again.Token)
	// Output:
	// pending
	// https://deploy.example.com/v2/auth/callback/github repo S256
	// completed gho_example
	// completed [REDACTED]
}

// Providers are shown without their client secret.
func ExampleService_CreateProvider() {
	st := storemem.New()
	defer st.Close()
	svc, err := oauthflow.New(st, &oauthflow.Options{
		SecretKey: make([]byte, 32),
		PublicURL: "https://deploy.example.com",
		Clock:     func() time.Time { return time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC) },
		NewID:     func() string { return "0194f3a0-0000-7000-8000-0000000000aa" },
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := svc.CreateProvider(context.Background(), "0194f3a0-0000-7000-8000-000000000001", oauthflow.NewProvider{
		ProviderID:   "google",
		Name:         "Google",
		ClientID:     "1234.apps.googleusercontent.com",
		ClientSecret: "GOCSPX-secret",
		AuthURL:      "https://accounts.google.com/o/oauth2/v2/auth",
		TokenURL:     "https://oauth2.googleapis.com/token",
		UsesPKCE:     true,
	})
	if err != nil {
		log.Fatal(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(p)
	// Output:
	// {
	//   "id": "0194f3a0-0000-7000-8000-0000000000aa",
	//   "organization_id": "0194f3a0-0000-7000-8000-000000000001",
	//   "provider_id": "google",
	//   "name": "Google",
	//   "client_id": "1234.apps.googleusercontent.com",
	//   "auth_url": "https://accounts.google.com/o/oauth2/v2/auth",
	//   "token_url": "https://oauth2.googleapis.com/token",
	//   "uses_pkce": true,
	//   "code_challenge_method": "S256",
	//   "created_at": "2026-11-21T10:04:05.123456Z",
	//   "updated_at": "2026-11-21T10:04:05.123456Z",
	//   "provider_type": null
	// }
}

// Validation reports every problem with its location.
func ExampleValidationError() {
	st := storemem.New()
	defer st.Close()
	svc, err := oauthflow.New(st, &oauthflow.Options{SecretKey: make([]byte, 32), PublicURL: "https://deploy.example.com"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = svc.CreateProvider(context.Background(), "0194f3a0-0000-7000-8000-000000000001", oauthflow.NewProvider{
		ProviderID: "github",
		ClientID:   "Iv1.example",
		AuthURL:    "http://github.com/login/oauth/authorize",
		TokenURL:   "https://github.com/login/oauth/access_token",
	})
	var ve *apierr.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Println(p.Loc, p.Type, p.Msg)
		}
	}
	// Output:
	// [body name] missing Field required
	// [body auth_url] url_scheme URL scheme should be 'https' ('http' only for hosts the server's operator allows)
}

// A callback whose state matches no open flow changes nothing.
func ExampleService_Callback() {
	st := storemem.New()
	defer st.Close()
	svc, err := oauthflow.New(st, &oauthflow.Options{SecretKey: make([]byte, 32), PublicURL: "https://deploy.example.com"})
	if err != nil {
		log.Fatal(err)
	}
	err = svc.Callback(context.Background(), oauthflow.CallbackRequest{ProviderID: "github", Code: "c", State: "forged"})
	fmt.Println(errors.Is(err, oauthflow.ErrUnknownState))
	// Output:
	// true
}

// A Secret prints redacted everywhere but in JSON and a string conversion.
func ExampleSecret() {
	tok := oauthflow.Secret("gho_example")
	fmt.Println(tok)
	fmt.Printf("%q %#v\n", tok, tok)
	b, _ := json.Marshal(oauthflow.WaitResult{Status: oauthflow.StatusCompleted, Token: tok})
	fmt.Println(string(b))
	fmt.Println(string(tok))
	// Output:
	// [REDACTED]
	// [REDACTED] [REDACTED]
	// {"status":"completed","token":"gho_example"}
	// gho_example
}
