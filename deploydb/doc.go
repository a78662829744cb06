// Package deploydb gives every deployment its own database and Redis on
// servers the operator shares between deployments: a PostgreSQL database
// with a login role of its own, and a Redis ACL user confined to keys and
// channels under a prefix of its own. An agent server needs both
// (DATABASE_URI and REDIS_URI, wire contract section 10); the Docker
// deployer starts a PostgreSQL and a Redis container per deployment unless
// it is given a Shared (deploydocker.Options.Databases), and any other
// deployer can use a Shared the same way.
//
//	s, err := deploydb.New(ctx, &deploydb.Options{
//		PostgresDSN: "postgres://admin:secret@db.internal:5432/postgres",
//		RedisURL:    "redis://:secret@redis.internal:6379",
//	})
//	env, err := s.Ensure(ctx, work, log) // DATABASE_URI, REDIS_URI, REDIS_KEY_PREFIX
//	err = s.Remove(ctx, tenant, deploymentID) // on DELETE: the data is gone
//
// # What a deployment gets
//
// Ensure creates, for the deployment of a controlplane.Work, all named
// Prefix + the deployment's id without dashes ("dp_0193..."):
//
//   - a role with LOGIN, a random password (48 hex digits), and the
//     resource_spec's db_max_connections as its CONNECTION LIMIT (none
//     when null);
//   - a database owned by that role, which only the role (and
//     superusers) may connect to: CONNECT and TEMPORARY are revoked from
//     PUBLIC;
//   - a Redis ACL user with a random password of its own, whose keys and
//     channels are those that start with its name and a colon
//     ("dp_0193...:"), and whose commands are those of the data types,
//     transactions, Lua scripts (EVAL, EVALSHA, SCRIPT LOAD) and publish
//     and subscribe, without the ones that reach beyond its prefix or
//     administer the server (see Isolation).
//
// DATABASE_URI is the shared server's URL with the role, its password and
// the database (the query, e.g. sslmode, is kept); REDIS_URI is the
// shared Redis URL with the user, its password and database 0
// (redis://dp_0193...:password@host:6379/0); REDIS_KEY_PREFIX is the
// user's prefix, which the agent server puts in front of every key and
// channel name it uses. Then Ensure waits until both answer: SELECT 1
// through DATABASE_URI (PingPostgres) and PING through REDIS_URI
// (PingRedis). While a server does not answer it tries again every
// Options.Interval, logging its progress, until its ctx is done; the
// caller bounds the wait. Errors that waiting does not cure (a missing
// privilege) are Permanent and return at once.
//
// Ensure is idempotent: a retried deploy, a later revision, a restarted
// control plane and its other replicas all get the same database, role,
// user and passwords, so the data stays across revisions; the Redis user's
// rules are set anew each time. The other db_* fields (cpu, memory,
// storage) and redis_memory_mb size nothing on a shared server: they are
// the server's to set.
//
// Remove, on DELETE, drops the database (WITH (FORCE), ending its
// sessions) and the role, deletes the Redis user (Redis ends its
// connections) and then every key under its prefix (SCAN and UNLINK).
// The deployment's data is gone.
//
// # Where the passwords are kept
//
// The passwords of a deployment's role and Redis user are a row of
// Options.Table (deployplane_databases) in the database of PostgresDSN,
// on the shared server itself: they survive restarts, every replica reads
// the same ones, and they live beside the databases they open, on the
// server whose backups hold them, rather than in the control plane's
// store (which would need a new domain record for something only this
// package reads). Only the table's owner may read it. Installs that share
// a server need different Prefixes.
//
// Redis keeps ACL users in memory, and writes them to its ACL file when
// it has one (the aclfile setting): Ensure and Remove run ACL SAVE after
// changing a user. Give the shared Redis an aclfile; without one a
// restarted Redis knows no deployment's user until its next revision
// recreates it. ACL users are not replicated: a replica promoted in a
// failover needs the same ACL file.
//
// # Isolation
//
// A deployment's role can reach only its own database, and its Redis user
// only its own keys and channels. All deployments share Redis database 0:
// an ACL user cannot be confined to a database number (SELECT is allowed
// or not, for every number), so numbers would separate nothing that the
// prefixes do not, and would bound the deployments of a server by its
// "databases" setting. The user may not run:
//
//   - anything in Redis's @admin and @dangerous categories (CONFIG, ACL,
//     FLUSHALL, FLUSHDB, KEYS, SHUTDOWN, DEBUG, MONITOR, INFO, SWAPDB,
//     MIGRATE, RESTORE, SORT, CLIENT KILL, LIST and PAUSE, ...);
//   - SELECT, MOVE and COPY (another database number), SCAN, RANDOMKEY and
//     DBSIZE (the key names of the whole database), PUBSUB (other
//     channels' names), CLIENT but for SETNAME, GETNAME, ID, INFO and
//     SETINFO, SCRIPT but for LOAD and EXISTS (FLUSH and KILL act on the
//     whole server), and FUNCTION (libraries are the server's);
//   - module commands.
//
// Keys a Lua script names, and every command it runs, are checked against
// the same rules. PSUBSCRIBE takes only the pattern of the prefix itself
// ("dp_0193...:*"): Redis compares patterns literally.
//
// A shared Redis separates data and credentials, not resources: a
// deployment can still fill the server's memory, hold many connections,
// or block the server with a long script or a slow command. Deployments
// that must not affect each other that way need their own Redis (the
// Docker deployer's per-deployment containers).
//
// # Privileges
//
// The role of PostgresDSN needs CREATEDB and CREATEROLE (or superuser).
// On PostgreSQL 16 and later a role that is no superuser is granted each
// deployment role it creates (to make it a database's owner).
//
// The shared Redis must be 6.2 or later (ACL users with channel
// permissions; New asks with HELLO) and let no client in without a
// password: New refuses one whose default user is on with nopass, as
// every deployment could log in as that user. RedisURL's user must
// manage ACL users (ACL GETUSER, SETUSER, DELUSER, SAVE) and run SCAN and
// UNLINK on database 0: the default user with requirepass, or a user with
// +@all ~* &*.
//
// # Tests
//
// The tests run against a real PostgreSQL (DEPLOYPLANE_TEST_POSTGRES_DSN;
// .ci/run starts one) and Debian's redis-server, which each test starts
// on a free loopback port in a temporary directory and stops; without
// either they skip and say why.
package deploydb
