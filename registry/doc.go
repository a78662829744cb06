// Package registry is deployplane's built-in OCI registry, which
// langgraph deploy --image pushes internal_docker images to (wire contract
// section 10). It runs the CNCF Distribution library
// (github.com/distribution/distribution/v3) as a library: its handlers
// over filesystem storage (Options.Dir) or an S3 bucket (Options.S3), on
// a listener of its own (the OCI API owns the /v2/ path, so it cannot
// share the control plane's port).
//
// Its only credentials are the control plane's registry tokens
// (controlplane.IssuePushToken, IssuePullToken): a request carries one as
// the password of HTTP basic auth, with any user name (docker login -u
// oauth2accesstoken --password-stdin is what the CLI sends), and gets what
// the token's controlplane.RegistryGrant allows: pull, and push for a push
// token, on the deployment's repository prefix
// (controlplane.RegistryRepository: deployments/<id>) and below, nothing
// else (no catalog, no delete, no other deployment's or tenant's
// repository). Tokens are checked in the control plane's store, so
// replicas behind one Host share them; the rule of what a grant allows
// lives in controlplane, this package only applies it.
//
// Registry also implements controlplane.ImageResolver: an internal_docker
// image_uri naming this registry by tag is recorded by digest when its
// revision is created; an image that was never pushed, or lies outside the
// deployment's prefix, is refused (422 at image_uri).
//
// cmd/deployplane serves it at -registry-addr, hands its URL to
// httphandler (POST .../push-token answers {token, registry_url}) and
// gives the Docker deployer a pull token of the deployment for its images.
//
// # Quota
//
// The repositories of one deployment may hold Options.Quota bytes of
// image blobs (layers and configs; manifests are not counted), default
// DefaultQuota (10 GiB). A blob the deployment's repositories link counts
// once, however many of them link it (whether another deployment holds it
// too does not matter), and so does the data of its unfinished uploads,
// which Distribution removes Options.UploadMaxAge (a day) after they
// start. Nothing else is ever removed: pushed blobs stay counted.
//
// The requests that send a blob's data (PATCH and PUT of an upload, once
// authorized) are counted as they are read: the deployment's usage is read
// from the storage when the request's body is first read, and the bytes
// this process's uploads of the deployment receive after that are added
// as they arrive, so that uploads running at once count each other.
// Replicas see each other's uploads through the storage only, when a
// request starts. An upload that would go beyond the quota (at once when
// its Content-Length says so, else at the byte that crosses it) is
// refused with the registry's own error, 403 with
//
//	{"errors": [{"code": "DENIED", "message": "registry quota exceeded: deployment <id> may store 10 GiB of image blobs and holds ..."}]}
//
// which the docker CLI shows as "denied: registry quota exceeded: ..." and
// go-containerregistry as "DENIED: ...". The refused upload's data is
// removed; the deployment's other uploads, and other deployments, go on.
//
// # An external registry
//
// Instead, an operator may run a registry of their own (CNCF Distribution
// with auth: token, or any registry that speaks the Docker Registry v2
// token authentication specification) that trusts this server's tokens.
// TokenServer is its realm: the registry refuses a client without a bearer
// token and names the realm (httphandler serves it at TokenPath, on the
// control plane's port); the client asks it with a registry token of the
// control plane as the basic-auth password (GET, or the OAuth2 password
// grant by POST) and gets a JWT signed with TokenOptions.Key (go-jose),
// valid DefaultBearerTTL and never beyond the registry token, whose access
// claim lists only the repositories asked for that lie in the deployment's
// prefix, with the actions its grant allows (controlplane.RegistryGrant.Allows):
// asking for another deployment's or tenant's repository, the catalog or
// delete gets nothing. The registry trusts the key through
// TokenServer.CertificatePEM (auth.token.rootcertbundle) or TokenServer.JWKS
// (auth.token.jwks, also served at JWKSPath); the tokens' kid is the key's
// RFC 7638 thumbprint, which is how Distribution names the keys of both.
// SigningKey derives an Ed25519 key from the server's secret key, so that
// replicas sign alike; ParseSigningKey reads an operator's PEM key.
//
// External is such a registry seen from the server: the registry_url of
// push-token and a controlplane.ImageResolver that resolves tags to
// digests over the registry API with a bearer token it mints (Mint). The
// deployers pull its images with pull tokens of the deployment, which
// their engines exchange at the realm like any client.
package registry
