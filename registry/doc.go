// Package registry is deployplane's built-in OCI registry, which
// langgraph deploy --image pushes internal_docker images to (wire contract
// section 10). It runs the CNCF Distribution library
// (github.com/distribution/distribution/v3) over filesystem storage
// (Options.Dir) or an S3 bucket (Options.S3, in a program built with the
// s3 build tag: S3Built), on a listener of its own
// (the OCI API owns the /v2/ path, so it cannot share the control plane's
// port). cmd/deployplane serves it at -registry-addr.
//
// Its only credentials are the registry tokens of a TokenStore
// (IssuePushToken, IssuePullToken), sent as the password of HTTP basic
// auth with any user name. A token allows what its Grant allows: pull,
// and push for a push token, on the deployment's repository prefix
// (Repository: deployments/<id>) and below; nothing else (no catalog, no
// delete, no other deployment's or tenant's repository). The TokenStore
// keeps them in the control plane's store (TokenCollection, beside the
// deployments it reads in the same transaction), so replicas share them.
//
// Registry also implements controlplane.ImageResolver: an internal_docker
// image_uri naming this registry by tag is recorded by digest when its
// revision is created; an image that was never pushed, or lies outside
// the deployment's prefix, is refused (422 at image_uri).
//
// # Quota
//
// The repositories of one deployment may hold Options.Quota bytes of image
// blobs (layers and configs, not manifests), default DefaultQuota (10
// GiB). A blob counts once however many of the deployment's repositories
// link it, and so do the bytes its unfinished uploads have received,
// which an UploadLedger counts (Options.Ledger; the TokenStore keeps them
// in the control plane's store, so that replicas sharing the storage
// count each other's); an unfinished upload is removed
// Options.UploadMaxAge (a day) after it starts. An upload that would go
// beyond the quota is refused, as soon as its Content-Length or its data
// says so, with 403 and
//
//	{"errors": [{"code": "DENIED", "message": "registry quota exceeded: deployment <id> may store 10 GiB of image blobs and holds ..."}]}
//
// and its data is removed; the deployment's other uploads go on. An
// upload request reads the usage when it starts to send data and again
// after every sixteenth of the quota (at most 16 MiB) it receives, adding
// what it received to the ledger: uploads of one deployment running at
// once, in this process or in another replica sharing the ledger, may
// together go beyond the quota by at most that much each.
//
// # Garbage collection
//
// Collect (cmd/deployplane runs it every 15 minutes, -registry-gc-every)
// frees what no deployment keeps, which gives a deployment its quota
// back:
//
//   - a deployment that is deleted loses its repositories;
//   - a live deployment keeps its KeptTags (10) most recently pushed tags
//     (over all its repositories; older tags are removed), and the images
//     they point to;
//   - it keeps the images its image_uri, its active revision and its
//     controlplane.UploadsKept (10) newest revisions name (recorded by
//     digest: a tag pushed over again does not lose them;
//     controlplane.ControlPlane.KeptImages);
//   - every other manifest goes, and every blob link that no kept
//     manifest references (an index keeps the manifests it lists);
//   - then the blobs no repository of any deployment links leave the
//     storage: a layer another deployment pushed too stays.
//
// Nothing pushed within Options.CollectGrace (an hour) goes, whatever
// keeps it: a push in progress has its blobs before its manifest comes,
// and its tag before a revision names it. Redeploying a revision older
// than those kept fails when its image is pulled.
//
// The collector asks a Retention what a deployment keeps: the TokenStore
// reads it from the control plane, for the tenant each push token
// records beside its deployment (repositories of a deployment it has no
// record of are left alone). It may run while images are pushed, and in
// several replicas at once (docs/design-notes.md, "registry").
//
// # An external registry
//
// An operator may instead run a registry of their own that speaks the
// Docker Registry v2 token authentication specification and trusts this
// server's tokens. TokenServer is its realm (httphandler serves it at
// TokenPath): a client gives a registry token of the control plane as the
// basic-auth password (GET, or the OAuth2 password grant by POST) and gets
// a JWT signed with TokenOptions.Key, valid DefaultBearerTTL and never
// beyond the registry token, granting only the actions its grant allows on
// repositories in the deployment's prefix. The registry trusts the key
// through TokenServer.CertificatePEM (auth.token.rootcertbundle) or
// TokenServer.JWKS (auth.token.jwks, also served at JWKSPath). SigningKey
// derives an Ed25519 key from the server's secret key, so that replicas
// sign alike; ParseSigningKey reads an operator's PEM key.
//
// External is such a registry seen from the server: the registry_url of
// push-token and a controlplane.ImageResolver that resolves tags to
// digests with a bearer token it mints (Mint). Design notes:
// docs/design-notes.md, "registry".
package registry
