// Package deploydocker is a controlplane.Deployer that runs revisions as
// containers on a Docker daemon, through the Engine API's official Go
// client (github.com/moby/moby/client, API version negotiated: Debian's
// docker.io 20.10 speaks 1.41).
//
//	cp := controlplane.New(st, nil)
//	d, err := deploydocker.New(&deploydocker.Options{
//		ProxyURL: "http://127.0.0.1:8001", // where d.Proxy() is served
//		State:    cp,
//	})
//	go http.ListenAndServe("127.0.0.1:8001", d.Proxy())
//	err = d.Reconcile(ctx) // adopt or remove what an earlier run left
//	go cp.Run(ctx, d)
//
// # A revision's way to DEPLOYED
//
// An external_docker revision reports QUEUED and AWAITING_DEPLOY, pulls
// image_uri (with the registry credentials Options.Credentials gives),
// reports DEPLOYING, then creates and starts min_scale containers (at
// least one) and waits until each answers its health check (GET
// Options.HealthPath, "/ok", with 200). Each container gets the revision's
// secrets as environment variables, the port to listen on in $PORT
// (Options.PortEnv, which overrides a secret of that name), the resource_spec's labels beside this package's, and
// Docker limits from the spec with its documented defaults applied by
// controlplane.ResourceSpec.WithDefaults (the one defaults function all
// deployers share): cpu becomes CPU shares (1024 per CPU), cpu_limit
// (default 2x cpu) a CPU quota, memory_mb a memory reservation and
// memory_limit_mb (default 2x memory_mb) the hard memory limit. A field
// left null sets no limit. Containers restart unless stopped.
//
// Before the revision's containers start, the deployment's database and
// Redis are made ready (see "A deployment's database" below); a revision
// whose database never answers ends DEPLOY_FAILED without a container.
//
// Then, under the deployment's lock, the revision reports DEPLOYED with
// its image as image_version and the deployment's url (Step.URL), and the
// proxy switches to the new containers. Only then are the containers of
// older revisions stopped: the proxy counts the requests in flight to each
// container, and the old ones are stopped once theirs are answered (at
// most Options.DrainTimeout), so a client sees no gap.
//
// A pull error, a container that exits (or restarts), a health check
// that answers a final status, or a health check not passed within
// Options.HealthTimeout ends the revision DEPLOY_FAILED with a
// status_message saying which (see "Failing fast" below), and its
// containers are removed. A revision that is still deploying when a
// newer one became active ends
// DEPLOY_FAILED ("Superseded by revision ...") and its half-started
// containers are removed; one superseded before DEPLOYING (SKIPPED) or
// interrupted by a delete has its containers removed as soon as its next
// report is refused.
//
// github (and internal_source) revisions are built first by
// Options.Builder: AWAITING_BUILD, BUILDING, then AWAITING_DEPLOY with the
// commit built (Step.RepoCommitSHA) and the image (Step.ImageVersion),
// after which the image deploys like an external_docker one (pulled only
// when the daemon lacks it). A Deploy resumed after the build finds the
// image in Work.ImageVersion. A failed build ends BUILD_FAILED with the
// Builder's error as the status_message ("clone failed: ...", "build
// failed: ..."). Without a Builder such a revision ends BUILD_FAILED
// saying that no image builder is configured. imagebuild.Builder is the
// Builder; cmd/deployplane wires it in.
//
// # A deployment's database
//
// An agent server needs DATABASE_URI and REDIS_URI (wire contract section
// 10). With Options.Services every deployment gets a PostgreSQL and a
// Redis container of its own; with Options.Databases (e.g. a
// *deploydb.Shared) a database, role and Redis user on servers the
// operator shares. Both are a Databases: for every revision, after
// DEPLOYING is reported, Deploy calls Ensure, which creates them the
// first time (later revisions, retries and restarted control planes get
// the same ones, with their data) and waits until they answer: PostgreSQL
// a real SELECT 1 (pgx) with the URI's credentials, Redis PING
// (go-redis). The wait is bounded by Options.DatabaseTimeout (3 minutes);
// its progress goes to the deploy log ("waiting for the deployment's
// database (container ..., port ...): ..." when what it answers changes,
// and every 10 seconds). A database that does not answer in time ends the
// revision DEPLOY_FAILED with a status_message naming it ("... were not
// ready within 3m0s: ..."); an image that cannot be pulled, or a container
// that exits or crashes, ends it at once saying so ("... could not be
// prepared: ...", see "Failing fast"). The revision's containers get
// DATABASE_URI and REDIS_URI (and a deploydb.Shared's REDIS_KEY_PREFIX:
// the prefix its Redis user is confined to) beside its secrets.
//
// The deployment stays AWAITING_DATABASE until its first revision is
// DEPLOYED (the control plane then makes it READY): a deployment is READY
// only once its database answered and a revision serves.
//
// The per-deployment containers (Services) are named and labelled like
// the revision's (LabelRole postgres or redis, no revision); on the host
// network they get their own port (from the same range as the revisions'
// containers) and listen on 127.0.0.1 only, on a network of the
// operator's they listen on 5432 and 6379 at their own address and the
// revision's containers find them by name; each has a random password,
// which a restarted control plane reads back from the container. They are
// sized from the resource_spec, after ResourceSpec.WithDefaults: db_cpu
// and db_cpu_limit, db_memory_mb and db_memory_limit_mb as for the server's
// containers, db_max_connections as postgres's max_connections;
// redis_memory_mb is Redis's maxmemory, its container's hard limit a
// quarter more (at least 32 MB). db_storage_gi is not enforced: a Docker
// volume, or a plain directory, has no size limit of its own. The data
// lives in a named volume per service (labelled like the containers) or,
// with Services.DataDir, in DataDir/INSTANCE/TENANT/DEPLOYMENT/{postgres,redis};
// it outlives the containers, so a container removed by hand is recreated
// over the same data.
//
// Teardown removes the deployment's containers and then calls
// Databases.Remove: the volumes (or the directory), or the shared
// database, role and Redis keys. The deployment's data is gone. Reconcile
// also removes the volumes and directories of deployments that no longer
// exist.
//
// # Where a deployment answers
//
// Every deployment's url is Options.ProxyURL + "/" + its id, unless its
// custom_url is set (an address of the operator's in front of the proxy):
// then the url is the custom_url as it was when the revision deployed.
// github deployments always have one (the control plane makes it from
// controlplane.Options.CustomURLTemplate): give the control plane
// ProxyURL + "/{id}" as the template, as cmd/deployplane does, so that it
// is where the proxy serves them. Proxy is a
// reverse proxy (net/http/httputil) that the server serves on its own
// listener: a request for /{deployment id}/rest goes, as /rest, to the
// active revision's containers in turn (round robin). Why a proxy in the
// server and not a published port per deployment: the url must not change
// when a revision replaces another (the new containers start beside the
// old ones, so they cannot take the old ones' ports), and it must spread
// requests over the replicas; a proxy whose table switches atomically
// gives both, and needs no iptables or userland proxy in the daemon. The
// cost: the url serves only while the control plane process runs (the
// containers keep running without it, and Reconcile restores the table on
// restart). A path prefix rather than a host name per deployment needs no
// DNS; LangGraph clients take a base URL with a path.
//
// # Networks and ports
//
// Options.Network is Docker's default "bridge" unless the operator says
// otherwise: a container there has its own network stack, so it reaches
// neither what listens on the daemon host's loopback (the control plane's
// API, /metrics, its registry) nor another container's loopback services.
// Containers listen on Options.ServerPort (8000) at their own address on
// the network, which the proxy and the health check read from the
// container (ContainerInspect) and reach directly: the control plane must
// be able to route to that network (on the daemon's machine it can).
// The default bridge has no DNS by container name, so per-deployment
// database containers (Options.Services) need a network of the
// operator's (docker network create NAME; containers find their database
// and Redis by name there) or host; New refuses Services on the default
// bridge, saying so. "none" and "container:..." are refused: the proxy
// could not reach the containers.
//
// "host" is for daemons without a bridge network (as in this project's
// CI): containers share the host's network stack, the proxy reaches them
// on 127.0.0.1, and so can they reach everything on the host's loopback.
// Several containers cannot all listen on 8000 there, so each gets its
// own port from Options.FirstPort..LastPort (20000..29999 by default,
// below Linux's ephemeral range): one no container of this daemon is
// labelled with, nothing listens on, and not handed out in the last
// minute. The port is passed in $PORT (the LangGraph API server reads it)
// and kept in the container's LabelPort label, so a restarted control
// plane knows where to find it.
//
// # Failing fast
//
// A deploy waits only for what waiting can change; an answer that will
// not change fails the revision at once, with a status_message and an
// ERROR line in the deploy log that say what happened:
//
//   - Pulls (the revision's image, and the database and Redis images):
//     an invalid reference, an image, tag or repository that does not
//     exist, missing or refused credentials, a registry name that does not
//     resolve ("no such host"), or an image without a variant for the
//     daemon's platform fail at once ("Pulling image IMAGE failed: ...",
//     "... could not be prepared: pulling the postgres image IMAGE: ...",
//     with Docker's error). Any other pull error (the daemon or the
//     registry unreachable, busy or rate-limiting, a network error) is
//     retried, each failure a deploy log line, after 1s, then twice as
//     long each time (at most 30s), while Options.PullRetryTimeout (3
//     minutes) has not passed since the first attempt (for the database
//     and Redis, also within Options.DatabaseTimeout); then the revision
//     fails with the last error.
//   - The health check of the revision's containers (GET
//     Options.HealthPath): 200 passes. A 4xx answer other than 408, 425
//     and 429 is final: the server runs but does not serve the health path
//     (404) or refuses the check; the revision fails at once ("container
//     NAME: health check GET /ok answered 404 Not Found (...)"). No answer
//     (connection refused while the server starts), 5xx and the other
//     statuses are waited out until Options.HealthTimeout ("... did not
//     answer its health check (GET /ok) within 3m0s: LAST ANSWER").
//   - A container (the revision's, or the deployment's database or
//     Redis) that exits, crashes (is restarting, or restarted since it was
//     started) or is removed fails at once, with its exit code and its last
//     lines of output ("container NAME exited with code 3 and was
//     restarted 1 time(s); its last output: ..."). One that cannot start at
//     all (its entrypoint does not exist, say) fails with the daemon's
//     error.
//
// # Crash safety
//
// Every container carries the labels LabelInstance (Options.Instance, so
// that several control planes or test runs can share a daemon),
// LabelTenant, LabelDeployment, LabelRevision, LabelRevisionCreated,
// LabelReplica and LabelPort, and a name derived from the revision and
// replica. A Deploy resumed after a restart (or taken over from a dead
// replica) lists the revision's containers and adopts them instead of
// creating new ones; a create that collides with the name of one it did
// not see adopts that one; so an in-flight revision completes with no
// duplicate. Reconcile, called once before Run, compares every container
// of the instance with the stored state (Options.State): the active
// revision's containers are adopted and served again, in-flight
// revisions' are left to their resumed Deploy, deployments being deleted
// to their Teardown, and everything else (deleted deployments, superseded
// or failed revisions) is removed.
//
// Teardown removes every container of the deployment and its proxy route
// before the control plane removes the records; container creation and
// Teardown are serialized per deployment, so a Deploy still running when
// the deployment is deleted creates nothing after Teardown listed.
//
// Several control-plane replicas sharing one daemon are not coordinated
// beyond the store's leases: each serves its own proxy table, filled by
// the revisions it deployed or adopted.
//
// # Logs
//
// Every revision gets its build and deploy logs (controlplane.LogLine)
// through the Reporter of its Deploy:
//
//   - the build log: every line of the Builder's output, in batches (one
//     store write per 100 lines or 256 KiB, at least every second so that
//     a build can be followed live, and the rest before the build's
//     outcome is reported), each at the level it names (LevelOf, else
//     INFO: the daemon's "ERROR: COPY failed: ..." is an ERROR line),
//     and a failed build's error at ERROR;
//   - the deploy log: the Deployer's steps (pulling, creating, healthy,
//     active at, failures at ERROR), one write each, before the report
//     that follows them, and the output of the revision's containers.
//
// A container's stdout and stderr are followed (ContainerLogs with follow
// and timestamps, demultiplexed with stdcopy) from its start, in the same
// batches, with the time Docker stamped on each line and the level the
// line names (see LevelOf; else INFO for stdout, ERROR for stderr). Until
// the revision is DEPLOYED they go through the Reporter, then through
// Options.State.AppendLogs, which needs no lease. A container adopted
// after a restart (by a resumed Deploy or by Reconcile) is followed again
// from the time of the last line of its revision's deploy log: lines the
// dead process had read but not written are read again when they are
// newer than that line. Following
// stops when the container is removed (or stops and is not restarting),
// when the deployment's logs are gone, or at Close, which writes the lines
// read so far. The control plane bounds each log
// (controlplane.LogRetention); the Deployer holds at most one batch per
// container in memory and reads no faster than the store writes.
//
// The same lines go to Options.Logger (the build's output at Debug).
// Writing a log never fails a deploy: a failed write is logged as a
// warning (once per revision) and its lines are dropped.
//
// # Images and readiness
//
// Teardown removes the images the Builder made for the deployment when
// the Builder implements ImageRemover (imagebuild.Builder does). Ready
// pings the daemon: the Deployer is a controlplane.ReadinessChecker, so
// the server's GET /readyz fails while Docker is unreachable.
//
// # Tests
//
// The tests need a Docker daemon: DEPLOYPLANE_TEST_DOCKER names its
// socket (.ci/docker.sh starts one; without the variable they skip and
// say so). They build the test server (testdata/server) as a static
// binary, push FROM scratch images of it to an in-process registry on
// 127.0.0.1, and deploy them for real.
// The deployments' databases are Debian's own
// postgres and redis-server, copied with their libraries into a FROM
// scratch image whose entrypoint (testdata/dbimage) starts them as the
// official images do; those tests skip when the packages are missing. The
// shared-server test needs DEPLOYPLANE_TEST_POSTGRES_DSN and redis-server.
package deploydocker
