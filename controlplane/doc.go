// Package controlplane is deployplane's deployment domain: the wire types of
// the API, every rule of the specification, and ControlPlane, which applies
// them over a store.Store, scoped per tenant.
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
// # Errors
//
// *NotFoundError (matches ErrNotFound; an id of another tenant is not
// found), ErrConflict, ErrInvalidState and *ValidationError (every problem
// of a request, each with its loc path). The Error text of the first three is
// the sentence an HTTP response carries as its detail. Store sentinels never
// leak out of this package.
//
// # The rules table
//
// Which request field is required, optional, not applicable, read-only,
// immutable, changed in place or revision-triggering, per source, is written
// once, in the table FieldRules returns. Validation and PATCH read it;
// so do the property tests' generators. Value checks (name pattern,
// Kubernetes sub-objects, ResourceSpec numbers, caps) are plain functions.
//
// # Storage
//
// Deployments are keyed by tenant and id. Next to each, in the same Update,
// the package keeps an order record (tenant, created_at, id) whose value is a
// compact summary (lowercased name, status, type, source, image version),
// and index records by status, deployment type, source (remote_reconciled),
// image version, tag value id and listener. ListDeployments walks one of
// them newest first: deployment_ids are direct gets; an exact filter uses its
// index and checks the rest on the order-record summaries; name_contains,
// which no prefix index can answer, scans the summaries without decoding a
// deployment. Offsets skip index keys; only the returned page is decoded.
package controlplane
