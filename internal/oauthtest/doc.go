// Package oauthtest is an OAuth 2.0 authorization server on an
// httptest.Server, for tests of code that signs users in through a provider
// (package oauthflow, and the OAuth endpoints of package httphandler).
//
// A Provider serves two endpoints:
//
//   - GET /authorize (AuthURL) checks the authorization request
//     (response_type=code, its client_id, a redirect_uri, a state, and
//     code_challenge_method=S256 when a code_challenge is sent) and
//     redirects the browser back to the redirect_uri with the state and a
//     fresh code, or with error (and error_description) once Deny is set.
//   - POST /token (TokenURL) checks the client credentials, sent either with
//     HTTP basic authentication (URL-encoded, as RFC 6749 section 2.3.1 says)
//     or as client_id and client_secret form fields, then trades an
//     authorization code (single use; the redirect_uri must match the one
//     of the authorization request, and the code_verifier must match the
//     S256 code_challenge when one was sent) or a refresh token (rotated:
//     each is accepted once and replaced by a new one) for an access token.
//     Refusals are RFC 6749 error responses: invalid_client (401),
//     invalid_grant, unsupported_grant_type, invalid_request (400).
//
// Knobs change how it answers from then on: Deny, SetClientSecret,
// SetExpiresIn, SetRefreshTokens, SetScope, ForgetCodes and
// ForgetRefreshTokens. Counts tells how many requests reached the token
// endpoint, how many code exchanges and refreshes it was asked for and
// how many PKCE verifiers it checked.
//
// The server is plain http on 127.0.0.1: code that reaches it through an
// egress policy (package egress) must allow Host.
//
// To move past the expiry of the tokens a Provider issues without
// sleeping, give the service under test an internal/testclock Clock. To
// run a test in a testing/synctest bubble, where loopback sockets would keep
// the fake clock from advancing, make the Provider with NewOn on an
// internal/memnet listener and give the service under test its Client.
//
// A Provider records every secret it handed out or received (every client
// secret it has had, states, codes, verifiers, access and refresh tokens),
// and Secrets returns them, so that a test can look for them where they
// must not be: logs, error messages, HTTP answers, stored records.
//
// A Provider is safe for concurrent use; a Provider's server
// closes when the test that made it ends.
package oauthtest
