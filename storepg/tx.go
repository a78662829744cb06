package storepg

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/deployplane/deployplane/store"
)

// Scan reads pages of rows, each a bounded index range query that starts
// after the previous page's last key, so a scan that stops early costs what it
// read, and the callback may use the transaction between pages. Pages start
// small, for the common early stop, and grow for long walks.
const (
	firstScanPage = 16
	maxScanPage   = 1024
)

// noFullSort runs before a transaction's first Scan, in the Scan's
// pipeline. A Scan page must walk
// the index and stop after the page (an incremental sort re-orders only keys
// that share a head). Without statistics, as for a table that has just
// grown, the planner may instead collect the whole key range and sort it,
// which makes every page cost the range: forbidding full sorts leaves it the
// index walk. No other statement of ours sorts, so a transaction that does
// not Scan (a create's) does not pay for the statement.
const noFullSort = "SET LOCAL enable_sort = off"

// returningXID ends every write: a statement that changes a row returns the
// transaction's id, which costs no round trip and lets Store.try learn
// whether a COMMIT whose answer was lost took effect. (insertMany, whose
// rows all go in, answers it once instead, not once a row: a create's
// two dozen answers cost 2 – 3% of its CPU, BENCHMARKS.md.)
const returningXID = ` RETURNING pg_current_xact_id()::text`

// queries are a Store's SQL statements, with its schema name filled in.
type queries struct {
	// beginView, beginUpdate and beginAlone are the statements that start
	// a View's transaction, an Update's, and an Update's that runs alone.
	beginView, beginUpdate, beginAlone []string

	get, create, put, delete string
	// putMany is Put for many records at once, in one statement: the
	// collections, keys and values as three arrays (putRows).
	putMany string
	// insert and insertMany are Insert (store.Inserter) for one record and
	// for many: an INSERT without ON CONFLICT, which the unique index
	// refuses (unique_violation) if a key is there. insertMany is a
	// WITH ... INSERT whose SELECT answers the transaction's id once.
	insert, insertMany string
	// discardMany is Discard for many records at once, in one statement:
	// a join of the records with the collections and keys given as two
	// arrays, which the planner answers with one index lookup a key.
	discardMany string
	// scan is the SELECT ... FROM ... WHERE collection part of a Scan page;
	// txn.Scan adds the key bounds, the order and the limit.
	scan string
}

func newQueries(schema string) queries {
	table := pgx.Identifier{schema, "records"}.Sanitize()
	// The key's head comes first so that the planner walks the index;
	// the exact comparisons follow (see headLen).
	where := ` WHERE ` + collectionHash + ` = sha256($1::bytea) AND collection = $1 AND ` +
		keyHead + ` = substr($2::bytea, 1, ` + strconv.Itoa(headLen) + `) AND key = $2`
	// Every Update holds this lock in a mode Updates share, one that runs
	// alone in an exclusive mode (see Contention in the package doc). LOCK TABLE, unlike a SELECT of
	// pg_advisory_xact_lock, takes no snapshot, so the transaction's
	// snapshot is taken after the lock is granted and sees every Update
	// that held it before.
	lockTable := `LOCK TABLE ` + pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	return queries{
		beginView:   []string{"BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"},
		beginUpdate: []string{"BEGIN ISOLATION LEVEL SERIALIZABLE", lockTable + ` IN ROW EXCLUSIVE MODE`},
		beginAlone:  []string{"BEGIN ISOLATION LEVEL SERIALIZABLE", lockTable + ` IN EXCLUSIVE MODE`},
		get:         `SELECT value FROM ` + table + where,
		create:      `INSERT INTO ` + table + ` (collection, key, value) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING` + returningXID,
		put: `INSERT INTO ` + table + ` (collection, key, value) VALUES ($1, $2, $3)` +
			` ON CONFLICT (` + indexColumns + `) DO UPDATE SET value = excluded.value` + returningXID,
		putMany: `INSERT INTO ` + table + ` (collection, key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[])` +
			` ON CONFLICT (` + indexColumns + `) DO UPDATE SET value = excluded.value` + returningXID,
		insert: `INSERT INTO ` + table + ` (collection, key, value) VALUES ($1, $2, $3)` + returningXID,
		insertMany: `WITH inserted AS (INSERT INTO ` + table + ` (collection, key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[]))` +
			` SELECT pg_current_xact_id()::text`,
		delete: `DELETE FROM ` + table + where + returningXID,
		discardMany: `DELETE FROM ` + table + ` r USING unnest($1::bytea[], $2::bytea[]) AS d (collection, key)` +
			` WHERE sha256(r.collection) = sha256(d.collection) AND r.collection = d.collection` +
			` AND substr(r.key, 1, ` + strconv.Itoa(headLen) + `) = substr(d.key, 1, ` + strconv.Itoa(headLen) + `) AND r.key = d.key` +
			returningXID,
		scan: `SELECT key, value FROM ` + table + ` WHERE ` + collectionHash + ` = sha256($1::bytea) AND collection = $1`,
	}
}

// txn is one try of a View or an Update, on one pooled connection.
type txn struct {
	ctx  context.Context
	conn *pgxpool.Conn
	q    *queries
	// begin are the statements that start the transaction. They travel
	// with the transaction's first statement, in one round trip; until
	// then, begun is false and there is nothing to commit or roll back.
	begin []string
	begun bool
	// sortOff says that noFullSort has been sent (before the first Scan).
	sortOff bool
	// oneShot says that a first statement that is a Get may run alone,
	// outside a transaction (a View's; see Store.View); shot, that one
	// did, so that any later statement fails with errNeedTransaction.
	oneShot, shot bool
	// xid is the transaction's id once a statement has changed a row, as
	// text ("" before).
	xid string
	// ended is set when the closure has returned: a Reader or Tx kept past
	// it (which the contract forbids) then fails instead of using a
	// connection that is back in the pool.
	ended bool
	// err is the first statement that failed. PostgreSQL aborts the
	// transaction on any failed statement, so later calls fail at once
	// with it, and Store.try decides from it whether to re-run the closure.
	err error
	// puts are Puts, Inserts and Discards not yet sent, in order: they
	// answer nothing but failure, so they are held back and sent in one
	// pipeline with the next statement (or with COMMIT), and a run of
	// them costs one round trip.
	puts []heldPut
	// heldTotal counts the writes ever held back, sentHeld those sent,
	// and immediate the Creates and Deletes sent: a combined Update
	// (runBatch) tells from them whether a closure's writes are all
	// still held, and can be taken back.
	heldTotal, sentHeld, immediate int
}

// errNeedTransaction fails a statement that follows a Get run outside a
// transaction (txn.oneShot): the try is void, and the closure runs again
// in a transaction.
var errNeedTransaction = errors.New("a View's second statement needs a transaction")

// heldPut is a Put or an Insert (its value copied) or a Discard not yet
// sent.
type heldPut struct {
	collection, key, value []byte
	kind                   heldKind
}

// heldKind tells the writes held back apart.
type heldKind uint8

const (
	heldPutKind heldKind = iota
	heldInsertKind
	heldDiscardKind
)

// query runs one statement, passes each row it returns to scan, and returns
// its command tag. The transaction's first statement is pipelined after the
// BEGIN, so starting a transaction costs no round trip of its own.
func (t *txn) query(op, sql string, args []any, scan func(pgx.Rows) error) (pgconn.CommandTag, error) {
	if t.ended {
		return pgconn.CommandTag{}, fmt.Errorf("storepg: %s: Reader or Tx used after its transaction ended", op)
	}
	if t.err != nil {
		return pgconn.CommandTag{}, fmt.Errorf("storepg: transaction aborted by an earlier error: %w", t.err)
	}
	if t.shot {
		t.err = errNeedTransaction
		return pgconn.CommandTag{}, fmt.Errorf("storepg: %s: %w", op, errNeedTransaction)
	}
	var (
		batch pgx.BatchResults
		rows  pgx.Rows
		err   error
	)
	isScan := op == "scan"
	if t.oneShot && op == "get" && !t.begun && len(t.puts) == 0 {
		// The first statement of a View, a Get: alone, in one round
		// trip, outside a transaction.
		t.oneShot, t.shot = false, true
		rows, err = t.conn.Query(t.ctx, sql, args...)
	} else if t.begun && len(t.puts) == 0 && (t.sortOff || !isScan) {
		rows, err = t.conn.Query(t.ctx, sql, args...)
	} else {
		t.oneShot = false
		// One pipeline: what must come first (queuePrelude), then this
		// statement.
		b := &pgx.Batch{}
		execs, held := t.queuePrelude(b, isScan)
		b.Queue(sql, args...)
		batch = t.conn.SendBatch(t.ctx, b)
		var inHeld bool
		if inHeld, err = t.readPrelude(batch, execs, held); inHeld {
			op = "put"
		}
		if err == nil {
			rows, err = batch.Query()
		}
	}
	if err == nil {
		for err == nil && rows.Next() {
			err = scan(rows)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if batch != nil {
		if cerr := batch.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		if t.err == nil {
			t.err = err
		}
		return pgconn.CommandTag{}, fmt.Errorf("storepg: %s: %w", op, err)
	}
	return rows.CommandTag(), nil
}

// queuePrelude queues in b what must precede the transaction's next
// statement: the statements that begin the transaction (before its first
// statement), noFullSort (before its first Scan, when scan is true), then
// the writes held back (queueHeld). It returns how many of b's first
// answers are those of plain statements and how many are those of held
// writes, for readPrelude.
func (t *txn) queuePrelude(b *pgx.Batch, scan bool) (execs, held int) {
	execs = t.queueBegin(b)
	if scan && !t.sortOff {
		t.sortOff = true
		b.Queue(noFullSort)
		execs++
	}
	return execs, t.queueHeld(b)
}

// queueBegin queues in b the statements that begin the transaction, if
// none has run yet, and returns how many it queued.
func (t *txn) queueBegin(b *pgx.Batch) int {
	if t.begun {
		return 0
	}
	t.begun = true
	for _, stmt := range t.begin {
		b.Queue(stmt)
	}
	return len(t.begin)
}

// readPrelude reads the answers of what queuePrelude queued; inHeld says
// that the error is a held write's.
func (t *txn) readPrelude(batch pgx.BatchResults, execs, held int) (inHeld bool, err error) {
	for range execs {
		if _, err := batch.Exec(); err != nil {
			return false, err
		}
	}
	if held > 0 {
		if err := t.readHeld(batch, held); err != nil {
			return true, err
		}
	}
	return false, nil
}

// write is query for a statement that ends with returningXID.
func (t *txn) write(op, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.query(op, sql, args, func(rows pgx.Rows) error {
		if t.xid != "" {
			return nil
		}
		return rows.Scan(&t.xid)
	})
}

// commitTimeout bounds a COMMIT, which runs even if ctx is cancelled.
const commitTimeout = 30 * time.Second

// errPutFailed marks the failure of Puts sent in one pipeline with COMMIT:
// the COMMIT did not run, nothing was committed.
var errPutFailed = errors.New("storepg: put before commit")

// commit commits the transaction, if a statement began it. A ctx cancelled
// while COMMIT is under way would break the connection and leave unknown
// whether the transaction committed, so COMMIT runs to its end regardless,
// within commitTimeout.
//
// Puts still held back travel in one pipeline with the COMMIT when the
// transaction's id is known (an earlier write returned it), so that a lost
// answer can still be told apart (Store.commitOutcome); otherwise they are
// sent first (flush). If one of them fails, the transaction is rolled back
// and the error, wrapping errPutFailed and the server's, returned.
func (t *txn) commit() error {
	if t.xid == "" {
		t.flush()
		if t.err != nil {
			t.rollback()
			return fmt.Errorf("%w: %w", errPutFailed, t.err)
		}
	}
	if !t.begun {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), commitTimeout)
	defer cancel()
	var tag pgconn.CommandTag
	var err error
	if len(t.puts) == 0 {
		tag, err = t.conn.Exec(ctx, "COMMIT")
	} else {
		b := &pgx.Batch{}
		n := t.queueHeld(b)
		b.Queue("COMMIT")
		batch := t.conn.SendBatch(ctx, b)
		if perr := t.readHeld(batch, n); perr != nil {
			_ = batch.Close()
			if t.err == nil {
				t.err = perr
			}
			var pgErr *pgconn.PgError
			if errors.As(perr, &pgErr) {
				// The server refused a Put: the COMMIT did not run.
				t.rollback()
				return fmt.Errorf("%w: %w", errPutFailed, perr)
			}
			return perr // the connection failed: the COMMIT may have run
		}
		tag, err = batch.Exec()
		if cerr := batch.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		// PostgreSQL answers ROLLBACK when the transaction had failed;
		// txn.err should have caught that first.
		return fmt.Errorf("COMMIT answered %q", tag.String())
	}
	return nil
}

// queueHeld queues the Puts, Inserts and Discards held back in b, in
// order, and returns how many statements it queued: a lone Discard is a
// DELETE, a run of them one DELETE of many (discardMany), a lone Put an
// upsert, a run of Puts one upsert of many rows (putMany), a lone Insert
// an INSERT, a run of Inserts one INSERT of many rows (insertMany). A
// run's rows are sorted by collection and key (so
// that transactions that write the same records lock them in one order,
// and neighbouring keys go into the index together); a run of Puts keeps
// only the last value of a key put twice (a row may be changed once per
// statement), while a key inserted twice fails its run, as it must.
func (t *txn) queueHeld(b *pgx.Batch) int {
	held := t.puts
	t.puts = nil
	t.sentHeld += len(held)
	n := 0
	for len(held) > 0 {
		run := 1
		for run < len(held) && held[run].kind == held[0].kind {
			run++
		}
		queueRun(b, t.q, held[:run])
		held, n = held[run:], n+1
	}
	return n
}

// queueRun queues one statement for a run of Puts, of Inserts or of
// Discards (queueHeld).
func queueRun(b *pgx.Batch, q *queries, run []heldPut) {
	kind := run[0].kind
	if len(run) == 1 {
		switch kind {
		case heldDiscardKind:
			b.Queue(q.delete, run[0].collection, run[0].key)
		case heldInsertKind:
			b.Queue(q.insert, run[0].collection, run[0].key, run[0].value)
		default:
			b.Queue(q.put, run[0].collection, run[0].key, run[0].value)
		}
		return
	}
	slices.SortStableFunc(run, func(a, b heldPut) int {
		return cmp.Or(bytes.Compare(a.collection, b.collection), bytes.Compare(a.key, b.key))
	})
	cols, keys, values := make([][]byte, 0, len(run)), make([][]byte, 0, len(run)), make([][]byte, 0, len(run))
	for i, p := range run {
		if kind == heldPutKind && i+1 < len(run) && bytes.Equal(p.collection, run[i+1].collection) && bytes.Equal(p.key, run[i+1].key) {
			continue // a later Put of the same key follows
		}
		cols, keys, values = append(cols, p.collection), append(keys, p.key), append(values, p.value)
	}
	switch kind {
	case heldDiscardKind:
		b.Queue(q.discardMany, cols, keys)
	case heldInsertKind:
		b.Queue(q.insertMany, cols, keys, values)
	default:
		b.Queue(q.putMany, cols, keys, values)
	}
}

// readHeld reads the answers of the n statements queueHeld queued,
// noting the transaction's id.
func (t *txn) readHeld(batch pgx.BatchResults, n int) error {
	for range n {
		rows, err := batch.Query()
		if err != nil {
			return alreadyThere(err)
		}
		for rows.Next() {
			if t.xid == "" {
				if err := rows.Scan(&t.xid); err != nil {
					rows.Close()
					return err
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return alreadyThere(err)
		}
	}
	return nil
}

// alreadyThere wraps store.ErrAlreadyExists around the server's refusal
// of an Insert whose key is present (unique_violation, which only an
// INSERT without ON CONFLICT raises here).
func alreadyThere(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("insert of a key already present: %w: %w", store.ErrAlreadyExists, err)
	}
	return err
}

// rollback ends a transaction that will not commit. It runs even when ctx is
// done, with a short deadline of its own; if it fails, the connection is
// left inside the transaction, so the pool discards it on release and the
// server rolls back.
func (t *txn) rollback() {
	if !t.begun {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 5*time.Second)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
}

// reader is the store.Reader a View's closure gets.
type reader struct{ t *txn }

// writer is the store.Tx an Update's closure gets.
type writer struct{ reader }

var (
	_ store.Reader    = reader{}
	_ store.Tx        = writer{}
	_ store.Discarder = writer{}
)

// Get implements store.Reader.
func (r reader) Get(collection, key string) ([]byte, error) {
	if err := store.CheckKey(collection, key); err != nil {
		return nil, err
	}
	var value []byte
	tag, err := r.t.query("get", r.t.q.get, []any{[]byte(collection), []byte(key)}, func(rows pgx.Rows) error {
		return rows.Scan(&value)
	})
	if err != nil {
		return nil, err
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("storepg: get %q in %q: %w", key, collection, store.ErrNotFound)
	}
	return value, nil
}

// bound is one end of a Scan's key range.
type bound struct {
	key    string
	strict bool // exclude key itself
	set    bool
}

// Scan implements store.Reader.
func (r reader) Scan(collection, prefix string, opts *store.ScanOptions, fn func(key string, value []byte) (more bool, err error)) error {
	if err := store.CheckCollection(collection); err != nil {
		return err
	}
	t := r.t
	var start string
	var reverse bool
	if opts != nil {
		start, reverse = opts.Start, opts.Reverse
	}

	// The keys with the prefix are [prefix, end); Start narrows that.
	lo := bound{key: prefix, set: prefix != ""}
	var hi bound
	if end, ok := prefixEnd(prefix); ok {
		hi = bound{key: end, strict: true, set: true}
	}
	if start != "" {
		if !reverse && start > lo.key {
			lo = bound{key: start, set: true}
		}
		if reverse && (!hi.set || start < hi.key) {
			hi = bound{key: start, set: true}
		}
	}

	var keys [][]byte
	var values [][]byte
	for page := firstScanPage; ; page = min(2*page, maxScanPage) {
		sql, args := t.q.scanPage(collection, lo, hi, reverse, page)
		keys, values = keys[:0], values[:0]
		_, err := t.query("scan", sql, args, func(rows pgx.Rows) error {
			var k, v []byte
			err := rows.Scan(&k, &v)
			keys, values = append(keys, k), append(values, v)
			return err
		})
		if err != nil {
			return err
		}
		// The rows are read and the connection is free: fn may call Get.
		for i := range keys {
			more, err := fn(string(keys[i]), values[i])
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
		if len(keys) < page {
			return nil
		}
		last := string(keys[len(keys)-1])
		if reverse {
			hi = bound{key: last, strict: true, set: true}
		} else {
			lo = bound{key: last, strict: true, set: true}
		}
	}
}

// scanPage returns the query for one page of a Scan and its arguments.
func (q *queries) scanPage(collection string, lo, hi bound, reverse bool, limit int) (string, []any) {
	args := []any{[]byte(collection)}
	var b strings.Builder
	b.WriteString(q.scan)
	// Each bound is a lossy comparison of the head, which the index
	// answers, and the exact comparison of the key.
	cond := func(bd bound, op string) {
		args = append(args, []byte(bd.key))
		n := "$" + strconv.Itoa(len(args))
		fmt.Fprintf(&b, ` AND %s %s= substr(%s::bytea, 1, %d) AND key %s`, keyHead, op, n, headLen, op)
		if !bd.strict {
			b.WriteString("=")
		}
		b.WriteString(" " + n)
	}
	if lo.set {
		cond(lo, ">")
	}
	if hi.set {
		cond(hi, "<")
	}
	dir := ""
	if reverse {
		dir = " DESC"
	}
	args = append(args, limit)
	fmt.Fprintf(&b, ` ORDER BY %s%s, key%s LIMIT $%d`, keyHead, dir, dir, len(args))
	return b.String(), args
}

// prefixEnd returns the smallest string greater than every string that
// starts with prefix, or false if there is none (prefix is empty or all
// 0xff bytes).
func prefixEnd(prefix string) (string, bool) {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			return prefix[:i] + string([]byte{prefix[i] + 1}), true
		}
	}
	return "", false
}

// Create implements store.Tx.
func (w writer) Create(collection, key string, value []byte) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	w.t.immediate++
	tag, err := w.t.write("create", w.t.q.create, []byte(collection), []byte(key), nonNil(value))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("storepg: create %q in %q: %w", key, collection, store.ErrAlreadyExists)
	}
	return nil
}

// Put implements store.Tx. The Put is held back and sent with the next
// statement, or before COMMIT (see txn.puts): a failure of the server's
// (a serialization failure, a lost connection) is then returned by that
// statement, or by Update.
func (w writer) Put(collection, key string, value []byte) error {
	return w.t.hold("put", heldPutKind, collection, key, value)
}

// Insert implements store.Inserter: it is held back and sent like a Put
// (see txn.puts), as a plain INSERT; a key that is there fails the
// statement it is sent with, or Update, with an error wrapping
// store.ErrAlreadyExists, and the transaction rolls back.
func (w writer) Insert(collection, key string, value []byte) error {
	return w.t.hold("insert", heldInsertKind, collection, key, value)
}

// Discard implements store.Discarder: it deletes key if present, held
// back and sent like a Put.
func (w writer) Discard(collection, key string) error {
	return w.t.hold("discard", heldDiscardKind, collection, key, nil)
}

// hold checks a Put, Insert or Discard (op) and holds it back, with a copy
// of its value (see txn.puts).
func (t *txn) hold(op string, kind heldKind, collection, key string, value []byte) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	if t.ended {
		return fmt.Errorf("storepg: %s: Reader or Tx used after its transaction ended", op)
	}
	if t.err != nil {
		return fmt.Errorf("storepg: transaction aborted by an earlier error: %w", t.err)
	}
	h := heldPut{collection: []byte(collection), key: []byte(key), kind: kind}
	if kind != heldDiscardKind {
		h.value = append([]byte{}, value...)
	}
	t.puts = append(t.puts, h)
	t.heldTotal++
	return nil
}

// flush sends the writes held back, if any, in one pipeline (with the
// statements that begin the transaction, when none has run yet); a
// failure is recorded in t.err.
func (t *txn) flush() {
	if len(t.puts) == 0 || t.err != nil {
		return
	}
	b := &pgx.Batch{}
	execs, held := t.queuePrelude(b, false)
	batch := t.conn.SendBatch(t.ctx, b)
	_, err := t.readPrelude(batch, execs, held)
	if cerr := batch.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.err = err
	}
}

// flushSaved sends the writes held back, if any, in a savepoint of their
// own (with the statements that begin the transaction, when none has run
// yet), for a combined Update's closure (runBatch with isolate). If the
// server refuses an Insert because its key is there, it rolls back to the
// savepoint, which undoes those writes alone and leaves the transaction
// usable, and returns the refusal (wrapping store.ErrAlreadyExists); any
// other failure is recorded in t.err.
func (t *txn) flushSaved() (refused error) {
	if len(t.puts) == 0 || t.err != nil {
		return nil
	}
	b := &pgx.Batch{}
	execs := t.queueBegin(b) + 1
	b.Queue("SAVEPOINT combined")
	held := t.queueHeld(b)
	b.Queue("RELEASE SAVEPOINT combined")
	batch := t.conn.SendBatch(t.ctx, b)
	inHeld, err := t.readPrelude(batch, execs, held)
	if err == nil {
		_, err = batch.Exec()
	}
	if cerr := batch.Close(); err == nil {
		err = cerr
	}
	if inHeld && errors.Is(err, store.ErrAlreadyExists) {
		if _, rerr := t.conn.Exec(t.ctx, "ROLLBACK TO SAVEPOINT combined"); rerr != nil {
			t.err = rerr
			return nil
		}
		return err
	}
	if err != nil {
		t.err = err
	}
	return nil
}

// Delete implements store.Tx.
func (w writer) Delete(collection, key string) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	w.t.immediate++
	tag, err := w.t.write("delete", w.t.q.delete, []byte(collection), []byte(key))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("storepg: delete %q in %q: %w", key, collection, store.ErrNotFound)
	}
	return nil
}

// nonNil turns a nil value into an empty one: pgx sends a nil []byte as
// SQL NULL, and an empty value is a value.
func nonNil(value []byte) []byte {
	if value == nil {
		return []byte{}
	}
	return value
}
