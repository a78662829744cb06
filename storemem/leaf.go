package storemem

import (
	"sort"
	"strings"
)

// A leaf's data is, in this order:
//
//   - the end of each record, counted from the first record's start: 2
//     bytes each, little endian, when the data is shorter than 64 KiB,
//     else 4;
//   - the prefix that all its keys share (node.plen bytes: the keys of
//     one leaf are neighbours, so they repeat the tenant and more: a
//     gram index leaf's keys share their tenant, gram and the high bytes
//     of their time);
//   - the records: uvarint(length of the key's rest), the key's rest
//     after the prefix, and the value as the leaf stores it (codec.go).
//
// A record then costs its key's rest, its value (encoded), 2 bytes of end
// and 1 of length; the leaf, one string and its node.

// width is the size of each record end in n.data.
func (n *node) width() int {
	if len(n.data) < 1<<16 {
		return 2
	}
	return 4
}

// end returns where record i ends, counted from the first record's start.
func (n *node) end(i int) int {
	if len(n.data) < 1<<16 {
		return int(n.data[2*i]) | int(n.data[2*i+1])<<8
	}
	j := 4 * i
	return int(n.data[j]) | int(n.data[j+1])<<8 | int(n.data[j+2])<<16 | int(n.data[j+3])<<24
}

// prefix returns the prefix of every key of leaf n.
func (n *node) prefix() string {
	s := int(n.cnt) * n.width()
	return n.data[s : s+int(n.plen)]
}

// record returns record i of leaf n: its key without the prefix, and its
// value as stored.
func (n *node) record(i int) (rest, val string) {
	base := int(n.cnt)*n.width() + int(n.plen)
	start := 0
	if i > 0 {
		start = n.end(i - 1)
	}
	r := n.data[base+start : base+n.end(i)]
	l, k := uvarint(r)
	return r[k : k+int(l)], r[k+int(l):]
}

// key returns the key of record i of leaf n, in a string of its own (so
// that holding it does not hold the leaf).
func (n *node) key(i int) string {
	rest, _ := n.record(i)
	return n.prefix() + strings.Clone(rest)
}

// search returns the index of the first record of leaf n whose key is >=
// k, and whether that key is k.
func (n *node) search(k string) (int, bool) {
	p, c := n.prefix(), int(n.cnt)
	if !strings.HasPrefix(k, p) {
		// k sorts before or after every key, all of which start with p.
		if k < p {
			return 0, false
		}
		return c, false
	}
	rest := k[len(p):]
	i := sort.Search(c, func(i int) bool { r, _ := n.record(i); return r >= rest })
	if i < c {
		r, _ := n.record(i)
		return i, r == rest
	}
	return i, false
}

// entry is record i of leaf n, read in place.
type entry struct {
	n *node
	i int
}

// key returns the record's key.
func (e entry) key() string {
	rest, _ := e.n.record(e.i)
	if e.n.plen == 0 {
		return rest
	}
	return e.n.prefix() + rest
}

// value returns a copy of the record's value (nil when empty).
func (e entry) value() []byte {
	_, v := e.n.record(e.i)
	return decode(v, e.n.dict)
}

// rec is a leaf's record while the leaf is rewritten: its key is
// head+tail (the leaf's prefix and the record's rest, or the whole key
// of a record being written) and val its value as stored under the
// leaf's dictionary.
type rec struct {
	head, tail, val string
}

func (r *rec) keyLen() int { return len(r.head) + len(r.tail) }

// keyByte returns byte j of r's key.
func (r *rec) keyByte(j int) byte {
	if j < len(r.head) {
		return r.head[j]
	}
	return r.tail[j-len(r.head)]
}

// unpack returns the records of leaf n, with room for extra more.
func (n *node) unpack(extra int) []rec {
	p := n.prefix()
	recs := make([]rec, n.cnt, int(n.cnt)+extra)
	for i := range recs {
		rest, val := n.record(i)
		recs[i] = rec{head: p, tail: rest, val: val}
	}
	return recs
}

// pack makes recs, their values stored under dict, the records of leaf
// n.
func (n *node) pack(recs []rec, dict string) {
	lp := 0
	if len(recs) > 0 {
		a, b := &recs[0], &recs[len(recs)-1]
		for lp < a.keyLen() && lp < b.keyLen() && a.keyByte(lp) == b.keyByte(lp) {
			lp++
		}
	}
	size := lp
	for i := range recs {
		l := recs[i].keyLen() - lp
		size += uvarintLen(uint64(l)) + l + len(recs[i].val)
	}
	w := 2
	if len(recs)*2+size >= 1<<16 {
		w = 4
	}
	var b strings.Builder
	b.Grow(len(recs)*w + size)
	end := 0
	for i := range recs {
		l := recs[i].keyLen() - lp
		end += uvarintLen(uint64(l)) + l + len(recs[i].val)
		b.WriteByte(byte(end))
		b.WriteByte(byte(end >> 8))
		if w == 4 {
			b.WriteByte(byte(end >> 16))
			b.WriteByte(byte(end >> 24))
		}
	}
	if len(recs) > 0 {
		writeKey(&b, &recs[0], 0, lp)
	}
	var v [10]byte
	for i := range recs {
		r := &recs[i]
		b.Write(appendUvarint(v[:0], uint64(r.keyLen()-lp)))
		writeKey(&b, r, lp, r.keyLen())
		b.WriteString(r.val)
	}
	n.data, n.dict, n.cnt, n.plen = b.String(), dict, uint32(len(recs)), uint32(lp)
}

// writeKey writes bytes [from, to) of r's key.
func writeKey(b *strings.Builder, r *rec, from, to int) {
	h := len(r.head)
	if from < h {
		b.WriteString(r.head[from:min(to, h)])
	}
	if to > h {
		b.WriteString(r.tail[max(from-h, 0) : to-h])
	}
}

// Dictionaries. A leaf that is split chooses, for each half, whether to
// keep its dictionary: a half whose values take more than two thirds of
// their length under it (or that has none), and whose values are at least
// minDictInput bytes, tries its middle value as a dictionary, and takes
// it if that saves more than half the dictionary's length; a half too
// small to choose keeps its dictionary, or takes the other half's if it
// has none (a leaf that splits after its last record, as ascending keys
// make it do, leaves that record alone on the right). Leaves inherit
// the dictionary of the leaf they were split from, so a collection of
// like records mostly shares one or a few; a leaf of small values (the
// indexes' empty ones) has none and stores values as they are.
const minDictInput = 1 << 10

// rechoose returns the dictionary for recs, stored under dict, and recs
// stored under it. When recs are too few to choose, and have no
// dictionary, they take lend (their sibling's choice).
func rechoose(recs []rec, dict, lend string) (string, []rec) {
	raw, enc := 0, 0
	for i := range recs {
		raw += rawLen(recs[i].val, dict)
		enc += len(recs[i].val)
	}
	if raw < minDictInput {
		if dict == "" && lend != "" {
			return lend, recode(recs, dict, lend)
		}
		return dict, recs
	}
	if dict != "" && enc*3 <= raw*2 {
		return dict, recs
	}
	cand := decode(recs[len(recs)/2].val, dict)
	if len(cand) > maxDict {
		cand = cand[:maxDict]
	}
	if len(cand) < minMatch || string(cand) == dict {
		return dict, recs
	}
	nd := string(cand)
	out := recode(recs, dict, nd)
	enc2 := 0
	for i := range out {
		enc2 += len(out[i].val)
	}
	if enc-enc2 <= len(nd)/2 {
		return dict, recs
	}
	return nd, out
}

// recode returns recs, stored under dictionary from, stored under to.
func recode(recs []rec, from, to string) []rec {
	if from == to {
		return recs
	}
	e := newEncoder(to)
	out := make([]rec, len(recs))
	for i, r := range recs {
		out[i] = rec{head: r.head, tail: r.tail, val: e.encode(string(decode(r.val, from)))}
	}
	return out
}
