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
// the callback may itself use the transaction. Every transaction runs
// with enable_sort off (SET LOCAL), so that the planner walks the index
// for a page even when its statistics say the table is tiny, rather than
// sorting the whole key range; none of the other statements sorts.
//
// A transaction costs no round trip of its own: BEGIN travels in one
// pipeline with the closure's first statement, and a closure that runs no
// statement never reaches the server. A View with one Get is two round trips
// (BEGIN+SELECT, COMMIT); an Update that reads and writes one record is
// three, the last waiting for the WAL flush.
//
// A cancelled ctx aborts the statement in flight and the transaction rolls
// back; a ctx done when the closure returns abandons the transaction instead
// of committing it. COMMIT itself runs to its end even if ctx is cancelled
// meanwhile (for at most 30 seconds), since breaking the connection then
// would leave unknown whether it committed.
//
// If the connection fails during COMMIT, the client cannot tell whether the
// server committed. Every write returns the transaction's id (RETURNING
// pg_current_xact_id(), no extra round trip), so Update then asks the server
// on another connection (pg_xact_status), first ending the old backend if
// the server still counts the transaction in progress: committed means
// Update returns nil, aborted means it runs the closure again. Only if the
// server cannot be asked either does Update return an error wrapping
// store.ErrOutcomeUnknown, the one case where an error does not mean that
// nothing was committed.
//
// # Requirements
//
// PostgreSQL 13 or newer: Scan relies on incremental sort, and the check of a
// lost COMMIT on pg_current_xact_id and pg_xact_status, all new in 13.
// Tested with PostgreSQL 15.18 (Debian 15.18-0+deb12u1). The role needs
// CREATE on the database the first time a schema is made, and then only the
// rights to read and write its tables.
//
// # Tests
//
// The tests need a real server: they read a DSN from the environment
// variable DEPLOYPLANE_TEST_POSTGRES_DSN and skip, saying so, when it is
// unset. Each test works in a new schema with a random name and drops it at
// the end, so any database the role may create schemas in will do. The
// repository's .ci/postgres.sh starts a throwaway cluster and sets the
// variable:
//
//	source .ci/postgres.sh && pg_start && trap pg_stop EXIT
//	go test -race ./storepg/
//
// Besides store/storetest's suite, the tests run package controlplane over
// storepg as replicas do: two ControlPlanes, each over its own Store and
// pool, over one schema. Same-name creates and PATCHes race from both
// (each name created once, one revision per accepted PATCH, both replicas
// agreeing); lists taken while both create are consistent snapshots; both
// replicas Run a simulated Deployer while deployments are created, changed
// and deleted, and no revision or teardown is ever driven by both at once;
// an expired lease is taken over. The controlplanetest state machine runs
// over storemem and storepg side by side (30 random sequences unless
// rapid's -rapid.checks or RAPID_CHECKS says otherwise).
//
// # Performance
//
// Each benchmark runs a baseline first, a bare "SELECT 1" round trip over a
// pool of the same size at the same parallelism, and reports the operation as
// a multiple of it (x-roundtrip), with the closure re-runs per operation
// (retries/op). Figures from
//
//	go test -run '^$' -bench . -benchtime=2000x -count=5 ./storepg/
//
// on the 2-core development machine (AMD EPYC), against PostgreSQL 15.18 as
// .ci/postgres.sh starts it (default settings: fsync and synchronous_commit
// on) over loopback; medians of five runs, with the range of the ratio. The
// machine was shared with other work, so serial times in particular are
// noisy, and a ratio is larger than the round-trip count because the server
// does work beyond answering SELECT 1.
//
//	                                   storepg   baseline   x-roundtrip        retries/op
//	Get in a View, serial               247 µs      46 µs   7.0 (4.7-7.7)      0
//	Get in a View, 64 goroutines        101 µs      54 µs   2.0 (1.9-2.4)      0
//	Get+Put in an Update, serial        788 µs      89 µs   8.6 (8.1-9.2)      0
//	Get+Put in an Update, 64 goroutines 509 µs      50 µs   10  (6.6-13)       0.085
//
// The parallel rows are time per operation with 64 goroutines sharing 16
// connections, so about 10,000 Gets or 2,000 Updates a second; serial
// Updates wait for the WAL flush. Each goroutine of the parallel Update
// benchmark has its own record, yet some transactions are retried:
// PostgreSQL's predicate locks on B-tree pages are coarser than a row.
//
// BenchmarkScanEarlyStop reads the first 10 records from the middle of a
// 10,000-record collection in 258 µs, against 369 µs for a 100-record one
// (x-small 0.64): a Scan that stops early costs what it reads.
//
// # Under the control plane
//
// The controlplane benchmarks run a ControlPlane over storepg against one
// over storebolt, the embedded default, in the same run: the storepg
// sub-benchmark reports x-baseline, storebolt's time over storepg's
// (internal/benchcmp), so 0.1 means ten times as long. Figures from five
// runs of
//
//	go test -run '^$' -bench ControlPlane -benchtime=1000x ./storepg/
//
// on the same machine and PostgreSQL 15.18 as above, under a load average
// of about 8 (other builds), so absolute times are loose; medians, with the
// range of the ratio:
//
//	                                   storepg   storebolt   x-baseline            retries/op
//	CreateDeployment, 64 goroutines,
//	  one tenant                        9.5 ms     354 µs    0.037 (0.023-0.044)   4.0
//	  64 tenants, one per goroutine     3.0 ms     377 µs    0.13  (0.096-0.20)    0.40
//	GetDeployment, serial               248 µs      34 µs    0.13  (0.094-0.22)
//	GetDeployment, 64 goroutines        312 µs      27 µs    0.086 (0.064-0.16)
//
// Creates run over a pool of 4 connections, Gets over 16. A create is one
// Update of some 15 statements (9 Puts, 2 Creates, a Delete, 3 Scans), each
// a round trip, one Scan reading the order records of the tenant's newest
// name block (up to 256, in pages of 16 and up), so about 20 round trips
// before the COMMIT. Creates into one tenant conflict with each other: each
// rewrites the tenant's newest name block and reads the order records that
// the others append to, so PostgreSQL lets one of them commit at a time and
// aborts the rest (serialization failures, retried): about 100 creates a
// second for one tenant here, against about 2,800 for storebolt. With a pool
// of 16 connections, that is 16 such creates at once, and some of them
// exhaust DefaultMaxRetries and fail ("giving up after 51 tries"). Creates
// of different tenants conflict too, less often: predicate locks cover
// B-tree pages, and in a small table unrelated keys share pages. A
// GetDeployment is a View with one Get (two round trips) against an
// in-process read of storebolt's memory map; with 64 goroutines the two
// cores, shared by the client and the server, are the limit.
package storepg
