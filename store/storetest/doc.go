// Package storetest is the conformance suite for store.Store: the one set
// of checks that every backend (storemem, storebolt, storepg, or one of your
// own) must pass, so that the domain packages can rely on the contract in
// package store without knowing which backend they run on.
//
// # Using it for a new backend
//
// A backend's test file is a few lines: a Harness that opens a new, empty
// store for each check, and a call to Run.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t testing.TB) store.Store {
//				s, err := mystore.Open(filepath.Join(t.TempDir(), "db"), nil)
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//			// For a persistent store: open the same data again.
//			Reopen: func(t testing.TB, closed store.Store) store.Store {
//				s, err := mystore.Open(closed.(*mystore.Store).Path(), nil)
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//		})
//	}
//
// Run closes every store it opens (Close must be idempotent). Leave Reopen
// nil for a store that keeps nothing across Close; the Durability checks
// are then skipped, and reported as skipped. Run with -race: several checks
// exist to let the race detector see the store's concurrent paths. The
// Model check honours rapid's flags, e.g. -rapid.checks=1000 for a longer
// search.
//
// # What it checks
//
// Each check is a subtest with a stable name, so one can be rerun with
// go test -run 'TestConformance/Scan/StartReverse':
//
//   - Sentinels/GetMissing, DeleteMissing, CreateExisting: ErrNotFound from
//     Get and Delete (also for a key deleted earlier in the same
//     transaction, and in a never-written collection), ErrAlreadyExists from
//     Create (also for a key created earlier in the same transaction).
//   - Sentinels/InvalidKey: ErrInvalidKey from every operation for an empty
//     or over-long (MaxKeyLen+1 bytes) key or collection name, writing
//     nothing; Sentinels/MaxKeyLen: names of exactly MaxKeyLen bytes work.
//   - RoundTrip/Values: empty, nil, all-256-bytes, NUL-filled and 1 MiB
//     values come back byte for byte. RoundTrip/CreatePutDelete,
//     Collections (the same key in collections whose names are prefixes of
//     each other), UnwrittenCollection (reads as empty, as does one emptied
//     by deletes).
//   - Aliasing: mutating a slice passed to Put or Create, after the call
//     (inside or after the transaction), or a slice returned by Get or
//     passed to a Scan callback, changes nothing stored; returned slices
//     keep their contents after the transaction, even once the records are
//     overwritten and deleted.
//   - Scan/ByteOrder: ascending and descending order is byte order, over
//     keys that are prefixes of each other and keys with bytes 0x00, 0x7f,
//     0x80 and 0xff. Scan/Prefix: keys just outside the prefix are
//     excluded, the empty prefix is the whole collection, neighbouring
//     collections never appear. Scan/Start and Scan/StartReverse: start
//     keys before, inside, between, on and after the keys, inside and
//     outside the prefix. Scan/StopEarly and Scan/StopEarlyReverse: more=false
//     stops the walk. Scan/CallbackError: the callback's error stops the
//     scan and comes back unchanged from Scan, View and Update.
//   - ReadYourWrites: Get and Scan (both directions) inside an Update see
//     its own Creates, Puts and Deletes, and a key deleted in it can be
//     created again.
//   - Rollback/Error: an Update whose closure returns an error writes
//     nothing (Put, Create, Delete, a new collection) and returns that very
//     error (matchable with errors.Is and errors.As). Rollback/Panic: the
//     same for a panic, re-raised with the same value (by View too), and
//     the store stays usable.
//   - Isolation: an Update writes a, blocks, then writes b; a View started
//     meanwhile sees a and b (by Get and by Scan) both old or both new, and
//     both old if it finishes while the Update is blocked. Stores that make
//     Views wait and stores that serve snapshots both pass.
//   - Concurrency/Increment: 32 goroutines x 20 read-increment-write
//     Updates of one counter end at 640. Concurrency/CreateRace: of 16
//     concurrent Creates of one key exactly one wins, the rest get
//     ErrAlreadyExists, and the winner's value is stored.
//   - Context/Canceled, Context/DeadlineExceeded: View and Update with a
//     done context return an error matching ctx.Err() without running the
//     closure. Context/CanceledDuringUpdate: a context cancelled inside the
//     closure gives either nil with the write committed or an error
//     wrapping context.Canceled with nothing written.
//   - Close/UseAfterClose: View and Update return ErrClosed without running
//     the closure. Close/Idempotent: Close thrice returns nil each time.
//     Close/WaitsForRunning and WaitsForRunningView: Close does not return
//     while an Update's or a View's closure runs, and that transaction
//     completes (the Update commits, durably with Reopen).
//     Close/ConcurrentClose: Closes racing with each other and with Updates
//     all return nil; the Updates commit or get ErrClosed.
//   - Durability/Committed and Durability/RolledBack (only with Reopen):
//     committed Puts, overwrites and Deletes survive Close and Reopen (twice),
//     and writes of Updates that returned an error or panicked do not.
//   - Model: a rapid state-machine test. Each step is an Update running 1
//     to 8 random Get, Scan (random prefix, start, direction and limit),
//     Create, Put and Delete operations, which commits, returns an error or
//     panics after a random number of them; or a View of random reads; or,
//     with Reopen, a Close and Reopen. Every operation's result, and after
//     every step every collection, must equal those of a map-based model.
//     Keys come from a six-byte alphabet (0x00 a b 0x7f 0x80 0xff) so that
//     they collide and share prefixes.
//
// The closures the checks pass to Update and View reset what they capture
// at the start of each run, since a store may run a closure more than once.
//
// Timing never decides a verdict: where a check lets a concurrent
// transaction run for a while (Isolation, Close/WaitsForRunning) a
// correct store passes however slow the machine; the pause only tunes how
// likely a broken one is to be caught.
//
// # Dump
//
// Dump is a helper for the tests of code built on a store (the domain
// packages): it reads every record of the named collections in one View,
// so that a test can compare the whole store-visible state before and
// after an operation, or search it for what must not be stored.
//
// # The suite's own tests
//
// The package's tests run the suite against a small map-and-mutex reference
// store, which must pass, and against deliberately broken variants of it
// (no rollback, aliased slices, signed-byte scan order, lost concurrent
// increments, a panic that commits, ignored contexts, dirty reads, a
// descending scan that ignores Start, a Close that closes nothing or does
// not wait), each of which must fail the checks named for it. Each broken
// store runs in a child process (the test binary re-executed with
// -test.run=^TestHelperBroken$), whose "--- FAIL:" lines are then read.
package storetest
