// Package deploydb gives every deployment its own database and Redis on
// servers the operator shares between deployments: a PostgreSQL database
// with a login role of its own, and a Redis database number. An agent
// server needs both (DATABASE_URI and REDIS_URI, wire contract section
// 10); the Docker deployer starts a PostgreSQL and a Redis container per
// deployment unless it is given a Shared (deploydocker.Options.Databases),
// and any other deployer can use a Shared the same way.
//
//	s, err := deploydb.New(ctx, &deploydb.Options{
//		PostgresDSN: "postgres://admin:secret@db.internal:5432/postgres",
//		RedisURL:    "redis://:secret@redis.internal:6379",
//	})
//	env, err := s.Ensure(ctx, work, log) // DATABASE_URI, REDIS_URI
//	err = s.Remove(ctx, tenant, deploymentID) // on DELETE: the data is gone
//
// # What a deployment gets
//
// Ensure creates, for the deployment of a controlplane.Work:
//
//   - a role named Prefix + the deployment's id without dashes
//     ("dp_0193..."), with LOGIN, a random password (48 hex digits), and
//     the resource_spec's db_max_connections as its CONNECTION LIMIT
//     (none when null);
//   - a database of the same name owned by that role, which only the role
//     (and superusers) may connect to: CONNECT and TEMPORARY are revoked
//     from PUBLIC;
//   - the lowest Redis database number no other deployment holds.
//
// DATABASE_URI is the shared server's URL with the role, its password and
// the database (the query, e.g. sslmode, is kept); REDIS_URI is the
// shared Redis URL with the number as its path (redis://host:6379/3).
// Then Ensure waits until both answer: SELECT 1 through DATABASE_URI
// (PingPostgres) and PING through REDIS_URI (PingRedis). While a server
// does not answer it tries again every Options.Interval, logging its
// progress, until its ctx is done; the caller bounds the wait. Errors that
// waiting does not cure (a missing privilege, no free Redis number:
// ErrRedisFull) are Permanent and return at once.
//
// Ensure is idempotent: a retried deploy, a later revision, a restarted
// control plane and its other replicas all get the same database, role,
// password and number, so the data stays across revisions. The other
// db_* fields (cpu, memory, storage) and redis_memory_mb size nothing on
// a shared server: they are the server's to set.
//
// Remove, on DELETE, drops the database (WITH (FORCE), ending its
// sessions) and the role, empties the Redis number (FLUSHDB) and frees
// it. The deployment's data is gone.
//
// # Where the allocation is kept
//
// Which deployment holds which Redis number (and its role's password)
// is a row of Options.Table (deployplane_databases) in the database of
// PostgresDSN, on the shared server itself. The allocation is taken
// under a table lock, so replicas never hand out a number twice; it
// survives restarts; and it lives beside the databases it describes, on
// the server whose backups hold them, rather than in the control plane's
// store (which would need a new domain record for something only this
// package reads). Installs that share a Redis must share that table
// (the same PostgresDSN database and Table); installs that share a
// PostgreSQL server need different Prefixes.
//
// The number of Redis databases is CONFIG GET databases (16 unless
// redis.conf says otherwise), or Options.RedisDatabases where CONFIG is
// disabled. Numbers in that range belong to this package: keep other data
// out of them.
//
// # Isolation
//
// A deployment's role can reach only its own database. Redis numbers
// separate keys, not clients: every deployment gets the shared Redis's
// credentials and could SELECT another number. Give deployments that do
// not trust each other their own Redis (the Docker deployer's
// per-deployment containers).
//
// # Privileges
//
// The role of PostgresDSN needs CREATEDB and CREATEROLE (or superuser).
// On PostgreSQL 16 and later a role that is no superuser is granted each
// deployment role it creates (to make it a database's owner).
//
// # Tests
//
// The tests run against a real PostgreSQL (DEPLOYPLANE_TEST_POSTGRES_DSN;
// .ci/run starts one) and Debian's redis-server, which each test starts
// on a free loopback port in a temporary directory and stops; without
// either they skip and say why.
package deploydb
