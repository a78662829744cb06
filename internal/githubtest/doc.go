// Package githubtest is a fake GitHub on an httptest.Server, for tests of
// the verified installation of a GitHub App (package githubapp, and the
// GitHub integration endpoints of package httphandler and cmd/deployplane).
//
// A GitHub serves one App (its id, slug, RSA key and OAuth client) and
// these endpoints, the web site at URL and the REST API at APIURL (URL
// followed by /api/v3/, as on GitHub Enterprise Server):
//
//   - GET /apps/{slug}/installations/new?state=S, the App's installation
//     page: it installs the App on the account that WillInstall set (a new
//     installation id, or the one given) and redirects the browser to the
//     setup URL (SetSetupURL) with installation_id, setup_action=install,
//     the state S, and a code of a user who can access the installation.
//   - POST /login/oauth/access_token trades such a code (single use; client
//     id and secret as form fields or HTTP basic authentication) for a user
//     token. Like GitHub it answers refusals with 200 and an "error" field
//     (bad_verification_code, incorrect_client_credentials).
//   - GET /api/v3/user/installations (a user token) lists the
//     installations that user can access, paginated with per_page and page
//     and a Link header as GitHub does.
//   - POST /api/v3/app/installations/{id}/access_tokens (the App's JWT,
//     checked against its key: RS256, iss the App id, not expired) issues an
//     installation token.
//   - POST /api/v3/repos/{owner}/{repo}/deployments and
//     .../deployments/{id}/statuses (an installation token) make GitHub
//     Deployments and add their statuses, which Deployments and
//     DeploymentStatuses return.
//
// Code makes a code for a user with access to given installations without
// the browser round trip; Down makes the server answer 503 to everything.
// Secrets returns every secret it handed out or received, for tests that
// look for them where they must not be.
//
// A GitHub is safe for concurrent use; its server closes when the test
// that made it ends.
package githubtest
