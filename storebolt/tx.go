package storebolt

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/deployplane/deployplane/store"
)

var (
	errTxDone     = errors.New("storebolt: transaction used after its closure returned")
	errTxReadOnly = errors.New("storebolt: write in a read-only transaction")
)

// txn is the store.Tx (and store.Reader) handed to one closure. In an
// Update, several closures share one bbolt write transaction, each through
// its own txn, which logs what its closure overwrote so that a failing
// closure can be undone alone.
type txn struct {
	btx         *bbolt.Tx
	writable    bool
	fillPercent float64
	ended       bool
	// gen counts writes, so that Scan notices a write made from inside its
	// callback and repositions its cursor (bbolt cursors do not survive
	// writes to their bucket).
	gen  uint64
	undo []undoRecord
	// buckets keeps the buckets a read-only transaction has opened:
	// bbolt opens a bucket anew at each Tx.Bucket of a read-only
	// transaction (a seek in the root), and a list makes many small Scans
	// of one collection. (A writable transaction's buckets are kept by
	// bbolt itself.)
	buckets map[string]*readBucket
}

// readBucket is a bucket a read-only transaction has opened, and the
// cursors its finished Gets and Scans gave back: a new bbolt cursor
// starts with an empty stack of pages that each seek grows again (a few
// allocations per Get), while a cursor's seek reuses its stack.
type readBucket struct {
	b    *bbolt.Bucket
	free []*bbolt.Cursor
}

// bucket returns the collection's bucket, or nil when it was never
// written.
func (t *txn) bucket(collection string) *bbolt.Bucket {
	if t.writable {
		return t.btx.Bucket([]byte(collection))
	}
	if rb, ok := t.buckets[collection]; ok {
		return rb.b
	}
	b := t.btx.Bucket([]byte(collection))
	if t.buckets == nil {
		t.buckets = map[string]*readBucket{}
	}
	t.buckets[collection] = &readBucket{b: b}
	return b
}

// cursor returns a cursor over b, the collection's bucket: in a read-only
// transaction, one a finished Get or Scan gave back (releaseCursor) when
// there is one. A cursor is used by one Get or Scan at a time (a Scan's
// callback that reads the same collection takes another).
func (t *txn) cursor(collection string, b *bbolt.Bucket) *bbolt.Cursor {
	if !t.writable {
		if rb := t.buckets[collection]; rb != nil && len(rb.free) > 0 {
			c := rb.free[len(rb.free)-1]
			rb.free = rb.free[:len(rb.free)-1]
			return c
		}
	}
	return b.Cursor()
}

// releaseCursor gives back a cursor that cursor returned, once its Get
// or Scan is done with it.
func (t *txn) releaseCursor(collection string, c *bbolt.Cursor) {
	if !t.writable {
		if rb := t.buckets[collection]; rb != nil {
			rb.free = append(rb.free, c)
		}
	}
}

// undoRecord restores one write: the key's previous value (or its absence),
// or, when key is nil, removes a bucket the closure created.
type undoRecord struct {
	bucket  *bbolt.Bucket
	name    []byte
	key     []byte
	old     []byte
	existed bool
}

var _ store.Tx = (*txn)(nil)

func (t *txn) end() { t.ended = true }

func (t *txn) readable() error {
	if t.ended {
		return errTxDone
	}
	return nil
}

func (t *txn) writableNow() error {
	if t.ended {
		return errTxDone
	}
	if !t.writable {
		return errTxReadOnly
	}
	return nil
}

// Get implements store.Reader.
func (t *txn) Get(collection, key string) ([]byte, error) {
	if err := t.readable(); err != nil {
		return nil, err
	}
	if err := store.CheckKey(collection, key); err != nil {
		return nil, err
	}
	b := t.bucket(collection)
	if b == nil {
		return nil, notFound(collection, key)
	}
	c := t.cursor(collection, b)
	defer t.releaseCursor(collection, c)
	k, v := c.Seek([]byte(key))
	if k == nil || string(k) != key {
		return nil, notFound(collection, key)
	}
	return clone(v), nil
}

// Scan implements store.Reader.
func (t *txn) Scan(collection, prefix string, opts *store.ScanOptions, fn func(key string, value []byte) (bool, error)) error {
	if err := t.readable(); err != nil {
		return err
	}
	if err := store.CheckCollection(collection); err != nil {
		return err
	}
	b := t.bucket(collection)
	if b == nil {
		return nil
	}
	var o store.ScanOptions
	if opts != nil {
		o = *opts
	}
	p := []byte(prefix)
	c := t.cursor(collection, b)
	defer t.releaseCursor(collection, c)
	var k, v []byte
	switch {
	case !o.Reverse && o.Start <= prefix:
		k, v = c.Seek(p)
	case !o.Reverse && strings.HasPrefix(o.Start, prefix):
		k, v = c.Seek([]byte(o.Start))
	case !o.Reverse:
		return nil // Start is past every key with the prefix
	case o.Start == "":
		k, v = lastWithPrefix(c, p)
	case o.Start < prefix:
		return nil // Start is before every key with the prefix
	case strings.HasPrefix(o.Start, prefix):
		k, v = seekAtOrBefore(c, []byte(o.Start))
	default:
		k, v = lastWithPrefix(c, p) // Start is past the prefix: clip to its end
	}
	gen := t.gen
	for k != nil && bytes.HasPrefix(k, p) {
		key := string(k)
		more, err := fn(key, clone(v))
		if err != nil || !more {
			return err
		}
		if t.gen != gen {
			// fn wrote through this transaction; the cursor may be stale.
			gen = t.gen
			if o.Reverse {
				k, v = seekAtOrBefore(c, []byte(key))
			} else {
				k, v = c.Seek([]byte(key))
			}
			if k == nil || string(k) != key {
				continue
			}
		}
		if o.Reverse {
			k, v = c.Prev()
		} else {
			k, v = c.Next()
		}
	}
	return nil
}

// Create implements store.Tx.
func (t *txn) Create(collection, key string, value []byte) error {
	return t.put(collection, key, value, true)
}

// Put implements store.Tx.
func (t *txn) Put(collection, key string, value []byte) error {
	return t.put(collection, key, value, false)
}

func (t *txn) put(collection, key string, value []byte, create bool) error {
	if err := t.writableNow(); err != nil {
		return err
	}
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	if int64(len(value)) > bbolt.MaxValueSize {
		return fmt.Errorf("storebolt: value of %d bytes for %q in %q is over bbolt's limit of %d", len(value), key, collection, bbolt.MaxValueSize)
	}
	b, err := t.bucketForWrite(collection)
	if err != nil {
		return err
	}
	k := []byte(key)
	old, existed := lookup(b, k)
	if existed && create {
		return fmt.Errorf("%w: %q in collection %q", store.ErrAlreadyExists, key, collection)
	}
	rec := undoRecord{bucket: b, key: k, existed: existed}
	if existed {
		rec.old = clone(old)
	}
	t.undo = append(t.undo, rec)
	t.gen++
	// bbolt keeps the slices it is given until the commit: give it a copy.
	if err := b.Put(k, clone(value)); err != nil {
		return fmt.Errorf("storebolt: put %q in %q: %w", key, collection, err)
	}
	return nil
}

// Delete implements store.Tx.
func (t *txn) Delete(collection, key string) error {
	if err := t.writableNow(); err != nil {
		return err
	}
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	b := t.bucket(collection)
	if b == nil {
		return notFound(collection, key)
	}
	k := []byte(key)
	old, existed := lookup(b, k)
	if !existed {
		return notFound(collection, key)
	}
	t.undo = append(t.undo, undoRecord{bucket: b, key: k, old: clone(old), existed: true})
	t.gen++
	if err := b.Delete(k); err != nil {
		return fmt.Errorf("storebolt: delete %q in %q: %w", key, collection, err)
	}
	return nil
}

// bucketForWrite returns the collection's bucket, creating it on first
// write, with the fill target for splits set.
func (t *txn) bucketForWrite(collection string) (*bbolt.Bucket, error) {
	name := []byte(collection)
	b := t.btx.Bucket(name)
	if b == nil {
		var err error
		b, err = t.btx.CreateBucket(name)
		if err != nil {
			return nil, fmt.Errorf("storebolt: create collection %q: %w", collection, err)
		}
		t.undo = append(t.undo, undoRecord{name: name})
	}
	// FillPercent is not persisted; it applies to the splits of this
	// transaction, which is the one that writes.
	b.FillPercent = t.fillPercent
	return b, nil
}

// undoWrites reverts every write of this txn, newest first.
func (t *txn) undoWrites() error {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		var err error
		switch {
		case u.key == nil:
			err = t.btx.DeleteBucket(u.name)
		case u.existed:
			err = u.bucket.Put(u.key, u.old)
		default:
			err = u.bucket.Delete(u.key)
		}
		if err != nil {
			return fmt.Errorf("storebolt: undo a failed transaction: %w", err)
		}
	}
	t.undo = nil
	return nil
}

// lookup returns the value under key and whether the key is present (an
// empty value is present).
func lookup(b *bbolt.Bucket, key []byte) ([]byte, bool) {
	k, v := b.Cursor().Seek(key)
	if k == nil || !bytes.Equal(k, key) {
		return nil, false
	}
	return v, true
}

// seekAtOrBefore positions c at the last key <= target.
func seekAtOrBefore(c *bbolt.Cursor, target []byte) ([]byte, []byte) {
	k, v := c.Seek(target)
	if k == nil {
		return c.Last()
	}
	if !bytes.Equal(k, target) {
		return c.Prev()
	}
	return k, v
}

// lastWithPrefix positions c at the last key that starts with prefix, or
// at a key before all of them when there is none.
func lastWithPrefix(c *bbolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := prefixEnd(prefix)
	if end == nil {
		return c.Last()
	}
	k, _ := c.Seek(end)
	if k == nil {
		return c.Last()
	}
	return c.Prev()
}

// prefixEnd returns the smallest key greater than every key with the
// prefix, or nil when there is none (empty prefix or all 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func notFound(collection, key string) error {
	return fmt.Errorf("%w: %q in collection %q", store.ErrNotFound, key, collection)
}

// clone returns a copy of v that is never nil, so that an empty value reads
// back as empty rather than absent.
func clone(v []byte) []byte {
	c := make([]byte, len(v))
	copy(c, v)
	return c
}
