// Package oauthflow is deployplane's OAuth helper domain: the OAuth
// providers each tenant configures, the authorization-code flows that
// obtain tokens for the tenant's end users, and the tokens themselves.
//
// A Service works over the same store.Store as controlplane (in its own
// collections, named "oauthflow.*") and talks to providers through
// golang.org/x/oauth2. It knows nothing of HTTP routes: package
// httphandler maps /v2/auth/* onto a Service. Every method but Callback
// takes the tenant explicitly; one tenant's providers, flows and tokens
// are invisible to another (apierr.ErrNotFound, or not_found for a flow).
//
// Providers: CreateProvider, ListProviders, GetProvider, UpdateProvider
// and DeleteProvider. provider_id is unique per tenant. auth_url and
// token_url must be absolute URLs that the egress policy accepts
// (Options.Egress, egress.Policy.CheckURL), else a problem of type
// url_scheme or url_host. The client secret is write-only: no Provider
// carries it. created_at and updated_at are wiretime.Time values.
//
// Flows: Authenticate answers completed with a stored token that is
// unexpired (or refreshed) and covers the requested scopes, or starts a
// flow and returns the provider's authorization URL, with redirect_uri
// Options.PublicURL + "/v2/auth/callback/{provider_id}" and PKCE S256 when
// the provider uses_pkce. Scopes is required (nil is a "missing" problem,
// empty asks for no particular scope) and holds at most 100 items.
// Callback accepts each state once, exchanges the code and stores the
// token (per tenant, provider and user). Wait long-polls a flow, from 0
// to MaxWaitTimeout; it answers completed, pending, timeout or not_found
// (a failed flow answers not_found, like an unknown or expired one). Flows
// expire Options.FlowTTL (default 10 minutes) after they start, a
// completed one FlowTTL after it completes; Cleanup removes expired ones.
//
// Egress: the code exchange and the refresh go through Options.Egress's
// client (default the strict egress policy) unless Options.HTTPClient is
// set, and are checked when dialled, whatever URL was stored. A refused
// exchange sends nothing and fails the flow with an error matching
// ErrExchangeFailed, ErrTokenEndpointRefused and egress.ErrRefused; a
// refused refresh starts a new flow.
//
// Secrets: client secrets, tokens and PKCE verifiers are sealed with
// AES-256-GCM under Options.SecretKey, bound to the record that owns them;
// states are stored as SHA-256 digests. Types that carry secrets redact
// them in fmt and log/slog output.
//
// Errors, and the answers httphandler makes of them:
//
//	*apierr.ValidationError              422 {"detail": Problems}
//	errors.Is(err, apierr.ErrNotFound)   404 {"detail": err.Error()}  e.g. "OAuth provider github not found."
//	errors.Is(err, apierr.ErrConflict)   409 {"detail": err.Error()}
//	apierr.ErrInvalidTenant, others      500
//
// and for Callback, which renders a small HTML page rather than JSON:
//
//	nil                                 200 "you can close this window"
//	errors.Is(err, ErrUnknownState)     400 error page (nothing changed)
//	*AuthorizationError                 400 error page (the flow failed; Code and
//	                                    Description come from the provider: escape them)
//	errors.Is(err, apierr.ErrNotFound)  404 error page (the provider was deleted)
//	errors.Is(err, ErrExchangeFailed)   502 error page (the flow failed;
//	                                    ErrTokenEndpointRefused when the egress
//	                                    policy refused the token endpoint)
//
// A missing provider is an *apierr.NotFoundError of Kind
// apierr.KindOAuthProvider. Design notes: docs/design-notes.md,
// "oauthflow".
package oauthflow
