// Package dashboard is deployplane's web dashboard: HTML pages for people,
// beside the JSON API, over the same controlplane.ControlPlane methods.
// httphandler mounts it under /ui/ (httphandler.Options.Dashboard;
// cmd/deployplane turns it on unless -ui=false); it is not part of the
// API and not in /openapi.json (wire contract section 10, "The
// dashboard").
//
// Pages are rendered on the server with html/template (so every value is
// escaped for where it lands); a little hand-written JavaScript
// (static/app.js, embedded with the templates and styles) follows the live
// streams with EventSource. Nothing is built, nothing comes from a CDN.
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
//	GET  /ui/listeners
//	GET  /ui/stream/events[?deployment=|?ids=]   live status (text/event-stream)
//	GET  /ui/stream/logs/{id}/{rid}?type=&after=&level=&q=   live log lines
//
// Every action calls the ControlPlane method the API calls, with the
// session's tenant, so the rules are the API's: a 422 is shown as the
// form again, each problem beside the field its loc names (the others
// above the form); the dashboard holds no rule of its own beyond reading
// forms. Every filter of the deployments page, the listener's included
// (ListDeploymentsQuery.ListenerID), is answered by the control plane
// through its indexes.
//
// # Sessions
//
// Signing in checks the API key with the Authenticator (httphandler passes
// the API's own, so a key opens exactly the tenants it opens in the API)
// and opens a session: a random token in the cookie dp_session (HttpOnly,
// SameSite=Strict, Path=/ui/, Secure on https or behind a proxy that says
// X-Forwarded-Proto: https, or always with Options.SecureCookies), which
// expires with the session after Options.SessionTTL (default 8 hours). The
// key itself is never stored, in the cookie or on the server: the session
// record holds the principal's name, its tenants, the chosen tenant, the
// session's CSRF token and, when the Authenticator is a KeyChecker (as
// httphandler's is over its KeyTable), the key's SHA-256 digest, the form
// key tables hold. Every request of such a session checks that digest
// again: once the key is no longer accepted (removed from the key file and
// the server restarted, or a replica with the new table reached) or opens
// other tenants, the session ends there, its record goes, and a form
// posted with it changes nothing. A live stream already open runs until the
// page reconnects. Sessions opened before digests were kept end at their
// next request. With another Authenticator a session lasts until it
// expires or the user signs out.
//
// Sessions live in Options.Sessions, a store.Store: cmd/deployplane gives
// the control plane's own store, so that every replica sharing a storepg
// database knows every session and a restart signs nobody out. The record
// is keyed by the session's expiry and the SHA-256 of its token, so that a
// reader of the database cannot use a session it sees, and expired
// sessions are swept (a batch at each sign-in). The store is required:
// the dashboard imports no store implementation, and which store holds the
// sessions is the program's choice.
//
// A missing or expired session sends a page to the sign-in page (which
// comes back to it) and refuses a form with 403. Every form carries the
// session's CSRF token, compared in constant time (and a cross-origin
// Origin header is refused); the sign-in form, which has no session yet,
// carries a token that must equal the one in the dp_signin cookie.
//
// # Safety
//
// Every answer carries Content-Security-Policy (default-src 'none';
// scripts, styles and connections from the dashboard itself only; no
// inline script or style; frame-ancestors 'none'), X-Frame-Options: DENY,
// X-Content-Type-Options: nosniff and Referrer-Policy: same-origin; pages
// are Cache-Control: no-store. Secret values never reach a page, an
// attribute or a stream: the pages show secret names, the secrets form
// leaves values empty (an empty value keeps the stored one), and the live
// streams re-encode the event log's events with the fields the pages show
// only (the log's deployment events carry the secrets).
//
// The live streams follow ControlPlane.FollowEvents, the source of the
// API's GET /v2/events; EventSource resumes with Last-Event-ID. A stream
// opened after its page was rendered could miss what changed in between,
// so each stream starts, once it follows the log, with the state as it is
// then (events of change "snapshot", without an id): the deployment page's
// deployment and newest revisions, the list page's deployments (their ids
// in ?ids=), the revision page's revision; every later change comes
// through the log. The log stream likewise first reads the lines after the
// page's last (ListLogs from its next_offset), so that no line written in
// between is lost; the page drops a line it already shows. The list page
// does not insert rows (a new deployment may not belong on the page shown,
// with its filters and offset): when a deployment is created elsewhere
// (the API, the CLI), it shows a notice with a link that reloads the list.
package dashboard
