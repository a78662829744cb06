package storetest_test

import (
	"cmp"
	"context"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/deployplane/deployplane/store"
)

// bug selects a deliberate defect of refStore, for checking that the suite
// catches it. The zero value is the correct store.
type bug string

const (
	noBug          bug = ""
	bugNoRollback  bug = "norollback"  // writes go straight to the data: nothing rolls back
	bugAliasing    bug = "aliasing"    // stores and returns callers' slices
	bugSignedOrder bug = "signedorder" // Scan orders bytes as signed (0x80 before 0x00)
	bugLostUpdate  bug = "lostupdate"  // Update runs its closure without holding the lock
	bugPanicCommit bug = "paniccommit" // a panicking Update commits before re-raising
	bugIgnoreCtx   bug = "ignorectx"   // View and Update ignore a done context
	bugDirtyRead   bug = "dirtyread"   // the Update's writes become visible one by one
	bugScanStart   bug = "scanstart"   // descending Scan ignores Start
	bugNoClose     bug = "noclose"     // Close does nothing: the store stays usable
	bugCloseNoWait bug = "closenowait" // Close returns at once, even while transactions run
)

// refStore is a tiny correct store.Store (a map under a RWMutex, with
// copy-on-write Updates and a sorted scan), unless bug says otherwise.
type refStore struct {
	bug    bug
	mu     sync.RWMutex
	data   map[string]map[string][]byte
	closed atomic.Bool // written under mu, except by bugCloseNoWait
}

func newRefStore(b bug) *refStore {
	return &refStore{bug: b, data: map[string]map[string][]byte{}}
}

func cloneData(d map[string]map[string][]byte) map[string]map[string][]byte {
	out := make(map[string]map[string][]byte, len(d))
	for c, recs := range d {
		out[c] = maps.Clone(recs) // values are never mutated in place: sharing them is safe
	}
	return out
}

func (s *refStore) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := ctx.Err(); err != nil && s.bug != bugIgnoreCtx {
		return err
	}
	if s.bug == bugDirtyRead {
		// Reads the shared map without waiting for a running Update.
		if s.closed.Load() {
			return store.ErrClosed
		}
		return fn(&refTx{s: s, data: s.data})
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	return fn(&refTx{s: s, data: s.data})
}

func (s *refStore) Update(ctx context.Context, fn func(store.Tx) error) (err error) {
	if err := ctx.Err(); err != nil && s.bug != bugIgnoreCtx {
		return err
	}
	if s.bug == bugLostUpdate {
		// Reads a snapshot under the lock, runs fn unlocked, then installs
		// its result over whatever committed meanwhile.
		s.mu.RLock()
		if s.closed.Load() {
			s.mu.RUnlock()
			return store.ErrClosed
		}
		work := cloneData(s.data)
		s.mu.RUnlock()
		runtime.Gosched() // let the other Updates take the same snapshot
		if err := fn(&refTx{s: s, data: work}); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.data = work
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return store.ErrClosed
	}
	work := s.data
	if s.bug != bugNoRollback && s.bug != bugDirtyRead {
		work = cloneData(s.data)
	}
	if s.bug == bugPanicCommit {
		defer func() {
			if p := recover(); p != nil {
				s.data = work
				panic(p)
			}
		}()
	}
	if s.bug == bugDirtyRead {
		// Writes in place, where the unlocked Views see them, and undoes
		// them on error or panic.
		tx := &refTx{s: s, data: work, undo: map[[2]string]*[]byte{}}
		committed := false
		defer func() {
			if !committed {
				tx.rollback()
			}
		}()
		if err := fn(tx); err != nil {
			return err
		}
		committed = true
		return nil
	}
	if err := fn(&refTx{s: s, data: work}); err != nil {
		return err
	}
	s.data = work
	return nil
}

func (s *refStore) Close() error {
	if s.bug == bugCloseNoWait {
		s.closed.Store(true)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed.Store(s.bug != bugNoClose)
	return nil
}

// refTx reads and writes data, which is the store's own map in a View and
// the Update's private copy otherwise.
type refTx struct {
	s    *refStore
	data map[string]map[string][]byte
	undo map[[2]string]*[]byte // bugDirtyRead: the value before the first write, nil if absent
}

func (tx *refTx) own(v []byte) []byte {
	if tx.s.bug == bugAliasing {
		return v
	}
	return append([]byte{}, v...)
}

func (tx *refTx) Get(collection, key string) ([]byte, error) {
	if err := store.CheckKey(collection, key); err != nil {
		return nil, err
	}
	v, ok := tx.data[collection][key]
	if !ok {
		return nil, store.ErrNotFound
	}
	return tx.own(v), nil
}

func (tx *refTx) Scan(collection, prefix string, opts *store.ScanOptions, fn func(string, []byte) (bool, error)) error {
	if err := store.CheckCollection(collection); err != nil {
		return err
	}
	var o store.ScanOptions
	if opts != nil {
		o = *opts
	}
	if tx.s.bug == bugScanStart && o.Reverse {
		o.Start = ""
	}
	var keys []string
	for k := range tx.data[collection] {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	compare := strings.Compare
	if tx.s.bug == bugSignedOrder {
		compare = signedCompare
	}
	slices.SortFunc(keys, compare)
	if o.Reverse {
		slices.Reverse(keys)
	}
	for _, k := range keys {
		if o.Start != "" && (!o.Reverse && compare(k, o.Start) < 0 || o.Reverse && compare(k, o.Start) > 0) {
			continue
		}
		more, err := fn(k, tx.own(tx.data[collection][k]))
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// signedCompare orders strings as if their bytes were int8, the mistake of
// a store that compares with a signed char.
func signedCompare(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := cmp.Compare(int8(a[i]), int8(b[i])); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

func (tx *refTx) Create(collection, key string, value []byte) error {
	if _, err := tx.Get(collection, key); err == nil {
		return store.ErrAlreadyExists
	} else if err != store.ErrNotFound {
		return err
	}
	return tx.Put(collection, key, value)
}

func (tx *refTx) Put(collection, key string, value []byte) error {
	if err := store.CheckKey(collection, key); err != nil {
		return err
	}
	tx.remember(collection, key)
	if tx.data[collection] == nil {
		tx.data[collection] = map[string][]byte{}
	}
	tx.data[collection][key] = tx.own(value)
	return nil
}

func (tx *refTx) Delete(collection, key string) error {
	if _, err := tx.Get(collection, key); err != nil {
		return err
	}
	tx.remember(collection, key)
	delete(tx.data[collection], key)
	return nil
}

func (tx *refTx) remember(collection, key string) {
	if tx.undo == nil {
		return
	}
	k := [2]string{collection, key}
	if _, ok := tx.undo[k]; ok {
		return
	}
	if v, ok := tx.data[collection][key]; ok {
		tx.undo[k] = &v
	} else {
		tx.undo[k] = nil
	}
}

func (tx *refTx) rollback() {
	for k, v := range tx.undo {
		if v == nil {
			delete(tx.data[k[0]], k[1])
		} else {
			tx.data[k[0]][k[1]] = *v
		}
	}
}
