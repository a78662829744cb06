// Package dashboard is deployplane's web dashboard: HTML pages for people,
// beside the JSON API, over the same controlplane.ControlPlane methods.
// httphandler mounts it under /ui/ (httphandler.Options.Dashboard;
// cmd/deployplane turns it on unless -ui=false); it is not part of the
// API and not in /openapi.json (wire contract section 10, "The
// dashboard"). Pages are rendered on the server with html/template; a
// little embedded JavaScript follows the live streams with EventSource.
// Nothing is built, nothing comes from a CDN.
//
// # Pages and actions
//
//	GET  /ui/signin, POST /ui/signin     sign in with an API key (and a workspace)
//	POST /ui/signout                     end the session
//	GET  /ui/workspace, POST             choose among the key's workspaces
//	GET  /ui/deployments                 newest first; filters name, status, type, listener; paging
//	GET  /ui/deployments/new, POST       create (CreateDeployment)
//	GET  /ui/deployments/{id}            fields, url, revisions, secret names, resources with defaults
//	POST /ui/deployments/{id}/image          UpdateDeployment: a new revision of the image
//	POST /ui/deployments/{id}/secrets        UpdateDeployment: the secrets (values never shown)
//	POST /ui/deployments/{id}/resources      UpdateDeployment: the resource spec
//	POST /ui/deployments/{id}/display-name   UpdateDeployment: the display name (in place)
//	POST /ui/deployments/{id}/delete         DeleteDeployment, once the name is typed
//	GET  /ui/deployments/{id}/revisions/{rid}             status history and a log
//	POST /ui/deployments/{id}/revisions/{rid}/redeploy    RedeployRevision
//	GET  /ui/deployments/{id}/revisions/{rid}/rollback    what a rollback to it changes
//	POST /ui/deployments/{id}/revisions/{rid}/rollback    Rollback
//	GET  /ui/listeners
//	GET  /ui/stream/events[?deployment=|?ids=]   live status (text/event-stream)
//	GET  /ui/stream/logs/{id}/{rid}?type=&after=&level=&q=   live log lines
//
// Every action calls the ControlPlane method the API calls, with the
// session's tenant, so the rules are the API's; a 422 shows the form again
// with each problem beside its field.
//
// # Sessions
//
// Signing in checks the API key with the Authenticator (httphandler passes
// the API's own) and opens a session: a random token in the cookie
// dp_session (HttpOnly, SameSite=Strict, Path=/ui/, Secure on https or
// with Options.SecureCookies) that expires after Options.SessionTTL
// (default 8 hours). The key itself is never stored. When the
// Authenticator is a KeyChecker, every request checks the key again: a
// session whose key is not accepted, or that opens other tenants, ends
// there. Sessions live in Options.Sessions (required), a store.Store:
// give the control plane's own, so that replicas share sessions and a
// restart signs nobody out.
//
// A missing or expired session sends a page to the sign-in page and
// refuses a form with 403. Every form carries a CSRF token, and a
// cross-origin Origin header is refused.
//
// # Safety
//
// Every answer carries a strict Content-Security-Policy (no inline script
// or style, frame-ancestors 'none'), X-Frame-Options: DENY,
// X-Content-Type-Options: nosniff and Referrer-Policy: same-origin; pages
// are Cache-Control: no-store. Secret values never reach a page, an
// attribute or a stream. The live streams start with the state as it is
// when they follow the log (events of change "snapshot"), so nothing that
// changed after the page was rendered is missed.
//
// Design notes: docs/design-notes.md, "dashboard".
package dashboard
