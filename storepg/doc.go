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
// millisecond to at most 100 ms; after Options.AloneAfter such failures
// (DefaultAloneAfter, 2), the tries run alone (see Contention below). If
// the closure returns an error or panics, the transaction rolls back and the
// error is returned unchanged or the panic re-raised. Once a statement has
// failed, PostgreSQL has aborted the transaction: later calls in the same
// closure fail at once, and if the closure returns nil anyway, Update
// reports the failure instead of committing.
//
// View runs its closure in a SERIALIZABLE READ ONLY transaction and retries
// it the same way. REPEATABLE READ would give a consistent snapshot too, but
// a read-only transaction at that level can see a state that no serial order
// of the Updates produces (the read-only anomaly), which store.Store's
// serializable promise rules out; SERIALIZABLE READ ONLY DEFERRABLE never
// fails but may wait at its start until the concurrent writers finish, which
// puts the latency of Updates into every View.
//
// A View whose first statement is a Get runs that Get alone, outside a
// transaction, in one round trip (a GetDeployment): one record read at
// once is consistent with every serial order the Updates can take, since
// two Updates that both write it cannot both commit unless one saw the
// other. If the closure goes on to a second statement, that statement
// fails, the try is void whatever the closure makes of it, and the closure
// runs again in a transaction (no pause, no retry counted); the Store
// remembers the closure by its code and starts its later Views in a
// transaction at once.
//
// Create is an INSERT ... ON CONFLICT DO NOTHING whose row count tells
// ErrAlreadyExists; Put is an upsert; Delete's row count tells ErrNotFound.
// A Put answers nothing but failure, so it is held back (its value copied)
// and sent in one pipeline with the transaction's next statement, or with
// COMMIT: a run of Puts is one upsert of many rows (unnest of three
// arrays, sorted by collection and key, the last value of a key put twice),
// one statement and no round trip of its own. Discard (store.Discarder: a
// delete that does not tell whether the key was there) is held back the
// same way, a run of them one DELETE joined with the keys (unnest of two
// arrays, one index lookup a key); so is Insert (store.Inserter: a
// write of a key the caller knows is absent), a run of which is one plain
// INSERT of many rows, without the upsert's ON CONFLICT: PostgreSQL then
// descends the index once per row, to insert it, where an upsert first
// searches it for the key (ExecCheckIndexConstraints) and descends again
// to insert. A key that is there after all fails that INSERT
// (unique_violation), and the Update with an error wrapping
// store.ErrAlreadyExists. A held write's failure (a serialization
// failure, a lost connection) is then returned by that next statement or
// by Update, never as success; the store.Tx contract allows it, since its
// Puts fail only for the server's reasons. The held writes go
// with the COMMIT only once an earlier write has returned the
// transaction's id (see below), so that a COMMIT whose answer is lost can
// still be looked up; otherwise they are sent just before it.
// Scan reads pages of rows: each page is a range query on the index that
// starts after the previous page's last key, 16 rows at first and doubling to
// 1024, so a scan that stops early reads little, memory stays bounded, and
// the callback may itself use the transaction. A transaction's first Scan
// turns enable_sort off (SET LOCAL, in the Scan's pipeline), so that the
// planner walks the index for a page even when its statistics say the
// table is tiny, rather than sorting the whole key range; none of the
// other statements sorts, so a transaction without a Scan skips it.
//
// A transaction costs no round trip of its own: BEGIN (and, for an Update,
// the LOCK TABLE below) travels in one pipeline with the closure's first
// statement, and a closure that runs no statement never reaches the server.
// A View with one Get is one round trip. An Update that reads one record
// and puts one is three (BEGIN+SELECT, the upsert, COMMIT waiting for the
// WAL flush: a Put does not tell the transaction's id before it is sent);
// one whose first write is a Create, a Delete or a Put sent with a read
// carries its later Puts with the COMMIT. A CreateDeployment is two round
// trips and four statements: BEGIN, LOCK TABLE and its two dozen Inserts
// (its name and the new deployment's records, one statement), then
// COMMIT; combined with others (below), a share of that.
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
// Options.OnCommit is told of every COMMIT of Updates that wrote or read
// something: how many Updates it commits, its latency (the round trip,
// which includes the server's WAL flush) and its error. Package
// prommetrics turns them into the store_commit_* metrics.
//
// # Combined Updates
//
// A transaction has a cost of its own, whatever it writes: BEGIN and LOCK
// TABLE, a COMMIT that waits for the WAL flush, two round trips, and the
// serializable bookkeeping; and many transactions at once on a few cores
// contend for the same index pages and switch between backends. So while
// as many Updates are under way as the pool has connections, the Updates
// that come meanwhile queue, and when a transaction ends, the first of them
// leads up to Options.MaxBatchSize (DefaultMaxBatchSize, 16) of them in the
// next one: it runs their closures one after another, each seeing the
// writes of those before it, and commits once. A lone Update, or one that
// finds a connection's worth of room, runs at once in a transaction of
// its own, as described above; nothing waits for company.
//
// Each Update still learns its own outcome:
//   - A closure that returns an error whose writes are all still held
//     back (nothing of it reached the server: it wrote only with Put,
//     Insert and Discard, and read nothing after them) has them taken back,
//     and its Update returns the error once the others have committed: it
//     ran after the closures before it, as it would have alone.
//   - An Insert refused because its key is there (two creates of one name
//     in one batch, or a create of a name taken before) aborts the
//     transaction when the writes are sent, and no one knows yet whose it
//     was. The batch then runs again, each closure's held writes sent
//     after it returns in a savepoint of their own (SAVEPOINT, the writes,
//     RELEASE, in one pipeline): a refusal rolls back to the savepoint and
//     fails that closure's Update alone, with store.ErrAlreadyExists, as
//     it would have failed alone after the closures before it; the others
//     commit together. (Not the first time round: a savepoint a closure
//     costs a round trip each and a subtransaction.)
//   - Otherwise, when a closure returns an error after its writes were
//     sent, or panics, or a statement or the COMMIT fails (a serialization
//     failure, a lost connection that did not commit), the transaction
//     rolls back and every Update of it runs again in a transaction of its
//     own, in its own goroutine, with the retries and tries alone
//     described above: a closure may run more than once, as store.Store
//     allows. A panic is raised again in its own caller's goroutine.
//   - An Update whose ctx is done while it is queued leaves the queue and
//     returns ctx.Err(); once taken, it waits for the transaction's
//     outcome. The transaction's statements run until every one of its
//     callers has gone.
//   - If the connection fails during the COMMIT, the question to the
//     server (above) answers for all of them.
//
// Creates into one tenant from 64 goroutines over two replicas, with
// pgxpool's default pool (4 connections on 2 cores), commit about 4.5 at
// a time, at 1.3 – 1.4 times the rate of one transaction each, for a
// quarter less CPU a create (BENCHMARKS.md, issue 18 point 3).
// Options.MaxBatchSize 1 turns combining off.
//
// # Contention
//
// Retries alone do not ensure progress. When many Updates conflict with
// each other, as creates of deployments in one tenant did before issue 18
// (each advanced the tenant's event counter and the counts of the current
// time windows of its order records; package controlplane now leaves both
// to a sequencer), PostgreSQL lets one of them commit and aborts the
// others, and an unlucky one may lose every round: 64 goroutines creating
// into one tenant over a pool of 16 connections made some give up after 51
// tries.
// So an Update is optimistic at first and pessimistic once it has lost:
//
//   - Every Update's transaction first takes LOCK TABLE schema_migrations
//     IN ROW EXCLUSIVE MODE, a mode Updates share: it conflicts only with
//     EXCLUSIVE and stronger modes, which only a try alone and DDL take.
//   - After Options.AloneAfter of its tries have failed with a
//     serialization failure or a deadlock, each further try takes that lock
//     IN EXCLUSIVE MODE instead: it waits until the Updates under way, from
//     every Store and process over the schema, have ended, and the Updates
//     that start meanwhile queue behind it (PostgreSQL grants a lock request
//     only if it conflicts with no earlier request still waiting), so it
//     runs alone, and the others follow.
//   - Views take no lock and are never held back: EXCLUSIVE mode admits
//     plain readers.
//
// The lock is a table lock rather than an advisory lock
// (pg_advisory_xact_lock) because of when the snapshot is taken: a
// SERIALIZABLE transaction's snapshot is that of its first query, and the
// SELECT that takes an advisory lock is a query, whose snapshot predates its
// wait for the lock; a try that waited for another would then start with a
// snapshot from before it and conflict with it anyway. LOCK TABLE takes no
// snapshot, so the snapshot follows the lock and sees every Update that held
// it before. The table locked is schema_migrations, which every version of
// the schema has, so that this needed no new schema version and a previous
// storepg can still open the schema.
//
// The guarantee. A try alone has no concurrent writer: every Update that
// held the lock before it ended before its snapshot, and none writes until
// it has ended. So it meets no concurrent update and no deadlock; and of a
// dangerous structure for which PostgreSQL's serializable snapshot
// isolation aborts a transaction (T1, T2, T3, each reading what the next,
// concurrent, writes), it can only be T3, the one spared: PostgreSQL
// aborts the pivot T2 or else T1, which both read what a concurrent
// transaction writes, as a try alone cannot. Views change nothing (the rare
// abort a read-only transaction brings about falls on a pivot). What
// remains are artefacts of PostgreSQL's implementation. A writer releases
// its locks a moment before its serializable bookkeeping records it as
// committed; if a pivot is in that moment when the try alone commits,
// PostgreSQL can no longer abort the pivot and aborts the try alone
// instead ("conflict in from prepared pivot"). And it may abort
// conservatively once that bookkeeping has overflowed its shared memory
// (many transactions overlapping one long serializable transaction).
// TestContendedUpdatesAllCommit met the first in about one try alone in
// 3,000 on the busy 2-core machine, and never twice for one Update. The next
// try runs alone again, so an Update fails for contention only if all of
// its last MaxRetries - AloneAfter + 1 tries, 49 by default, run alone and
// each meets such an artefact; MaxRetries remains the bound, as a safety
// net that contention does not reach. (Updates still fail for reasons of
// their own: the closure's error, a cancelled ctx, a lost connection or
// server.)
//
// The cost. A try alone holds back every Update of the schema while it
// runs, whatever records they touch: under sustained contention Updates
// go about one at a time, and contention in one tenant slows the others
// while it lasts. A transaction that stays open, such as one whose client
// vanished without the server noticing, holds back a try alone, and every
// Update behind it, until it ends: the caller's ctx bounds each wait, and
// the server's idle_in_transaction_session_timeout and TCP keepalives bound
// how long such a transaction lives. The guarantee holds among Stores that
// take the lock, this version on; an older storepg still writing to the
// schema can abort a try alone. AloneAfter -1 turns tries alone off.
// Store.AloneRuns counts the tries run alone, for metrics.
//
// # Requirements
//
// PostgreSQL 13 or newer: Scan relies on incremental sort, and the check of a
// lost COMMIT on pg_current_xact_id and pg_xact_status, all new in 13.
// Tested with PostgreSQL 15.18 (Debian 15.18-0+deb12u1). The role needs
// CREATE on the database the first time a schema is made, and then only the
// rights to read and write its tables (LOCK TABLE schema_migrations IN
// EXCLUSIVE MODE needs UPDATE, DELETE or TRUNCATE on that table).
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
// Besides store/storetest's suite, the tests check retries and tries
// alone: the lock mode of each try (from pg_locks); that a View is not held
// back by a try alone, and that an Update waiting for one runs after it
// without a retry; and that 64 goroutines of Updates that all conflict,
// over 16 connections with the default options, all commit, in a serial
// order (with AloneAfter -1 instead, some give up after 51 tries, which was
// checked by hand).
//
// Combined Updates are lined up deterministically (a pool of one
// connection held by an Update whose closure waits until the others have
// queued): they commit together, each closure reading the writes of those
// before it; a closure's error takes back its held writes alone; a closure
// failing after its writes were sent and a panic send each Update to run
// alone, with its own outcome; a refused Insert, of a key another closure
// of the batch inserts or of one already there, fails its own Update
// alone while the others commit together; a cancelled Update leaves
// the queue; and a property test lines up random mixes of those and checks
// every outcome and effect against running each Update alone.
//
// They also run package controlplane over storepg as replicas do: two
// ControlPlanes, each over its own Store and pool, over one schema.
// Same-name creates and PATCHes race from both (each name created once,
// one revision per accepted PATCH, both replicas agreeing); lists taken
// while both create are consistent snapshots; both replicas Run a simulated
// Deployer while deployments are created, changed and deleted, and no
// revision or teardown is ever driven by both at once; an expired lease is
// taken over; 64 goroutines across both, each replica with a pool of 16
// connections, create deployments into one tenant, and none fails. The
// controlplanetest state machine runs over storemem and storepg side by
// side (30 random sequences unless rapid's -rapid.checks or RAPID_CHECKS
// says otherwise).
//
// # Performance
//
// Each benchmark runs a baseline first, a bare "SELECT 1" round trip over a
// pool of the same size at the same parallelism, and reports the operation as
// a multiple of it (x-roundtrip), with the closure re-runs per operation
// (retries/op). Figures from
//
//	go test -run '^$' -bench '^Benchmark(Get|Update|ScanEarlyStop)$' -benchtime=2000x -count=5 ./storepg/
//
// on the 2-core development machine (AMD EPYC), against PostgreSQL 15.18 as
// .ci/postgres.sh starts it (default settings: fsync and synchronous_commit
// on) over loopback; medians of five runs, with the range of the ratio. The
// machine was shared with other work (load average 2 to 6), so times are
// noisy, serial ones in particular, and a ratio is larger than the
// round-trip count because the server does work beyond answering SELECT 1.
//
//	                                   storepg   baseline   x-roundtrip        retries/op
//	Get in a View, serial               222 µs      61 µs   4.4 (3.4-5.4)      0
//	Get in a View, 64 goroutines        110 µs      53 µs   2.3 (2.0-3.5)      0
//	Get+Put in an Update, serial        682 µs      86 µs   5.8 (4.6-12)       0
//	Get+Put in an Update, 64 goroutines 372 µs      61 µs   5.9 (4.9-6.7)      0.076
//
// The parallel rows are time per operation with 64 goroutines sharing 16
// connections, so about 9,000 Gets or 2,700 Updates a second; serial
// Updates wait for the WAL flush. The lock every Update takes (see
// Contention) costs no round trip: the storepg before it, measured in the
// same session, took 626 µs and 346 µs for the two Update rows. Each
// goroutine of the parallel Update benchmark has its own record, yet some
// transactions are retried: PostgreSQL's predicate locks on B-tree pages
// are coarser than a row.
//
// BenchmarkScanEarlyStop reads the first 10 records from the middle of a
// 10,000-record collection in 192 µs, against 246 µs for a 100-record one
// (x-small 0.78): a Scan that stops early costs what it reads.
//
// # Under the control plane
//
// The controlplane benchmarks run a ControlPlane over storepg against one
// over storebolt, the embedded default, in the same run: the storepg
// sub-benchmark reports x-baseline, storebolt's time over storepg's
// (internal/benchcmp), so 0.1 means ten times as long. Figures from
//
//	go test -run '^$' -bench ControlPlane -benchtime=1000x -count 3 ./storepg/
//
// on the same machine and PostgreSQL 15.18 as above, under a load average
// of 2 to 6 (other builds), so absolute times are loose; medians of three
// runs, with the range of the ratio:
//
//	                                   storepg   storebolt   x-baseline            retries/op   alone/op
//	CreateDeployment, 64 goroutines,
//	  one tenant, 4 connections         5.6 ms     128 µs    0.022 (0.019-0.023)   1.1          0.44
//	  one tenant, 16 connections        5.8 ms     326 µs    0.045 (0.031-0.050)   1.5          0.70
//	  64 tenants, 4 connections         3.1 ms     276 µs    0.14  (0.093-0.16)    0.54         0.17
//	  64 tenants, 16 connections        3.8 ms     478 µs    0.13  (0.090-0.14)    0.67         0.22
//	GetDeployment, serial               276 µs      24 µs    0.085 (0.082-0.087)
//	GetDeployment, 64 goroutines         95 µs      16 µs    0.14  (0.10-0.16)
//
// (Those figures are from before issue 18.) A create was then one Update
// of some 15 statements (9 Puts, 2 Creates, a Delete, 3 Scans), each a
// round trip, one Scan reading the order records of the tenant's newest
// name block (up to 256, in pages of 16 and up), so about 20 round trips
// before the COMMIT; it now writes a gram record per trigram of the name
// and four order counts instead of the name block, and its Puts travel in
// pipelines (BENCHMARKS.md, "Scale"). Creates into one tenant conflict
// with each other: each advanced the tenant's event counter and rewrote
// its newest name block (now: the event counter and the order counts), so
// PostgreSQL lets one of them commit at a time and aborts the rest. With
// the tries alone, about
// 180 creates a second for one tenant here, against about 3,000 to 8,000
// for storebolt, and none fails: the storepg before them, in the same
// session, took 8.0 ms a create (7.2-9.3, 3.2 retries/op) over 4
// connections, and over 16 gave up on some create after 51 tries in each
// of its three runs, and in one of three with 64 tenants. Creates of
// different tenants conflict too, less often: predicate locks cover B-tree
// pages, and in a small table unrelated keys share pages; there, the tries
// alone made no measurable difference (3.1 ms a create with 64 tenants over
// 4 connections before them too). AloneAfter 1 and 3 measured no better
// than 2 (about 7 and 9 ms a create into one tenant over 16 connections, two
// runs each). A GetDeployment is a View with one Get (two round trips
// then, one now) against an in-process read of storebolt's memory map;
// with 64 goroutines the two cores, shared by the client and the server,
// are the limit.
//
// Since issue 18, creates into one tenant do not conflict (package
// controlplane leaves the event numbers and the order counts to a
// sequencer) and cost two round trips. Through two replicas over one
// schema, 64 goroutines creating into one tenant reach 394 to 534 creates
// a second in process (0.36x to 0.40x a bare one-row INSERT from as many
// goroutines) and 323 to 537 over HTTP, none failing, 0.006 retries per
// create; GET over HTTP is 0.33x to 0.43x a bare handler. PostgreSQL
// spends about 2 ms of CPU a create here (two dozen rows into one index),
// which bounds it below the 1,000 a second on this 2-core
// machine. The commands and figures are in BENCHMARKS.md ("Scale").
package storepg
