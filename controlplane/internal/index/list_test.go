package index_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/store"
)

// TestListLargeFleet fills many gram lists and term chunks, with creation
// times out of order so that entries land all over the lists, and checks
// Name and Terms pages against the model.
func TestListLargeFleet(t *testing.T) {
	st := open(t)
	x := index.New(nil)
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"red", "green", "blue", "Teal", "amber"}
	var all []*entry
	for i := range 1500 {
		e := &entry{id: i + 1, at: t0.Add(time.Duration(rng.IntN(1_000_000)) * time.Millisecond), name: fmt.Sprintf("%s-%d", words[rng.IntN(len(words))], i)}
		for _, tag := range []byte("abc") {
			if rng.IntN(3) == 0 {
				e.tags += string(tag)
			}
		}
		all = append(all, e)
	}
	update(t, st, func(tx store.Tx) error {
		for _, e := range all {
			if err := index.Put(tx, tenantA, nil, e.entry()); err != nil {
				return err
			}
		}
		return nil
	})
	newestFirst(all)
	for _, q := range []struct {
		name   string
		tags   string
		offset int
		limit  int
	}{
		{"teal", "", 0, 100},
		{"TEAL", "", 250, 100},
		{"-1", "", 300, 7},
		{"e", "", 1000, 100},
		{"1499", "", 0, 5},
		{"nothing", "", 0, 5},
		{"", "a", 150, 100},
		{"", "bc", 390, 100},
		{"", "abc", 1000, 100},
		{"red", "ab", 60, 50},
	} {
		iq := &index.Query{Name: q.name, Offset: q.offset, Limit: q.limit}
		for _, tag := range []byte(q.tags) {
			iq.Terms = append(iq.Terms, term(tag))
		}
		want := page(all, func(e *entry) bool {
			return strings.Contains(strings.ToLower(e.name), strings.ToLower(q.name)) &&
				(q.tags == "" || strings.ContainsAny(e.tags, q.tags))
		}, q.offset, q.limit)
		got := list(t, st, x, tenantA, iq)
		if !slices.Equal(got, want) {
			t.Errorf("name %q terms %q offset %d: %v, want %v", q.name, q.tags, q.offset, got, want)
		}
		if len(want) == 0 && q.name != "nothing" {
			t.Errorf("query %+v matches nothing: the test does not exercise paging", q)
		}
	}
}
