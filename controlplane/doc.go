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
// template of github deployments, the logger, the tracing-project hook and
// the caps of Limits). Its methods mirror the API and take ctx, then the
// tenant (the workspace id), then values:
//
//	deployments  CreateDeployment, GetDeployment, ListDeployments,
//	             UpdateDeployment (PATCH), DeleteDeployment
//	revisions    GetRevision, ListRevisions, CreateRevision, RedeployRevision
//	listeners    CreateListener, GetListener, ListListeners, UpdateListener,
//	             DeleteListener
//	integrations CreateIntegration, ListIntegrations
//
// A deployment starts AWAITING_DATABASE with a first revision in status
// CREATING; PATCHes and redeploys add revisions (immutable snapshots of
// source_revision_config, secrets, resource_spec and the install and build
// commands); DeleteDeployment marks it AWAITING_DELETE, after which changes
// answer ErrInvalidState and its name stays taken. Moving revisions along and
// removing deleted deployments is the lifecycle's work, not done here yet.
//
// # Errors
//
// *NotFoundError (matches ErrNotFound; an id of another tenant is not
// found), ErrConflict, ErrInvalidState and *ValidationError (every problem of
// a request, each with its loc path, e.g. ["body", "source_config",
// "resource_spec", "sidecars", 0, "name"]). The Error text of the first
// three is the sentence an HTTP response carries as its detail. Store
// sentinels never leak out of this package; a TracingProjects hook's error
// is returned wrapped.
//
// # The rules table
//
// Which request field is required, optional, not applicable, read-only,
// immutable, changed in place or revision-triggering, per source, is written
// once, in the table FieldRules returns. Validation and PATCH read it, and so
// do the generators of the state-machine test (package controlplanetest).
// Value checks (the name pattern, UUIDs, enums, Kubernetes sub-objects,
// ResourceSpec numbers, the caps of Limits) are plain functions; the
// references a create names (integration, listener, namespace) are checked
// inside the transaction that writes it.
//
// # Storage
//
// Every key starts with the tenant. A deployment is one JSON record keyed by
// tenant and id; next to it, in the same Update, the package keeps:
//
//   - an order record, tenant/created_at/id with an empty value, so that a
//     reverse scan lists newest first and an offset skips small keys;
//   - a summary record under the same key (lowercased name, status, type,
//     source, image version) against which filters are checked without
//     decoding a deployment;
//   - index records tenant/field/value/created_at/id for status, deployment
//     type, source (remote_reconciled), image version, tag value id and
//     listener;
//   - a name record (tenant/name, for uniqueness) and an entry in the name
//     blocks: records of up to 256 lowercased names in order-record order,
//     which answer name_contains with one bytes.Index per block and resolve
//     only the matches to ids (nameblocks.go).
//
// ListDeployments with deployment_ids does one Get per id. Otherwise it walks
// one source newest first, chosen by a fixed priority (no counts are kept):
// the tag indexes (tag_value_ids), the image version index, the name blocks
// (name_contains), the type, status and source indexes, else the order
// records; the other filters are checked on the candidates' summaries, the
// offset skips matches, and only the returned page is decoded. Revisions are
// keyed by tenant/deployment/id with their own order records (value: the
// status, for the status filter); listeners likewise.
//
// # Benchmarks
//
// At 100k deployments in one tenant over storemem (every 200th a github
// "dev" deployment, every 150th tagged, pages of 100):
//
//	go test -run XXX -bench . -benchtime 50x -count 3 ./controlplane/
//
//	CreateDeployment                      60-100 µs/op (GC of the 100k heap included)
//	UpdateDeployment (new revision)       ~62 µs/op
//	GetDeployment                         ~26 µs/op
//	page of 100 at offset 0               ~1.45 ms; ratio to the same page at 1k 0.76 (goal <= 1.5)
//	page of 100 at offset 50k             ~9.3 ms (50k order keys skipped, 100 deployments decoded)
//	deployment_type=dev (0.5% match)      1.4-1.9 ms
//	tag_value_ids (0.67%)                 ~2.0 ms
//	name_contains (0.1%)                  ~3.6 ms
//	remote_reconciled=false (0.5%)        ~1.4 ms
//	deployment_ids (100 ids)              ~2.1 ms
//
// Measured (best of the three runs) on a 2-core machine shared with other
// builds (load average 5 to 10), so absolute figures vary by 2x or more
// from run to run; the ratios are the stable part. Decoding the page's 100
// JSON records (~15 µs each) dominates every list but the deep offset.
package controlplane
