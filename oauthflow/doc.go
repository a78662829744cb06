// Package oauthflow is deployplane's OAuth helper domain: the OAuth
// providers each tenant configures, the authorization-code flows that obtain
// tokens for the tenant's end users, and the tokens themselves.
//
// It is a domain beside controlplane, over the same store.Store (in its own
// collections, all named "oauthflow.*"), and it talks to providers through
// golang.org/x/oauth2 with an injectable *http.Client. It knows nothing of
// HTTP routes: package httphandler maps /v2/auth/* onto a Service.
//
// # Providers
//
// CreateProvider, ListProviders, GetProvider, UpdateProvider and
// DeleteProvider manage a tenant's providers. provider_id is unique per
// tenant. auth_url and token_url must be absolute https URLs (http only for
// localhost, 127.0.0.0/8 and ::1). The client secret is write-only: it is
// encrypted at rest and no Provider carries it.
//
// # Flows
//
// Authenticate answers completed with a stored token when one is unexpired
// and covers the requested scopes (refreshing an expired one through its
// refresh token), or starts a flow: a fresh auth_id and state (crypto/rand,
// at least 128 bits each), a PKCE S256 challenge when the provider
// uses_pkce, and the provider's authorization URL with redirect_uri
// Options.PublicURL + "/v2/auth/callback/{provider_id}". Callback, which
// needs no tenant because the state identifies the flow, accepts each state
// once, exchanges the code with the PKCE verifier and stores the token.
// Wait long-polls a flow until it completes.
//
// Flows expire Options.FlowTTL (default 10 minutes) after they start; a
// completed flow stays readable by Wait for another FlowTTL after it
// completes. Expired flows are removed lazily: each Authenticate that
// starts a flow removes up to 16 expired ones in the same transaction, and
// Cleanup removes all of them.
//
// # Secrets
//
// Client secrets, access and refresh tokens and PKCE verifiers are sealed
// with AES-256-GCM under Options.SecretKey, with a random nonce per seal and
// the owning record's identity (tenant, provider, user or flow) as
// additional data, so a sealed value copied into another record does not
// open. States are stored only as SHA-256 digests. Types that carry secrets
// (Secret, NewProvider, ProviderPatch, AuthResult, WaitResult,
// CallbackRequest) redact them in fmt and log/slog output.
//
// # Tenants
//
// Every method but Callback takes the tenant explicitly. Providers, tokens
// and flows of one tenant are invisible to another: another tenant's
// provider is ErrNotFound and another tenant's flow is not_found. Tokens are
// kept per (tenant, provider, user).
package oauthflow
