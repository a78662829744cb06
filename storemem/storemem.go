package storemem

import (
	"context"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/deployplane/deployplane/store"
)

// snapshot is an immutable view of every collection. Neither the map nor the
// trees in it are modified after publication.
type snapshot struct {
	colls map[string]*tree
}

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	// life is held for reading by every running transaction and for writing by
	// Close, so Close waits for transactions in flight.
	life   sync.RWMutex
	closed atomic.Bool

	// writer serializes Updates and guards master.
	writer sync.Mutex
	// master holds the writer's private copy of each collection's tree; the
	// published snapshot holds clones of these.
	master map[string]*tree

	snap atomic.Pointer[snapshot]
}

// New returns an empty store.
func New() *Store {
	s := &Store{master: map[string]*tree{}}
	s.snap.Store(&snapshot{colls: map[string]*tree{}})
	return s
}

var _ store.Store = (*Store)(nil)

// begin checks ctx and the store's state and holds the store open for one
// transaction; the caller must call s.life.RUnlock when done.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.life.RLock()
	if s.closed.Load() {
		s.life.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// View runs fn over the latest committed snapshot. It never waits for a
// running Update.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.life.RUnlock()
	return fn(&reader{colls: s.snap.Load().colls})
}

// Update runs fn alone against private copies of the collections it writes,
// and publishes them if fn returns nil. An error or a panic from fn discards
// every write; the panic propagates to the caller.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.life.RUnlock()
	s.writer.Lock()
	defer s.writer.Unlock()

	base := s.snap.Load()
	t := &tx{reader: reader{colls: base.colls}, master: s.master, written: map[string]*tree{}}
	if err := fn(t); err != nil {
		return err
	}
	if len(t.written) == 0 {
		return nil
	}
	next := &snapshot{colls: maps.Clone(base.colls)}
	for name, w := range t.written {
		s.master[name] = w
		next.colls[name] = w.Clone()
	}
	s.snap.Store(next)
	return nil
}

// Close marks the store closed after the transactions in flight finish.
// It is idempotent. The data is dropped with the Store.
func (s *Store) Close() error {
	s.life.Lock()
	defer s.life.Unlock()
	s.closed.Store(true)
	return nil
}

// reader reads one snapshot.
type reader struct {
	colls map[string]*tree
}

func (r *reader) Get(collection, key string) ([]byte, error) {
	return get(r.colls[collection], collection, key)
}

func (r *reader) Scan(collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	return scan(r.colls[collection], collection, prefix, opts, fn)
}

// get reads key from t, which is nil for a collection never written.
func get(t *tree, collection, key string) ([]byte, error) {
	if err := store.CheckKey(collection, key); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, store.ErrNotFound
	}
	it, ok := t.Get(key)
	if !ok {
		return nil, store.ErrNotFound
	}
	return it.value(), nil
}

// scan implements store.Reader.Scan over t, which is nil for a collection
// never written.
func scan(t *tree, collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	if err := store.CheckCollection(collection); err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	if opts == nil {
		opts = &store.ScanOptions{}
	}
	end, bounded := prefixEnd(prefix)
	var err error
	visit := func(it entry) bool {
		k := it.key()
		if bounded && k == end {
			return true // the exclusive upper bound of a descending walk
		}
		if !strings.HasPrefix(k, prefix) {
			return false // walked out of the prefix's contiguous range
		}
		var more bool
		more, err = fn(k, it.value())
		return more && err == nil
	}
	switch {
	case !opts.Reverse:
		t.Ascend(max(prefix, opts.Start), visit)
	case opts.Start != "" && (!bounded || opts.Start < end):
		t.Descend(opts.Start, false, visit)
	case bounded:
		t.Descend(end, false, visit)
	default:
		t.Descend("", true, visit)
	}
	return err
}

// prefixEnd returns the smallest string greater than every string that has
// prefix, or bounded=false when there is none (empty prefix or all 0xff).
func prefixEnd(prefix string) (end string, bounded bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// tx is the read-write view of one Update. Reads go to the written clone of a
// collection when there is one, else to the snapshot the Update started from.
type tx struct {
	reader
	master  map[string]*tree
	written map[string]*tree
}

func (t *tx) tree(collection string) *tree {
	if w, ok := t.written[collection]; ok {
		return w
	}
	return t.colls[collection]
}

// writable returns the transaction's private clone of collection, making it
// on first use from the writer's master copy (never from a published tree).
func (t *tx) writable(collection string) *tree {
	if w, ok := t.written[collection]; ok {
		return w
	}
	var w *tree
	if m, ok := t.master[collection]; ok {
		w = m.Clone()
	} else {
		w = newTree()
	}
	t.written[collection] = w
	return w
}

func (t *tx) Get(collection, key string) ([]byte, error) {
	return get(t.tree(collection), collection, key)
}

func (t *tx) Scan(collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	return scan(t.tree(collection), collection, prefix, opts, fn)
}

func (t *tx) Create(collection, key string, value []byte) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	if cur := t.tree(collection); cur != nil && cur.Has(key) {
		return store.ErrAlreadyExists
	}
	t.writable(collection).Put(key, value)
	return nil
}

func (t *tx) Put(collection, key string, value []byte) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	t.writable(collection).Put(key, value)
	return nil
}

func (t *tx) Delete(collection, key string) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	if cur := t.tree(collection); cur == nil || !cur.Has(key) {
		return store.ErrNotFound
	}
	t.writable(collection).Delete(key)
	return nil
}
