package storepg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/store"
)

// DefaultSchema is the PostgreSQL schema a Store uses when Options.Schema is
// empty.
const DefaultSchema = "deployplane"

// DefaultMaxRetries is how many times a transaction is re-run after a
// serialization failure or deadlock when Options.MaxRetries is zero.
const DefaultMaxRetries = 50

// DefaultAloneAfter is how many tries of an Update may fail with a
// serialization failure or a deadlock before it runs alone, when
// Options.AloneAfter is zero.
const DefaultAloneAfter = 2

// Backoff between tries: a random pause in [0, min(maxBackoff, minBackoff<<retry)).
const (
	minBackoff = time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// Options configure a Store. A nil *Options means the defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the Store's tables,
	// created if missing. Stores with different schemas share one database
	// without seeing each other's records; Stores with the same schema share
	// the records. Empty means DefaultSchema.
	Schema string
	// MaxRetries is how many times View and Update re-run a transaction
	// that PostgreSQL aborted with a serialization failure (SQLSTATE 40001)
	// or a deadlock (40P01), after a short random pause. Zero means
	// DefaultMaxRetries; a negative value means never.
	MaxRetries int
	// AloneAfter is how many tries of an Update may fail with a
	// serialization failure or a deadlock before the next ones run alone:
	// such a try waits until the Updates under way (of every Store over
	// the schema) have ended, and Updates that start meanwhile wait for it
	// to end, so that no concurrent writer can make it fail (see the
	// package documentation). Zero means DefaultAloneAfter; a negative
	// value means never, leaving only MaxRetries, so that an Update under
	// heavy contention may fail.
	AloneAfter int
	// MaxConns caps the connection pool that Open creates. Zero keeps the
	// DSN's pool_max_conns, or pgxpool's default (the larger of 4 and the
	// number of CPUs). Other pool settings go in the DSN (pool_min_conns,
	// pool_max_conn_lifetime, ...; see pgxpool.ParseConfig). OpenPool
	// ignores it. More is not faster once the database's cores are busy:
	// on a 2-core machine, creates into one tenant from two replicas ran
	// fastest with 4 to 8 connections a replica, and a third slower with
	// 32 (BENCHMARKS.md, "PostgreSQL").
	MaxConns int32
	// OnCommit, when set, is called after each COMMIT of an Update's
	// transaction, successful or not, with how many Updates it commits
	// (more than 1 when Updates were combined, MaxBatchSize), the time the
	// COMMIT took (its round trip, which includes the server's WAL flush),
	// and its error. A try that PostgreSQL aborted before the COMMIT, and
	// a closure that returned an error, commit nothing and are not
	// counted. It is called from the goroutine of an Update of the
	// transaction, which waits for it: it must be quick and must not call
	// the Store (package prommetrics records it in histograms).
	OnCommit func(updates int, took time.Duration, err error)
	// MaxBatchSize caps how many Updates one transaction runs. While as
	// many Updates are under way as the pool has connections, the ones
	// that come meanwhile queue, and the next transaction takes up to
	// MaxBatchSize of them, runs their closures one after another and
	// commits them at once (see "Combined Updates" in the package
	// documentation). Zero means DefaultMaxBatchSize; 1 or less, every
	// Update in a transaction of its own.
	MaxBatchSize int
}

// Store is a store.Store over a PostgreSQL database, safe for concurrent use
// by several goroutines and by several processes sharing the database.
type Store struct {
	pool       *pgxpool.Pool
	ownsPool   bool
	retries    int
	aloneAfter int // -1: never
	q          queries
	onCommit   func(updates int, took time.Duration, err error) // Options.OnCommit
	maxBatch   int                                              // Options.MaxBatchSize, at least 1
	inFlight   int                                              // transactions of Updates at once: the pool's size
	comb       combiner

	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup

	rerun atomic.Int64 // closures re-run after a serialization failure
	alone atomic.Int64 // tries of an Update run alone

	// multiViews holds the code pointers of View closures that ran a
	// statement after a Get outside a transaction (see View): they start
	// with a transaction from then on.
	multiViews sync.Map // uintptr -> struct{}
}

var _ store.Store = (*Store)(nil)

// Open connects to the PostgreSQL database named by dsn (a URL such as
// postgres://user:password@host:5432/db or a keyword/value string, as
// pgxpool.ParseConfig accepts), creates or migrates the schema, and returns a
// Store that owns its connection pool: Close closes the pool.
func Open(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("storepg: %w", err)
	}
	if opts != nil && opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("storepg: %w", err)
	}
	s, err := OpenPool(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// OpenPool is Open over a pool the caller already has, for programs that
// share one pool between the Store and their own queries, or configure it in
// ways Options do not. The Store does not own the pool: Close leaves it open,
// and the caller closes it after the Store.
func OpenPool(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("storepg: nil pool")
	}
	schema, retries, aloneAfter, maxBatch := DefaultSchema, DefaultMaxRetries, DefaultAloneAfter, DefaultMaxBatchSize
	var onCommit func(int, time.Duration, error)
	if opts != nil {
		onCommit = opts.OnCommit
		switch {
		case opts.MaxBatchSize > 0:
			maxBatch = opts.MaxBatchSize
		case opts.MaxBatchSize < 0:
			maxBatch = 1
		}
		if opts.Schema != "" {
			schema = opts.Schema
		}
		switch {
		case opts.MaxRetries > 0:
			retries = opts.MaxRetries
		case opts.MaxRetries < 0:
			retries = 0
		}
		switch {
		case opts.AloneAfter > 0:
			aloneAfter = opts.AloneAfter
		case opts.AloneAfter < 0:
			aloneAfter = -1
		}
	}
	// PostgreSQL truncates longer identifiers, which would silently make
	// two long names one schema.
	if len(schema) > 63 {
		return nil, fmt.Errorf("storepg: schema name %q longer than 63 bytes", schema)
	}
	if err := migrate(ctx, pool, schema); err != nil {
		return nil, fmt.Errorf("storepg: preparing schema %q: %w", schema, err)
	}
	return &Store{pool: pool, retries: retries, aloneAfter: aloneAfter, q: newQueries(schema), onCommit: onCommit,
		maxBatch: maxBatch, inFlight: max(1, int(pool.Config().MaxConns))}, nil
}

// View runs fn in a SERIALIZABLE READ ONLY transaction, which sees one
// consistent snapshot that fits the serial order of all Updates. PostgreSQL
// may abort such a transaction to keep that promise; View then re-runs fn as
// Update does.
//
// A closure whose first statement is a Get runs it alone, outside a
// transaction, in one round trip: one record read at once is consistent
// with every serial order that PostgreSQL's SERIALIZABLE Updates can
// take. If the closure goes on to a second statement, that statement
// fails, the try is void whatever the closure returns, and the closure
// runs again in a transaction; the Store then remembers the closure (by
// its code) and starts its later Views in a transaction at once.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	site := reflect.ValueOf(fn).Pointer()
	_, multi := s.multiViews.Load(site)
	oneShot := !multi
	err := s.run(ctx, false, &oneShot, func(t *txn) error { return fn(reader{t}) })
	if !multi && !oneShot {
		s.multiViews.Store(site, struct{}{})
	}
	return err
}

// Update runs fn in a SERIALIZABLE read-write transaction and commits it if
// fn returns nil. When PostgreSQL aborts the transaction with a
// serialization failure or a deadlock, Update rolls back and re-runs fn, up
// to Options.MaxRetries times, with a short random pause between tries;
// after Options.AloneAfter such failures, the tries run alone, which no
// concurrent Update can make fail. While the pool's connections are all
// busy with Updates, concurrent Updates share transactions
// (Options.MaxBatchSize).
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	body := func(t *txn) error { return fn(writer{reader{t}}) }
	if s.maxBatch <= 1 {
		return s.run(ctx, true, nil, body)
	}
	return s.update(&updateCall{ctx: ctx, fn: body, done: make(chan callOutcome, 1)})
}

// Close waits for running transactions to finish and, if Open created the
// pool, closes it. It is idempotent; afterwards View and Update return
// store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	s.running.Wait()
	if !already && s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// enter registers a transaction about to start, or reports that the Store is
// closed.
func (s *Store) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.running.Add(1)
	return true
}

// run runs fn in a View's transaction or an Update's, re-running it on
// serialization failures and deadlocks, and running an Update's tries alone
// after s.aloneAfter of them failed so. For a View, *oneShot says that
// the closure's first Get may run outside a transaction; run clears it
// when the closure went on to another statement and ran again in a
// transaction.
func (s *Store) run(ctx context.Context, update bool, oneShot *bool, fn func(*txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.enter() {
		return store.ErrClosed
	}
	defer s.running.Done()
	return s.tries(ctx, update, oneShot, fn)
}

// tries is run for a caller that has entered the Store.
func (s *Store) tries(ctx context.Context, update bool, oneShot *bool, fn func(*txn) error) error {
	conflicts := 0
	for retry := 0; ; retry++ {
		begin := s.q.beginView
		if update {
			begin = s.q.beginUpdate
			if s.aloneAfter >= 0 && conflicts >= s.aloneAfter {
				begin = s.q.beginAlone
				s.alone.Add(1)
			}
		}
		retryable, err := s.try(ctx, begin, update, oneShot != nil && *oneShot, fn)
		if !retryable {
			return err
		}
		if errors.Is(err, errNeedTransaction) {
			*oneShot = false // again, in a transaction: no pause, no retry counted
			retry--
			continue
		}
		if isConflict(err) {
			conflicts++
		}
		if retry >= s.retries {
			return fmt.Errorf("storepg: giving up after %d tries: %w", retry+1, err)
		}
		pause := time.Duration(rand.Int64N(int64(min(maxBackoff, minBackoff<<min(retry, 16)))))
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("storepg: abandoned before retrying: %w", ctx.Err())
		case <-timer.C:
		}
		s.rerun.Add(1)
	}
}

// Retries returns how many times the Store has re-run a closure: mostly
// because PostgreSQL aborted its transaction with a serialization failure
// or a deadlock, a measure of contention for metrics; also after a
// connection failed before the transaction committed.
func (s *Store) Retries() int64 { return s.rerun.Load() }

// AloneRuns returns how many tries of an Update the Store has run alone,
// after Options.AloneAfter tries had failed with a serialization failure or
// a deadlock: a measure of contention that retries did not resolve.
func (s *Store) AloneRuns() int64 { return s.alone.Load() }

// try runs fn once in a new transaction. It reports whether the error is
// one that running fn again may cure.
func (s *Store) try(ctx context.Context, begin []string, update, oneShot bool, fn func(*txn) error) (retryable bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("storepg: %w", err)
	}
	defer conn.Release()
	t := &txn{ctx: ctx, conn: conn, q: &s.q, begin: begin, oneShot: oneShot}
	done := false
	defer func() {
		// Runs on every path that did not commit, including a panic in
		// fn, which continues unwinding after the rollback.
		if !done {
			t.rollback()
		}
		t.ended = true
	}()

	ferr := fn(t)
	if ferr == nil && t.xid == "" {
		// The Puts still held back, if no write has told the
		// transaction's id yet (else they go with the COMMIT); a failure
		// lands in t.err.
		t.flush()
	}
	switch {
	case errors.Is(t.err, errNeedTransaction):
		// A statement after a Get outside a transaction: whatever fn
		// made of its failure, this try is void.
		return true, t.err
	case t.err != nil && worthRetrying(ctx, t.err):
		// Whatever fn made of it, a statement failed because of a
		// concurrent transaction: this try is void.
		return true, t.err
	case ferr != nil:
		return false, ferr
	case t.err != nil:
		// fn ignored a failed statement; PostgreSQL has aborted the
		// transaction, so there is nothing to commit.
		return false, fmt.Errorf("storepg: transaction aborted by an earlier error: %w", t.err)
	}
	if err := ctx.Err(); err != nil {
		// The caller has gone: abandon rather than commit.
		return false, fmt.Errorf("storepg: abandoned before commit: %w", err)
	}
	done = true
	pid := conn.Conn().PgConn().PID()
	if err := s.observedCommit(t, update, 1); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) || t.xid == "" {
			// The server refused the COMMIT, or there was nothing to
			// commit: nothing took effect.
			return worthRetrying(ctx, err), fmt.Errorf("storepg: commit: %w", err)
		}
		// The connection failed at COMMIT, and only the server knows
		// whether it got the COMMIT and committed. (pgconn.SafeToRetry
		// cannot tell: a connection that broke while awaiting the answer
		// reports "conn closed", which it calls safe to retry.)
		conn.Release() // broken; frees its place in the pool for the question
		committed, cerr := s.commitOutcome(ctx, t.xid, pid)
		switch {
		case cerr != nil:
			return false, fmt.Errorf("storepg: commit: %w: %w; asking the server failed: %w", store.ErrOutcomeUnknown, err, cerr)
		case committed:
			return false, nil
		default:
			return ctx.Err() == nil, fmt.Errorf("storepg: commit: %w", err)
		}
	}
	return false, nil
}

// observedCommit commits t and, for the transaction of updates Updates
// that a statement began, reports it to Options.OnCommit.
func (s *Store) observedCommit(t *txn, update bool, updates int) error {
	if s.onCommit == nil || !update || !t.begun {
		return t.commit()
	}
	start := time.Now()
	err := t.commit()
	s.onCommit(updates, time.Since(start), err)
	return err
}

// commitOutcome learns whether the transaction xid, whose COMMIT was sent on
// the connection to backend pid but whose answer was lost, committed. While
// the server still counts it in progress (it has not noticed the broken
// connection yet), it ends that backend, which either finishes the commit or
// aborts the transaction, and asks again.
func (s *Store) commitOutcome(ctx context.Context, xid string, pid uint32) (committed bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	for {
		var status *string
		if err := s.pool.QueryRow(ctx, `SELECT pg_xact_status($1::xid8)`, xid).Scan(&status); err != nil {
			return false, err
		}
		switch {
		case status == nil:
			return false, fmt.Errorf("transaction %s is too old for pg_xact_status", xid)
		case *status == "committed":
			return true, nil
		case *status == "aborted":
			return false, nil
		}
		// Only that backend, and only while it still runs xid: its
		// process id may be reused once it exits.
		_, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE pid = $1 AND backend_xid = xid($2::xid8)`, int32(pid), xid)
		if err != nil {
			return false, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// worthRetrying reports whether a transaction that failed with err may succeed
// if run again: PostgreSQL aborted it because of concurrent transactions (a
// serialization failure or a deadlock), or the statement never reached the
// server (a pooled connection the server had dropped) and ctx is still live.
func worthRetrying(ctx context.Context, err error) bool {
	if isConflict(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return !errors.As(err, &pgErr) && pgconn.SafeToRetry(err) && ctx.Err() == nil
}

// isConflict reports whether PostgreSQL aborted a transaction with err
// because of concurrent transactions: a serialization failure or a
// deadlock.
func isConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}
