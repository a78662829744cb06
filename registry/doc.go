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
package registry
