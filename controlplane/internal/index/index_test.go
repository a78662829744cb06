package index_test

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/deployplane/deployplane/controlplane/internal/index"
	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/store/storetest"
	"github.com/deployplane/deployplane/storemem"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Tenant prefixes: one byte for the first 23 tenants, then a length byte
// and the number.
var (
	tenantA = keyenc.TenantPrefix(1)
	tenantB = keyenc.TenantPrefix(2)
	tenantC = keyenc.TenantPrefix(42)
	tenantD = keyenc.TenantPrefix(256)
)

// tb is what the helpers need of a *testing.T, *testing.B or *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
}

// tail is the tail of the entry with id number id created at at, as
// controlplane makes them: the time key, then a UUID's id part.
func tail(at time.Time, id int) string {
	var u [16]byte
	binary.BigEndian.PutUint64(u[8:], uint64(id))
	return keyenc.Time(at) + keyenc.ID(uuid.UUID(u).String())
}

// entry is an entry of the tests: its summary is the lowercased name, a
// NUL and color; its terms are "c" and each tag's byte.
type entry struct {
	id    int
	at    time.Time
	name  string
	color string
	tags  string // bytes, each a term "c" + byte
}

func (e *entry) entry() *index.Entry {
	ie := &index.Entry{Tail: tail(e.at, e.id), Name: e.name, Summary: strings.ToLower(e.name) + "\x00" + e.color}
	for i := range len(e.tags) {
		ie.Terms = append(ie.Terms, term(e.tags[i]))
	}
	return ie
}

func term(tag byte) string { return "c" + string([]byte{tag}) }

// newestFirst sorts entries as List answers: by tail, descending.
func newestFirst(es []*entry) {
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Or(b.at.Compare(a.at), cmp.Compare(b.id, a.id)) })
}

func open(t testing.TB) store.Store {
	st := storemem.New()
	t.Cleanup(func() { st.Close() })
	return st
}

func update(t tb, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

func put(t tb, st store.Store, tp string, old, e *entry) {
	t.Helper()
	update(t, st, func(tx store.Tx) error {
		var was *index.Entry
		if old != nil {
			was = old.entry()
		}
		return index.Put(tx, tp, was, e.entry())
	})
}

func remove(t tb, st store.Store, tp string, e *entry) {
	t.Helper()
	update(t, st, func(tx store.Tx) error { return index.Remove(tx, tp, e.entry()) })
}

func fold(t tb, st store.Store, batch int) {
	t.Helper()
	if err := index.Fold(context.Background(), st, &index.FoldOptions{Batch: batch}); err != nil {
		t.Fatal(err)
	}
}

// foldGrams folds the pending changes (batch an Update) and packs the
// gram records of the entries added into blocks of at most blockTails
// tails.
func foldGrams(t tb, st store.Store, batch, blockTails int) {
	t.Helper()
	if err := index.Fold(context.Background(), st, &index.FoldOptions{Batch: batch, BlockTails: blockTails}); err != nil {
		t.Fatal(err)
	}
}

// list returns the ids of the page q asks for.
func list(t tb, st store.Store, x *index.Index, tp string, q *index.Query) []int {
	t.Helper()
	var tails []string
	err := st.View(context.Background(), func(r store.Reader) error {
		var err error
		tails, err = x.List(r, tp, q)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := []int{}
	for _, tl := range tails {
		ids = append(ids, int(binary.BigEndian.Uint64([]byte(tl[17:]))))
	}
	return ids
}

// page is the model of a List: the ids of es (newest first) that keep
// accepts, from offset, at most limit.
func page(es []*entry, keep func(*entry) bool, offset, limit int) []int {
	ids := []int{}
	for _, e := range es {
		if keep(e) {
			ids = append(ids, e.id)
		}
	}
	return ids[min(offset, len(ids)):min(offset+limit, len(ids))]
}

// TestListModel checks random queries (terms, a name, a term every entry
// must carry, a check of the summary, offsets) over random entries, put,
// changed and removed, against the obvious filter over every entry, newest
// first; and ScanTerm against the entries of each term, oldest first, from
// the start or after one entry's tail.
func TestListModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := storemem.New()
		defer st.Close()
		x := index.New(nil)
		now := t0
		var live []*entry
		colors := rapid.SampledFrom([]string{"red", "blue", ""})
		tags := rapid.Map(rapid.SliceOfNDistinct(rapid.SampledFrom([]byte("abcd")), 0, 3, rapid.ID), func(b []byte) string { return string(b) })
		for i := range rapid.IntRange(0, 30).Draw(rt, "steps") {
			switch rapid.SampledFrom([]string{"put", "put", "put", "change", "remove", "fold"}).Draw(rt, "action") {
			case "put":
				if rapid.Bool().Draw(rt, "tick") {
					now = now.Add(time.Millisecond)
				}
				e := &entry{id: i, at: now, name: rapid.SampledFrom([]string{"Alpha", "beta", "alphabet", "Delta-Alpha"}).Draw(rt, "name") + fmt.Sprint(i),
					color: colors.Draw(rt, "color"), tags: tags.Draw(rt, "tags")}
				put(rt, st, tenantA, nil, e)
				live = append(live, e)
			case "change":
				if len(live) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(live)-1).Draw(rt, "changed")
				e := *live[j]
				e.color, e.tags = colors.Draw(rt, "color"), tags.Draw(rt, "tags")
				put(rt, st, tenantA, live[j], &e)
				live[j] = &e
			case "remove":
				if len(live) == 0 {
					continue
				}
				j := rapid.IntRange(0, len(live)-1).Draw(rt, "removed")
				remove(rt, st, tenantA, live[j])
				live = slices.Delete(live, j, j+1)
			case "fold":
				fold(rt, st, rapid.IntRange(1, 4).Draw(rt, "batch"))
			}
		}
		// Noise in another tenant.
		put(rt, st, tenantB, nil, &entry{id: 1000, at: now, name: "alpha", tags: "abcd"})
		all := slices.Clone(live)
		newestFirst(all)
		for range 8 {
			q := &index.Query{
				Terms:  nil,
				Name:   rapid.SampledFrom([]string{"", "", "ALPHA", "bet", "1", "zzz"}).Draw(rt, "name"),
				Offset: rapid.IntRange(0, 12).Draw(rt, "offset"),
				Limit:  rapid.IntRange(0, 10).Draw(rt, "limit"),
			}
			for _, tag := range []byte(tags.Draw(rt, "terms")) {
				q.Terms = append(q.Terms, term(tag))
			}
			if rapid.Bool().Draw(rt, "repeat a term") && len(q.Terms) > 0 {
				q.Terms = append(q.Terms, q.Terms[0])
			}
			with := []byte(tags.Draw(rt, "with tags"))
			for _, w := range with {
				q.With = append(q.With, term(w))
			}
			color := ""
			if rapid.Bool().Draw(rt, "keep") {
				color = colors.Draw(rt, "keep color")
				q.Keep = func(summary []byte) bool {
					_, c, _ := strings.Cut(string(summary), "\x00")
					return c == color
				}
			}
			keep := func(e *entry) bool {
				tagged := len(q.Terms) == 0 || slices.ContainsFunc([]byte(e.tags), func(b byte) bool { return slices.Contains(q.Terms, term(b)) })
				return tagged && strings.Contains(strings.ToLower(e.name), strings.ToLower(q.Name)) &&
					!slices.ContainsFunc(with, func(w byte) bool { return strings.IndexByte(e.tags, w) < 0 }) && (q.Keep == nil || e.color == color)
			}
			want := page(all, keep, q.Offset, max(q.Limit, 0))
			if got := list(rt, st, x, tenantA, q); !slices.Equal(got, want) {
				rt.Fatalf("page for terms %q name %q with %q color %q offset %d limit %d: %v, want %v", q.Terms, q.Name, q.With, color, q.Offset, q.Limit, got, want)
			}
		}
		for _, tag := range []byte("abcd") {
			var got, want []int
			var after string
			if len(all) > 0 && rapid.Bool().Draw(rt, "after") {
				e := rapid.SampledFrom(all).Draw(rt, "after entry")
				after = e.entry().Tail
			}
			for _, e := range slices.Backward(all) {
				if strings.IndexByte(e.tags, tag) >= 0 && e.entry().Tail > after {
					want = append(want, e.id)
				}
			}
			err := st.View(context.Background(), func(r store.Reader) error {
				return index.ScanTerm(r, tenantA, term(tag), after, func(tl string) (bool, error) {
					got = append(got, int(binary.BigEndian.Uint64([]byte(tl[17:]))))
					return true, nil
				})
			})
			if err != nil {
				rt.Fatal(err)
			}
			if !slices.Equal(got, want) {
				rt.Fatalf("ScanTerm %q after %q: %v, want %v", term(tag), after, got, want)
			}
		}
	})
}

// TestPutRefuses: Put refuses an entry it cannot keep, and a change of an
// entry's tail or name, writing nothing.
func TestPutRefuses(t *testing.T) {
	st := open(t)
	e := &entry{id: 1, at: t0, name: "agent"}
	put(t, st, tenantA, nil, e)
	for _, tc := range []struct {
		name string
		old  *index.Entry
		e    index.Entry
	}{
		{"no name", nil, index.Entry{Tail: tail(t0, 2), Summary: "\x00"}},
		{"a name too long", nil, index.Entry{Tail: tail(t0, 2), Name: strings.Repeat("a", 64), Summary: strings.Repeat("a", 64) + "\x00"}},
		{"a byte no name holds", nil, index.Entry{Tail: tail(t0, 2), Name: "a b", Summary: "a b\x00"}},
		{"a summary without the name", nil, index.Entry{Tail: tail(t0, 2), Name: "Agent", Summary: "Agent\x00"}},
		{"a short tail", nil, index.Entry{Tail: "12345678", Name: "agent", Summary: "agent\x00"}},
		{"a new name", e.entry(), index.Entry{Tail: e.entry().Tail, Name: "agent2", Summary: "agent2\x00"}},
		{"a new tail", e.entry(), index.Entry{Tail: tail(t0, 2), Name: "agent", Summary: "agent\x00"}},
	} {
		err := st.Update(context.Background(), func(tx store.Tx) error { return index.Put(tx, tenantA, tc.old, &tc.e) })
		if err == nil || !strings.HasPrefix(err.Error(), "index: ") {
			t.Errorf("%s: Put = %v, want an error of the index", tc.name, err)
		}
	}
	if got := list(t, st, index.New(nil), tenantA, &index.Query{Limit: 10}); !slices.Equal(got, []int{1}) {
		t.Errorf("entries %v, want [1]", got)
	}
}

// TestMissingSummary: a candidate without its summary record is an error,
// not a silent miss.
func TestMissingSummary(t *testing.T) {
	st := open(t)
	e := &entry{id: 1, at: t0, name: "agent"}
	put(t, st, tenantA, nil, e)
	update(t, st, func(tx store.Tx) error { return tx.Delete(index.ColSummaries, tenantA+e.entry().Tail) })
	err := st.View(context.Background(), func(r store.Reader) error {
		_, err := index.New(nil).List(r, tenantA, &index.Query{Keep: func([]byte) bool { return true }, Limit: 10})
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("List = %v, want an error wrapping store.ErrNotFound", err)
	}
}

// TestRemoveLeavesNothing: once every entry put (and changed) is removed
// and the counts folded, no collection of the index holds a record.
func TestRemoveLeavesNothing(t *testing.T) {
	st := open(t)
	var es []*entry
	for i := range 20 {
		e := &entry{id: i, at: t0.Add(time.Duration(i) * time.Hour), name: fmt.Sprintf("agent-%d", i), color: "red", tags: "ab"[:i%3]}
		put(t, st, tenantC, nil, e)
		if i%2 == 0 {
			changed := *e
			changed.color, changed.tags = "blue", "cd"
			put(t, st, tenantC, e, &changed)
			e = &changed
		}
		es = append(es, e)
	}
	fold(t, st, 7)
	for _, e := range es {
		remove(t, st, tenantC, e)
	}
	fold(t, st, 7)
	left, err := storetest.Dump(context.Background(), st, index.Collections()...)
	if err != nil {
		t.Fatal(err)
	}
	for col, recs := range left {
		for k := range recs {
			t.Errorf("%s: %q left after every entry is removed", col, k)
		}
	}
}
