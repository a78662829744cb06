// Package deploydocker is a controlplane.Deployer that runs revisions as
// containers on a Docker daemon, through the Engine API's Go client
// (github.com/moby/moby/client, API version negotiated).
//
//	cp := controlplane.New(st, nil)
//	d, err := deploydocker.New(&deploydocker.Options{
//		ProxyURL: "http://127.0.0.1:8001", // where d.Proxy() is served
//		State:    cp,
//	})
//	go http.ListenAndServe("127.0.0.1:8001", d.Proxy())
//	err = d.Reconcile(ctx) // adopt or remove what a previous run left
//	go cp.Run(ctx, d)
//
// A revision pulls image_uri (with Options.Credentials), makes the
// deployment's database and Redis ready, starts min_scale containers (at
// least one) and waits until each answers GET Options.HealthPath with 200.
// Containers get the revision's secrets, DATABASE_URI and REDIS_URI as
// environment variables, the port to listen on in $PORT, and Docker limits
// from the resource_spec after controlplane.ResourceSpec.WithDefaults.
// With no database to wait for, the containers are created while the
// image is pulled and started once the pull has succeeded, from the
// image it left (one made from what the tag named before is made again).
// Then the revision reports DEPLOYED and the proxy switches to the new
// containers; older revisions' containers are stopped once their requests
// in flight are answered (at most Options.DrainTimeout), so a client sees
// no gap. github and internal_source revisions are first built by
// Options.Builder (imagebuild.Builder); without one they end BUILD_FAILED.
//
// A revision fails at once, with a status_message and an ERROR line in its
// deploy log saying why, on an answer that waiting will not change: a pull
// error that is final (no such image, refused credentials, unknown host,
// no variant for the platform), a final health-check answer (a 4xx other
// than 408, 425, 429), or a container that exits, restarts or is removed.
// Other pull errors are retried until Options.PullRetryTimeout, a
// health check until Options.HealthTimeout, a database until
// Options.DatabaseTimeout. A failed or superseded revision's containers
// are removed, and so are those of a revision that ended without its
// Deploy (interrupted, skipped or deleted: controlplane.ErrRevisionEnded),
// whose build is cancelled; the active revision serves on.
//
// Databases: with Options.Services each deployment gets PostgreSQL and
// Redis containers of its own; with Options.Databases (a *deploydb.Shared)
// a database and Redis user on servers the operator shares. Either keeps
// its data across revisions and restarts; Teardown removes it. A
// deployment stays AWAITING_DATABASE until its first revision is DEPLOYED.
// db_storage_gi is not enforced on Docker.
//
// Addresses: a deployment's url is Options.ProxyURL + "/" + its id (the
// proxy forwards /{id}/rest as /rest, round robin over the active
// containers), unless custom_url is set. Options.Network is Docker's
// "bridge" by default; Options.Services needs a network of the operator's
// (New refuses the default bridge), and "none" and "container:..." are
// refused. On "host", each container gets its own port from
// Options.FirstPort..LastPort.
//
// Scale to zero: a deployment of type dev_zero or dev_free_zero
// (ScalesToZero) that no request through the proxy reached for
// Options.IdleTimeout (15 minutes by default, on Options.Clock; none in
// flight either) has its active revision's containers stopped, not
// removed; its database and Redis run on, keeping their data. Its status
// becomes UNUSED through Options.StatusReporter (a status event), and a
// line in the revision's deploy log says why. The next request to its
// url is held (at most Options.WakeTimeout, then 503 with Retry-After)
// while one start, shared by every request that comes meanwhile, starts
// the containers and waits for their health check as a deploy does; then
// it is forwarded, and the deployment is READY again. A client that goes
// away ends only its own wait. A start that fails is answered 502, says
// why in the deploy log at ERROR, leaves the containers stopped, and the
// next request tries again. A new revision deploys as usual and makes the
// deployment READY. Asleep is what Docker shows: Reconcile takes a
// deployment that scales to zero whose active containers are all stopped
// as asleep (it starts nothing, and sets UNUSED if a restart came before
// the report), so it stays asleep across restarts and wakes on a
// request. On the host network a stopped container keeps its port
// (no other container of any instance is given it), but another program
// that takes it meanwhile makes the start fail.
//
// Crash safety: every container carries LabelInstance (Options.Instance,
// so several control planes can share a daemon) and the labels of its
// tenant, deployment, revision and replica. A resumed Deploy adopts the
// revision's containers instead of creating new ones; Reconcile, called
// once before Run, adopts the active revisions' containers and removes
// what no deployment needs. Teardown removes every container, route, data
// and built image (ImageRemover) of the deployment.
//
// Logs: the Builder's output becomes the build log, the Deployer's steps
// and the containers' stdout and stderr the deploy log (level from LevelOf,
// else INFO for stdout, ERROR for stderr), also after DEPLOYED and after a
// restart. Writing a log never fails a deploy. Ready pings the daemon (a
// controlplane.ReadinessChecker, for /readyz).
//
// The tests need DEPLOYPLANE_TEST_DOCKER (a daemon's socket) and skip
// without it. Design notes: docs/design-notes.md, "deploydocker".
package deploydocker
