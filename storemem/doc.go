// Package storemem is an in-memory store.Store: fast, safe for concurrent
// use, and gone when the process exits. Use it for tests, examples and
// development servers (`deployplane -db :memory:`).
//
// # Design
//
// Each collection is a copy-on-write B+tree (tree.go, whose Clone is O(1)
// and shares nodes until either side writes). The store publishes an
// immutable snapshot, a map from collection name to tree, behind an
// atomic pointer:
//
//   - View loads the current snapshot and reads it without taking any lock,
//     so a View never waits for an Update and always sees one consistent
//     state, even while an Update is running.
//   - Update runs alone (one writer at a time, under a mutex). Its first write
//     to a collection clones that collection's tree; writes then copy only the
//     nodes on their path. If the closure returns nil, the new trees are
//     published as the next snapshot in one atomic store; if it returns an
//     error or panics, the clones are dropped and nothing is visible.
//
// A published tree is never written or cloned again (Clone mutates
// the tree it is called on, so it is only ever called on the writer's private
// copy of each collection). Values are copied on the way in and on the way
// out, so no byte slice is shared with a caller.
//
// The closure of an Update runs exactly once.
//
// # Space
//
// The target is 1M deployments in at most 2 GB resident; each is
// about 20 records (the deployment, its revision, their order, summary,
// index and name records, and 13 records of the name's trigram index),
// some 660 bytes of keys and 890 of values. A leaf packs its records
// into one string (leaf.go), and three things make that string small:
//
//   - Shared key prefix: the prefix that all keys of a leaf share is
//     stored once. Keys next to each other repeat their tenant and more
//     (a trigram record's key is tenant, trigram, time and id, and one
//     leaf mostly holds one trigram's run of times): this took a third of
//     the key bytes. Prefix against the leaf rather than against the
//     previous key (front coding proper) keeps every record readable on
//     its own, so a lookup stays a binary search, not a decoding walk.
//   - Values against a dictionary (codec.go): a leaf whose values are
//     large and alike encodes each against one earlier value of the
//     collection, as copies and literal bytes; a deployment's stored
//     JSON then takes less than half its length (its sealed secret, ids
//     and times are most of what is left). Reading a value decodes it
//     alone. Whole-leaf compression (snappy, zstd) would take more but
//     make every lookup decode a leaf; a static dictionary would know
//     nothing of a store's own records. Leaves of small values (the
//     indexes' empty ones) have no dictionary and store values as they
//     are.
//   - Small headers: 2-byte record ends in the leaf's string (4 bytes
//     past 64 KiB) where a separate slice of 4-byte ends took 4 and a
//     slice header; separators of inner nodes are strings of their own,
//     so they do not keep the first version of each leaf alive.
//
// Not done: leaves in slabs of bytes of their own allocator (a slab freed
// only when no snapshot holds any of its leaves would need reference
// counts that the copy-on-write sharing does not keep; the allocator's
// spans, with these smaller leaves, hold the rest), and leaves bigger
// than 64 records or 8 KiB, which would make every write copy more.
// BENCHMARKS.md ("Scale") has the figures, from BenchmarkResident.
//
// # Performance
//
// Figures from `go test -run=^$ -bench=. -benchtime=200000x ./storemem/`
// are recorded in BENCHMARKS.md.
package storemem
