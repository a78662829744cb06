package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
)

// countingStore counts the Views of the store it wraps.
type countingStore struct {
	store.Store
	views int
}

func (s *countingStore) View(ctx context.Context, fn func(store.Reader) error) error {
	s.views++
	return s.Store.View(ctx, fn)
}

func TestDump(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{Store: newRefStore(noBug)}
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, w := range [][3]string{{"a", "k1", "v1"}, {"a", "k2", "\x00\xff"}, {"ab", "k1", "other"}, {"emptied", "k", "v"}, {"unasked", "k", "v"}} {
			if err := tx.Put(w[0], w[1], []byte(w[2])); err != nil {
				return err
			}
		}
		return tx.Delete("emptied", "k")
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := storetest.Dump(ctx, st, "a", "ab", "emptied", "never")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"a":  {"k1": "v1", "k2": "\x00\xff"},
		"ab": {"k1": "other"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Dump (-want +got):\n%s", diff)
	}
	if st.views != 1 {
		t.Errorf("Dump used %d Views, want 1", st.views)
	}

	if got, err := storetest.Dump(ctx, st); err != nil || len(got) != 0 || got == nil {
		t.Errorf("Dump of no collections = %#v, %v; want an empty map", got, err)
	}
	if _, err := storetest.Dump(ctx, st, "a", ""); !errors.Is(err, store.ErrInvalidKey) {
		t.Errorf("Dump of an empty collection name: %v, want ErrInvalidKey", err)
	}
	st.Close()
	if got, err := storetest.Dump(ctx, st, "a"); !errors.Is(err, store.ErrClosed) || got != nil {
		t.Errorf("Dump after Close = %v, %v; want nil, ErrClosed", got, err)
	}
}

// A test of code over a store compares dumps taken before and after an
// operation that must change nothing, or looks through every stored value.
func ExampleDump() {
	ctx := context.Background()
	st := newRefStore(noBug)
	defer st.Close()
	_ = st.Update(ctx, func(tx store.Tx) error {
		_ = tx.Put("users", "u1", []byte(`{"name":"ada"}`))
		return tx.Put("users", "u2", []byte(`{"name":"bob"}`))
	})
	records, err := storetest.Dump(ctx, st, "users", "sessions")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(records)
	// Output:
	// map[users:map[u1:{"name":"ada"} u2:{"name":"bob"}]]
}
