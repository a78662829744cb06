// Package deploydb gives every deployment its own database and Redis on
// servers the operator shares between deployments: a PostgreSQL database
// with a login role of its own, and a Redis ACL user confined to keys and
// channels under a prefix of its own. An agent server needs both
// (DATABASE_URI and REDIS_URI, wire contract section 10); a Shared is a
// deploydocker.Options.Databases, and any other deployer can use it the
// same way.
//
//	s, err := deploydb.New(ctx, &deploydb.Options{
//		PostgresDSN: "postgres://admin:secret@db.internal:5432/postgres",
//		RedisURL:    "redis://:secret@redis.internal:6379",
//	})
//	env, err := s.Ensure(ctx, work, log) // DATABASE_URI, REDIS_URI, REDIS_KEY_PREFIX
//	err = s.Remove(ctx, tenant, deploymentID) // on DELETE: the data is gone
//
// Ensure creates, named Options.Prefix + the deployment's id without
// dashes ("dp_0193..."): a role with LOGIN, a random password and
// db_max_connections as its CONNECTION LIMIT; a database owned by that
// role, which only the role (and superusers) may connect to; and a Redis
// ACL user whose keys and channels start with its name and a colon, and
// which may not run administrative commands or reach beyond its prefix.
// It returns DATABASE_URI (the shared server's URL with the role, its
// password and the database; the query is kept), REDIS_URI (database 0)
// and REDIS_KEY_PREFIX, which the agent server puts in front of every key
// and channel name. Then it waits until both answer (PingPostgres,
// PingRedis), trying again (soon at first, then every Options.Interval)
// until ctx is done; errors that waiting does not cure are Permanent and
// return at once.
//
// Ensure is idempotent: retries, later revisions, restarted control planes
// and other replicas get the same database, role, user and passwords, so
// the data stays across revisions. The other db_* fields and
// redis_memory_mb size nothing on a shared server. Remove drops the
// database (ending its sessions) and the role, deletes the Redis user and
// every key under its prefix.
//
// Passwords are kept in Options.Table (deployplane_databases) in the
// database of PostgresDSN; installs that share a server need different
// Prefixes. Give the shared Redis an aclfile: Ensure and Remove run ACL
// SAVE, and without one a restarted Redis knows no deployment's user until
// its next revision.
//
// A shared Redis separates data and credentials, not resources: a
// deployment can still fill its memory, hold many connections or block it
// with a slow command. Deployments that must not affect each other that
// way need their own Redis (deploydocker.Options.Services).
//
// Privileges: the role of PostgresDSN needs CREATEDB and CREATEROLE (or
// superuser). The shared Redis must be 6.2 or later and let no client in
// without a password (New refuses a default user with nopass); RedisURL's
// user must manage ACL users (ACL GETUSER, SETUSER, DELUSER, SAVE) and run
// SCAN and UNLINK on database 0.
//
// The tests need DEPLOYPLANE_TEST_POSTGRES_DSN and redis-server, and skip
// without them. Design notes: docs/design-notes.md, "deploydb".
package deploydb
