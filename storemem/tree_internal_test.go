package storemem

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTreeModel: random puts, deletes and walks over enough keys to split
// and merge nodes several levels deep agree with a sorted map, in key
// patterns that ascend (as ids and times do), descend and scatter; and a
// clone taken along the way never sees the writes made after it.
func TestTreeModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tr := newTree()
		tr.max = rapid.SampledFrom([]int{4, 5, 8, maxItems}).Draw(rt, "max") // small nodes: deep trees
		model := map[string]string{}
		var frozen *tree
		var frozenModel map[string]string
		keyOf := func(i int) string { return fmt.Sprintf("k%05d", i) }
		n := rapid.IntRange(1, 3000).Draw(rt, "keys")
		next := 0
		steps := rapid.IntRange(1, 4000).Draw(rt, "steps")
		for range steps {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 5: // put: ascending, or anywhere
				i := next
				if rapid.Bool().Draw(rt, "scatter") {
					i = rapid.IntRange(0, n).Draw(rt, "i")
				} else {
					next++
				}
				k, v := keyOf(i), fmt.Sprint(rapid.IntRange(0, 9).Draw(rt, "v"))
				tr.Put(newItem(k, []byte(v)))
				model[k] = v
			case op < 8: // delete
				k := keyOf(rapid.IntRange(0, max(n, next)).Draw(rt, "del"))
				_, had := model[k]
				if got := tr.Delete(k); got != had {
					rt.Fatalf("Delete(%s) = %v, want %v", k, got, had)
				}
				delete(model, k)
			case op == 8:
				frozen, frozenModel = tr.Clone(), maps.Clone(model)
			default:
				from := keyOf(rapid.IntRange(0, max(n, next)).Draw(rt, "from"))
				checkWalks(rt, tr, model, from)
			}
		}
		checkWalks(rt, tr, model, keyOf(n/2))
		if frozen != nil {
			checkWalks(rt, frozen, frozenModel, keyOf(n/3))
		}
	})
}

func checkWalks(rt *rapid.T, tr *tree, model map[string]string, from string) {
	keys := slices.Sorted(maps.Keys(model))
	var got []string
	tr.Ascend("", func(it item) bool { got = append(got, it.key()+"="+string(it.value())); return true })
	var want []string
	for _, k := range keys {
		want = append(want, k+"="+model[k])
	}
	if !slices.Equal(got, want) {
		rt.Fatalf("ascending walk: %d items, want %d", len(got), len(want))
	}
	got = got[:0]
	tr.Descend("", true, func(it item) bool { got = append(got, it.key()); return true })
	if !slices.Equal(got, reversed(keys)) {
		rt.Fatalf("descending walk differs")
	}
	got = got[:0]
	tr.Ascend(from, func(it item) bool { got = append(got, it.key()); return len(got) < 10 })
	i, _ := slices.BinarySearch(keys, from)
	if w := keys[i:min(len(keys), i+10)]; !slices.Equal(got, w) {
		rt.Fatalf("Ascend(%s) = %v, want %v", from, got, w)
	}
	got = got[:0]
	tr.Descend(from, false, func(it item) bool { got = append(got, it.key()); return len(got) < 10 })
	j, found := slices.BinarySearch(keys, from)
	if found {
		j++
	}
	w := reversed(keys[max(0, j-10):j])
	if !slices.Equal(got, w) {
		rt.Fatalf("Descend(%s) = %v, want %v", from, got, w)
	}
	for _, k := range []string{from, "k", "z"} {
		it, ok := tr.Get(k)
		v, want := model[k]
		if ok != want || (ok && string(it.value()) != v) {
			rt.Fatalf("Get(%s) = %q, %v; want %q, %v", k, it, ok, v, want)
		}
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
