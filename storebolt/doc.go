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
// return copies; Create and Put copy the caller's slice before bbolt sees it
// (bbolt keeps the slices it is given until the commit).
//
// # Durability
//
// Update returns nil only after bbolt's commit, fsync included, returned
// nil. Nothing here trades durability for speed: NoSync, NoGrowSync and
// NoFreelistSync stay off. Open waits Options.LockTimeout (default 2 s) for
// a file another process holds and then fails with an error wrapping
// ErrLocked that names the file.
//
// # Group commit
//
// Views are bbolt read transactions: snapshots that run concurrently with
// the writer and with each other. (The one wait bbolt has: when a commit
// grows the file past its memory map, the remap waits for the Views open at
// the time, and new Views wait for the remap. Options.InitialMmapSize sized
// above the file avoids it.) A View opens each bucket once and reuses the
// cursors of its finished Gets and Scans (a list makes hundreds of small
// reads of one collection); the store contract keeps a Reader to its
// closure's goroutine.
//
// Updates go through one writer goroutine. Update queues its closure; the
// writer takes everything queued (up to Options.MaxBatchSize), runs the
// closures one after another in a single bbolt write transaction, takes in
// and runs the Updates queued meanwhile, and when it has caught up commits
// once and wakes their callers. There is no timer: a lone Update is
// committed as soon as the writer sees it, and the Updates that arrive
// during a commit form the next batch, so 64 concurrent writers share a
// fsync about 60 at a time. One refinement: right after a commit, if the
// queue is shorter than the batch just committed, the writer yields the
// processor (runtime.Gosched, until the queue is that long again or two
// yields in a row bring no one) so that the callers it just woke can queue
// their next Update in time. A lone writer never yields.
//
// Closures sharing a transaction are isolated by an undo log. Each closure
// gets its own Tx, which records the previous value (or absence) of every
// key it writes, and every collection it creates. When the closure returns
// an error or panics, its writes are undone, newest first, before the next
// closure runs; the transaction then holds exactly the writes of the
// closures that succeeded, applied in queue order, so each closure ran
// against the state it commits with (serializable, and no closure is run
// twice in the normal course). Undoing costs one copy of each overwritten
// value, taken while writing; the alternative, re-running the batch without
// the failed closure as bbolt's own Batch does, would run closures more
// than once and make one failure cost a whole batch.
//
// Outcomes:
//   - A closure's error is returned by its Update unchanged; a panic is
//     re-raised in the caller's goroutine with the same value; a
//     runtime.Goexit (t.FailNow) ends the caller's goroutine. Other
//     closures of the batch are unaffected (after a Goexit, which unwinds
//     the writer goroutine itself, they are rolled back and run again in a
//     fresh transaction by a new writer goroutine, as the contract allows).
//   - If the commit fails, every Update whose closure succeeded in that
//     batch returns the commit error; none is told it is done. A commit can
//     fail cleanly (Options.MaxSize reached: nothing was written) or on an
//     I/O error; after a failed fsync, as with any database, what reached
//     the disk is unknown until the file is reopened.
//   - If ctx is done while the Update is still queued, it is withdrawn and
//     Update returns ctx.Err(); once the writer has taken it, Update waits
//     for the outcome, so nil always means committed.
//
// Close stops accepting Updates (they return store.ErrClosed), lets the
// writer commit what is already queued, waits for running Views, and closes
// the file. Check runs bbolt's consistency check.
//
// Options.OnCommit is told of every group commit: how many Updates it
// holds, how long the write and fsync took, and its error (package
// prommetrics turns them into the store_commit_* metrics).
//
// # Space
//
// Deployment keys are ordered by time (UUIDv7 ids after a tenant prefix), so
// new records land at the right edge of each tenant's range and a page that
// splits is never written to again by inserts. Write transactions therefore
// set each bucket's FillPercent to Options.FillPercent, default 0.9 instead
// of bbolt's 0.5: pages are left 90% full, with 10% slack for in-place
// updates (a PATCH, a status change) that grow a record.
//
// Measured with BenchmarkSpace100k (100,000 deployments created through
// controlplane.CreateDeployment from 64 goroutines; each deployment is its
// record, its first revision, its tracing project, and the control plane's
// order, summary, name, index and pending-work records):
//
//	page size  fill  bytes per deployment
//	4096       0.5   7129   (bbolt's defaults)
//	4096       0.9   5764   (storebolt's defaults)
//	4096       1.0   5593
//	16384      0.9   5253
//	16384      1.0   4744
//
// Three quarters of that is the two JSON documents per deployment (the
// deployment, about 1.6 KB, and its revision, about 1.35 KB, most of it
// null resource_spec fields), of which only two fit in a 4 KiB page.
// Options.PageSize (new files only) trades larger page writes for denser
// packing of such records.
//
// # Figures
//
// Measured on a shared 2-core VM, ranges over three runs; BENCHMARKS.md at
// the repository root has the details. Each write benchmark runs its
// baseline in the same run and reports x-baseline (baseline time over
// storebolt time):
//
//	BenchmarkUpdate64              0.82 - 1.22  64 goroutines of Updates vs raw bbolt db.Batch, MaxBatchSize 64 (goal >= 0.8)
//	BenchmarkUpdate1               0.95 - 1.00  one goroutine of Updates vs raw bbolt db.Update (goal >= 0.8)
//	BenchmarkControlPlaneCreate64  0.74 - 0.98  controlplane creates from 64 goroutines, storebolt vs storemem (goal >= 0.5)
//	BenchmarkColdOpen100k          2.6 - 2.7 ms open a 100k-deployment file with a cold page cache and serve the first list page (goal < 1 s)
//
// BenchmarkOpenNew: creating, opening and closing a new file takes about 2 ms,
// raw bbolt's time (0.88 - 1.27x), so a test may open a store per case.
//
// The commands:
//
//	go test -run '^$' -bench 'Update|Create64|ColdOpen' -benchtime 3s -count 3 ./storebolt/
//	go test -run '^$' -bench 'Space100k' -benchtime 1x ./storebolt/
//
// # Tests
//
// Besides store/storetest's conformance suite (durability across reopen
// included) and the controlplane state machine run side by side over
// storemem and storebolt, TestCrash re-executes the test binary as a
// controlplane writer (creates, PATCHes, redeploys from 8 goroutines),
// kills it with SIGKILL at a random moment 20 times, and checks after each
// kill that bbolt's consistency check is clean and that every write the
// child acknowledged is present.
package storebolt
