package storebolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/deployplane/deployplane/store"
)

// ErrLocked is returned (wrapped, with the path) by Open when another process
// holds the database file and the lock did not come free within
// Options.LockTimeout.
var ErrLocked = errors.New("storebolt: database file is locked by another process")

// Defaults used when Options (or one of its fields) is zero.
const (
	// DefaultLockTimeout is how long Open waits for another process to
	// release the file lock.
	DefaultLockTimeout = 2 * time.Second
	// DefaultMaxBatchSize is the most Updates one bbolt transaction commits.
	DefaultMaxBatchSize = 1000
	// DefaultFillPercent is how full bbolt packs a page when it splits one.
	// Keys the domain writes are ordered by time (UUIDv7), so inserts land
	// at the right edge of a collection and pages left behind are never
	// filled again: packing them nearly full saves space, while the 10%
	// slack absorbs an in-place update that grows a record without an
	// immediate split.
	DefaultFillPercent = 0.9
)

// Options configure Open. A nil *Options, or a zero field, means the default.
type Options struct {
	// LockTimeout is how long Open waits for the file lock when another
	// process holds the database. Default DefaultLockTimeout. The wait is
	// always finite.
	LockTimeout time.Duration
	// MaxBatchSize caps how many queued Updates the writer commits in one
	// bbolt transaction (one fsync). Default DefaultMaxBatchSize.
	MaxBatchSize int
	// FillPercent is bbolt's page fill target for splits, between 0.1 and
	// 1. Default DefaultFillPercent.
	FillPercent float64
	// InitialMmapSize is the initial size of the memory map in bytes; a
	// value at least as large as the file spares bbolt from remapping (which
	// briefly waits for open Views) as the file grows. Default 0: bbolt
	// maps the file and grows the map as needed.
	InitialMmapSize int
	// MaxSize, when positive, is the largest the file may grow to, in
	// bytes. A commit that would grow it further fails, and every Update in
	// that commit returns the error.
	MaxSize int
	// PageSize is the page size, in bytes, of a newly created file (an
	// existing file keeps its own). Default: the operating system's page
	// size.
	PageSize int
	// FileMode is the permission of a newly created file. Default 0o600.
	FileMode os.FileMode
	// OnCommit, when set, is called after each commit of a group of
	// Updates (one bbolt transaction, one fsync), successful or not, with
	// the number of Updates in it whose closures succeeded, the time the
	// commit took (the write and fsync, not the closures), and the commit's
	// error. It is called from the store's single writer, which waits for
	// it: it must be quick and must not call the Store (package prommetrics
	// records it in histograms). A group whose closures all failed commits
	// nothing and is not reported.
	OnCommit func(updates int, took time.Duration, err error)
}

// Store is a store.Store kept in one bbolt file. Create it with Open; it is
// safe for concurrent use. Views are bbolt read transactions over a snapshot;
// Updates go through a single writer that commits every Update queued at the
// time in one bbolt transaction. See the package documentation.
type Store struct {
	path         string
	db           *bbolt.DB
	fillPercent  float64
	maxBatchSize int

	// commit commits a write transaction. It is (*bbolt.Tx).Commit except in
	// tests, which replace it to inject commit failures.
	commit func(*bbolt.Tx) error
	// onCommit is Options.OnCommit (nil: none).
	onCommit func(updates int, took time.Duration, err error)

	mu      sync.Mutex
	cond    sync.Cond  // signalled when queue grows or closing is set
	queue   []*request // Updates waiting for the writer, in arrival order
	closing bool       // set by Close; no new Updates are accepted
	// lastBatch is the size of the batch the writer committed last.
	lastBatch int

	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

var _ store.Store = (*Store)(nil)

// Open opens the bbolt database at path, creating the file if it does not
// exist, and starts the store's writer. If another process holds the file,
// Open waits up to Options.LockTimeout and then returns an error wrapping
// ErrLocked. The caller must Close the store.
func Open(path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.MaxBatchSize <= 0 {
		o.MaxBatchSize = DefaultMaxBatchSize
	}
	if o.FillPercent == 0 {
		o.FillPercent = DefaultFillPercent
	}
	if o.FillPercent < 0.1 || o.FillPercent > 1 {
		return nil, fmt.Errorf("storebolt: FillPercent %v is outside [0.1, 1]", o.FillPercent)
	}
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	db, err := bbolt.Open(path, o.FileMode, &bbolt.Options{
		Timeout:         o.LockTimeout,
		InitialMmapSize: o.InitialMmapSize,
		MaxSize:         o.MaxSize,
		PageSize:        o.PageSize,
		// Durability is not negotiable: NoSync, NoGrowSync and
		// NoFreelistSync all stay false.
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (waited %s)", ErrLocked, path, o.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("storebolt: open %s: %w", path, err)
	}
	s := &Store{
		path:         path,
		db:           db,
		fillPercent:  o.FillPercent,
		maxBatchSize: o.MaxBatchSize,
		commit:       (*bbolt.Tx).Commit,
		onCommit:     o.OnCommit,
		writerDone:   make(chan struct{}),
	}
	s.cond.L = &s.mu
	go s.writeLoop()
	return s, nil
}

// Path returns the path of the database file.
func (s *Store) Path() string { return s.path }

// View runs fn in a bbolt read transaction: a consistent snapshot that the
// writer never blocks.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	btx, err := s.beginRead()
	if err != nil {
		return err
	}
	defer btx.Rollback() //nolint:errcheck // a read transaction has nothing to lose
	t := &txn{btx: btx}
	defer t.end()
	return fn(t)
}

// Update queues fn for the writer, which runs it in the bbolt transaction it
// is about to commit, alongside every other Update queued at the time. fn's
// writes are kept if and only if it returns nil; a failing fn (error or
// panic) is undone alone and does not affect the others. Update returns nil
// only after the transaction has been committed and fsynced.
//
// If ctx is done while fn is still queued, Update withdraws it and returns
// ctx.Err(); once the writer has picked fn up, Update waits for the outcome.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{fn: fn, done: make(chan struct{})}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return store.ErrClosed
	}
	r.queued = true
	s.queue = append(s.queue, r)
	s.cond.Signal()
	s.mu.Unlock()

	select {
	case <-r.done:
	case <-ctx.Done():
		if s.withdraw(r) {
			return ctx.Err()
		}
		<-r.done
	}
	return r.result()
}

// withdraw removes r from the queue if the writer has not taken it yet.
func (s *Store) withdraw(r *request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.queued {
		return false
	}
	for i, q := range s.queue {
		if q == r {
			s.queue = slices.Delete(s.queue, i, i+1)
			break
		}
	}
	r.queued = false
	return true
}

// Check runs bbolt's consistency check over a snapshot of the file and
// returns every problem it finds, joined, or nil if the file is sound.
func (s *Store) Check() error {
	btx, err := s.beginRead()
	if err != nil {
		return err
	}
	defer btx.Rollback() //nolint:errcheck // a read transaction has nothing to lose
	var errs []error
	for err := range btx.Check() {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Close stops accepting Updates, lets the writer commit those already
// queued, waits for running Views, and closes the file. It is idempotent:
// later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.cond.Signal()
		s.mu.Unlock()
		<-s.writerDone
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("storebolt: close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// beginRead starts a bbolt read transaction, or returns store.ErrClosed
// once the file is closed.
func (s *Store) beginRead() (*bbolt.Tx, error) {
	btx, err := s.db.Begin(false)
	if errors.Is(err, bbolt.ErrDatabaseNotOpen) {
		return nil, store.ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("storebolt: begin read: %w", err)
	}
	return btx, nil
}
