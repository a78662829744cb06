package storetest

import (
	"context"
	"fmt"

	"github.com/deployplane/deployplane/store"
)

// Dump reads every record of each of the named collections of st, all in
// one View (so the result is one consistent snapshot), and returns them by
// collection and key, values as strings. It is for tests of code built on
// a store: take a dump before an operation that must change nothing and
// compare it with one taken after (cmp.Diff shows which records moved), or
// search every stored value for something that must not be there.
//
// A collection without records (never written, or emptied) is absent from
// the result rather than present and empty, so two stores holding the same
// records dump equal whatever their history. Collections not named are not
// read. An error from the store (a done ctx, ErrClosed, ErrInvalidKey for
// a bad collection name) comes back wrapped with the collection's name, and
// no map with it.
func Dump(ctx context.Context, st store.Store, collections ...string) (map[string]map[string]string, error) {
	var out map[string]map[string]string
	err := st.View(ctx, func(r store.Reader) error {
		out = map[string]map[string]string{}
		for _, col := range collections {
			err := r.Scan(col, "", nil, func(k string, v []byte) (bool, error) {
				if out[col] == nil {
					out[col] = map[string]string{}
				}
				out[col][k] = string(v)
				return true, nil
			})
			if err != nil {
				return fmt.Errorf("storetest: dump collection %q: %w", col, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
