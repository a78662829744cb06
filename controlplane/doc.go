// Package controlplane is deployplane's deployment domain: the wire types of
// the API, every rule of the specification (spec/seed-spec.md made exact by
// spec/wire-contract.md), and ControlPlane, which applies them over a
// store.Store, scoped per tenant. It does no I/O of its own and imports no
// store implementation and no net/http.
//
// # Entry points
//
// New(st, opts) builds a ControlPlane; nil options mean defaults (Options
// injects the clock, the id generator, the sources offered, the custom URL
// template of github deployments, the logger, the tracing-project hook, the
// GitHub App that verifies installations, the caps of Limits, and the lifecycle's poll interval, lease duration and
// worker count). Its methods mirror the API and take ctx, then the
// tenant (the workspace id), then values:
//
//	deployments  CreateDeployment, GetDeployment, ListDeployments,
//	             UpdateDeployment (PATCH), DeleteDeployment
//	revisions    GetRevision, ListRevisions, CreateRevision, RedeployRevision
//	listeners    CreateListener, GetListener, ListListeners, UpdateListener,
//	             DeleteListener
//	integrations StartGitHubInstall, CompleteGitHubInstall (verified),
//	             CreateIntegration (unverified), ListIntegrations
//	lifecycle    Run, Process, HandleGitHubPush, ReportDeploymentStatus
//	logs         ListLogs, AppendLogs (and Reporter.Log during the work)
//	events       FollowEvents (EventStream.Next), WaitRevision
//	for HTTP     GetDeploymentJSON, AppendDeploymentJSON (the wire JSON in
//	             one call), Limits
//
// A deployment starts AWAITING_DATABASE with a first revision in status
// CREATING (a deployment of internal_source or internal_docker, the
// sources of langgraph deploy, only once what its revisions come from
// arrives: see "The sources of langgraph deploy" below); PATCHes, redeploys and build_on_push pushes add revisions
// (immutable snapshots of source_revision_config, secrets and
// resource_spec, wire contract section 7). The deployment's source_revision_config
// is always its latest revision's, repo_commit_sha included: nil for a
// revision created by a create or a PATCH (it builds its ref's head) until
// the Deployer reports the commit it built, the pushed commit for a push,
// and the named revision's commit for a redeploy (so a redeploy rebuilds
// that commit, not the branch's head). DeleteDeployment marks it
// AWAITING_DELETE, after which changes answer apierr.ErrInvalidState and its name
// stays taken until the lifecycle removes it.
//
// A redeploy changes only what a revision is: the new revision copies the
// named one's source_revision_config (repo_commit_sha included), secrets
// and resource_spec, while the fields a PATCH changes in place
// (install_command, build_command, custom_url, build_on_push: the
// PatchInPlace rows of FieldRules) keep their current values; which fields
// come from the revision is read from the rules table (its PatchRevision
// rows), not from a second list. A revision also records the install and
// build commands the deployment had when it was created, which Work hands
// the Deployer (so a build resumed after a restart uses the commands it
// started with), but they are not part of its snapshot: the contract makes
// them in-place fields, which create no revision when changed, so
// restoring them on a redeploy would undo a PATCH the client made without
// creating any revision. (Before, a redeploy restored them.)
//
// # Lifecycle
//
// The control plane records desired state; a Deployer makes it real. Run
// (or Process, one unit at a time in the caller's goroutine) claims pending
// work and calls Deployer.Deploy(ctx, *Work, Reporter) for a revision not
// yet terminal, or Deployer.Teardown for a deployment AWAITING_DELETE,
// after which every record of the deployment is removed (revisions,
// indexes, name: the name is free again, GET answers not found).
//
// Why a Reporter and not step-wise calls: a real deployer's steps take
// minutes and happen elsewhere (a build service, a Kubernetes rollout); it
// knows when a step is done, the control plane does not. So the deployer
// drives and reports, and the control plane keeps what only it can keep:
// the lease, and the one transition table. Each Report is checked against
// Transitions and written in its own Update with the lease renewed; a
// refused report (apierr.ErrInvalidState) or a lost lease (ErrLeaseLost) writes
// nothing and tells the deployer to stop. Deploy may also return before the
// revision is terminal, to be called again after PollInterval (a deployer
// that polls an outside system), or return an error, recorded as the
// failure of the revision's phase (FailureOf) with the error's text as
// status_message. Every call starts from the stored status in Work, so work
// resumed after a restart or taken over from a dead replica carries on
// where it was.
//
// The table (Transitions, HappyPath, IsTerminal, CanTransition): github
// goes CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY,
// DEPLOYING, DEPLOYED; external_docker skips the two build states; each
// non-terminal status may fail to its phase's *_FAILED. Choices where the
// contract leaves room:
//
//   - SKIPPED is written by the Update that creates a newer revision
//     (create, PATCH, CreateRevision, redeploy, push): every revision of
//     the deployment still before DEPLOYING becomes SKIPPED with the
//     message "Superseded by revision {id}.". A revision already DEPLOYING
//     finishes; if it reaches DEPLOYED after a newer one did, it keeps its
//     status but does not become active (active_revision_id is always the
//     newest DEPLOYED revision).
//   - INTERRUPTED is written by DeleteDeployment for every unfinished
//     revision, in the same Update; it is final (IsTerminal counts it,
//     beside the contract's five terminal statuses).
//   - UNKNOWN is the deployer's "I cannot tell": reachable from any
//     unfinished status, it stays pending, and may go to any status of the
//     happy path after CREATING or any failure once the deployer knows.
//   - A Step's RepoCommitSHA is written on the revision and, when the
//     revision is the deployment's latest, on the deployment too, in the
//     same Update (updated_at moves).
//   - DEPLOYED makes the revision active (unless a newer one is), moves the
//     deployment from AWAITING_DATABASE to READY and sets image_version to
//     the version the deployer reported for it. A deployer sets READY,
//     UNUSED or UNKNOWN on the deployment in a Step, or at any time with
//     ReportDeploymentStatus.
//
// Leases and replicas: a claim writes "owner:sequence expiry" into the
// work's pending record (owner from NewID, so replicas differ), renewed
// every third of LeaseDuration while the work runs and by every report.
// Two ControlPlanes over one store never drive one revision at once: a
// report or renewal whose token is not the stored one fails with
// ErrLeaseLost and cancels the Deploy's ctx. Work whose lease expired (its
// owner crashed) is taken by whoever claims next; work in flight when Run
// stops is given back at once, so a restart resumes it. Run wakes at once
// when this ControlPlane creates work and polls every PollInterval for work
// other replicas created.
//
// Fair shares: Run drives up to Options.Workers units at once, and at most
// Options.TenantWorkers of them (default a quarter of Workers, at least 1)
// are one tenant's; a Deployer builds a revision's image inside its unit,
// so this bounds each tenant's builds too. A claim passes over the waiting
// work of a tenant at its share, seeking past it in the pending records'
// key order rather than reading it, so a tenant with a burst of revisions
// waiting neither starves the others' work nor slows its claims. The share
// is counted per ControlPlane: each replica gives a tenant its share.
//
// Operations: every status change the loop records (a report, or the
// failure of a Deploy error) is logged at Info ("revision transition":
// tenant, deployment, revision, from, to, and step, the time the Deployer
// spent in the status it left) and told to Options.Observer, with every
// lease taken over (claimed after another claim's lease expired; work given
// back for a retry, whose lease carries the token "retry", is not taken
// over) and the duration of every Deploy and Teardown call; package
// prommetrics implements Observer with Prometheus. SKIPPED and INTERRUPTED
// are written by API calls, not the loop, and are not observed. Ready
// reports whether the store answers, Run runs and its Deployer (when it
// implements ReadinessChecker) reaches its engine, for GET /readyz, and
// ClusterHealth the state of each cluster of a Deployer that drives
// several (ClusterHealthReporter), which does not make it unready;
// PendingWork counts the revisions and deletions waiting and in progress,
// reading only the pending records.
//
// GitHub installations: an integration is a GitHub App installation, and
// an installation belongs to at most one tenant (a second claim, by any
// tenant, is apierr.ErrConflict), so a push reaches exactly the tenant that holds
// it. The verified way to claim one: StartGitHubInstall stores a random
// state bound to the tenant (only its SHA-256 is stored; single use,
// expiring after GitHubInstallStateTTL) and returns the App's installation
// URL carrying it; CompleteGitHubInstall, given GitHub's setup redirect,
// spends the state, asks the GitHubApp (Options.GitHubApp, implemented by
// package githubapp; called outside any store transaction) whether the user
// behind the redirect's code can access the installation, and only then
// records it for the state's tenant. CreateIntegration records an
// installation without asking GitHub: whoever calls it is trusted with any
// installation id nobody holds yet (cmd/deployplane serves it only with
// -allow-unverified-integrations).
//
// build_on_push: HandleGitHubPush takes a push event the HTTP layer has
// authenticated (signature checking is not done here). A push to
// refs/heads/<branch> creates a revision with the pushed commit as
// repo_commit_sha for every github deployment of the integration holding
// that installation, with build_on_push true, the same repository (case,
// scheme, user, ".git" and "/" ignored; git@host:o/r is https://host/o/r)
// and repo_ref equal to the branch. Tags, other refs and branch deletions
// change nothing. A delivery is processed once: its delivery id and body
// digest (PushEvent.DeliveryID, BodyDigest) are recorded in the Update that
// creates its revisions, and a later push with either seen before, within
// DeliveryRetention (24 hours), creates nothing.
//
// # The sources of langgraph deploy
//
// internal_source (a tarball uploaded to the service, built like github)
// and internal_docker (an image pushed to the registry the service names,
// run like external_docker) are columns of the rules table like the
// others (wire contract section 10), offered wherever external_docker is.
// What the table cannot say lives in sources.go:
//
//   - A create without source_revision_config.source_tarball_path
//     (internal_source) or image_uri (internal_docker) makes no revision:
//     latest_revision_id is null until one arrives. A PATCH of
//     revision-triggering fields before then changes the deployment in
//     place; POST .../revisions before then is 422 missing at the field.
//   - revision_source (top level of PATCH and POST .../revisions) is null
//     or the deployment's own source, else 422 at ["body",
//     "revision_source"]; tracked_packages (at most MaxTrackedPackages
//     names of 1 to MaxTrackedPackageChars characters) is kept on the
//     revision the request creates, and a redeploy copies it.
//   - deployment_type defaults to dev; internal_source's
//     langgraph_config_path to DefaultLanggraphConfigPath.
//   - Options.Uploads (UploadChecker) decides, inside the transaction,
//     whether a source_tarball_path names a completed upload of the
//     deployment: by default UploadRecords, the records IssueUpload and
//     FinishUpload keep, so that a deployment cannot name a tarball that
//     is not its own; AnyUpload takes every path as given.
//     Options.Images (ImageResolver) turns an internal_docker image tag
//     into its digest before the revision is made; it is implemented
//     outside this package (package registry owns the registry), and nil
//     means no resolution.
//
// # Logs and status history
//
// Every revision keeps two logs, build and deploy, of lines with an id, a
// timestamp, a level (DEBUG, INFO, WARNING, ERROR, CRITICAL) and a
// message. A Deployer writes them in batches with Reporter.Log (one store
// transaction per call, renewing the lease; allowed after the revision is
// terminal, refused with ErrLeaseLost for a lost lease), or with
// AppendLogs outside its work (a running server's output). Each log is
// bounded by Options.LogRetention (default: the last 10,000 lines and 5
// MiB of messages; a message is cut at 16 KiB): the oldest lines are
// dropped in the write that goes over, and counted, and ListLogs answers
// one WARNING line "N earlier lines dropped: ..." in their place, which
// pages and filters like any line. Logs are removed with the deployment.
//
// ListLogs reads one log of a revision (or of the deployment's latest
// revision), asc or desc, filtered by level (exact, case-insensitive),
// query (a substring of the message, case-insensitive) and a time window
// [start_time, end_time). Its offset is opaque (the order and the place
// of the previous page's last line); next_offset is null only on a page
// with no line, so a client following a growing log in asc order passes
// each next_offset back and never sees a line twice. LogQuery.Validate
// reports every bad parameter at [In, name], In being "query" or "body".
//
// A revision answers status_history, every status it entered with its
// time, oldest first (its CREATING at created_at included), written in
// the Update that changes the status.
//
// # Event log
//
// Every change of a deployment or a revision (created, updated, status
// changed, deleted) writes one event, in the same store Update as the
// change: an event exists if and only if its change committed. The change
// does not number it (a counter every change of a tenant wrote made
// creates into one tenant conflict under PostgreSQL, one commit at a
// time): it goes to an outbox, and a sequencer numbers the outbox's events
// 1, 2, 3, ... per tenant in batches, each deployment's in the order of
// its changes, a batch after every earlier one, across replicas sharing
// one storepg database too. A follower runs the sequencer before it reads
// (so it reads every event committed before it looked) and reads only
// numbered events, so it never misses one that is numbered later; Run
// runs it at each poll, SequenceEvents runs it on demand, and a
// ControlPlane runs it itself every few hundred events it writes, unless
// another replica's such run holds the sequencer lease (record
// cp_sequencer/lease, which lapses two seconds after its holder took
// it): replicas that write at one pace would otherwise run it at once
// and, under PostgreSQL, make each other's runs fail and run again (a
// fifth of the CPU of a create, BENCHMARKS.md). The
// number's decimal form is the event's id. FollowEvents follows a tenant's log (or one deployment's
// events) from now or after a given id; EventStream.Next waits for the
// next events, woken when a change commits through this ControlPlane and
// polling the store every Options.EventPollInterval for the other
// replicas'. The log keeps at least each tenant's newest
// Options.EventRetention events no older than Options.EventMaxAge (pruned
// in batches as later events are numbered); a follower whose next event
// was pruned gets an EventGap event. Deployment events are kept in the
// sealed storage form and carry, when read, the deployment's wire JSON as
// GetDeployment answers it (secrets included, like GET); revision events
// carry the revision's. WaitRevision answers once a revision is terminal
// or at a timeout, on the same wake-ups. Log lines of revisions enter the
// log as EventLog events, in the Update that stores them (every line
// Reporter.Log or AppendLogs keeps, with the id ListLogs answers for it),
// read only by followers that ask for their type.
//
// # Errors
//
// The errors of a client's mistake are those of package apierr, the
// vocabulary controlplane shares with oauthflow and httphandler:
// *apierr.NotFoundError (matches apierr.ErrNotFound; Kind is
// apierr.KindDeployment, KindRevision or KindListener; an id of another
// tenant is not found), apierr.ErrConflict, apierr.ErrInvalidState and
// *apierr.ValidationError (every problem of a request, each with its loc
// path, e.g. ["body", "source_config", "resource_spec", "sidecars", 0,
// "name"], and one of the apierr.Type codes). The Error text of the first
// three is the sentence an HTTP response carries as its detail, e.g.
// "Deployment ID {id} not found.". A tenant that breaks apierr.CheckTenant
// is apierr.ErrInvalidTenant. This package's own sentinels are those of
// the reconcile loop (ErrLeaseLost) and of the GitHub installation flow
// (ErrGitHubAppNotConfigured, ErrUnknownInstallState,
// ErrInstallationForbidden, ErrGitHubUnavailable, each returned as an
// *apierr.DetailError carrying its sentence). Store sentinels never leak
// out of this package; a TracingProjects hook's error is returned wrapped.
//
// ValidateCreateDeployment, ValidateUpdateDeployment,
// ValidateCreateListener and ValidateUpdateListener run the checks of the
// method they are named after and write nothing (they read the store in a
// View: the deployment or listener a PATCH applies to, the references a
// create names). A front end that could decode only part of a request
// calls them to list the rule problems of the rest beside its own.
//
// # Timestamps
//
// The created_at and updated_at fields of Deployment, Revision and Listener
// are a wiretime.Time (package wiretime, shared with oauthflow): a
// time.Time that encodes as fixed-width RFC 3339 in UTC with exactly six
// fractional digits and a Z, as wire contract section 1 shows and the
// hosted service writes: 2026-11-21T10:04:05.123456Z,
// 2026-11-21T10:04:05.000000Z when the microseconds are zero. Clients that
// parse with Python's datetime.fromisoformat (3 or 6 digits only before
// 3.11) read them, and they sort as strings in time order. The wire types
// have no MarshalJSON of their own: json.Marshal of a Deployment, a page,
// or a struct of yours that holds them writes the wire format, at the cost
// of encoding the same struct with time.Time fields (BENCHMARKS.md).
//
// The ControlPlane stamps times in UTC at the microsecond, so encoding (which
// truncates below the microsecond) loses nothing. Decoding accepts any RFC
// 3339 time, with or without a fraction. Convert with wiretime.New(t) and
// d.CreatedAt.Time(); Before, After, Compare, Equal and Add work on the
// field directly.
//
// # The rules table
//
// Which request field is required, optional, not applicable, read-only,
// immutable, changed in place or revision-triggering, per source, is written
// once, in the table FieldRules returns. Each row also says the field's
// create default, whether a revision records it and a redeploy restores it
// (what a revision is), and which list index and summary use it; create,
// PATCH, newRevision and RedeployRevision read the rows, and table tests
// check every row against the storage code. The
// state-machine test (package controlplanetest) does not: its model states
// the rules again, from the wire contract, so that a wrong rule here shows
// as a difference instead of being copied into the predictions, and this
// package's mutation tests check that it catches deliberately broken rules
// (mutation.go, switched on per ControlPlane by a hook only the tests
// reach).
//
// Shape checks (the name pattern, UUIDs, enums, string lengths, DNS-1123
// names, the ranges of ResourceSpec numbers) are `validate` struct tags on
// the request types, run by github.com/go-playground/validator/v10 (built
// once per ControlPlane, in New) and translated to this package's problems:
// the loc by JSON names, indexes as ints, the types and messages of
// package apierr. What a tag cannot say cleanly stays a plain function:
// per-source and cross-field rules (the table, build_on_push with a tag
// ref, limits >= requests on the defaulted spec), caps checked before a
// list's items, unique names, volume mounts naming a volume, value and
// valueFrom exclusive, Kubernetes qualified names as map keys and the size
// of free-form objects. The references a create names (integration,
// listener, namespace) are checked inside the transaction that writes it.
//
// Requests name secrets as SecretInput, whose Value is a pointer: a secret
// needs both its name and its value (the seed's Secret), so an absent or
// null value is 422 missing at ["body", "secrets", i, "value"] on create,
// PATCH and POST .../revisions, while "" is a value. Answers and Work carry
// Secret, {name, value}, as before.
//
// A problem's loc names the key the client sent: when a request gives the
// graph path by its input alias source_revision_config.langgraph_config_path
// (wire contract section 1) and not as graph_config_path, its problems (not
// applicable to external_docker, too short, too long) are reported at
// ["body", "source_revision_config", "langgraph_config_path"]. Answers
// (deployments, revisions, Work) carry both names, always equal, because
// the hosted service's clients read langgraph_config_path (wire contract
// section 9); the alias is never stored.
//
// Fields the service owns are answered, never taken from a request:
// tenant_id (the record's key holds the tenant), url (set by the Deployer)
// and repo_commit_sha. display_name is a row like any other: optional on
// create, in place on PATCH, 1 to 256 characters (a dispname tag); as null
// in a PATCH means no change and "" is too short, it cannot be cleared
// once set.
//
// Every list of a request body is checked against its cap (Limits) before
// anything is done per item: secrets (MaxSecrets), tag_value_ids
// (MaxTagValueIDs), every list of a resource_spec and of its containers
// (image_pull_secrets, volumes, volume_mounts, init_containers, sidecars,
// command, args, env, envFrom, volumeMounts: MaxItems), its maps
// (MaxMapEntries) and a listener's k8s_namespaces (MaxItems). A list over
// its cap is one too_long problem and none of its items is looked at, so
// the work of a request, and the number of its problems, do not grow with
// a list beyond its cap; duplicate checks use one map per list, linear.
//
// # Storage
//
// Every record the package writes is keyed by tenant first (a short
// per-tenant prefix for the deployment collections), in the store
// collections Collections lists (for tools that back up, copy or inspect a
// store). Beside each deployment, in the same Update, the package keeps
// the order, summary, index and name records its lists read, so that
// ListDeployments never decodes a tenant's deployments to filter them:
// with deployment_ids it does one Get per id; otherwise it walks one
// index newest first (tag, image version, the positioned trigram index
// for name_contains, type, status, source, the other sources' indexes
// merged for remote_reconciled=false, else the order), checks the other
// filters on small summaries, skips the offset over small keys (an
// unfiltered page over counts kept per window of creation time, so a deep
// page costs about what the first does), and decodes only the returned
// page. name_contains is case-insensitive and answers any needle (those of
// one or two bytes too) exactly from the index, at a cost that follows
// the matches, not the fleet. Measured on storebolt with one tenant of
// 1M deployments (BENCHMARKS.md, issue 18): a page of 100 name matches,
// a page at offset 500k and every other filter each cost about what the
// first page does (0.8 - 1.5 ms of CPU on a lightly loaded machine;
// decoding the page's 100 deployments is most of it) and no more than
// at 100k; a needle that matches nothing costs tens of microseconds.
// The layout of every collection, for maintainers, is
// documented beside the code that writes it, in records.go.
//
// Deployments and revisions are stored in a compact storage form, not as
// their wire JSON: nulls and empty members are left out, and every record
// carries a format version. A build that meets a record written by a newer
// build (a newer format version) refuses to read it, with an error that
// wraps ErrNewerRecord and names the record and both versions, rather than
// misreading it: do not run an older binary over a store a newer one wrote.
//
// Stores written in the storage layouts of earlier builds are not read and
// not converted: recreate them. (*ControlPlane).CheckLayout, called after
// opening a store and before serving from it (cmd/deployplane does so at
// every start), refuses a store whose deployments have the text keys of
// earlier builds or that holds their earlier name_contains indexes, with
// an error wrapping ErrOldLayout; it reads a few keys and writes nothing.
// A deployment, revision or tracing project record without a format
// version (the wire-JSON form of earlier builds) is refused when read,
// with an error wrapping ErrOldLayout that names it.
//
// # Secrets at rest
//
// With Options.SecretKey (32 bytes, the key oauthflow takes too;
// cmd/deployplane always passes it), deployment and revision secrets are
// sealed with AES-256-GCM before they reach the store, each record's bound
// to its tenant and identity, in every store: the store holds no secret
// value in plain text. The ControlPlane answers, and a Deployer's Work
// receives, the plain values. Without a key (embedders, tests) secrets are
// stored in plain text, readable by whoever reads the store: set a key in
// production. A read of sealed secrets without a key, or with another key,
// fails with an error wrapping ErrSecretKey; Open (New after
// VerifySecretKey) refuses such a key up front, against a check value the
// store keeps from the first key it was used with. Records with plain-text
// secrets (written without a key) still read with a key and are sealed
// when next written.
//
// GetDeploymentJSON (and AppendDeploymentJSON) keep, in memory, the wire
// JSON they made of recently read deployments, secret values included,
// bounded by Options.AnswerCacheBytes (4 MiB by default; negative keeps
// nothing). Each read still reads the stored record and serves the kept
// answer only when the record is byte for byte the one it was made from,
// so a change made through any ControlPlane over the store shows in the
// next read.
//
// Key rotation is not supported yet: there is one key, and no command
// re-seals a store under another. A sealed value starts with a version
// byte so that a later build can open values of an old key while sealing
// with a new one; until then, an operator keeps the key (and backs it up
// with the store).
//
// # Adding a field
//
// A field of source_config or source_revision_config (the usual case)
// touches three production files, four when an index or the list summary
// uses it:
//
//  1. types.go: the field on its struct, with its JSON name and, for its
//     shape checks, a `validate` tag (shape.go lists this package's own
//     tags beside validator's).
//  2. rules.go: one row of the rules table: its loc, its create and patch
//     policy per source, and, where they apply, its create default, its
//     snapshot policy (snapRecorded or snapRestored), the index fields and
//     the summary that use it, and its get/set accessors. Validation,
//     PATCH, create defaults, new revisions and redeploys follow the row.
//     A snapshot field is also mapped, beside the table, to the revision
//     record (revisionRecord.snapshot and newRevisionRecord).
//  3. storageform.go: the same field, with a short storage key, on the
//     stored twin of its struct (storedSourceConfig or
//     storedRevisionConfig). The twins are conversions of the wire structs,
//     so the build fails until the field is there.
//  4. records.go, only when an index or the list summary uses the field:
//     indexKeys or summary. The table tests (rules_internal_test.go, whose
//     two fixtures must differ in the new field) fail until records.go and
//     the row agree.
//
// A field inside resource_spec or another object row is part of that
// row's value: it needs only types.go (and its tag), and for resource_spec
// its twin in storedResourceSpec (storageform.go). A check no tag can
// express is a plain function in validate.go; a new top-level request
// member also needs the request types (requests.go) and draftOf.
//
// The tests then say what else to state, on purpose: the state-machine
// model states each rule again (controlplanetest's policy table;
// TestModelTableAgrees fails until it does), the row fixtures of
// rules_internal_test.go and the bad draft of shape_internal_test.go need a
// value for the field.
package controlplane
