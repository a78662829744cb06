// Command deployplane is the standalone deployplane server: the HTTP API of
// package httphandler over a controlplane.ControlPlane and a store (bbolt,
// in memory, or PostgreSQL for several replicas), the reconcile loop that
// moves revisions along with the simulated deployer of package deploysim
// (or, with -deployer docker, runs them as containers with package
// deploydocker),
// the GitHub webhook of build_on_push, API keys, request logs and graceful
// shutdown. Run `deployplane -h` for the flags, the keys file format and how
// the default tenant is chosen.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/dashboard"
	"github.com/deployplane/deployplane/deployroute"
	"github.com/deployplane/deployplane/deploysim"
	"github.com/deployplane/deployplane/egress"
	"github.com/deployplane/deployplane/githubapp"
	"github.com/deployplane/deployplane/httphandler"
	"github.com/deployplane/deployplane/oauthflow"
	"github.com/deployplane/deployplane/prommetrics"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/storebolt"
	"github.com/deployplane/deployplane/storemem"
	"github.com/deployplane/deployplane/storepg"
	"github.com/deployplane/deployplane/uploads"
	"github.com/deployplane/deployplane/webhooks"
)

const usage = `deployplane: a deployment control plane for agent servers (the HTTP API of
github.com/deployplane/deployplane/httphandler as a standalone server).

Usage:

    deployplane agent -control-plane URL -listener-id ID ...
                      the agent of a listener this server does not drive,
                      run beside its compute: see deployplane agent -h

    deployplane [-addr 127.0.0.1:8124] [-db ./deployplane.db | -db postgres://...]
                [-keys FILE] [-public-url URL] [-secret-key-file FILE]
                [-blob-url URL]
                [-deployer sim|docker|k8s] [-sim-step 500ms] [-sim-fail-at STATUS]
                [-sim-agents=false]
                [-docker-host URL] [-docker-endpoint NAME=ADDRESS ...]
                [-docker-network bridge] [-build-network bridge]
                [-docker-proxy-addr 127.0.0.1:8125]
                [-docker-proxy-url URL] [-docker-instance NAME]
                [-docker-postgres-image IMAGE] [-docker-redis-image IMAGE]
                [-docker-postgres-data-path PATH] [-docker-data-dir DIR]
                [-docker-database-timeout 3m] [-docker-pull-retry-timeout 3m]
                [-shared-postgres-dsn DSN [-shared-redis-url URL]]
                [-docker-health-path /ok] [-docker-health-timeout 3m]
                [-docker-idle-timeout 15m] [-docker-secret-ref NAME/KEY=SRC ...]
                [-build-base-image IMAGE] [-workers 16] [-tenant-workers N]
                [-build-clone-timeout 5m] [-build-timeout 30m]
                [-build-max-repo-bytes N] [-build-max-bytes N] [-build-max-files N]
                [-build-max-depth 64] [-build-max-path-bytes 4096]
                [-kubeconfig FILE[:FILE...]] [-k8s-instance NAME]
                [-k8s-namespaces NS[,NS...]] [-k8s-in-cluster=false]
                [-k8s-expose none|ingress|httproute -k8s-host-template T
                 [-k8s-path-template T] [-k8s-ingress-class NAME]
                 [-k8s-gateway [NS/]NAME [-k8s-gateway-section NAME]]
                 [-k8s-tls-issuer KIND/NAME] [-k8s-https]
                 [-k8s-expose-annotation KEY=VALUE ...]]
                [-registry-addr auto|off|HOST:PORT] [-registry-host HOST:PORT]
                [-registry-storage DIR|s3://BUCKET]
                [-registry-max-conns 256] [-registry-quota 10GiB]
                [-registry-gc-every 15m] [-registry-gc-grace 1h]
                [-registry-external-url URL [-registry-token-key FILE]
                 [-registry-token-service NAME]]
                [-github-webhook-secret SECRET]
                [-github-app-id ID -github-app-slug SLUG -github-app-private-key-file FILE
                 -github-client-id ID -github-client-secret SECRET]
                [-allow-unverified-integrations] [-github-preview-forks]
                [-max-conns 1024] [-max-in-flight N] [-max-long-polls 256]
                [-rate-limit 50] [-rate-burst 100]
                [-max-in-flight-per-tenant N] [-max-long-polls-per-tenant N]
                [-max-uploads 64] [-max-uploads-per-tenant N] [-min-upload-rate 16384]
                [-upload-rate-window 30s] [-upload-max-bytes N]
                [-max-body-bytes 1048576] [-public-max-body-bytes 65536]
                [-webhook-max-body-bytes N] [-public-read-timeout 10s]
                [-log-format text|json] [-metrics-key KEY] [-ui=false]

Flags:

    -addr HOST:PORT   where to listen (default 127.0.0.1:8124; port 0 picks a
                      free one, logged at start)
    -db PATH|DSN      the database: a bbolt file, created if missing (default
                      ./deployplane.db); :memory: for an in-memory store that
                      is gone when the server stops; or a PostgreSQL URL,
                      postgres://user:password@host:5432/dbname?sslmode=...
                      (postgresql:// too), which several replicas of this
                      server may share (see "Replicas" below)
    -pg-schema NAME   with a PostgreSQL -db, the schema that holds the tables,
                      created and migrated at start (default deployplane);
                      replicas must use the same one, separate installs
                      sharing one database different ones
    -keys FILE        API keys, a JSON array of
                          {"key": "<the key>", "tenant_ids": ["<uuid>", ...]}
                      or, to keep the key itself out of the file,
                          {"key_sha256": "<hex SHA-256 of the key>", "tenant_ids": [...]}
                      A key with one tenant needs no X-Tenant-Id header; a key
                      with several needs it.
    -new-key          generate a new API key for the default tenant, replacing the
                      generated one (which stops working), print it once, and
                      serve; only when no key is configured
    -max-body-bytes N request body limit (default 1048576); larger bodies get 413
                      (GitHub webhook deliveries may be up to 25 MiB, as GitHub
                      sends them)
    -shutdown-timeout D
                      how long SIGINT/SIGTERM waits for requests in flight
                      (default 30s)
    -public-url URL   the base URL users' browsers reach this server at, e.g.
                      https://deploy.example.com; OAuth providers redirect to
                      URL/v2/auth/callback/{provider_id}, so register that as
                      the redirect URI at each provider (default: derived
                      from -addr, http://127.0.0.1:8124; an unspecified host
                      such as 0.0.0.0 becomes 127.0.0.1); the upload URLs of
                      langgraph deploy --remote are absolute URLs under it too
    -blob-url URL     where the source tarballs of internal_source deployments
                      (langgraph deploy --remote) are kept: a gocloud.dev/blob
                      URL, file:///dir, s3://bucket?region=..., gs://bucket or
                      azblob://container, with credentials from the
                      environment as those SDKs read them (default: the
                      directory <db>.uploads beside a bbolt file,
                      ./deployplane-uploads with PostgreSQL, a temporary one
                      with :memory:); replicas must share one bucket. The
                      cloud drivers are in the binary only when it is built
                      with their build tags, -tags s3, gcs or azure (the
                      container image has all three): without, the server
                      refuses to start, naming the tag
    -secret-key-file FILE
                      the 32-byte key that encrypts OAuth client secrets and
                      tokens at rest (AES-256-GCM), written in FILE as 64 hex
                      digits or as base64 (standard or URL alphabet, padded or
                      not); surrounding whitespace is ignored
    -egress-allow-hosts LIST
                      comma-separated hosts that requests made on a tenant's
                      behalf (the OAuth code exchange and token refresh, the
                      clones of github revisions, the deliveries of tenants'
                      webhooks) may reach although they are not public https services:
                      each a name or an IP address (every port), or
                      HOST:PORT ([::1]:9000 for IPv6); see "OAuth helpers"
    -webhook-retries LIST
                      comma-separated waits before each retry of a webhook
                      delivery that failed (default 5s,30s,2m,10m,30m,1h,1h:
                      eight attempts, then the delivery fails)
    -webhook-lease DURATION
                      how long a replica keeps dispatching a tenant's webhooks
                      without renewing its lease (default 30s): after a crash,
                      another replica, or this one restarted, takes over then
    -deployer sim|docker|k8s
                      what makes revisions real (default sim): sim walks the
                      statuses without running anything (see "Revisions");
                      docker runs external_docker revisions as containers on
                      a Docker daemon (package deploydocker), and builds
                      github revisions' images there first: it clones
                      repo_url (https, through the egress policy, with the
                      GitHub App's installation token when one is
                      configured) and builds its Dockerfile, or the one
                      "langgraph dockerfile" would write (package imagebuild);
                      k8s runs deployments without a listener on a cluster
                      of -kubeconfig (-k8s-default-cluster; it builds no
                      images: external_docker and internal_docker only)
    -k8s-default-cluster NAME
                      with -deployer k8s, the kubeconfig context deployments
                      without a listener run on (default: the current
                      context; in a pod without a kubeconfig, in-cluster),
                      in the first of -k8s-namespaces, else "default"
    -sim-step D       the simulated deployer's delay per revision status
                      (default 500ms: an external_docker revision is DEPLOYED
                      about 2 s after it is created, a github one about 3 s)
    -sim-fail-at STATUS
                      make the simulated deployer fail every revision at this
                      status (BUILDING gives BUILD_FAILED, DEPLOYING
                      DEPLOY_FAILED, ...), to try failures and their logs
    -sim-agents=false with -deployer sim, serve no listener with simulated
                      agents (see "Listeners and agents"): the deployments of
                      listeners this server does not drive then wait QUEUED
                      for a real agent (deployplane agent)
    -docker-host URL  with -deployer docker, the daemon: unix:///path.sock or
                      tcp://host:port (default $DOCKER_HOST, else
                      unix:///var/run/docker.sock)
    -docker-network NAME
                      the Docker network containers join; see "Running
                      revisions on Docker" in README.md for what each
                      exposes. bridge (the default): Docker's default
                      bridge, away from the host's loopback; it has no DNS
                      by container name, so the per-deployment database
                      containers need a network of your own (docker network
                      create deployplane, then -docker-network deployplane)
                      or -shared-postgres-dsn. Containers listen on 8000 at
                      their address there, which this server must reach.
                      host: the host's own network, its loopback (this
                      server's API, /metrics, registry) included, for
                      daemons without a bridge; each container gets its own
                      port in $PORT. none is refused
    -build-network NAME
                      the Docker network builds' RUN steps run on: bridge
                      (the default; reaches package indexes, not the host's
                      loopback), none (no network), host (the host's own
                      network: a tenant's Dockerfile then reaches this
                      server's API, /metrics and registry on loopback; only
                      for daemons without a bridge) or a network's name
    -docker-proxy-addr HOST:PORT
                      where deployments' urls are served (default
                      127.0.0.1:8125): a deployment answers at
                      <proxy URL>/<deployment id>/..., balanced over its
                      active revision's containers
    -docker-proxy-url URL
                      the base URL clients reach -docker-proxy-addr at, which
                      deployments' url fields carry (default: derived from
                      -docker-proxy-addr)
    -docker-instance NAME
                      the label value that marks this server's containers
                      (default deployplane); servers sharing a daemon need
                      different ones, or the same one when they are replicas
                      of one install
    -docker-postgres-image IMAGE, -docker-redis-image IMAGE
                      the images of the database and the Redis every
                      deployment gets, started before its first revision and
                      kept until DELETE; its containers find them in
                      DATABASE_URI and REDIS_URI (defaults postgres:16-alpine
                      and redis:7-alpine; '' starts none). On the host
                      network they listen on 127.0.0.1 only, with a random
                      password each; sized by the resource_spec's db_* and
                      redis_memory_mb (db_storage_gi is not enforced)
    -docker-postgres-data-path PATH
                      where the database image keeps its data (default
                      /var/lib/postgresql/data, the PGDATA of the official
                      images up to 17; /var/lib/postgresql for postgres:18)
    -docker-data-dir DIR
                      an absolute directory (on this machine, which must be
                      the daemon's) holding each deployment's database and
                      Redis data, DIR/<instance>/<tenant>/<deployment>/...
                      (default: a Docker volume per deployment and service).
                      DELETE removes the deployment's data: it is gone
    -docker-database-timeout D
                      how long a revision waits for its deployment's
                      database and Redis to answer (SELECT 1, PING; default
                      3m) before it is DEPLOY_FAILED
    -docker-pull-retry-timeout D
                      how long a pull that fails with a transient error (the
                      registry or the daemon unreachable, busy or
                      rate-limiting) is retried with backoff (default 3m);
                      a final error (no such image, refused credentials)
                      fails the revision at once
    -shared-postgres-dsn DSN, -shared-redis-url URL
                      instead of containers, give each deployment a database
                      and login role on this PostgreSQL
                      (postgres://admin:password@host:5432/postgres, a role
                      with CREATEDB and CREATEROLE) and an ACL user limited
                      to its own key prefix on this Redis (6.2 or later,
                      with a password: redis://:password@host:6379);
                      DELETE drops them. Default
                      $DEPLOYPLANE_SHARED_POSTGRES_DSN and
                      $DEPLOYPLANE_SHARED_REDIS_URL (prefer the environment:
                      command lines are visible to other users)
    -docker-health-path PATH, -docker-health-timeout D
                      a new container is healthy once GET PATH answers 200
                      (default /ok, on the port in $PORT); one that does not
                      within D (default 3m) fails its revision (DEPLOY_FAILED)
    -docker-secret-ref NAME/KEY=file:PATH, NAME/KEY=env:VAR (repeated)
                      the value a Docker deployment's secret reference to
                      secret NAME key KEY gets: the file's content or the
                      variable of the server's environment, read when a
                      container starts; a create or PATCH naming a pair
                      with no value is refused (422)
    -docker-idle-timeout D
                      a dev_zero or dev_free_zero deployment that no request
                      reached for D (default 15m) has its containers stopped
                      (its database and Redis run on) and is UNUSED; the
                      next request to its url waits while they start, then
                      is answered, and the deployment is READY again. 0
                      never stops them (see docs/docker.md, "Scale to zero")
    -docker-endpoint NAME=ADDRESS
                      a Docker engine (unix:///path.sock or tcp://host:port)
                      that deployments with a docker listener whose
                      compute_id is NAME run on; repeat it for several
                      hosts. The -docker-* settings above apply to each;
                      its containers carry the label <-docker-instance>-NAME,
                      so that each endpoint reconciles and deletes only its
                      own; one proxy (-docker-proxy-addr) serves the urls of
                      all. A listener naming an engine not given here is
                      served by agents (see "Listeners and agents")
    -kubeconfig FILE[:FILE...]
                      the Kubernetes clusters deployments with a k8s listener
                      run on: each context is a cluster, named by the
                      listener's compute_id; several files merge as kubectl
                      merges them (default $KUBECONFIG, else ~/.kube/config;
                      in a pod without either, its own cluster as
                      "in-cluster"). A context that cannot be used is logged
                      and its deployments fail; the others work. A listener
                      naming a context not given here is served by agents
                      (see "Listeners and agents", docs/kubernetes.md)
    -k8s-namespaces NS[,NS...]
                      the namespaces the Kubernetes deployers work in: they
                      list, watch and change objects there and nowhere else,
                      so a Role in each is grant enough (the Helm chart's,
                      deploy/helm/deployplane); a revision whose namespace
                      is another fails saying so (default: every namespace,
                      which needs a ClusterRole)
    -k8s-in-cluster=false
                      in a pod without a kubeconfig, do not drive the pod's
                      own cluster (default: drive it, as "in-cluster"): its
                      listeners are then served by agents
    -k8s-expose none|ingress|httproute
                      how each deployment on a Kubernetes cluster is reached
                      from outside it (default none: its url is its
                      Service's address in the cluster,
                      http://dp-<id>.<namespace>.svc.cluster.local:8000):
                      an Ingress (networking.k8s.io/v1) or a Gateway API
                      HTTPRoute (the cluster needs the Gateway API's CRDs)
                      named dp-<id> in front of its Service; its url is then
                      that address, scheme://host[path], from the next
                      revision on (a custom_url still wins). The server and
                      every agent of a cluster should be given the same
                      -k8s-* flags (see docs/kubernetes.md, "Reaching
                      deployments from outside the cluster")
    -k8s-host-template T, -k8s-path-template T
                      the host (required with -k8s-expose) and the path
                      prefix (default none: the whole host) of each
                      deployment, made of {name} (the deployment's name),
                      {id}, {namespace} and {tenant}: e.g.
                      {name}.agents.example.com, or agents.example.com with
                      /{id}. Together they must use {id} or {name} (with
                      {tenant} when several tenants share the cluster); a
                      host is lowercased; a path starts with / and does not
                      end with one. An HTTPRoute strips the path before the
                      request reaches the server; an Ingress passes it as it
                      is. A template with another placeholder, or whose
                      hosts cannot be DNS names, stops the start; a host
                      that a deployment's name makes invalid fails its
                      revision with the cluster's words
    -k8s-ingress-class NAME
                      the Ingresses' class (default: the cluster's default)
    -k8s-gateway [NAMESPACE/]NAME, -k8s-gateway-section NAME
                      the Gateway the HTTPRoutes attach to (namespace
                      default: the deployment's; its listener must allow
                      routes from the deployments' namespaces), and which of
                      its listeners (default: all); required with
                      -k8s-expose httproute
    -k8s-tls-issuer ClusterIssuer/NAME|Issuer/NAME
                      cert-manager issues each Ingress's certificate (the
                      annotation cert-manager.io/cluster-issuer or
                      cert-manager.io/issuer, and a TLS section for its host
                      with the Secret dp-<id>-tls); the url is https.
                      Ingress only: an HTTPRoute's TLS is its Gateway
                      listener's
    -k8s-https        the url is https without -k8s-tls-issuer: TLS ends at
                      the Gateway's listener or at the ingress controller
    -k8s-expose-annotation KEY=VALUE
                      an annotation of every Ingress or HTTPRoute, such as
                      the controller's settings (repeatable); the
                      resource_spec's annotations are not put on them
    -k8s-instance NAME
                      the label value that marks this server's Kubernetes
                      objects, which it reconciles and deletes (default
                      deployplane); servers sharing a cluster need different
                      ones, or the same one when they are replicas of one
                      install
    -build-base-image IMAGE
                      the base image of the Dockerfiles generated for github
                      revisions without their own (as langgraph build
                      --base-image; default: the project's base_image, else
                      langchain/langgraph-api)
    -build-clone-timeout D, -build-timeout D
                      how long a build's clone (default 5m) and its image
                      build (default 30m) may take; beyond it the revision
                      is BUILD_FAILED saying it timed out. A build runs in
                      one of its tenant's -tenant-workers places, which
                      these bound in time
    -build-max-repo-bytes N
                      the most a build's clone downloads, its pack (default
                      1073741824, 1 GiB)
    -build-max-bytes N, -build-max-files N
                      what a build's source (a repository checked out, a
                      tarball unpacked) may hold: bytes of files (default
                      1073741824, 1 GiB) and entries, directories and
                      links counted (default 100000)
    -build-max-depth N, -build-max-path-bytes N
                      the levels of a path in a build's source (default 64)
                      and the bytes of a path or of a link's target
                      (default 4096). A repository's tree is checked before
                      anything is written; a source over a limit, or with
                      a link that leads outside it, is BUILD_FAILED naming
                      the limit and the path, and leaves nothing on disk
    -workers N        revisions and deletions the reconcile loop drives
                      (builds and deploys) at once (default 16), per
                      replica
    -tenant-workers N revisions and deletions of one tenant driven (built and
                      deployed) at once, of the 16 the reconcile loop drives
                      (default 0: a quarter of them, 4; -1: no cap); a tenant
                      with more waiting takes N at a time while other
                      tenants' work goes ahead. Each replica gives a tenant
                      its own N
    -registry-addr auto|off|HOST:PORT
                      where the built-in OCI registry listens, which
                      langgraph deploy --image pushes to (POST
                      /v2/deployments/{id}/push-token answers a one-hour
                      token for the deployment's repository there); auto
                      (the default): 127.0.0.1:8126 with -deployer docker,
                      none otherwise; docker pushes plain HTTP to loopback
                      addresses only, so a registry elsewhere needs TLS in
                      front of it
    -registry-host HOST:PORT
                      the address clients and the Docker daemon reach the
                      registry at, which push-token's registry_url names
                      (default: -registry-addr's)
    -registry-storage DIR|s3://BUCKET[/ROOT]?region=R&endpoint=URL
                      where the registry keeps images (default:
                      deployplane-registry beside -db; a temporary directory
                      with -db :memory:); replicas share an S3 bucket
                      (credentials from the AWS environment; only in a
                      binary built with -tags s3, as the container image is)
    -registry-max-conns N
                      open connections to the registry at most (default
                      256; 0: no cap), apart from -max-conns, so that idle
                      registry clients cannot take the descriptors the API
                      needs; beyond it new connections wait in the kernel's
                      accept queue. The registry's port has the API port's
                      timeouts (10 s for the request line and headers,
                      120 s idle between requests), but an image layer may
                      take longer than 60 s: its body, and an answer, is cut
                      only after 60 s without a byte, or when it falls below
                      16 KiB/s on average after its first 60 s
    -registry-quota SIZE
                      the image blobs (layers and configs) the repositories
                      of one deployment may hold, its unfinished uploads
                      included: bytes, or 500MiB, 10GiB, 20GB (default
                      10GiB; 0: no quota). An upload beyond it is refused
                      with the registry's error, 403 DENIED "registry quota
                      exceeded: ..."; another deployment's pushes go on.
                      Unfinished uploads are removed a day after they start
    -registry-gc-every DURATION
                      how often the registry removes what no deployment
                      keeps (default 15m; 0: never): the repositories of
                      deleted deployments; in a live deployment's, the
                      images that neither one of its 10 most recently
                      pushed tags nor its image_uri, its active revision or
                      one of its 10 newest revisions names; then the blobs
                      no repository links. That frees its quota
    -registry-gc-grace DURATION
                      what was pushed within it is never removed, so that a
                      push in progress keeps its blobs until its manifest
                      comes (default 1h)
    -registry-external-url https://HOST[:PORT]|http://HOST[:PORT]
                      an external registry instead of the built-in one (see
                      "An external registry" below): push-token's
                      registry_url names it, and the server is its token
                      realm (GET/POST <public URL>/registry/token)
    -registry-token-key FILE
                      the PEM private key (Ed25519, ECDSA P-256/384/521 or
                      RSA) that signs the realm's tokens (default: an Ed25519
                      key derived from the secret key, the same on every
                      replica that shares it)
    -registry-token-service NAME
                      the external registry's auth.token.service (default:
                      its host)
    -github-webhook-secret SECRET
                      the webhook secret of the GitHub App whose pushes
                      trigger build_on_push deployments (prefer the
                      environment variable: command lines are visible to
                      other users of the machine)
    -github-app-id ID, -github-app-slug SLUG, -github-app-private-key-file FILE,
    -github-client-id ID, -github-client-secret SECRET
                      the GitHub App tenants install to connect their
                      repositories (its settings page: App ID, the slug of
                      github.com/apps/<slug>, a private key (PEM), and the
                      OAuth client id and secret); all five or none (see
                      "GitHub integrations" below)
    -github-api-url URL, -github-url URL
                      GitHub's REST API and web site (default
                      https://api.github.com/ and https://github.com; for
                      GitHub Enterprise Server https://<host>/api/v3/ and
                      https://<host>)
    -allow-unverified-integrations
                      also serve POST /v1/integrations/github, which
                      registers a GitHub installation id without asking
                      GitHub (see "GitHub integrations" below)
    -github-preview-forks
                      give pull requests from forks preview deployments
                      too (source_config.preview); off by default, because
                      a preview runs the pull request's code with a copy of
                      its parent's secrets (docs/github.md)
    -max-conns N      open connections at most (default 1024; 0: no cap);
                      beyond it new connections wait in the kernel's accept
                      queue until one closes (the registry's port has its
                      own cap, -registry-max-conns)
    -max-in-flight N  requests in service at once, long polls and uploads
                      aside (default 0: 32 per processor, at least 64); one
                      more is answered at once 503 with Retry-After: 1; -1:
                      no cap
    -max-long-polls N long polls (GET /v2/auth/wait/...) open at once, apart
                      from -max-in-flight (default 256; -1: no cap); must be
                      below -max-conns, or long polls could hold every
                      connection
    -rate-limit R     requests per second each API key may send, sustained
                      (default 50; 0: no rate limit); beyond it 429 with
                      Retry-After, RateLimit-Limit, RateLimit-Remaining and
                      RateLimit-Reset. Failed credentials, and the public
                      routes, are limited by client address alike
    -rate-burst N     requests each API key may send at once before the rate
                      applies (default 100)
    -max-in-flight-per-tenant N
                      places of -max-in-flight one tenant holds at once
                      (default 0: half, at least 8); beyond it 503 naming
                      the tenant's share, while other tenants are served.
                      Requests to public routes (the dashboard, the
                      webhook) count per client address; -1: no share
    -max-long-polls-per-tenant N
                      long polls one tenant holds open (default 0: a
                      quarter of -max-long-polls, at least 8); -1: no share
    -max-uploads N    upload PUTs (langgraph deploy --remote) streaming at
                      once, apart from -max-in-flight (default 64; -1: no
                      cap)
    -max-uploads-per-tenant N
                      upload PUTs of one tenant at once (default 0: an
                      eighth of -max-uploads, at least 8); -1: no share
    -min-upload-rate B
                      bytes per second an upload must keep, measured over
                      -upload-rate-window of waiting for it (default
                      16384); a slower one is cut (400) and logged; -1:
                      none
    -upload-rate-window D
                      the span over which -min-upload-rate is measured
                      (default 30s): how long an upload may stall before
                      it is cut
    -upload-max-bytes N
                      the largest source tarball an upload PUT takes
                      (default 209715200, 200 MiB); a larger one is 413
    -public-max-body-bytes N
                      request body limit of the public routes: the
                      dashboard's forms and sign-in, the registry realm
                      (default 65536; the GitHub webhook takes up to 25 MiB)
    -webhook-max-body-bytes N
                      body limit of a GitHub webhook delivery (default
                      26214400, 25 MiB, the most GitHub sends); a larger
                      one is 413
    -public-read-timeout D
                      time the body of a public route's request (the GitHub
                      webhook's included) has to arrive (default 10s);
                      beyond it 408
    -log-format F     text (default: log/slog's key=value lines) or json (one
                      JSON object per line), on standard error
    -metrics-key KEY  require "Authorization: Bearer KEY" on GET /metrics
                      (default: /metrics is public; prefer the environment
                      variable, see "Operations")
    -ui=false         do not serve the web dashboard (default: served under
                      /ui/; sign in there with an API key; sessions are kept
                      in the store, so replicas sharing it share them)

Environment:

    DEPLOYPLANE_API_KEY     one more API key, bound to the default tenant
    DEPLOYPLANE_SECRET_KEY  the OAuth secret key, encoded as for
                            -secret-key-file (give one or the other, not both)
    DEPLOYPLANE_GITHUB_WEBHOOK_SECRET
                            the GitHub webhook secret, as -github-webhook-secret
                            (give one or the other, not both)
    DEPLOYPLANE_GITHUB_CLIENT_SECRET
                            the GitHub App's OAuth client secret, as
                            -github-client-secret (give one or the other)
    DEPLOYPLANE_METRICS_KEY the key of GET /metrics, as -metrics-key (give
                            one or the other)

Keys and tenants:

    Every resource belongs to a tenant (a workspace UUID). On its first start
    the server generates a default tenant id and keeps it in the database, so
    it stays the same across restarts; it is logged at every start.
    DEPLOYPLANE_API_KEY is bound to that tenant. When no key is configured
    (no -keys, no DEPLOYPLANE_API_KEY), the first start also generates an API
    key for the default tenant, prints it once on standard output, and keeps
    only its SHA-256 digest in the database: later starts accept the same key
    without printing it again. (With -db :memory: that happens at every start.)
    While keys are configured, the generated key is not accepted.

    Clients send the key as "X-Api-Key: <key>" or "Authorization: Bearer <key>",
    and pick a tenant with "X-Tenant-Id: <uuid>" when the key has several.

Revisions:

    With -deployer docker, revisions run as containers (see -deployer);
    otherwise the server runs the reconcile loop with the simulated deployer:
    every revision walks its statuses one -sim-step at a time (github:
    CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY, DEPLOYING,
    DEPLOYED; external_docker skips the two build states), then becomes the
    deployment's active revision and the deployment READY. Nothing is built
    or run for real. DELETE leaves a deployment AWAITING_DELETE for one step,
    then removes it (GET answers 404). A revision in flight at shutdown is
    given back and resumed at the next start, or by another replica.

Listeners and agents:

    A deployment with a listener runs where the listener points: the
    cluster (-kubeconfig context) or Docker engine (-docker-endpoint) its
    compute_type and compute_id name, when this server was given it. The
    deployments of any other listener are served by that listener's agents
    (deployplane agent, run beside its compute, which dial out to this
    server's agent routes under /v2/listeners/{listener_id}/agent with a
    listener token from POST /v2/listeners/{listener_id}/tokens): they answer
    remote_reconciled: true, and each revision waits QUEUED ("Waiting for the
    agent of listener ...") until an agent claims it. With -deployer sim (the
    default) the server runs a simulated agent for each such listener itself
    (its version "simulated"), which speaks the same protocol to this server
    in process, so that every deployment reaches DEPLOYED on a laptop;
    -sim-agents=false leaves them to real agents.

An external registry:

    -registry-external-url makes langgraph deploy push to a registry you run
    (CNCF Distribution, or any registry that speaks Docker Registry v2 token
    authentication) instead of the built-in one. Configure it with
      auth:
        token:
          realm: <public URL>/registry/token
          service: <-registry-token-service, default the registry's host>
          issuer: deployplane
          rootcertbundle: <dir of -db>/deployplane-registry-token.crt
    (or jwks: <dir of -db>/deployplane-registry-token.jwks.json, the answer of
    GET <public URL>/registry/jwks.json), both written at every start. The
    registry refuses a client without a token and sends it to the realm, which
    takes a push or pull token as the password of basic auth and answers a
    5-minute JWT for that deployment's repository prefix only (push and pull,
    or pull), whatever it asked for. The Docker deployer pulls with a pull
    token the same way; Kubernetes clusters pull through an image pull Secret.

GitHub integrations:

    A github deployment names an integration: a GitHub App installation that
    belongs to exactly one tenant. With the App configured (the five
    -github-app-*/-github-client-* flags), GET /v1/integrations/github/install
    answers {"url": ...}: the App's installation page, with a state bound to
    the caller's tenant (single use, valid 15 minutes). In the App's
    settings, set both the Callback URL and the Setup URL to
    <public URL>/v1/integrations/github/setup and tick "Request user
    authorization (OAuth) during installation". GitHub sends the user back
    there (no API key; the state is the proof); the server trades the code
    for a user token, asks GitHub (GET /user/installations) whether that user
    can access the installation, and only then records it for the state's
    tenant. An installation another tenant holds is refused (409). Without
    the App the install route answers 503. GET /v1/integrations/github lists
    the tenant's integrations.

    -allow-unverified-integrations also serves POST /v1/integrations/github
    {"installation_id", "name"}, which records an installation id without
    asking GitHub. It trusts every API key holder of every tenant: any of
    them can claim any installation id no tenant holds yet, and then receives
    its pushes (builds of that repository). Use it only when one team holds
    all the keys. Without the flag the route answers 404.

GitHub webhook (build_on_push):

    Point the GitHub App's webhook URL at
    <public URL>/v1/integrations/github/webhook, content type application/json,
    and give the server the same webhook secret (DEPLOYPLANE_GITHUB_WEBHOOK_SECRET
    or -github-webhook-secret). The route takes no API key: each delivery must
    carry X-Hub-Signature-256, the HMAC-SHA256 of its body with the secret,
    or it is refused with 401. A push to a branch creates a revision, at the
    pushed commit, of every github deployment with build_on_push true whose
    integration has the delivery's installation id, whose repo_url is the
    pushed repository and whose repo_ref is the branch; other events, tags
    and branch deletions change nothing (202). Without a secret the webhook
    answers 503 to every delivery. The secret is never logged.

OAuth helpers:

    /v2/auth/* stores the providers each tenant configures and the tokens
    their users obtain; client secrets, tokens and PKCE verifiers are
    encrypted with the secret key. Without DEPLOYPLANE_SECRET_KEY or
    -secret-key-file, the first start generates a key and keeps it beside the
    database in <db>.secret-key (64 hex digits, permissions 0600); later
    starts reuse it. Back it up with the database: without the key, stored
    client secrets and tokens cannot be read (providers must be given their
    secret again and users must sign in again). With -db :memory: the
    generated key is ephemeral, like the data it protects. With a PostgreSQL
    database nothing is generated: give the key (the same to every replica)
    with DEPLOYPLANE_SECRET_KEY or -secret-key-file.

    Tenants choose the token_url the server posts the code exchange and
    refreshes to, so those requests go out under a strict policy (package
    egress): https only, and only to public addresses. Each connection is
    checked against the address it is about to reach, after DNS, so a name
    that resolves to loopback, a private network (10/8, 172.16/12,
    192.168/16, fc00::/7), CGNAT (100.64/10), link-local (169.254/16, cloud
    metadata), multicast or another non-public address is refused, and no
    proxy is used. Providers whose auth_url or token_url is http, a
    non-public IP address or a localhost name are refused at registration
    (422). -egress-allow-hosts lifts both checks for the hosts it names:
    every tenant may then register providers there and make the server
    reach them, so name only services you would let any tenant use (an
    in-house identity provider, a fake provider in tests), never a
    database, an admin port or a metadata address.

    GET /v2/auth/callback/{provider_id} takes no API key (a browser lands on
    it; the flow's state is the proof). Long polls
    (GET /v2/auth/wait/{auth_id}?timeout=S, up to 300 s) outlive the
    server's 60 s write timeout.

Replicas:

    With -db postgres://..., run as many servers as you like over one database
    and schema (behind a load balancer): every write is a serializable
    transaction, and each unit of revision work is claimed with a lease, so no
    two replicas drive the same revision at once; work of a replica that died
    is taken over when its lease expires (30 s). Give every replica the same
    keys, OAuth secret key and webhook secret. The default tenant and the
    generated key are made once, by the first replica to start.

Logs:

    Structured, on standard error: log/slog's text lines, or JSON lines with
    -log-format json. One record per request
    (method, path without the query, status, duration, request_id, tenant);
    keys, tokens, secrets, bodies and query strings (the OAuth callback's
    carries the code and state) are never logged, nor the password of a
    PostgreSQL URL. Every answer carries its X-Request-Id. Request records
    are written by a goroutine of their own, in order, and all of them
    before the server exits.

Operations:

    GET /healthz answers 200 {"status": "ok"} while the process serves.
    GET /readyz answers 200 {"status": "ok"} when the database answers, the
    reconcile loop runs and the deployer reaches its engine, and otherwise
    503 {"status": "unavailable", "detail": ..., "not_ready": [...]} naming
    "store", "reconcile" or "deployer" (the causes go to the log, at Warn,
    when the state changes). Kubernetes clusters are not part of it: both
    answers carry "clusters": {"<context>": "ok" or "unreachable"}, the log
    says when a cluster stops or starts answering, and GET /metrics has
    deployplane_cluster_up{cluster}. Both are public, carry no data, and answer
    even when the in-flight cap or the rate limit refuses other requests:
    point a load balancer's or Kubernetes' liveness probe at /healthz and
    its readiness probe at /readyz.

    GET /metrics answers the Prometheus text format (package prommetrics):
    requests by route pattern, method and status with their durations,
    revision transitions, deployer step and call durations, leases taken
    over, revisions waiting and in progress, database commit latency and
    batch size, and the Go runtime's and the process's metrics. It is
    public unless a metrics key is given (-metrics-key or
    DEPLOYPLANE_METRICS_KEY): then scrapers send it as a bearer token
    (Prometheus: authorization: {credentials: KEY}).

    Each answer carries X-Request-Id: the client's own when it sent one (at
    most 128 bytes, letters, digits and - _ . : / + = @ kept, the rest
    dropped), a generated one otherwise; the request's log record has the
    same request_id. The reconcile loop logs each revision status change at
    Info ("revision transition": tenant, deployment, revision, from, to,
    step).

Signals:

    SIGINT and SIGTERM stop accepting connections, let requests in flight
    finish (up to -shutdown-timeout), stop the reconcile loop (revisions in
    flight are given back, to resume at the next start), close the database
    and exit 0.

The API is described by GET /openapi.json (no key needed).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "deployplane:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// config is what the flags and the environment say.
type config struct {
	addr            string
	db              string
	keysFile        string
	maxBody         int64
	webhookMaxBody  int64
	shutdownTimeout time.Duration
	// autoRollbackWindow is -auto-rollback-window
	// (controlplane.Options.AutoRollbackWindow).
	autoRollbackWindow time.Duration
	newKey             bool
	envKey             string
	publicURL          string
	blobURL            string
	secretKeyFile      string
	egressAllow        string
	envSecretKey       string
	pgSchema           string
	simStep            time.Duration
	simFailAt          string
	simAgents          bool
	workers            int
	tenantWorkers      int
	webhookSecret      string
	deployer           deployerFlags
	registry           registryFlags // registry.go

	// The GitHub App (integrations).
	githubAppID           int64
	githubAppSlug         string
	githubKeyFile         string
	githubClientID        string
	githubClientSecret    string
	githubAPIURL          string
	githubURL             string
	githubPreviewForks    bool // -github-preview-forks: controlplane.Options.PreviewForks
	allowUnverifiedIntegs bool
	// Load: connections, concurrency and rate limits.
	maxConns     int
	maxInFlight  int
	maxLongPolls int
	rateLimit    float64
	rateBurst    int
	// Each tenant's share of the caps, uploads, and request bodies.
	maxInFlightPerTenant  int
	maxLongPollsPerTenant int
	maxUploads            int
	maxUploadsPerTenant   int
	minUploadRate         int64
	uploadRateWindow      time.Duration
	uploadMaxBytes        int64
	publicMaxBody         int64
	publicReadTimeout     time.Duration
	// Operations: logs and metrics.
	logFormat  string
	metricsKey string
	// ui serves the dashboard under /ui/.
	ui bool
	// The tenants' webhooks: -webhook-retries and -webhook-lease.
	webhookRetries []time.Duration
	webhookLease   time.Duration
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	c := &config{envKey: getenv("DEPLOYPLANE_API_KEY"), envSecretKey: getenv("DEPLOYPLANE_SECRET_KEY")}
	envWebhookSecret := getenv("DEPLOYPLANE_GITHUB_WEBHOOK_SECRET")
	fs := flag.NewFlagSet("deployplane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8124", "listen address")
	fs.StringVar(&c.db, "db", "./deployplane.db", "database file, or :memory:")
	fs.StringVar(&c.keysFile, "keys", "", "JSON file of API keys")
	fs.BoolVar(&c.newKey, "new-key", false, "replace the generated API key")
	fs.Int64Var(&c.maxBody, "max-body-bytes", httphandler.DefaultMaxBodyBytes, "request body limit")
	fs.Int64Var(&c.webhookMaxBody, "webhook-max-body-bytes", httphandler.DefaultWebhookMaxBodyBytes, "body limit of a GitHub webhook delivery")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "graceful shutdown limit")
	fs.DurationVar(&c.autoRollbackWindow, "auto-rollback-window", controlplane.DefaultAutoRollbackWindow,
		"how long after a revision becomes active a failed health check rolls it back (deployments with source_config.auto_rollback)")
	fs.StringVar(&c.publicURL, "public-url", "", "base URL browsers reach the server at")
	fs.StringVar(&c.secretKeyFile, "secret-key-file", "", "file holding the OAuth secret key")
	fs.StringVar(&c.blobURL, "blob-url", "", "blob store of uploaded source tarballs (file://; s3://, gs://, azblob:// built with -tags s3, gcs, azure)")
	fs.StringVar(&c.egressAllow, "egress-allow-hosts", "", "hosts requests on a tenant's behalf may reach over http or at non-public addresses")
	c.webhookRetries = webhooks.DefaultBackoff
	fs.Func("webhook-retries", "waits before each retry of a webhook delivery", func(v string) error {
		var ds []time.Duration
		for e := range strings.SplitSeq(v, ",") {
			e = strings.TrimSpace(e)
			d, err := time.ParseDuration(e)
			if err != nil || d <= 0 {
				return fmt.Errorf("%q is not a positive duration", e)
			}
			ds = append(ds, d)
		}
		c.webhookRetries = ds
		return nil
	})
	fs.DurationVar(&c.webhookLease, "webhook-lease", webhooks.DefaultLeaseTTL, "lease of a replica on a tenant's webhook dispatch")
	fs.StringVar(&c.pgSchema, "pg-schema", storepg.DefaultSchema, "PostgreSQL schema")
	fs.DurationVar(&c.simStep, "sim-step", deploysim.DefaultStep, "simulated deployer delay per status")
	fs.StringVar(&c.simFailAt, "sim-fail-at", "", "revision status at which the simulated deployer fails")
	fs.BoolVar(&c.simAgents, "sim-agents", true, "with -deployer sim, serve the listeners this server does not drive with simulated agents")
	fs.IntVar(&c.workers, "workers", controlplane.DefaultWorkers, "units of work (revisions, deletions) the reconcile loop drives at once")
	fs.IntVar(&c.tenantWorkers, "tenant-workers", 0, "units of work of one tenant driven at once (0: a quarter of the workers, -1: no cap)")
	c.deployer.register(fs, getenv)
	c.registry.register(fs)
	fs.StringVar(&c.webhookSecret, "github-webhook-secret", "", "GitHub App webhook secret")
	// The GitHub App (integrations).
	envClientSecret := getenv("DEPLOYPLANE_GITHUB_CLIENT_SECRET")
	fs.Int64Var(&c.githubAppID, "github-app-id", 0, "GitHub App id")
	fs.StringVar(&c.githubAppSlug, "github-app-slug", "", "GitHub App slug")
	fs.StringVar(&c.githubKeyFile, "github-app-private-key-file", "", "GitHub App private key (PEM) file")
	fs.StringVar(&c.githubClientID, "github-client-id", "", "GitHub App OAuth client id")
	fs.StringVar(&c.githubClientSecret, "github-client-secret", "", "GitHub App OAuth client secret")
	fs.StringVar(&c.githubAPIURL, "github-api-url", githubapp.DefaultAPIURL, "GitHub REST API URL")
	fs.StringVar(&c.githubURL, "github-url", githubapp.DefaultWebURL, "GitHub web URL")
	fs.BoolVar(&c.allowUnverifiedIntegs, "allow-unverified-integrations", false, "serve POST /v1/integrations/github")
	fs.BoolVar(&c.githubPreviewForks, "github-preview-forks", false,
		"give pull requests from forks previews too (they run the fork's code with the parent's secrets)")
	fs.IntVar(&c.maxConns, "max-conns", 1024, "open connections at most (0: no cap)")
	fs.IntVar(&c.maxInFlight, "max-in-flight", 0, "requests in service at once (0: default, -1: no cap)")
	fs.IntVar(&c.maxLongPolls, "max-long-polls", httphandler.DefaultMaxLongPolls, "long polls open at once (-1: no cap)")
	fs.Float64Var(&c.rateLimit, "rate-limit", 50, "requests per second per API key (0: no limit)")
	fs.IntVar(&c.rateBurst, "rate-burst", 100, "requests per API key at once")
	fs.IntVar(&c.maxInFlightPerTenant, "max-in-flight-per-tenant", 0, "requests of one tenant in service at once (0: default, -1: no share)")
	fs.IntVar(&c.maxLongPollsPerTenant, "max-long-polls-per-tenant", 0, "long polls of one tenant open at once (0: default, -1: no share)")
	fs.IntVar(&c.maxUploads, "max-uploads", httphandler.DefaultMaxUploads, "upload PUTs streaming at once (-1: no cap)")
	fs.IntVar(&c.maxUploadsPerTenant, "max-uploads-per-tenant", 0, "upload PUTs of one tenant at once (0: default, -1: no share)")
	fs.Int64Var(&c.minUploadRate, "min-upload-rate", httphandler.DefaultMinUploadRate, "bytes per second below which an upload is cut (-1: none)")
	fs.DurationVar(&c.uploadRateWindow, "upload-rate-window", httphandler.DefaultUploadRateWindow, "span over which -min-upload-rate is measured")
	fs.Int64Var(&c.uploadMaxBytes, "upload-max-bytes", uploads.MaxBytes, "the largest source tarball an upload takes")
	fs.Int64Var(&c.publicMaxBody, "public-max-body-bytes", httphandler.DefaultPublicMaxBodyBytes, "request body limit of the public routes")
	fs.DurationVar(&c.publicReadTimeout, "public-read-timeout", httphandler.DefaultPublicReadTimeout, "time a public route's request body has to arrive")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.metricsKey, "metrics-key", "", "key GET /metrics requires (default: public)")
	fs.BoolVar(&c.ui, "ui", true, "serve the web dashboard under /ui/")
	envMetricsKey := getenv("DEPLOYPLANE_METRICS_KEY")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "deployplane: unexpected arguments %q\n", fs.Args())
		return nil, errUsage
	}
	if c.maxBody <= 0 {
		fmt.Fprintln(stderr, "deployplane: -max-body-bytes must be positive")
		return nil, errUsage
	}
	if c.secretKeyFile != "" && c.envSecretKey != "" {
		fmt.Fprintln(stderr, "deployplane: give DEPLOYPLANE_SECRET_KEY or -secret-key-file, not both")
		return nil, errUsage
	}
	if msg := checkSimFlags(c.simStep, c.simFailAt); msg != "" {
		fmt.Fprintln(stderr, "deployplane: "+msg)
		return nil, errUsage
	}
	if c.workers <= 0 {
		fmt.Fprintln(stderr, "deployplane: -workers must be positive")
		return nil, errUsage
	}
	if c.tenantWorkers < -1 {
		fmt.Fprintln(stderr, "deployplane: -tenant-workers must be -1 (no cap), 0 (the default) or positive")
		return nil, errUsage
	}
	switch {
	case c.webhookSecret != "" && envWebhookSecret != "":
		fmt.Fprintln(stderr, "deployplane: give DEPLOYPLANE_GITHUB_WEBHOOK_SECRET or -github-webhook-secret, not both")
		return nil, errUsage
	case envWebhookSecret != "":
		c.webhookSecret = envWebhookSecret
	}
	if c.pgSchema == "" {
		fmt.Fprintln(stderr, "deployplane: -pg-schema must not be empty")
		return nil, errUsage
	}
	if msg := c.deployer.check(); msg != "" {
		fmt.Fprintln(stderr, "deployplane: "+msg)
		return nil, errUsage
	}
	if msg := c.registry.check(); msg != "" {
		fmt.Fprintln(stderr, "deployplane: "+msg)
		return nil, errUsage
	}
	if msg := checkBlobURL(c.blobURL); msg != "" {
		fmt.Fprintln(stderr, "deployplane: "+msg)
		return nil, errUsage
	}
	// The GitHub App: all of it or none.
	switch {
	case c.githubClientSecret != "" && envClientSecret != "":
		fmt.Fprintln(stderr, "deployplane: give DEPLOYPLANE_GITHUB_CLIENT_SECRET or -github-client-secret, not both")
		return nil, errUsage
	case envClientSecret != "":
		c.githubClientSecret = envClientSecret
	}
	if given := c.githubApp(); len(given) > 0 && len(given) < 5 {
		fmt.Fprintf(stderr, "deployplane: the GitHub App needs -github-app-id, -github-app-slug, -github-app-private-key-file, -github-client-id and -github-client-secret; given only %s\n",
			strings.Join(given, " "))
		return nil, errUsage
	}
	if msg := c.checkLoadFlags(); msg != "" {
		fmt.Fprintln(stderr, "deployplane: "+msg)
		return nil, errUsage
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		fmt.Fprintf(stderr, "deployplane: -log-format must be text or json, not %q\n", c.logFormat)
		return nil, errUsage
	}
	switch {
	case c.metricsKey != "" && envMetricsKey != "":
		fmt.Fprintln(stderr, "deployplane: give DEPLOYPLANE_METRICS_KEY or -metrics-key, not both")
		return nil, errUsage
	case envMetricsKey != "":
		c.metricsKey = envMetricsKey
	}
	return c, nil
}

// keyTenants lists the tenants the keys name, each once, in canonical
// form.
func keyTenants(keys []httphandler.Key) []string {
	var out []string
	for _, k := range keys {
		for _, t := range k.Tenants {
			if ct, ok := httphandler.CanonicalTenant(t); ok && !slices.Contains(out, ct) {
				out = append(out, ct)
			}
		}
	}
	return out
}

// checkSimFlags says what is wrong with -sim-step and -sim-fail-at, or "".
func checkSimFlags(step time.Duration, failAt string) string {
	if step <= 0 {
		return "-sim-step must be positive"
	}
	if s := controlplane.RevisionStatus(failAt); s != "" && (controlplane.IsTerminal(s) || !slices.Contains(controlplane.HappyPath(controlplane.SourceGitHub), s)) {
		return "-sim-fail-at must be a status a revision passes through (CREATING, QUEUED, AWAITING_BUILD, BUILDING, AWAITING_DEPLOY, DEPLOYING)"
	}
	return ""
}

// newSim is the simulated Deployer of the -sim-* flags.
func newSim(step time.Duration, failAt string) *deploysim.Deployer {
	return deploysim.New(&deploysim.Options{Step: step, FailAt: controlplane.RevisionStatus(failAt)})
}

// githubApp lists the GitHub App flags given (the client secret from the
// environment counts).
func (c *config) githubApp() []string {
	var given []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"-github-app-id", c.githubAppID != 0}, {"-github-app-slug", c.githubAppSlug != ""},
		{"-github-app-private-key-file", c.githubKeyFile != ""}, {"-github-client-id", c.githubClientID != ""},
		{"-github-client-secret", c.githubClientSecret != ""}} {
		if f.set {
			given = append(given, f.name)
		}
	}
	return given
}

// newGitHubApp returns the configured GitHub App, or nil when none is.
func newGitHubApp(c *config) (controlplane.GitHubApp, error) {
	if len(c.githubApp()) == 0 {
		return nil, nil
	}
	key, err := os.ReadFile(c.githubKeyFile)
	if err != nil {
		return nil, fmt.Errorf("-github-app-private-key-file: %w", err)
	}
	app, err := githubapp.New(&githubapp.Options{AppID: c.githubAppID, Slug: c.githubAppSlug, PrivateKeyPEM: key,
		ClientID: c.githubClientID, ClientSecret: c.githubClientSecret, APIURL: c.githubAPIURL, WebURL: c.githubURL,
		HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	if err != nil {
		return nil, err
	}
	return app, nil
}

// serverMaxHeaderBytes is net/http's limit of a request line and headers,
// set well above the handler's own (httphandler.DefaultMaxURLBytes and
// DefaultMaxHeaderBytes) so that a request beyond those gets the handler's
// JSON 414 or 431; only one beyond this gets net/http's plain-text 431.
const serverMaxHeaderBytes = 512 << 10

// run is the whole server (or, with the first argument agent, the agent:
// runAgent); it returns when ctx is done (after a graceful shutdown) or on
// a failure.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "agent" {
		return runAgent(ctx, args[1:], getenv, stderr) // agentcmd.go
	}
	c, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	// slog's text or JSON lines; through httphandler's handler, the request
	// log formats and writes its lines itself, in batches.
	logFormat := httphandler.LogText
	if c.logFormat == "json" {
		logFormat = httphandler.LogJSON
	}
	log := slog.New(httphandler.NewLogHandler(stderr, logFormat))
	metrics := prommetrics.New(&prommetrics.Options{Logger: log})

	st, err := openStore(ctx, c.db, c.pgSchema, metrics.ObserveCommit)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the database", "err", err)
		}
	}()

	keys, err := readKeysFile(c.keysFile)
	if err != nil {
		return err
	}
	// Listen before a key is generated: a key stored but never shown (the
	// port was taken) would lock the operator out.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	defer ln.Close() // Serve closes it too; a second Close is harmless
	url := "http://" + ln.Addr().String()
	publicURL := c.publicURL
	if publicURL == "" {
		publicURL = defaultPublicURL(ln.Addr())
	}
	secretKey, keyOrigin, err := loadSecretKey(c, log)
	if err != nil {
		return err
	}
	if err := controlplane.VerifySecretKey(ctx, st, secretKey); err != nil {
		if errors.Is(err, controlplane.ErrSecretKey) {
			return fmt.Errorf("the secret key read from %s is not the one that sealed the secrets of %s: "+
				"start with that key (DEPLOYPLANE_SECRET_KEY or -secret-key-file)", keyOrigin, redactDSN(c.db))
		}
		return err
	}
	// Requests made on a tenant's behalf (the OAuth token endpoint, the
	// clones of github revisions) go out through one egress policy.
	egressHosts := egress.SplitHosts(c.egressAllow)
	egressPolicy, err := egress.New(&egress.Options{AllowHosts: egressHosts})
	if err != nil {
		return fmt.Errorf("-egress-allow-hosts: %w", err)
	}
	if len(egressHosts) > 0 {
		log.Warn("requests made on a tenant's behalf may reach these hosts over http and at any address", "egress_allow_hosts", egressHosts)
	}
	oauth, err := oauthflow.New(st, &oauthflow.Options{SecretKey: secretKey, PublicURL: publicURL, Logger: log, Egress: egressPolicy})
	if err != nil {
		return fmt.Errorf("-public-url: %w", err)
	}

	generated := ""
	switch {
	case len(keys) == 0 && c.envKey == "":
		generated = newAPIKey()
	case c.newKey:
		return errors.New("-new-key replaces the generated key, which is not used while -keys or DEPLOYPLANE_API_KEY give keys")
	}
	srvCfg, storedGenerated, err := loadServerConfig(ctx, st, uuid.NewString(), generated, c.newKey)
	if err != nil {
		return err
	}
	if c.envKey != "" {
		keys = append(keys, httphandler.Key{SHA256: httphandler.HashKey(c.envKey), Tenants: []string{srvCfg.DefaultTenant}})
	}
	if len(keys) == 0 {
		d, err := hex.DecodeString(srvCfg.GeneratedKeySHA256)
		if err != nil || len(d) != 32 {
			return fmt.Errorf("the database holds a malformed generated key digest")
		}
		keys = append(keys, httphandler.Key{SHA256: [32]byte(d), Tenants: []string{srvCfg.DefaultTenant}})
	}
	// The simulated agents of the listeners this server does not drive
	// (simagents.go) call its handler with keys of their own.
	var simKeys map[string]string
	if c.deployer.kind == "sim" && c.simAgents {
		var table []httphandler.Key
		simKeys, table = simAgentKeys(keyTenants(keys))
		keys = append(keys, table...)
	}
	auth, err := httphandler.NewKeyTable(keys)
	if err != nil {
		return err
	}

	if storedGenerated {
		fmt.Fprintf(stdout, `deployplane: generated an API key for the default tenant %s.
It is shown only now; the database keeps only its SHA-256 digest.

    %s

Try: curl -H 'X-Api-Key: %s' %s/v2/deployments
`, srvCfg.DefaultTenant, generated, generated, url)
	}

	githubApp, err := newGitHubApp(c)
	if err != nil {
		return err
	}
	proxyLn, proxyURL, err := listenProxy(&c.deployer)
	if err != nil {
		return err
	}
	// Uploads are the records of the upload URLs (uploads.go): a
	// source_tarball_path names a completed upload of the deployment.
	cpOpts := &controlplane.Options{Logger: log, GitHubApp: githubApp, SecretKey: secretKey, Observer: metrics, Uploads: uploads.Records{},
		SecretReferenceProblem: c.deployer.secretReferenceProblem}
	if githubApp != nil {
		cpOpts.GitHubInstallStates = githubapp.NewStates(st, nil) // in the control plane's store
	}
	// Previews tell their pull requests through the App (Deployments).
	if r, ok := githubApp.(controlplane.PreviewStatusReporter); ok {
		cpOpts.PreviewStatus = r
	}
	cpOpts.PreviewForks = c.githubPreviewForks
	c.workerOptions(cpOpts)
	// The listeners this server drives are those its deployers' Router
	// has an engine for (stored below, before anything is served); the
	// deployments of the others wait for their agents.
	var router atomic.Pointer[deployroute.Router]
	cpOpts.Drives = func(l *controlplane.Listener) bool {
		r := router.Load()
		return r == nil || r.Drives(l)
	}
	// The built-in registry (registry.go) resolves internal_docker image
	// tags to digests; it serves once cp checks its tokens.
	reg, err := openRegistry(ctx, &c.registry, c.deployer.kind, c.db, registrySecret(secretKey), log)
	if err != nil {
		if proxyLn != nil {
			proxyLn.Close()
		}
		return err
	}
	if reg != nil {
		defer reg.close()
		cpOpts.Images = reg
	}
	// Or an external registry, which trusts the realm's tokens (registry.go).
	ext, err := openExternalRegistry(&c.registry, secretKey, c.db, publicURL, log)
	if err != nil {
		if proxyLn != nil {
			proxyLn.Close()
		}
		return err
	}
	var realm http.Handler
	if ext != nil {
		cpOpts.Images, realm = ext, ext.realm
	}
	if proxyURL != "" {
		// github deployments' custom_url, their url: where the proxy serves them.
		cpOpts.CustomURLTemplate = proxyURL + "/{id}"
	}
	cp := controlplane.New(st, cpOpts)
	var pushRegistry httphandler.Registry
	var registryCreds registryCredentials
	registryDesc := "none"
	var pulls pullTokenFunc // the deployers' pull credentials of the registry's images
	switch {
	case reg != nil:
		reg.serve(cp, log)
		pulls = pullTokens(reg.Names(), reg.tokens.TokenStore)
		pushRegistry, registryCreds, registryDesc = reg, dockerCredentials(pulls), reg.Host()
	case ext != nil:
		ext.tokens.setTokens(cp)
		pulls = pullTokens(ext.Names(), ext.tokens.TokenStore)
		pushRegistry, registryCreds, registryDesc = ext, dockerCredentials(pulls), ext.Host()+" (external)"
	}
	// A store written in another storage layout is refused before
	// anything is served or deployed: it is to be recreated.
	if err := cp.CheckLayout(ctx); err != nil {
		if proxyLn != nil {
			proxyLn.Close()
		}
		return fmt.Errorf("checking the store: %w", err)
	}
	if err := errors.Join(metrics.WatchPendingWork(cp), metrics.WatchClusters(cp)); err != nil {
		if proxyLn != nil {
			proxyLn.Close()
		}
		return err
	}
	// Source tarballs of langgraph deploy --remote (uploads.go).
	upl, blobDesc, stopUploads, err := openUploads(ctx, c, cp, secretKey, publicURL, log)
	if err != nil {
		if proxyLn != nil {
			proxyLn.Close()
		}
		return err
	}
	defer stopUploads()
	deployer, deployerDesc, stopDeployer, err := startDeployer(ctx, &c.deployer, c.simStep, controlplane.RevisionStatus(c.simFailAt),
		&deployerEnv{state: cp, cp: cp, log: log, egress: egressPolicy, githubApp: githubApp, proxy: proxyLn, proxyURL: proxyURL, credentials: registryCreds,
			tarballs: upl, pulls: pulls})
	if err != nil {
		return err
	}
	defer stopDeployer()
	router.Store(deployer)
	// draining keeps ctx's values (the tests' hooks) but not its end.
	draining, drain := context.WithCancel(context.WithoutCancel(ctx))
	defer drain()
	// The tenants' outbound webhooks, delivered from the event log
	// beside the reconcile loop, through the same egress policy.
	hooks, err := webhooks.New(cp, &webhooks.Options{Egress: egressPolicy, SecretKey: secretKey, Logger: log,
		Backoff: c.webhookRetries, LeaseTTL: c.webhookLease})
	if err != nil {
		return err
	}
	var webhookSecret []byte
	if c.webhookSecret != "" {
		webhookSecret = []byte(c.webhookSecret)
	}
	api := httphandler.New(cp, &httphandler.Options{
		Authenticator:       auth,
		MaxBodyBytes:        c.maxBody,
		WebhookMaxBodyBytes: c.webhookMaxBody,
		Logger:              log,
		OAuth:               oauth,
		Webhooks:            hooks,
		GitHubWebhookSecret: webhookSecret,
		Load:                c.loadLimits(),
		Metrics:             metrics,
		MetricsKey:          c.metricsKey,
		Uploads:             upl,

		AllowUnverifiedIntegrations: c.allowUnverifiedIntegs,
		Registry:                    pushRegistry,
		RegistryRealm:               realm,
		Dashboard:                   c.dashboard(st),
	})
	var sims *simAgents
	if simKeys != nil {
		sims = &simAgents{cp: cp, drives: deployer.Drives, api: api, keys: simKeys, sim: newSim(c.simStep, c.simFailAt), log: log}
	}
	srv := portLimits(c.maxConns).server(endLongPolls(draining, api), log)
	keySource := "the generated key"
	switch {
	case c.keysFile != "" && c.envKey != "":
		keySource = "-keys and DEPLOYPLANE_API_KEY"
	case c.keysFile != "":
		keySource = "-keys"
	case c.envKey != "":
		keySource = "DEPLOYPLANE_API_KEY"
	}
	webhook := "disabled (no secret)"
	if webhookSecret != nil {
		webhook = "enabled"
	}
	githubAppState := "disabled"
	if githubApp != nil {
		githubAppState = "enabled"
	}
	metricsAccess := "public"
	if c.metricsKey != "" {
		metricsAccess = "key required"
	}
	log.Info("listening", append([]any{"addr", url, "db", redactDSN(c.db), "default_tenant", srvCfg.DefaultTenant, "keys", keySource,
		"public_url", publicURL, "secret_key", keyOrigin, "blob_url", blobDesc}, append(deployerDesc,
		"github_webhook", webhook, "github_app", githubAppState, "unverified_integrations", c.allowUnverifiedIntegs,
		"max_conns", c.maxConns, "rate_limit", c.rateLimit, "rate_burst", c.rateBurst,
		"metrics", metricsAccess, "registry", registryDesc, "sim_agents", sims != nil)...)...)

	// The reconcile loop has its own context: it stops after the last
	// request, and before the deferred Close of the store.
	loopCtx, stopLoop := context.WithCancel(context.Background())
	defer stopLoop()
	looped := make(chan error, 1)
	go func() { looped <- cp.Run(loopCtx, deployer) }()
	dispatched := make(chan struct{})
	go func() {
		defer close(dispatched)
		if err := hooks.Run(loopCtx); err != nil {
			log.Error("the webhooks' dispatcher stopped", "err", err)
		}
	}()
	defer func() { stopLoop(); <-dispatched }() // before the store closes
	simLoop := startSimAgents(loopCtx, sims)
	defer simLoop.close()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(c.limitListener(ln)) }()
	go cleanupFlows(ctx, oauth, log)
	swept := make(chan struct{})
	go func() { defer close(swept); upl.Run(loopCtx, 0) }() // removes the tarballs no revision needs
	defer func() { stopLoop(); <-swept }()                  // before the bucket closes
	var failed error
	select {
	case err := <-served:
		stopLoop()
		<-looped
		return fmt.Errorf("serve: %w", err)
	case err := <-looped:
		// Run returns early only when the store fails under it (closed).
		failed = fmt.Errorf("reconcile loop: %w", err)
		log.Error("the reconcile loop stopped; shutting down", "err", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", c.shutdownTimeout)
	drain()
	simLoop.close() // they give back their work through the handler, before it closes
	_ = api.Close() // ends event streams and ?wait= polls, which would hold Shutdown until its timeout
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight at the shutdown timeout", "err", err)
		_ = srv.Close()
	}
	<-served
	_ = api.Close() // the request records still waiting
	if failed == nil {
		stopLoop()
		if err := <-looped; err != nil {
			log.Error("the reconcile loop failed", "err", err)
		}
	}
	// The pull requests are told the last of their previews' statuses.
	if err := cp.FlushPreviewStatuses(sctx); err != nil {
		log.Warn("preview statuses not sent to GitHub at the shutdown timeout", "err", err)
	}
	log.Info("stopped")
	return failed
}

// checkLoadFlags says what is wrong with the load flags, or "".
func (c *config) checkLoadFlags() string {
	switch {
	case c.maxConns < 0:
		return "-max-conns must be 0 (no cap) or positive"
	case c.maxInFlight < -1:
		return "-max-in-flight must be -1 (no cap), 0 (the default) or positive"
	case c.maxLongPolls < -1 || c.maxLongPolls == 0:
		return "-max-long-polls must be -1 (no cap) or positive"
	case c.maxConns > 0 && (c.maxLongPolls < 0 || c.maxLongPolls >= c.maxConns):
		return "-max-long-polls must be below -max-conns, or long polls could hold every connection"
	case c.rateLimit < 0 || math.IsNaN(c.rateLimit) || math.IsInf(c.rateLimit, 0):
		return "-rate-limit must be 0 (no limit) or a positive number of requests per second"
	case c.rateLimit > 0 && c.rateBurst < 1:
		return "-rate-burst must be at least 1"
	case c.maxInFlightPerTenant < -1:
		return "-max-in-flight-per-tenant must be -1 (no share), 0 (the default) or positive"
	case c.maxLongPollsPerTenant < -1:
		return "-max-long-polls-per-tenant must be -1 (no share), 0 (the default) or positive"
	case c.maxUploads < -1 || c.maxUploads == 0:
		return "-max-uploads must be -1 (no cap) or positive"
	case c.maxUploadsPerTenant < -1:
		return "-max-uploads-per-tenant must be -1 (no share), 0 (the default) or positive"
	case c.minUploadRate < -1 || c.minUploadRate == 0:
		return "-min-upload-rate must be -1 (none) or a positive number of bytes per second"
	case c.publicMaxBody <= 0:
		return "-public-max-body-bytes must be positive"
	case c.publicReadTimeout <= 0:
		return "-public-read-timeout must be positive"
	case c.uploadRateWindow <= 0:
		return "-upload-rate-window must be positive"
	case c.uploadMaxBytes <= 0:
		return "-upload-max-bytes must be positive"
	case c.webhookMaxBody <= 0:
		return "-webhook-max-body-bytes must be positive"
	case c.webhookLease <= 0:
		return "-webhook-lease must be positive"
	}
	return ""
}

// workerOptions sets o's caps of the reconcile loop's work: -workers and
// -tenant-workers.
func (c *config) workerOptions(o *controlplane.Options) {
	o.Workers, o.TenantWorkers = c.workers, c.tenantWorkers
	o.AutoRollbackWindow = c.autoRollbackWindow
}

// loadLimits are the handler's LoadLimits of the flags.
func (c *config) loadLimits() *httphandler.LoadLimits {
	l := &httphandler.LoadLimits{MaxInFlight: c.maxInFlight, MaxLongPolls: c.maxLongPolls,
		MaxInFlightPerTenant: c.maxInFlightPerTenant, MaxLongPollsPerTenant: c.maxLongPollsPerTenant,
		MaxUploads: c.maxUploads, MaxUploadsPerTenant: c.maxUploadsPerTenant, MinUploadRate: c.minUploadRate,
		UploadRateWindow: c.uploadRateWindow, PublicMaxBodyBytes: c.publicMaxBody, PublicReadTimeout: c.publicReadTimeout}
	if c.rateLimit > 0 {
		l.RateLimit = &httphandler.RateLimit{PerSecond: c.rateLimit, Burst: c.rateBurst}
	}
	return l
}

// limitListener caps the API port's open connections at -max-conns
// (httpLimits.listener).
func (c *config) limitListener(ln net.Listener) net.Listener {
	return portLimits(c.maxConns).listener(ln)
}

// redactDSN hides the password of a PostgreSQL URL, for the log.
func redactDSN(db string) string {
	if !isPostgres(db) {
		return db
	}
	u, err := neturl.Parse(db)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// isPostgres reports whether -db names a PostgreSQL database.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// endLongPolls ends the long polls of GET /v2/auth/wait/{auth_id} when
// draining is done (the server is shutting down): they answer 503 at once,
// and the client asks again elsewhere or later, instead of holding the
// shutdown for up to 300 s. Other requests are left to finish.
func endLongPolls(draining context.Context, h http.Handler) http.Handler {
	polling := hooksFrom(draining).longPoll
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/auth/wait/") {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(draining, cancel)
			defer stop()
			r = r.WithContext(ctx)
			if polling != nil {
				polling()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// dashboard is the dashboard's options (nil with -ui=false): sessions in
// the server's store, so that replicas sharing it share them.
func (c *config) dashboard(st store.Store) *dashboard.Options {
	if !c.ui {
		return nil
	}
	return &dashboard.Options{Sessions: st}
}

// defaultPublicURL is the -public-url of a server listening at addr: its
// address, with an unspecified host (0.0.0.0, ::) replaced by 127.0.0.1.
func defaultPublicURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// secretKeySize is the size of the OAuth secret key (AES-256).
const secretKeySize = 32

// parseSecretKey decodes an OAuth secret key: 64 hex digits, or base64
// (standard or URL alphabet, padded or not) of 32 bytes. Errors never
// quote the input.
func parseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*secretKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == secretKeySize {
			return b, nil
		}
	}
	return nil, fmt.Errorf("the secret key must be %d bytes, written as %d hex digits or in base64", secretKeySize, 2*secretKeySize)
}

// loadSecretKey returns the OAuth secret key and says where it came from:
// DEPLOYPLANE_SECRET_KEY, -secret-key-file, or (neither given) the file
// beside the database, created on the first start, or with -db :memory: a
// key that lives as long as the process.
func loadSecretKey(c *config, log *slog.Logger) (key []byte, origin string, err error) {
	switch {
	case c.envSecretKey != "":
		key, err = parseSecretKey(c.envSecretKey)
		if err != nil {
			return nil, "", fmt.Errorf("DEPLOYPLANE_SECRET_KEY: %w", err)
		}
		return key, "DEPLOYPLANE_SECRET_KEY", nil
	case c.secretKeyFile != "":
		b, err := os.ReadFile(c.secretKeyFile)
		if err != nil {
			return nil, "", fmt.Errorf("-secret-key-file: %w", err)
		}
		if key, err = parseSecretKey(string(b)); err != nil {
			return nil, "", fmt.Errorf("-secret-key-file %s: %w", c.secretKeyFile, err)
		}
		return key, c.secretKeyFile, nil
	case isPostgres(c.db):
		return nil, "", errors.New("with a PostgreSQL database, give the OAuth secret key with DEPLOYPLANE_SECRET_KEY or -secret-key-file " +
			"(the same to every replica; it is never generated, and never kept in the database it protects)")
	case c.db == ":memory:":
		key = make([]byte, secretKeySize)
		_, _ = rand.Read(key)
		return key, "ephemeral (generated for -db :memory:)", nil
	}
	path := c.db + ".secret-key"
	key, created, err := keyFile(path)
	if err != nil {
		return nil, "", err
	}
	if created {
		log.Info("generated the OAuth secret key; back it up with the database", "file", path)
	} else if info, err := os.Stat(path); err == nil && info.Mode().Perm()&0o077 != 0 {
		log.Warn("the OAuth secret key file is readable by others; chmod 600 it", "file", path, "mode", info.Mode().Perm().String())
	}
	return key, path, nil
}

// keyFile reads the key kept at path, or creates the file (0600) with a
// new key when there is none.
func keyFile(path string) (key []byte, created bool, err error) {
	key = make([]byte, secretKeySize)
	_, _ = rand.Read(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if werr == nil {
			werr = f.Sync()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path) // a half-written key must not be found next time
			return nil, false, fmt.Errorf("writing the secret key %s: %w", path, werr)
		}
		return key, true, nil
	case !errors.Is(err, fs.ErrExist):
		return nil, false, fmt.Errorf("creating the secret key %s: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("reading the secret key: %w", err)
	}
	if key, err = parseSecretKey(string(b)); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return key, false, nil
}

// cleanupInterval is how often the server removes expired OAuth flows.
const cleanupInterval = 10 * time.Minute

// cleanupFlows removes expired OAuth flows every cleanupInterval until ctx
// is done, so that storage stays bounded even when flows are rarely
// started (starting one already removes a few).
func cleanupFlows(ctx context.Context, oauth *oauthflow.Service, log *slog.Logger) {
	t := time.NewTicker(cleanupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := oauth.Cleanup(ctx); err != nil && ctx.Err() == nil {
				log.Warn("removing expired OAuth flows", "err", err)
			} else if n > 0 {
				log.Info("removed expired OAuth flows", "count", n)
			}
		}
	}
}

// openStore opens the -db store; onCommit observes its commits (bbolt's
// and PostgreSQL's; the in-memory store has none).
func openStore(ctx context.Context, db, pgSchema string, onCommit func(int, time.Duration, error)) (store.Store, error) {
	switch {
	case db == ":memory:":
		return storemem.New(), nil
	case isPostgres(db):
		st, err := storepg.Open(ctx, db, &storepg.Options{Schema: pgSchema, OnCommit: onCommit})
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", redactDSN(db), err)
		}
		return st, nil
	}
	st, err := storebolt.Open(db, &storebolt.Options{OnCommit: onCommit})
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", db, err)
	}
	return st, nil
}

// newAPIKey returns a fresh random API key (256 bits).
func newAPIKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "dp_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// keyEntry is one element of the -keys file.
type keyEntry struct {
	Key       *string  `json:"key"`
	KeySHA256 *string  `json:"key_sha256"`
	TenantIDs []string `json:"tenant_ids"`
}

// readKeysFile reads the -keys file ("" means none).
func readKeysFile(path string) ([]httphandler.Key, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-keys: %w", err)
	}
	keys, err := parseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("-keys %s: %w", path, err)
	}
	return keys, nil
}

// parseKeys parses the JSON of a keys file. Unknown members are errors, so
// that a misspelt "tenant_ids" does not silently bind a key to nothing.
func parseKeys(b []byte) ([]httphandler.Key, error) {
	var entries []keyEntry
	if err := json.Unmarshal(b, &entries, json.RejectUnknownMembers(true)); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, errors.New("no keys")
	}
	keys := make([]httphandler.Key, 0, len(entries))
	for i, e := range entries {
		var k httphandler.Key
		switch {
		case e.Key != nil && e.KeySHA256 != nil:
			return nil, fmt.Errorf("entry %d: give key or key_sha256, not both", i)
		case e.Key != nil:
			if *e.Key == "" {
				return nil, fmt.Errorf("entry %d: empty key", i)
			}
			k.SHA256 = httphandler.HashKey(*e.Key)
		case e.KeySHA256 != nil:
			d, err := hex.DecodeString(*e.KeySHA256)
			if err != nil || len(d) != 32 {
				return nil, fmt.Errorf("entry %d: key_sha256 must be 64 hex digits", i)
			}
			k.SHA256 = [32]byte(d)
		default:
			return nil, fmt.Errorf("entry %d: key or key_sha256 is required", i)
		}
		if len(e.TenantIDs) == 0 {
			return nil, fmt.Errorf("entry %d: tenant_ids is required", i)
		}
		k.Tenants = e.TenantIDs
		keys = append(keys, k)
	}
	// NewKeyTable checks the tenants and duplicates again; doing it here
	// names the file in the error.
	if _, err := httphandler.NewKeyTable(keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// serverConfig is the server's own record in the store (configuration, not
// domain data), in collection serverCollection.
type serverConfig struct {
	DefaultTenant      string `json:"default_tenant"`
	GeneratedKeySHA256 string `json:"generated_key_sha256,omitempty"`
}

const (
	serverCollection = "deployplane.server"
	serverConfigKey  = "config"
)

// loadServerConfig reads the server's record, creating it on the first
// start with newTenant as the default tenant. When generatedKey is not empty
// and the record holds no generated key yet (or replace is set), its digest
// is stored and stored is true: the caller must show the key (once).
func loadServerConfig(ctx context.Context, st store.Store, newTenant, generatedKey string, replace bool) (cfg serverConfig, stored bool, err error) {
	err = st.Update(ctx, func(tx store.Tx) error {
		cfg, stored = serverConfig{}, false
		b, err := tx.Get(serverCollection, serverConfigKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
			cfg.DefaultTenant = newTenant
		case err != nil:
			return err
		default:
			if err := json.Unmarshal(b, &cfg); err != nil {
				return fmt.Errorf("the server record in the database is malformed: %w", err)
			}
			if _, ok := httphandler.CanonicalTenant(cfg.DefaultTenant); !ok {
				return fmt.Errorf("the server record's default tenant %q is not a UUID", cfg.DefaultTenant)
			}
			if generatedKey == "" || (cfg.GeneratedKeySHA256 != "" && !replace) {
				return nil
			}
		}
		if generatedKey != "" && (cfg.GeneratedKeySHA256 == "" || replace) {
			d := httphandler.HashKey(generatedKey)
			cfg.GeneratedKeySHA256 = hex.EncodeToString(d[:])
			stored = true
		}
		out, err := json.Marshal(cfg)
		if err != nil {
			return err
		}
		return tx.Put(serverCollection, serverConfigKey, out)
	})
	return cfg, stored, err
}
