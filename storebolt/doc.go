// Package storebolt is a store.Store kept in a single go.etcd.io/bbolt file:
// deployplane's embedded, durable default.
//
//	st, err := storebolt.Open("/var/lib/deployplane/deployplane.db", nil)
//	...
//	defer st.Close()
//	cp := controlplane.New(st, nil)
//
// Collections are bbolt buckets, created by their first write; a View of a
// collection never written reads as empty. Keys are the store's strings as
// bytes, so bbolt's byte order is the contract's key order. Get and Scan
// return copies; Create and Put copy the caller's slice.
//
// # Durability
//
// Update returns nil only after bbolt's commit, fsync included, returned
// nil; NoSync, NoGrowSync and NoFreelistSync stay off. Open waits
// Options.LockTimeout (default 2 s) for a file another process holds and
// then fails with an error wrapping ErrLocked that names the file.
//
// # Concurrency
//
// Views are bbolt read transactions: snapshots that run concurrently with
// the writer and with each other. Updates are group-committed: concurrent
// Updates share one write transaction and one fsync (at most
// Options.MaxBatchSize each), and a lone Update commits as soon as the
// writer sees it, with no timer. Closures sharing a transaction are
// isolated: each runs against the state it commits with, and a closure
// that fails leaves no write behind.
//
//   - A closure's error is returned by its Update unchanged; a panic is
//     re-raised in the caller's goroutine with the same value; a
//     runtime.Goexit (t.FailNow) ends the caller's goroutine. Other
//     closures of the batch are unaffected.
//   - If the commit fails, every Update whose closure succeeded in that
//     batch returns the commit error. A commit can fail cleanly
//     (Options.MaxSize reached: nothing was written) or on an I/O error;
//     after a failed fsync, what reached the disk is unknown until the
//     file is reopened.
//   - If ctx is done while the Update is still queued, it is withdrawn and
//     Update returns ctx.Err(); once the writer has taken it, Update waits
//     for the outcome, so nil always means committed.
//
// Close stops accepting Updates (they return store.ErrClosed), commits
// what is already queued, waits for running Views, and closes the file.
// Check runs bbolt's consistency check. Options.OnCommit is told of every
// group commit: how many Updates it holds, how long the write and fsync
// took, and its error (package prommetrics turns them into metrics).
//
// # Space
//
// Options.FillPercent (default 0.9) is how full split pages are packed and
// Options.PageSize (new files only) the page size; Options.InitialMmapSize
// above the file's size spares Views a wait when a commit grows the file.
//
// Design notes: docs/design-notes.md, "storebolt"; figures: BENCHMARKS.md,
// "Store writes and reads: storebolt" and "Space per deployment".
package storebolt
