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
// clone taken along the way never sees the writes made after it. Keys
// share prefixes of several lengths (a leaf stores its keys' common
// prefix once), and values are small, or records alike enough that
// leaves encode them against dictionaries (codec.go), or random bytes.
func TestTreeModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tr := newTree()
		tr.max = rapid.SampledFrom([]int{4, 5, 8, maxItems}).Draw(rt, "max") // small nodes: deep trees
		model := map[string]string{}
		var frozen *tree
		var frozenModel map[string]string
		keyPrefix := rapid.SampledFrom([]string{"", "k", "tenant\x00gram"}).Draw(rt, "keyPrefix")
		keyOf := func(i int) string { return fmt.Sprintf("%s%05d", keyPrefix, i) }
		valueOf := func(i int) string {
			switch rapid.IntRange(0, 3).Draw(rt, "kind") {
			case 0:
				return ""
			case 1:
				return fmt.Sprint(rapid.IntRange(0, 9).Draw(rt, "v"))
			case 2:
				return string(rapid.SliceOfN(rapid.Byte(), 0, 600).Draw(rt, "bytes"))
			}
			return likeRecord(i, rapid.IntRange(0, 1<<30).Draw(rt, "seed"))
		}
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
				k, v := keyOf(i), valueOf(i)
				tr.Put(k, []byte(v))
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
	tr.Ascend("", func(it entry) bool { got = append(got, it.key()+"="+string(it.value())); return true })
	var want []string
	for _, k := range keys {
		want = append(want, k+"="+model[k])
	}
	if !slices.Equal(got, want) {
		rt.Fatalf("ascending walk: %d items, want %d", len(got), len(want))
	}
	got = got[:0]
	tr.Descend("", true, func(it entry) bool { got = append(got, it.key()); return true })
	if !slices.Equal(got, reversed(keys)) {
		rt.Fatalf("descending walk differs")
	}
	got = got[:0]
	tr.Ascend(from, func(it entry) bool { got = append(got, it.key()); return len(got) < 10 })
	i, _ := slices.BinarySearch(keys, from)
	if w := keys[i:min(len(keys), i+10)]; !slices.Equal(got, w) {
		rt.Fatalf("Ascend(%s) = %v, want %v", from, got, w)
	}
	got = got[:0]
	tr.Descend(from, false, func(it entry) bool { got = append(got, it.key()); return len(got) < 10 })
	j, found := slices.BinarySearch(keys, from)
	if found {
		j++
	}
	w := reversed(keys[max(0, j-10):j])
	if !slices.Equal(got, w) {
		rt.Fatalf("Descend(%s) = %v, want %v", from, got, w)
	}
	for _, k := range []string{from, "k", "z", "", "tenant", "tenant\x00gram\xff"} {
		it, ok := tr.Get(k)
		v, want := model[k]
		if ok != want || (ok && string(it.value()) != v) {
			rt.Fatalf("Get(%s) = %v; want %q, %v", k, ok, v, want)
		}
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// likeRecord is a value like its neighbours': a deployment's stored JSON
// with its name, times, id and a secret of random bytes changed.
func likeRecord(i, seed int) string {
	secret := make([]byte, 40)
	for j := range secret {
		seed = seed*1103515245 + 12345
		secret[j] = byte(seed >> 16)
	}
	return fmt.Sprintf(`{"v":1,"n":"agent-%07d","s":"external_docker","rs":{"min_scale":1,"max_scale":3},`+
		`"rc":{"img":"registry.example.com/agent-%d:1.0.0"},"sx":"%x","c":%d,"u":%d,"st":"%s","lr":"01a20dd8-b3e6-7a8b-a166-%012x"}`,
		i, i%50, secret, 1795528635366686+seed%100000, 1795528635366686+seed%1000, []string{"AWAITING_DATABASE", "DEPLOYED"}[seed&1], seed)
}

// TestCodecRoundTrip: a value encoded against any dictionary decodes to
// itself: values alike the dictionary, a changed copy of it, and random
// bytes; and an empty dictionary stores values as they are.
func TestCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dict := rapid.SampledFrom([]string{"", likeRecord(1, 7), string(rapid.SliceOfN(rapid.Byte(), 0, maxDict).Draw(rt, "dict"))}).Draw(rt, "dictKind")
		var v string
		switch rapid.IntRange(0, 2).Draw(rt, "kind") {
		case 0:
			v = likeRecord(rapid.IntRange(0, 1e6).Draw(rt, "i"), rapid.IntRange(0, 1<<30).Draw(rt, "seed"))
		case 1:
			b := []byte(dict + dict)
			for range rapid.IntRange(0, 20).Draw(rt, "edits") {
				if len(b) == 0 {
					break
				}
				j := rapid.IntRange(0, len(b)-1).Draw(rt, "at")
				b[j] = rapid.Byte().Draw(rt, "b")
			}
			v = string(b)
		default:
			v = string(rapid.SliceOfN(rapid.Byte(), 0, 2000).Draw(rt, "v"))
		}
		checkRoundTrip(rt, dict, v)
	})
}

func checkRoundTrip(t interface{ Fatalf(string, ...any) }, dict, v string) {
	enc := newEncoder(dict).encode(v)
	if dict == "" && enc != v {
		t.Fatalf("encode without a dictionary changed the value")
	}
	if got := decode(enc, dict); string(got) != v || (v == "") != (got == nil) {
		t.Fatalf("decode(encode(%q)) = %q", v, got)
	}
	if n := rawLen(enc, dict); n != len(v) {
		t.Fatalf("rawLen = %d, want %d", n, len(v))
	}
}

// Records alike take about half their length: a deployment's JSON
// encoded against its neighbour's keeps mostly the bytes that differ.
func TestCodecShrinksLikeRecords(t *testing.T) {
	dict := likeRecord(1, 7)
	for i := 2; i < 100; i++ {
		v := likeRecord(i, i*7919)
		if enc := newEncoder(dict).encode(v); len(enc)*2 > len(v)+80 {
			t.Fatalf("record %d: %d bytes encoded, from %d", i, len(enc), len(v))
		}
	}
}

// TestTreeCompressesLikeRecords: a tree of like records stores them in
// less than their length, in leaves that share a few dictionaries.
func TestTreeCompressesLikeRecords(t *testing.T) {
	tr := newTree()
	raw := 0
	for i := range 5000 {
		v := likeRecord(i, i*7919)
		raw += len(v)
		tr.Put(fmt.Sprintf("tenant/%08d", i), []byte(v))
	}
	stored := 0
	dicts := map[string]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.leaf() {
			stored += len(n.data)
			dicts[n.dict] = true
			return
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(tr.root)
	if stored*10 > raw*6 {
		t.Errorf("%d bytes stored for %d bytes of values", stored, raw)
	}
	if len(dicts) > 20 {
		t.Errorf("%d dictionaries for 5000 like records", len(dicts))
	}
	for i := range 5000 {
		if e, ok := tr.Get(fmt.Sprintf("tenant/%08d", i)); !ok || string(e.value()) != likeRecord(i, i*7919) {
			t.Fatalf("record %d: %v", i, ok)
		}
	}
}

func FuzzCodec(f *testing.F) {
	f.Add(likeRecord(1, 7), likeRecord(2, 99))
	f.Add("", "abc")
	f.Add("aaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	f.Fuzz(func(t *testing.T, dict, v string) {
		if len(dict) > maxDict {
			dict = dict[:maxDict]
		}
		checkRoundTrip(t, dict, v)
	})
}
