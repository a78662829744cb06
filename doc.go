// Package deployplane is a deployment control plane for agent servers that a
// Go service can embed, and the standalone server built from it.
//
// It manages deployments of agent servers through the API of the hosted
// control plane it is compatible with: create, list, get, PATCH and redeploy
// deployments; immutable revisions; listeners; OAuth helper endpoints.
// Clients written for that service (curl in CI, example scripts,
// `langgraph deploy`) work against it unchanged.
//
// This package holds no code; it is the map of the module.
//
// # Packages
//
//   - store: the storage contract (closure transactions over ordered keys in
//     named collections) that every backend implements.
//   - store/storetest: the conformance suite every backend runs.
//   - storemem: in-memory store (tests, development, `-db :memory:`).
//   - storebolt: durable embedded store over bbolt, the server's default.
//   - storepg: PostgreSQL store, for several replicas over one database.
//   - apierr: the error vocabulary both domains and httphandler share
//     (not found, conflict, invalid state, validation problems).
//   - controlplane: the deployment domain; every rule of the API lives here,
//     with the Deployer interface and the reconcile loop that moves revisions.
//   - deploysim: the built-in simulated Deployer.
//   - agent: the agent of a listener the server does not drive (deployplane
//     agent): the reconcile loop run beside the listener's compute, a client
//     of the control plane's agent routes driving the same deployers.
//   - deploydocker: a real Deployer: revisions run as containers on Docker,
//     served without a gap through a reverse proxy, crash-safe by labels.
//   - deploydb: each deployment's database and Redis on shared servers (a
//     database, login role and Redis user per deployment), and the
//     readiness checks (SELECT 1, PING) deployers wait on.
//   - imagebuild: builds the image of a github revision (go-git clone, the
//     repository's Dockerfile or the one `langgraph dockerfile` writes,
//     the Docker Engine API); deploydocker calls it through its Builder.
//   - githubapp: the GitHub App through which tenants connect installations.
//   - registry: the built-in OCI registry (CNCF Distribution) langgraph
//     deploy --image pushes to, and its credentials: the registry tokens,
//     kept in the control plane's store.
//   - oauthflow: the OAuth helper domain (providers, flows, tokens).
//   - wiretime: the timestamp type of both domains' wire types (RFC 3339
//     UTC, always six fractional digits).
//   - httphandler: the HTTP API as an http.Handler to mount on any mux.
//   - prommetrics: the server's metrics in the Prometheus format (an
//     httphandler.Metrics, a controlplane.Observer, the stores' OnCommit).
//   - cmd/deployplane: the standalone server, and its agent.
//   - examples: runnable programs showing the library in use.
//
// Imports point one way: cmd and examples use httphandler, which uses
// controlplane and oauthflow, which use store and wiretime; all three use
// apierr, which uses nothing of deployplane; deploysim, deploydocker,
// deploydb, imagebuild, githubapp, prommetrics and agent use controlplane
// (deploydocker also uses deploydb's readiness checks; cmd wires imagebuild
// and a deploydb.Shared into deploydocker, which only declares the Builder
// and Databases it needs);
// the store implementations depend on store alone.
//
// # Quick start
//
// Run the server (it creates ./deployplane.db, prints an API key once and
// listens on 127.0.0.1:8124), then run every test:
//
//	go run ./cmd/deployplane
//	go vet ./... && go test -race -timeout 20m ./...
//
// To embed, open a store, build the domain over it, run its reconcile loop
// with a Deployer and mount the handler on your mux; examples/embed is a
// runnable program that does it.
package deployplane
