// Package oauthflow is deployplane's OAuth helper domain: the OAuth
// providers each tenant configures, the authorization-code flows that obtain
// tokens for the tenant's end users, and the tokens themselves.
//
// It is a domain beside controlplane, over the same store.Store (in its own
// collections, all named "oauthflow.*"), and it talks to providers through
// golang.org/x/oauth2 with an *http.Client that applies an egress policy
// (see Egress below; injectable). It knows nothing of HTTP routes: package
// httphandler maps /v2/auth/* onto a Service.
//
// # Providers
//
// CreateProvider, ListProviders, GetProvider, UpdateProvider and
// DeleteProvider manage a tenant's providers. provider_id is unique per
// tenant. auth_url and token_url must be absolute URLs without credentials
// or fragment that the egress policy accepts (Options.Egress,
// egress.Policy.CheckURL): https, to a host that is neither a non-public IP
// literal nor a localhost name, unless the operator allows the host; else
// a problem of type url_scheme or url_host. The client secret is
// write-only: it is encrypted at rest and no Provider carries it.
//
// A Provider's created_at and updated_at are a wiretime.Time, the
// timestamp type controlplane's wire types use too: they encode as
// fixed-width RFC 3339 in UTC with six fractional digits
// (2026-11-21T10:04:05.123456Z, also ...05.000000Z; wire contract section
// 1) with a plain json.Marshal, and decode from any RFC 3339 time, so
// providers stored by earlier builds with trimmed fractions still decode.
// The Service stamps them at the microsecond (its clock is truncated).
// The stored record is the Provider's JSON followed by the sealed secret.
//
// # Flows
//
// An AuthRequest needs user_id, provider and scopes: a nil Scopes (the
// JSON member missing or null) is a "missing" problem like the other two,
// and an empty list asks for no particular scope. Scopes has a cap of 100,
// checked before any item is looked at: a longer list is a single too_long
// problem, so a request costs work in proportion to the cap, not to its
// size, and answers at most 104 problems (one per scope and one per other
// field). Duplicate scopes count once; de-duplication, like the check that
// a stored token covers the scopes, goes through a set.
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
// # Egress
//
// The code exchange and the token refresh go to the token_url a tenant
// registered: requests made on a tenant's behalf. By default (no
// Options.HTTPClient) they go through Options.Egress's client (package
// egress; default the strict policy): https only, and each connection is
// checked when it is dialled against the address the name resolved to, so
// loopback, private, CGNAT, link-local, multicast, unspecified and other
// non-public addresses are refused even behind a name or a DNS rebinding,
// unless the operator allows the host. A refused exchange sends nothing to
// the provider; Callback fails the flow and returns an error matching
// ErrExchangeFailed and ErrTokenEndpointRefused, wrapping the
// *egress.RefusedError (errors.Is(err, egress.ErrRefused)). A
// refused refresh is treated like a failed one: Authenticate starts a new
// flow. The same policy decides at registration which URLs are accepted
// (see Providers), but the dial-time check applies whatever was stored: a
// provider registered before the operator narrowed the allowance is
// refused when it is used.
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
// # Waiting
//
// Wait long-polls without spinning: a Callback in the same process closes a
// per-auth_id channel that wakes every waiter at once, and each waiter also
// re-reads the store every Options.PollInterval (default 1 s) so that a flow
// completed by another replica over the same store is seen too. Timeouts
// run from 0 to MaxWaitTimeout (300 s); 0 checks once and may answer
// pending; the HTTP layer applies DefaultWaitTimeout (30 s) when the client
// gives none. A flow that failed (provider error, refused exchange) answers
// not_found, like an unknown or expired one: the wire contract's statuses
// are completed, pending, timeout and not_found. The timeout and the
// re-reads run on the time package's timers (which testing/synctest fakes);
// expiry is judged by Options.Clock.
//
// # Errors and HTTP statuses
//
// The errors of a client's mistake are those of package apierr, the
// vocabulary oauthflow shares with controlplane and httphandler. For the
// HTTP layer:
//
//	*apierr.ValidationError              422 {"detail": Problems}
//	errors.Is(err, apierr.ErrNotFound)   404 {"detail": err.Error()}  e.g. "OAuth provider github not found."
//	errors.Is(err, apierr.ErrConflict)   409 {"detail": err.Error()}
//	apierr.ErrInvalidTenant, others      500
//
// and for Callback, which renders a small HTML page rather than JSON:
//
//	nil                           200 "you can close this window"
//	errors.Is(err, ErrUnknownState)  400 error page (nothing changed)
//	*AuthorizationError           400 error page (the flow failed; Code and
//	                              Description come from the provider: escape them)
//	errors.Is(err, apierr.ErrNotFound)  404 error page (the provider was deleted)
//	errors.Is(err, ErrExchangeFailed)  502 error page (the flow failed;
//	                              errors.Is(err, ErrTokenEndpointRefused) when
//	                              the egress policy refused the token endpoint)
//
// A missing provider is an *apierr.NotFoundError of Kind
// apierr.KindOAuthProvider. controlplane returns the same types; the two
// domains do not import each other.
//
// # Performance
//
// The benchmarks compare each call with the bare store operations it
// cannot avoid, measured in the same run (x-baseline = baseline ns/op over
// Service ns/op):
//
//	go test -run '^$' -bench . -benchtime 20000x ./oauthflow/
//
//	BenchmarkAuthenticateStoredToken  10-15 µs/op  0.06-0.10 x-baseline
//	BenchmarkAuthenticateNewFlow      50-100 µs/op 0.20-0.47 x-baseline
//
// (storemem, 2 shared and busy cores; the spread is between runs.) A
// stored token costs two record reads, one JSON decode and one AES-GCM
// open; JSON decoding is most of the difference from the baseline. Either
// call is small beside the HTTP round trip that carries it.
//
// BenchmarkValidateScopes/60000, an authenticate with 60,000 scopes, costs
// about 1.2 µs: the list is refused by its length alone (before the cap was
// checked first, 40 s of quadratic de-duplication on the same machine).
// BenchmarkValidateScopes/100, a full list up to the provider lookup,
// about 70 µs.
//
// # Tenants
//
// Every method but Callback takes the tenant explicitly. Providers, tokens
// and flows of one tenant are invisible to another: another tenant's
// provider is apierr.ErrNotFound and another tenant's flow is not_found. Tokens are
// kept per (tenant, provider, user).
package oauthflow
