// Package httphandler is deployplane's HTTP API: the routes of the wire
// contract (sections 1 to 5) over a controlplane.ControlPlane, the GitHub
// webhook of build_on_push (section 7), and the OAuth helpers (section 8)
// over an optional oauthflow.Service, as one http.Handler to mount on any
// mux.
//
//	cp := controlplane.New(storebolt.Open(...), nil)
//	go cp.Run(ctx, deploysim.New(nil)) // moves revisions along; the handler only records requests
//	keys, _ := httphandler.NewKeyTable([]httphandler.Key{{SHA256: httphandler.HashKey(key), Tenants: []string{tenant}}})
//	mux.Handle("/api-host/", http.StripPrefix("/api-host", httphandler.New(cp, &httphandler.Options{Authenticator: keys})))
//
// The handler never moves a revision itself: a created deployment's
// revision stays CREATING until the program runs ControlPlane.Run with a
// Deployer (deploysim's simulation, or a real one). DELETE answers 204 at
// once and leaves the deployment AWAITING_DELETE until Run has torn it down
// and removed it; GET then answers 404.
//
// # Routes
//
// Every route is listed once, in routes.go, on a private http.ServeMux with
// Go 1.22 method patterns: deployments (POST, GET list, GET, PATCH, DELETE),
// revisions (GET list, POST, GET, POST redeploy), POST
// /v2/deployments/{deployment_id}/push-token (langgraph deploy's registry
// token, with Options.Registry's registry_url; pushtoken.go), revision logs (GET
// /v2/deployments/{deployment_id}/revisions/{revision_id}/logs, and
// langgraph-cli's POST /v1/projects/{project_id}/revisions/{revision_id}/build_logs,
// .../deploy_logs and /v1/projects/{project_id}/deploy_logs, whose project
// id is the deployment id and whose body is the GET's query; logs.go),
// listeners (POST, GET list,
// GET, PATCH, DELETE), GitHub integrations (GET /v1/integrations/github,
// GET /v1/integrations/github/install, the public GET
// /v1/integrations/github/setup and POST /v1/integrations/github/webhook,
// and POST /v1/integrations/github when allowed; below), with
// Options.Uploads the source tarballs of langgraph deploy --remote (POST
// /v2/deployments/{deployment_id}/upload-url and the public PUT
// /v2/uploads/{tenant}/{deployment_id}/{upload_id} of the signed URLs it
// answers, served by the Uploads, which checks the signature; uploads.go
// and package uploads), with Options.RegistryRealm the public token
// endpoint of an external registry (GET and POST /registry/token, GET
// /registry/jwks.json; Docker Registry v2 token authentication, served by
// package registry's TokenServer; pushtoken.go), the event streams
// (GET /v2/events, GET /v2/deployments/{deployment_id}/events; below), the OAuth helpers (below), the
// public GET /healthz, GET /readyz and (with Options.Metrics) GET /metrics
// (below, "Health and metrics"), and GET /openapi.json, an OpenAPI 3.1 document built from the same list, with
// schemas derived from the controlplane and oauthflow types by reflection,
// and the public GET /docs, an interactive page (Swagger UI) over it whose
// assets are embedded in github.com/swaggest/swgui and served below
// /docs/ (docs.go; not in the document, as in the hosted service's), and,
// with Options.Dashboard, the web dashboard of package dashboard under
// /ui/ (dashboard.go: public routes of the handler, since the dashboard
// checks its own sessions, signed in with this handler's Authenticator;
// its live streams under /ui/stream/ take the long-poll cap; not in the
// document).
//
// The document is what generated clients read (openapi.go): answer schemas
// require every member an answer always carries and say which are
// nullable (a nullable enum has null among its values); types read in
// requests have schemas of their own, suffixed Input, which require only
// what a request must give; ids and times carry format uuid and
// date-time; query parameters carry their bounds, defaults and enums;
// operation ids are FastAPI's, as the hosted service's document has them
// (list_deployments_v2_deployments_get: the serving function's name in
// snake_case, or route.op, then the path and the method); the list pages
// are DeploymentsList, RevisionsList and ListenersList; 409s document
// x-should-retry. Its server is Options.BasePath, the prefix an embedding
// program mounts the handler under, so that generated clients call paths
// that exist. A route's metadata (summary, body and answer types, query
// params built with qStr, qInt, qEnum, ..., extra error statuses) sits
// beside it in the route table (routes.go); the tests validate a real
// answer of every JSON route against the served document (JSON Schema
// 2020-12) and check these conventions, and CI lints it with Redocly.
// Success statuses are those of the contract: 201 for creations, 204 for
// deletions, 202 for webhook deliveries, 200 otherwise (OAuth providers are created with 200 and
// deleted with 200 {"message": "..."}, as the hosted service does).
//
// An endpoint decodes, calls one ControlPlane method and returns a status
// and a body, or an error (GET /v2/deployments/{id} answers
// ControlPlane.AppendDeploymentJSON, the wire JSON in one call, appended
// to a pooled buffer: the same bytes and headers as any encoded answer);
// one function (errorReply) maps errors to
// answers, one case per error of package apierr, the vocabulary both
// domains share: *apierr.ValidationError 422 {"detail": [{loc, msg, type}]}
// (at most 100 problems, below), apierr.ErrNotFound 404,
// apierr.ErrConflict 409 (with X-Should-Retry: false, so that generated
// SDKs do not retry it), apierr.ErrInvalidState 400, each with the
// domain's sentence as {"detail": "..."}, and anything else a bare
// 500 {"detail": "Internal Server Error"} whose cause goes to the log only.
// Answers are json.Encoder's bytes (HTML characters escaped, a final
// newline). Every timestamp in them (created_at, updated_at of deployments,
// revisions, listeners, OAuth providers and their pages) is fixed-width RFC
// 3339 UTC with six fractional digits, 2026-11-21T10:04:05.123456Z (wire
// contract section 1): their fields are a wiretime.Time, which encodes
// that way, so json.Encoder writes them with no help.
//
// An unknown path is a JSON 404 and a known path with another method a JSON
// 405 with Allow (the mux's own plain-text answers never show). A handler
// panic is logged and answered 500.
//
// # Decoding
//
// Bodies are decoded with github.com/go-json-experiment/json (the
// encoding/json/v2 design): object member names match exactly, so "ID",
// "Name" or "SOURCE" are unknown members, ignored like every unknown
// member, and can never reach the "id", "name" or "source" fields; a name
// given twice in one object is 422 json_invalid instead of the last copy
// winning; invalid UTF-8 is 422. null is the same as an absent member, and
// the langgraph_config_path alias is folded into graph_config_path by the
// controlplane. Read-only response fields (id, status, created_at, ...) have
// no place in the request types; repo_commit_sha, which requests share with
// responses, is dropped by the controlplane.
//
// A 422 lists every problem. A value of the wrong JSON type is a problem
// at its own loc (string_type, int_type for a fraction or an integer out
// of range too, float_type, bool_type, list_type, dict_type), however deep
// it is: ["body", "secrets", 2, "value"], with list indexes as numbers.
// Decoding does not stop at it: the member is left out (a list item keeps
// its place, as its zero value, so that the others keep their indexes),
// the rest decodes, and the endpoint asks the domain to check what decoded
// without writing (controlplane's Validate* methods for deployment and
// listener bodies), so that the same 422 lists the rule problems too: {"name":
// 5, "source": 7, "secrets": "x"} answers name string_type, source
// string_type and secrets list_type, and {"name": "Bad Name", "secrets":
// [1]} answers secrets.0 dict_type beside the name's pattern problem. A rule
// problem at or under a mistyped member is not listed (the client sent the
// member; "Field required" there would be wrong), nor a 404 or 400 of the
// dry run (the answer is the 422), and nothing is written. The OAuth and
// integration bodies list their type problems only (oauthflow has no
// check-only entry point). Malformed JSON (syntax, a duplicate name,
// invalid UTF-8, whitespace other than JSON's) is one json_invalid
// problem, whatever else is wrong; an empty or null body is missing (POST
// .../revisions may omit it). Bodies
// are read as JSON whatever their Content-Type (curl -d labels JSON as a
// form), and limited to Options.MaxBodyBytes (default 1 MiB): 413 beyond. Path ids
// must be UUIDs (422 uuid_parsing at ["path", name]); query values that do
// not parse are 422 at ["query", name], listed together with the range
// checks of the controlplane under the ControlPlane's own Limits
// (ValidateWith(cp.Limits())), so custom limits apply in the same 422.
//
// # Limits
//
// Work and answers stay proportional to what the server accepts. A 422
// lists at most 100 problems, for both domains: beyond that, the first 99
// are listed and the 100th, {"loc": ["body"], "type": "too_many_errors",
// "msg": "Too many problems: N more problems not shown"}, counts the rest.
// The body decoder itself keeps at most 100 type problems and only counts
// the others (without building their loc), and then skips the domain's
// checks, so a 1 MiB body of 200,000 mistyped list items answers a 422 of
// about 9 KB (TestProblemsCapped).
//
// Before anything else (routing, authentication), ServeHTTP checks the
// request target, its path and query as sent, against
// Options.MaxURLBytes (default DefaultMaxURLBytes, 16 KiB; 414 beyond), and
// the header fields (each value with its name and 4 bytes, plus the Host)
// against Options.MaxHeaderBytes (default DefaultMaxHeaderBytes, 64 KiB;
// 431 beyond), answering {"detail": "..."} with X-Request-Id like every
// other answer. net/http answers a request line and headers beyond
// http.Server.MaxHeaderBytes itself, in plain text, before any handler
// runs: a server should set that above the sum of the two (cmd/deployplane
// sets 512 KiB), so that clients see this handler's JSON. Bodies are
// limited by Options.MaxBodyBytes (above).
//
// # OAuth helpers
//
// With Options.OAuth set, the handler serves /v2/auth/*: POST, GET
// /v2/auth/providers and GET, PATCH, DELETE
// /v2/auth/providers/{provider_id} (client_secret is accepted, never
// returned); POST /v2/auth/authenticate, answering {status, url, auth_id,
// token} with every member present and null when it does not apply
// (completed carries token, pending carries url and auth_id); GET
// /v2/auth/wait/{auth_id}?timeout=S, a long poll of whole seconds, 0 to 300
// (default 30; anything else is a 422 at ["query", "timeout"]), answering
// {status, token} with status completed, pending (timeout=0 only), timeout
// or not_found; and GET /v2/auth/callback/{provider_id}, where providers
// send the user's browser back. A long poll pushes its connection's write
// deadline past its timeout with http.ResponseController, so it outlives
// the server's WriteTimeout, and ends as soon as the client goes away (its
// context is done; the request log says 503).
//
// The callback is public: a browser holds no API key, and the flow's state
// (single use, unguessable, bound to the provider) is the proof. It answers
// a small HTML page, rendered with html/template so that text the provider
// sends (error, error_description) is escaped, with Content-Type text/html;
// charset=utf-8, Content-Security-Policy default-src 'none' (the page loads
// and runs nothing, and may not be framed), Cache-Control no-store,
// Referrer-Policy no-referrer and X-Content-Type-Options nosniff. Statuses
// follow oauthflow's table: 200 done; 400 for an unknown, expired or used
// state and for a provider's refusal; 404 when the provider was deleted;
// 502 when the token endpoint refused the code; 500 (cause logged)
// otherwise. A HEAD of the callback answers 200 and spends nothing, so a
// link checker cannot use up the state before the browser arrives.
//
// oauthflow's errors are the same apierr errors and map the same way:
// *apierr.ValidationError 422, apierr.ErrNotFound 404 ("OAuth provider
// {provider_id} not found."), apierr.ErrConflict 409. With Options.OAuth
// nil the /v2/auth routes are neither served nor documented, and any
// request under /v2/auth/ answers 404
// {"detail": "The OAuth helpers (/v2/auth/*) are not enabled on this
// server."}.
//
// # GitHub integrations
//
// An integration is a GitHub App installation held by one tenant (wire
// contract section 9). GET /v1/integrations/github/install answers 200
// {"url": ...}: the App's installation page with a state bound to the
// caller's tenant (ControlPlane.StartGitHubInstall), or 503 {"detail": ...}
// when the control plane has no GitHub App (controlplane.Options.GitHubApp).
// GitHub sends the user's browser back to GET
// /v1/integrations/github/setup?installation_id=&setup_action=&code=&state=,
// which takes no API key (the state is the proof, as for the OAuth
// callback) and answers an HTML page: 200 once
// ControlPlane.CompleteGitHubInstall has confirmed with GitHub that the user
// can access the installation and recorded it for the state's tenant
// (the page shows the integration id); 400 for a missing parameter, an
// installation only requested (setup_action=request), or a state unknown,
// expired or already used; 403 when the user cannot access the
// installation; 409 when another tenant holds it; 502 when GitHub refused
// the code or could not be reached; 503 without an App. HEAD does not
// spend the state. GET /v1/integrations/github lists the tenant's
// integrations, oldest first.
//
// POST /v1/integrations/github {"installation_id", "name"} records an
// installation without asking GitHub. It is served only when
// Options.AllowUnverifiedIntegrations is set, because it trusts every API
// key holder of every tenant with any installation id no tenant holds yet;
// otherwise it answers 404 and is not in GET /openapi.json. Either way an
// installation another tenant holds is 409.
//
// # GitHub webhook (build_on_push)
//
// POST /v1/integrations/github/webhook is where a GitHub App sends its
// webhook deliveries; set the App's webhook URL to it and its webhook
// secret to Options.GitHubWebhookSecret. It takes no API key (GitHub holds
// none): the proof is X-Hub-Signature-256, "sha256=" and the hex
// HMAC-SHA256 of the raw body with the secret, which the handler computes
// over the body as read (at most Options.WebhookMaxBodyBytes, 25 MiB by
// default, the most GitHub sends; 413 beyond) and
// compares in constant time. A missing or wrong signature (the SHA-1
// X-Hub-Signature is not accepted) is 401 {"detail": ...}, and the body is
// not looked at. Without a configured secret every delivery, signed or
// not, is 503 {"detail": "The GitHub webhook is not enabled on this server:
// no webhook secret is configured."}: the server cannot check a signature,
// so it accepts nothing, and 503 tells the operator (in GitHub's delivery
// log) that the server, not the sender, is misconfigured.
//
// A signed delivery is then read by its X-GitHub-Event header. A push event
// to refs/heads/<branch> is decoded (the same strict JSON decoding as every
// body; 422 with its loc when it is malformed or, for a branch push, lacks
// installation.id, the repository URL or after) and handed to
// ControlPlane.HandleGitHubPush with installation.id, the repository's
// clone_url (else html_url, else ssh_url; the control plane compares them
// with each deployment's repo_url regardless of case, scheme, user and a
// ".git" suffix) and the pushed commit (after), which becomes the new
// revisions' repo_commit_sha, with the X-GitHub-Delivery header and the
// SHA-256 of the body: the control plane processes a delivery once, so a
// repeat (GitHub's redelivery, or a replayed signed body under any delivery
// id, which the signature does not cover) is 202 with revisions_created 0.
// The answer is 202 {"message": "...", "revisions_created": N}. Every other signed delivery is 202 with
// revisions_created 0 and changes nothing: ping and events other than
// push; pushes of tags or other refs and branch deletions (after all
// zeros) reach the control plane, whose rule is that they create nothing. GitHub Apps always deliver JSON; a form-encoded delivery
// (payload=...) of a repository webhook is a 422, and such webhooks carry
// no installation anyway.
//
// # Authentication and tenants
//
// Every route but GET /openapi.json, the OAuth callback, the GitHub setup
// redirect, the GitHub webhook, GET /healthz, GET /readyz and GET /metrics
// (which has its own key) needs credentials: X-Api-Key, or Authorization: Bearer. An Authenticator (Options) turns them into a
// Principal and the tenants it may use; the built-in KeyTable holds only
// SHA-256 digests of its keys and compares a presented key's digest with
// every entry in constant time. A principal with one tenant needs no
// X-Tenant-Id header; with several, a request without it is 403 "...
// requires workspace specification ..."; a tenant it may not use is 403.
// No credentials, or credentials the Authenticator rejects, are 401.
// Resources of another tenant answer 404, exactly like unknown ids.
//
// # Event streams
//
// GET /v2/events (the tenant's whole stream) and GET
// /v2/deployments/{deployment_id}/events (one deployment's, its revisions'
// included) answer 200 text/event-stream (wire contract section 9) and
// follow the ControlPlane's event log (controlplane.FollowEvents): one
// event per committed change of a deployment or revision, written in the
// same store Update as the change, so no change is missed and a change that
// rolled back has none.
//
//	event: revision
//	id: 42
//	data: {"change":"status","deployment_id":"…","revision_id":"…","revision":{…}}
//
// Events: "deployment" with data {"change", "deployment_id", "deployment"}
// and "revision" with {"change", "deployment_id", "revision_id",
// "revision"}, the resource being the wire JSON GET answers at that
// change; change is "created", "updated" (the status did not change),
// "status" (it did) or "deleted" (a deployment removed with its revisions
// after AWAITING_DELETE; no resource then). "log" events ({"type",
// "deployment_id", "revision_id", "log"}) are sent only with ?logs=build,
// ?logs=deploy or both (an unknown type is 422 at ["query", "logs"]; "log"
// is a line as the logs route answers it, written by the deployer). "gap"
// ({"detail"}) says that events after the client's Last-Event-ID are no
// longer retained: read the resources again.
//
// Ids are opaque strings, ordered like the tenant's commits across every
// replica sharing the store. A stream starts with the changes committed
// after it is opened; a client that reconnects with the Last-Event-ID
// header (browsers' EventSource does so itself) continues after that event
// with no gap and no duplicate, as long as the events after it are still
// retained (controlplane.Options.EventRetention, default the newest 10,000
// per tenant, and EventMaxAge, default 24 hours). A deployment's stream
// answers 404 for an unknown deployment (another tenant's included), and
// ends after its deleted event. An idle stream gets a ": heartbeat" comment
// every Options.EventHeartbeat (default 15 s). Each write has 30 s to
// complete, so a client that stops reading is dropped. A stream in one
// process wakes when a change commits through the same ControlPlane and
// looks in the store every controlplane.Options.EventPollInterval (default
// 1 s) for changes other replicas committed.
//
// GET /v2/deployments/{deployment_id}/revisions/{revision_id}?wait=terminal
// answers the revision as soon as its status is terminal (DEPLOYED,
// SKIPPED, INTERRUPTED or a *_FAILED), or as it is after ?timeout=S seconds
// (0 to 60, default 30; a bad wait or timeout is 422 at ["query", ...]),
// on the same change notification (controlplane.WaitRevision).
//
// The Handler's Close ends every open stream cleanly and makes every
// waiting ?wait= answer the revision as it is; a stream asked for after
// Close answers 503. http.Server.Shutdown does not end long-lived
// requests: call Close when shutdown begins (cmd/deployplane calls it
// before Shutdown; http.Server.RegisterOnShutdown works too), and again
// after Shutdown has returned to flush the request log.
//
// # Load
//
// Options.Load bounds the work the handler takes on (wire contract section
// 9: refused load is 503 with Retry-After, a rate limit 429 with
// Retry-After and RateLimit-*, both {"detail": ...}). Nothing waits in a
// queue: a request beyond a cap is answered at once, so the requests
// admitted keep their latency when a burst comes.
//
//   - In-flight cap (LoadLimits.MaxInFlight, default DefaultMaxInFlight():
//     32 per GOMAXPROCS, at least 64): requests in service at once, every
//     route and unknown path alike, long polls and uploads aside. One more
//     is answered 503 with Retry-After: 1 and {"detail": "The server is
//     busy: ..."} before its credentials are even checked. A refusal costs the handler about
//     3 µs (BenchmarkRefused); the default keeps a 2-core server's
//     CPU-bound requests (a page of 100 deployments takes milliseconds)
//     from queueing for seconds, while leaving storebolt's group commit
//     its 64 writers. A server whose requests mostly wait on a remote
//     database may raise it; a small, busy one gets lower latency from a
//     cap of a few per processor (BENCHMARKS.md).
//   - Long-poll cap (LoadLimits.MaxLongPolls, default DefaultMaxLongPolls,
//     256): GET /v2/auth/wait/{auth_id}, which holds its request for up to
//     300 s, goes through its own cap instead (503 "... too many long polls
//     ..."), so long polls never take the places of ordinary requests nor
//     these theirs. The event streams (GET /v2/events and
//     /v2/deployments/{deployment_id}/events) and GET of a revision with
//     ?wait= take the same cap (shed.go).
//   - Upload cap (LoadLimits.MaxUploads, default DefaultMaxUploads, 64):
//     the PUTs of upload URLs stream for as long as their client sends,
//     so they have their own cap too (503 "... too many uploads ...").
//   - Shares: one client holds at most part of each cap, so that a client
//     at its limit never starves the others. A client is the tenant of an
//     authenticated request or of an upload URL, else the client address
//     (RateLimit.ClientAddr). LoadLimits.MaxInFlightPerTenant defaults to
//     half of the in-flight cap, MaxLongPollsPerTenant to a quarter and
//     MaxUploadsPerTenant to an eighth of theirs, each at least 8. Beyond
//     it: 503 "... this workspace already has N ..., its share of the
//     server", Retry-After: 1. The share is taken once the credentials
//     are checked.
//   - Bodies (body.go) are read without a place: an admitted request gives
//     its place back, its body is read whole (Options.MaxBodyBytes; on
//     public routes LoadLimits.PublicMaxBodyBytes, 64 KiB, or the
//     webhook's WebhookMaxBodyBytes), then it takes a place again (503 if
//     none is left). A slow body holds a connection, never a place. A
//     Content-Length beyond the limit is refused unread (413). A public
//     route's body must arrive within LoadLimits.PublicReadTimeout (10 s;
//     408 beyond). Both close the connection. An upload streams instead,
//     at LoadLimits.MinUploadRate at least (16 KiB/s over each
//     UploadRateWindow, 30 s, of waiting for the client): a slower one is
//     cut (400) with a Warn record "upload cut: below the minimum rate".
//   - GET /healthz and GET /readyz are under neither cap nor the rate
//     limit: a load balancer that found a saturated server unhealthy would
//     pull it and move its load onto the others. GET /metrics is not
//     exempt: it is an ordinary public route (in-flight cap, and the rate
//     limit by address).
//   - Rate limit (LoadLimits.RateLimit, default none; cmd/deployplane sets
//     50 a second in bursts of 100): a token bucket (golang.org/x/time/rate)
//     per client. Requests with accepted credentials are charged to their
//     Principal.ID (the KeyTable's "key:" and digest prefix), whatever their
//     address, so clients behind one NAT do not share a bucket. Public
//     routes are charged to the client's address (RateLimit.ClientAddr,
//     default the IP of RemoteAddr, IPv6 by /64). Failed credentials (401)
//     are charged to the address in a bucket of their own, and an address
//     whose bucket is empty is answered 429 before its credentials are
//     checked, valid or not: guessing keys is bounded to the rate, and
//     costs the server no more than the check.
//
// Every answer of a rate-limited request carries RateLimit-Limit (the
// burst), RateLimit-Remaining (whole tokens left) and RateLimit-Reset
// (seconds until the bucket is full again, rounded up). A 429 adds
// Retry-After: the seconds until one token is back, rounded up, at least
// 1; with 50 a second that is 1. The limiter reads RateLimit.Now, so tests
// move its clock. Its table of buckets stays bounded: a bucket that has
// refilled is dropped (a new client gets a full one, so nothing changes),
// the table is swept each time it has doubled, and beyond
// RateLimit.MaxClients (default 100,000 clients active within one refill
// time) buckets are dropped at random, which errs on the side of serving.
//
// The connection count is the server's to cap: cmd/deployplane wraps its
// listener in golang.org/x/net/netutil.LimitListener (-max-conns).
//
// # Logs
//
// Options.Logger gets one Info record per request (method, path without the
// query, status, duration, request_id, tenant) and an Error record with the
// cause of every 500 and of every panic. Every answer carries X-Request-Id:
// the client's own X-Request-Id when it sent one, cut to MaxRequestIDBytes
// (128) with every byte but letters, digits and - _ . : / + = @ dropped (so
// it goes into a log line or a header as it is), or, when it sent none or
// nothing safe, one the handler makes (a random prefix per handler and a
// sequence number). The log records carry the same id.
//
// The request records are written asynchronously: a request appends its
// record (a few words, no allocation) to a buffer (Options.LogBuffer
// records), and one goroutine of the handler's own hands them to the
// Logger's handler, in the order the requests ended, so that formatting
// and writing the log does not lengthen the request nor make concurrent
// requests queue on the log's writer. Nothing is dropped: a request ending
// while the buffer is full waits for room (only a record whose Handle
// panics is skipped). The goroutine runs only while records wait. Call the
// Handler's Close after http.Server.Shutdown has returned: it returns once
// every record has reached the Logger's handler (or its writer), so that
// the program's last requests are in the log when it exits.
//
// A record is the line
//
//	{"time":"2026-11-24T09:20:16.123456789Z","level":"INFO","msg":"request","method":"GET","path":"/v2/deployments/...","status":200,"duration":41234,"request_id":"...","tenant":"..."}
//
// with slog.NewJSONHandler (duration in nanoseconds), and
//
//	time=2026-11-24T09:20:16.123Z level=INFO msg=request method=GET path=/v2/deployments/... status=200 duration=41.234µs request_id=... tenant=...
//
// with slog.NewTextHandler. slog's JSON handler takes about 1.7 µs to
// format one, a noticeable part of a GET's CPU under load. NewLogHandler
// returns a handler that writes the same lines as those two, byte for
// byte, and with it as the Logger's handler the request log formats its
// records itself, several times faster, and writes many lines a Write
// (cmd/deployplane logs through it). With any other handler each record
// is handed over as a slog.Record. Error records (the cause of a 500,
// a panic) are written synchronously, before their request's record. The
// Logger's attributes (Logger.With) and level apply as to any record; the
// request records carry no source location (HandlerOptions.AddSource). Keys, tokens,
// client secrets, bodies and query strings (the OAuth callback's carries the
// authorization code and state) are never logged; give the oauthflow.Service
// the same Logger, it never logs a secret either.
//
// # Health and metrics
//
// GET /healthz answers 200 {"status": "ok"} while the process serves. GET
// /readyz asks ControlPlane.Ready (the store answers a read, Run is
// running, and its Deployer, when it implements
// controlplane.ReadinessChecker, reaches its engine) within 5 s: 200
// {"status": "ok"}, or 503 {"status": "unavailable", "detail": "Not ready:
// ...", "not_ready": [...]} naming the components ("store", "reconcile",
// "deployer") in fixed words; both carry "clusters": {"<name>": "ok" or
// "unreachable"} when the Deployer drives Kubernetes clusters
// (ControlPlane.ClusterHealth), which do not make the server unready.
// Both are public and answer no tenant's data:
// the causes (which may hold addresses or paths) go to Options.Logger at
// Warn, once each time the set of components not ready changes, and the
// return to ready at Info. Probes that arrive while a check runs wait for
// it and share its verdict, so a flood of probes costs one check at a
// time.
//
// Options.Metrics (package prommetrics implements it) is told of every
// request once its answer is written: the route's pattern, never the path
// (ids would make a series each), the method, the status and the duration.
// It also serves GET /metrics, which is public unless Options.MetricsKey is
// set; then it needs Authorization: Bearer <key>, compared by SHA-256
// digest in constant time (401 with WWW-Authenticate otherwise). The metrics
// key and API keys open nothing of each other's. Without Options.Metrics
// /metrics is a 404 and is not in GET /openapi.json. The observation costs
// a request well under a microsecond (BENCHMARKS.md, "Metrics").
//
// # Performance
//
// Each benchmark reports its ratio against a baseline measured in the same
// run (benchcmp's x-baseline: baseline time over ours; 1.0 is as fast as
// the baseline): GetDeployment (one keep-alive client) and
// GetDeploymentParallel (64 concurrent keep-alive connections, the server
// and a bare net/http handler writing the same body alternately; its
// log-cost sub-benchmark sets the logged server against the unlogged one),
// CreateParallel (64 clients creating, storebolt against storemem),
// GetDeploymentInProcess (ServeHTTP on a recorder against
// ControlPlane.GetDeploymentJSON alone) and
// AuthenticateStoredTokenInProcess (the OAuth helpers' hot path against
// oauthflow's Authenticate and json.Marshal). For example
//
//	go test -run '^$' -bench 'GetDeploymentParallel/(storemem|storebolt)/(vs-bare|log-cost)$' -benchtime 20000x -count 5 ./httphandler/
//
// The figures, the commands that produced them and the machine's load at
// the time are in BENCHMARKS.md (section httphandler); they are kept there
// only, so that they are not left stale here.
package httphandler
