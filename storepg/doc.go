// Package storepg is a store.Store over PostgreSQL, so that several
// deployplane replicas share one database. It uses github.com/jackc/pgx/v5
// and its connection pool, pgxpool.
//
// # Opening
//
// Open connects with a DSN and owns its pool; OpenPool runs over a
// *pgxpool.Pool the program already has and leaves it open on Close. Either
// creates the schema (Options.Schema, "deployplane" by default) if it is
// missing and migrates it to the newest version, recording each version in
// the table schema_migrations. Migration runs under a transaction-scoped
// advisory lock keyed by the schema name, so replicas that start together
// take turns and exactly one of them migrates. Stores with different schemas
// share a database without seeing each other.
//
// # Tables
//
// All records live in one table, records(collection bytea, key bytea, value
// bytea), under one unique B-tree index. Keys are bytea, so PostgreSQL orders
// them by their bytes exactly as Go orders strings, whatever the bytes are.
// Because a B-tree entry must stay under about 2.7 kB and keys may be
// store.MaxKeyLen (32 KiB) long, the index holds the collection's SHA-256,
// the key's first 2048 bytes, and, only for keys longer than that, the key's
// SHA-256; queries compare the exact bytes as well. (Two collection names, or
// two long keys, with one SHA-256 would collide; that is taken as impossible.)
//
// # Transactions
//
// Update runs its closure in a SERIALIZABLE transaction. When PostgreSQL
// aborts it with a serialization failure (SQLSTATE 40001) or a deadlock
// (40P01), whether a statement inside the closure or the COMMIT failed,
// Update rolls back and runs the closure again, up to Options.MaxRetries
// times (DefaultMaxRetries), after a random pause that grows from about a
// millisecond to at most 100 ms. If the closure returns an error or panics,
// the transaction rolls back and the error is returned unchanged or the panic
// re-raised. Once a statement has failed, PostgreSQL has aborted the
// transaction: later calls in the same closure fail at once, and if the
// closure returns nil anyway, Update reports the failure instead of
// committing.
//
// View runs its closure in a SERIALIZABLE READ ONLY transaction and retries
// it the same way. REPEATABLE READ would give a consistent snapshot too, but
// a read-only transaction at that level can see a state that no serial order
// of the Updates produces (the read-only anomaly), which store.Store's
// serializable promise rules out; SERIALIZABLE READ ONLY DEFERRABLE never
// fails but may wait at its start until the concurrent writers finish, which
// puts the latency of Updates into every View.
//
// Create is an INSERT ... ON CONFLICT DO NOTHING whose row count tells
// ErrAlreadyExists; Put is an upsert; Delete's row count tells ErrNotFound.
// Scan reads pages of rows: each page is a range query on the index that
// starts after the previous page's last key, 16 rows at first and doubling to
// 1024, so a scan that stops early reads little, memory stays bounded, and
// the callback may itself call Get between pages.
//
// A cancelled ctx aborts the statement in flight, and the transaction rolls
// back. As with any client of a database server, if the connection breaks
// while COMMIT is under way, Update cannot learn whether the commit happened
// and returns an error although it may have.
package storepg
