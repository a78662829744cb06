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
// The design notes of this package (why its mechanisms are built as they
// are) are in docs/design-notes.md of the repository.
package storepg
