// Package store is deployplane's storage contract: a small, transactional,
// rule-free key-value interface that every backend (storemem, storebolt,
// storepg, or one of your own) implements, and that the domain packages
// (controlplane, oauthflow) build on.
//
// # Model
//
// Records are byte slices stored under string keys inside named collections.
// A collection springs into existence on its first write; reading a
// collection that was never written behaves like reading an empty one.
// Keys are ordered by their bytes (Go's string comparison), which is the
// order Scan walks them in.
//
// # Transactions
//
// Transactions are closures, as in bbolt:
//
//   - View(ctx, fn) runs fn with a read-only Reader over a consistent snapshot.
//   - Update(ctx, fn) runs fn with a read-write Tx. The writes fn makes commit
//     atomically if and only if fn returns nil. If fn returns an error, every
//     write is discarded and Update returns that error unchanged (so callers
//     can match it with errors.Is and errors.As). If fn panics, every write is
//     discarded and the panic is re-raised in the caller's goroutine.
//
// A panic in a View's closure is re-raised the same way. The error or panic
// value that comes back is the very value fn produced, not a wrapper.
//
// A Tx method that fails with ErrNotFound, ErrAlreadyExists or ErrInvalidKey
// leaves the transaction usable: the closure may carry on (for example, try
// Create and fall back to Get), and whatever it writes commits as usual if it
// returns nil. Backends whose database aborts a transaction on a failed
// statement must isolate each operation (a savepoint, a conditional write).
// (The one exception is optional: an Inserter's Insert of a key that is
// present fails the whole Update; see Inserter.)
//
// Isolation is serializable: the outcome of any set of concurrent
// transactions equals some serial order of them. A View never observes part of
// an Update, and an Update never loses a concurrent Update's writes (N
// goroutines doing read-increment-write on one key end at N).
//
// Update returns nil only once the writes are committed, and for a persistent
// store that means durable (on disk, or acknowledged by the database). Any
// non-nil error means nothing of that call was committed, with one
// exception a remote database cannot avoid: when the connection fails after
// COMMIT was sent and the store cannot find out what became of it, Update
// returns an error wrapping ErrOutcomeUnknown. Callers that must know re-read
// the data before acting again.
//
// The closure may run more than once (a backend may coalesce concurrent
// Updates into one physical transaction and retry, or retry on a
// serialization failure), so it must have no side effects outside the
// transaction: compute results into variables that are reset at the start of
// each run. The closure must not call the Store (no nested View or Update),
// must not keep the Reader or Tx after it returns, and must not use them from
// other goroutines.
//
// # Bytes
//
// Byte slices that a store returns (from Get and Scan) belong to the caller:
// they stay valid after the transaction and the store never changes them.
// Byte slices passed to Create and Put are copied or consumed before the call
// returns: the caller may reuse them at once. Neither direction aliases.
//
// # Context and lifecycle
//
// If ctx is done before a transaction starts, View and Update return
// ctx.Err() without running fn. A backend may also abandon a transaction
// that has not committed when ctx is done, returning an error that wraps
// ctx.Err(); it never reports success for an abandoned one. After Close,
// View and Update return ErrClosed. Close is idempotent; it waits for
// transactions already running (Views and Updates) to finish, and those
// complete normally: an Update running when Close is called still commits.
//
// Keys and collection names of 1 to MaxKeyLen bytes are accepted by every
// backend; anything else fails with ErrInvalidKey.
//
// # Errors
//
// Failures are reported with the sentinels below, wrapped with context where
// useful; always match them with errors.Is.
//
// Implementations are checked by the conformance suite in package
// store/storetest; a new backend's test file is a few lines that call
// storetest.Run.
package store

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors shared by every Store. Match them with errors.Is.
var (
	// ErrNotFound is returned by Get for a missing key and by Delete when
	// there is nothing to delete.
	ErrNotFound = errors.New("store: not found")
	// ErrAlreadyExists is returned by Create when the key is already present.
	ErrAlreadyExists = errors.New("store: already exists")
	// ErrClosed is returned by View and Update after Close.
	ErrClosed = errors.New("store: closed")
	// ErrOutcomeUnknown is wrapped by an Update error when the store lost
	// touch with its database after asking it to commit and could not learn
	// whether the commit took effect. The writes may or may not be there.
	ErrOutcomeUnknown = errors.New("store: commit outcome unknown")
	// ErrInvalidKey is returned for an empty collection name, an empty key,
	// or a key or collection name longer than MaxKeyLen bytes.
	ErrInvalidKey = errors.New("store: invalid key")
)

// MaxKeyLen is the longest key or collection name, in bytes, that every
// Store accepts. It is bbolt's limit, the smallest among the backends.
const MaxKeyLen = 32 << 10

// Store is a transactional key-value store. Implementations are safe for
// concurrent use by multiple goroutines. See the package documentation for
// the full contract.
type Store interface {
	// View runs fn in a read-only transaction over a consistent snapshot.
	// It returns fn's error unchanged, or a store error.
	View(ctx context.Context, fn func(Reader) error) error
	// Update runs fn in a read-write transaction that commits if and only if
	// fn returns nil. It returns fn's error unchanged, or a store error; nil
	// means the writes are committed (durably, for persistent stores).
	// fn may run more than once.
	Update(ctx context.Context, fn func(Tx) error) error
	// Close releases the store. It is idempotent; afterwards View and Update
	// return ErrClosed.
	Close() error
}

// Reader reads inside a transaction. It is valid only during the closure
// it was passed to.
type Reader interface {
	// Get returns a copy of the value stored under key in collection, or an
	// error wrapping ErrNotFound.
	Get(collection, key string) ([]byte, error)
	// Scan calls fn for each record of collection whose key starts with
	// prefix, in ascending key order (descending with opts.Reverse), starting
	// at opts.Start when it is set. fn returns more=false to stop early, or an
	// error, which stops the scan and is returned by Scan unchanged. The value
	// passed to fn is a copy the caller may keep. A nil opts means ascending
	// from the first key of the prefix.
	Scan(collection, prefix string, opts *ScanOptions, fn func(key string, value []byte) (more bool, err error)) error
}

// ScanOptions adjust a Scan. The zero value scans ascending from the first
// key of the prefix.
type ScanOptions struct {
	// Reverse walks keys in descending order.
	Reverse bool
	// Start, when non-empty, is where the walk begins: the first key visited
	// is the first key >= Start (ascending) or the last key <= Start
	// (descending), among those with the prefix. A Start outside the prefix
	// simply clips to it: ascending from a Start below the prefix begins at
	// the prefix's first key, and so on.
	Start string
}

// Tx reads and writes inside an Update. It is valid only during the closure
// it was passed to. Its reads see its own earlier writes.
type Tx interface {
	Reader
	// Create stores value under key, or returns an error wrapping
	// ErrAlreadyExists if the key is present.
	Create(collection, key string, value []byte) error
	// Put stores value under key, replacing any previous value.
	Put(collection, key string, value []byte) error
	// Delete removes key, or returns an error wrapping ErrNotFound if it is
	// absent.
	Delete(collection, key string) error
}

// CheckKey reports whether collection and key are acceptable to every Store:
// non-empty and at most MaxKeyLen bytes. It returns an error wrapping
// ErrInvalidKey otherwise. Backends call it on every operation so that the
// same input fails the same way everywhere.
func CheckKey(collection, key string) error {
	if err := CheckCollection(collection); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: empty key in collection %q", ErrInvalidKey, collection)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes in collection %q (max %d)", ErrInvalidKey, len(key), collection, MaxKeyLen)
	}
	return nil
}

// CheckCollection is CheckKey for a collection name alone (used by Scan,
// whose prefix may be empty).
func CheckCollection(collection string) error {
	if collection == "" {
		return fmt.Errorf("%w: empty collection name", ErrInvalidKey)
	}
	if len(collection) > MaxKeyLen {
		return fmt.Errorf("%w: collection name of %d bytes (max %d)", ErrInvalidKey, len(collection), MaxKeyLen)
	}
	return nil
}

// Discarder is an optional interface of a Tx whose deletes cost less when
// the caller need not learn whether the key was there: Discard removes key
// from collection if it is present, and its failures (the database's own:
// a serialization failure, a lost connection) may be reported by a later
// call of the transaction or by Update instead, never as success. storepg
// holds a Discard back like a Put and sends it with the transaction's next
// statement, so that a run of them costs one round trip, not one each.
type Discarder interface {
	Discard(collection, key string) error
}

// Discard removes key from collection in tx if it is present: with tx's
// Discard if tx is a Discarder, else with Delete, ignoring ErrNotFound.
func Discard(tx Tx, collection, key string) error {
	if d, ok := tx.(Discarder); ok {
		return d.Discard(collection, key)
	}
	if err := tx.Delete(collection, key); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// Inserter is an optional interface of a Tx whose writes of new records
// cost less when the caller knows the key is absent, as it is when the
// key holds an id made for the record (a new deployment's, a new
// revision's): Insert stores value under key without looking for a
// record there. If one is there after all, the Update fails with an
// error wrapping ErrAlreadyExists and commits nothing; the error may be
// returned by this call, by a later call of the transaction, or by
// Update, never as success (other failures as Discarder says). Insert is
// for keys that cannot be present, and for one that may be when the
// caller can tell from the Update's error which Insert was refused (a
// create whose other keys all hold a new id, so that only its name's
// can be taken); otherwise a key that may be present wants Create, whose
// answer comes at once. storepg holds an Insert back like
// a Put and sends a run of them as one INSERT without ON CONFLICT, which
// spares PostgreSQL a search of the index for each key before it inserts
// the key.
type Inserter interface {
	Insert(collection, key string, value []byte) error
}

// Insert stores value under key, which the caller knows is absent, in tx:
// with tx's Insert if tx is an Inserter, else with Create.
func Insert(tx Tx, collection, key string, value []byte) error {
	if i, ok := tx.(Inserter); ok {
		return i.Insert(collection, key, value)
	}
	return tx.Create(collection, key, value)
}
