package storemem

import (
	"slices"
	"sort"
)

// tree is a copy-on-write B+tree of records ordered by key: the records
// sit in the leaves, and an inner node holds its children and, between
// them, the smallest key of each child but the first. It replaced
// github.com/google/btree for space (BENCHMARKS.md, "Space per
// deployment"): that tree splits a full node in the middle, so keys
// written in ascending order (ids, times: most of the domain's) leave
// every node half full; this one splits at the insertion point, so they
// leave nodes full. A leaf packs its records into one string (leaf.go):
// their ends (2 bytes each), the prefix their keys share, once, and each
// record's key without it and its value, encoded against the leaf's
// dictionary when it has one (codec.go). A write packs the leaf anew, so
// a leaf is also cut when its records pass maxLeafBytes, which bounds
// what a write copies. A separator of an inner node is a string of its
// own, never a part of a leaf's string, which would keep the whole leaf
// as it was when it split alive after the leaf is rewritten.
//
// Nodes are shared between clones. A tree may change a node in place only
// if the node carries the tree's token; otherwise it copies the node
// first (and the path to it). Clone gives both trees new tokens, so
// neither changes what the other sees.
type tree struct {
	root *node
	tok  *token
	max  int // maxItems; smaller in tests, to grow deep trees from few keys
}

// token marks the nodes that one tree may change in place. It is never
// empty, so that every token has its own address.
type token struct{ _ byte }

// node is a leaf (kids == nil) or an inner node.
type node struct {
	tok *token
	// A leaf's records, in key order, packed in one string (leaf.go):
	// their ends, the prefix their keys share, and each record's key
	// without that prefix and its value, encoded against dict when dict
	// is not empty (codec.go). Replaced, never changed in place, so
	// copies of a node share them.
	data string
	dict string
	cnt  uint32   // a leaf's number of records
	plen uint32   // and the length of their keys' shared prefix
	seps []string // an inner node's: seps[i] is the smallest key of kids[i+1]
	kids []*node
}

// maxItems is the most items of a leaf and children of an inner node.
const maxItems = 64

// maxLeafBytes is the size past which a leaf of more than one record is
// cut in two: what a write copies, at most about twice over.
const maxLeafBytes = 8 << 10

func newLeaf(tok *token, recs []rec, dict string) *node {
	n := &node{tok: tok}
	n.pack(recs, dict)
	return n
}

func newTree() *tree { return &tree{tok: &token{}, max: maxItems} }

// Clone returns a tree with the same items that shares t's nodes. Both
// trees copy a shared node before changing it.
func (t *tree) Clone() *tree {
	t.tok = &token{}
	return &tree{root: t.root, tok: &token{}, max: t.max}
}

func (n *node) leaf() bool { return n.kids == nil }

// child returns the index of the child of inner node n whose range holds k.
func (n *node) child(k string) int {
	return sort.Search(len(n.seps), func(i int) bool { return n.seps[i] > k })
}

// Get returns the record of key k.
func (t *tree) Get(k string) (entry, bool) {
	n := t.root
	if n == nil {
		return entry{}, false
	}
	for !n.leaf() {
		n = n.kids[n.child(k)]
	}
	i, ok := n.search(k)
	if !ok {
		return entry{}, false
	}
	return entry{n, i}, true
}

// Has reports whether the tree holds key k.
func (t *tree) Has(k string) bool { _, ok := t.Get(k); return ok }

// mutable returns n, or a copy of n that t may change.
func (t *tree) mutable(n *node) *node {
	if n.tok == t.tok {
		return n
	}
	c := &node{tok: t.tok}
	if n.leaf() {
		// replaced, never changed in place
		c.data, c.dict, c.cnt, c.plen = n.data, n.dict, n.cnt, n.plen
	} else {
		c.seps, c.kids = slices.Clone(n.seps), slices.Clone(n.kids)
	}
	return c
}

// Put stores value v (copied) under key k, replacing the record of k.
func (t *tree) Put(k string, v []byte) {
	if t.root == nil {
		t.root = newLeaf(t.tok, []rec{{head: k, val: string(v)}}, "")
		return
	}
	t.root = t.mutable(t.root)
	if sep, right := t.put(t.root, k, v); right != nil {
		t.root = &node{tok: t.tok, seps: []string{sep}, kids: []*node{t.root, right}}
	}
}

// put stores v under k below n, which t may change, and returns the new
// right sibling of n and its smallest key when n had to split.
func (t *tree) put(n *node, k string, v []byte) (string, *node) {
	if n.leaf() {
		i, found := n.search(k)
		recs := n.unpack(1)
		r := rec{head: k, val: newEncoder(n.dict).encode(string(v))}
		if found {
			recs[i] = r
		} else {
			recs = slices.Insert(recs, i, r)
		}
		if len(recs) <= t.max && (len(n.data)+len(k)+len(r.val) <= maxLeafBytes || len(recs) == 1) {
			n.pack(recs, n.dict)
			return "", nil
		}
		cut := splitAt(i, len(recs))
		// The larger half chooses first, and lends its choice to the
		// other if that one is too small to choose.
		var ld, rd string
		var lr, rr []rec
		if cut >= len(recs)-cut {
			ld, lr = rechoose(recs[:cut], n.dict, "")
			rd, rr = rechoose(recs[cut:], n.dict, ld)
		} else {
			rd, rr = rechoose(recs[cut:], n.dict, "")
			ld, lr = rechoose(recs[:cut], n.dict, rd)
		}
		right := newLeaf(t.tok, rr, rd)
		n.pack(lr, ld)
		return right.key(0), right
	}
	c := n.child(k)
	kid := t.mutable(n.kids[c])
	n.kids[c] = kid
	sep, right := t.put(kid, k, v)
	if right == nil {
		return "", nil
	}
	n.kids = slices.Insert(n.kids, c+1, right)
	n.seps = slices.Insert(n.seps, c, sep)
	if len(n.kids) <= t.max {
		return "", nil
	}
	cut := splitAt(c+1, len(n.kids))
	r := &node{tok: t.tok, kids: slices.Clone(n.kids[cut:]), seps: slices.Clone(n.seps[cut:])}
	up := n.seps[cut-1]
	n.kids, n.seps = slices.Clone(n.kids[:cut]), slices.Clone(n.seps[:cut-1])
	return up, r
}

// splitAt is where a node of n entries that overflowed when entry i was
// added splits: right after i, so that entries added in ascending order
// leave full nodes behind them, but never leaving the left node less than
// half full, nor the right one empty.
func splitAt(i, n int) int {
	return min(max(i+1, n/2), n-1)
}

// Delete removes the record of key k and reports whether there was one.
func (t *tree) Delete(k string) bool {
	if t.root == nil || !t.Has(k) {
		return false
	}
	t.root = t.mutable(t.root)
	t.del(t.root, k)
	for t.root != nil && !t.root.leaf() && len(t.root.kids) == 1 {
		t.root = t.root.kids[0]
	}
	if t.root != nil && t.root.size() == 0 {
		t.root = nil
	}
	return true
}

// size is the number of entries of n.
func (n *node) size() int { return int(n.cnt) + len(n.kids) }

// del removes key k, which is present, from under n, which t may change.
func (t *tree) del(n *node, k string) {
	if n.leaf() {
		i, _ := n.search(k)
		n.pack(slices.Delete(n.unpack(0), i, i+1), n.dict)
		return
	}
	c := n.child(k)
	kid := t.mutable(n.kids[c])
	n.kids[c] = kid
	t.del(kid, k)
	switch {
	case kid.size() == 0:
		n.kids = slices.Delete(n.kids, c, c+1)
		if len(n.seps) > 0 {
			n.seps = slices.Delete(n.seps, max(c-1, 0), max(c, 1))
		}
	case kid.size() < t.max/4:
		// Merge a small child into a neighbour when both fit in one
		// node, so that deletes do not leave sparse nodes behind.
		if c > 0 && n.kids[c-1].size()+kid.size() <= t.max {
			t.merge(n, c-1)
		} else if c+1 < len(n.kids) && n.kids[c+1].size()+kid.size() <= t.max {
			t.merge(n, c)
		}
	}
}

// merge joins children i and i+1 of n into child i.
func (t *tree) merge(n *node, i int) {
	l := t.mutable(n.kids[i])
	r := n.kids[i+1]
	if l.leaf() {
		l.pack(append(l.unpack(int(r.cnt)), recode(r.unpack(0), r.dict, l.dict)...), l.dict)
	} else {
		l.seps = append(append(slices.Clip(l.seps), n.seps[i]), r.seps...)
		l.kids = append(slices.Clip(l.kids), r.kids...)
	}
	n.kids[i] = l
	n.kids = slices.Delete(n.kids, i+1, i+2)
	n.seps = slices.Delete(n.seps, i, i+1)
}

// Ascend calls fn with every record whose key is >= from, in key order,
// until fn returns false.
func (t *tree) Ascend(from string, fn func(entry) bool) {
	if t.root != nil {
		t.root.ascend(from, fn)
	}
}

func (n *node) ascend(from string, fn func(entry) bool) bool {
	if n.leaf() {
		i, _ := n.search(from)
		for ; i < int(n.cnt); i++ {
			if !fn(entry{n, i}) {
				return false
			}
		}
		return true
	}
	for _, kid := range n.kids[n.child(from):] {
		if !kid.ascend(from, fn) {
			return false
		}
	}
	return true
}

// Descend calls fn with every record whose key is <= from (every record
// when all is true), in descending key order, until fn returns false.
func (t *tree) Descend(from string, all bool, fn func(entry) bool) {
	if t.root != nil {
		t.root.descend(from, all, fn)
	}
}

func (n *node) descend(from string, all bool, fn func(entry) bool) bool {
	if n.leaf() {
		i := int(n.cnt)
		if !all {
			var found bool
			i, found = n.search(from)
			if found {
				i++
			}
		}
		for j := i - 1; j >= 0; j-- {
			if !fn(entry{n, j}) {
				return false
			}
		}
		return true
	}
	c := len(n.kids) - 1
	if !all {
		c = n.child(from)
	}
	for j := c; j >= 0; j-- {
		if !n.kids[j].descend(from, all, fn) {
			return false
		}
	}
	return true
}
