package storemem

// A leaf may encode its values against a dictionary: one earlier value of
// the collection (tree.go says which). Records of one collection are
// mostly the same JSON members, names and ids with a few bytes changed
// (a deployment's record repeats its neighbour's but for its name, times,
// ids and sealed secret), so a value becomes a few copies out of the
// dictionary and the literal bytes between them: about half its size for
// a deployment or a revision, where general compressors need a window of
// many records and decoding the whole window to read one. Decoding one
// value reads only its own bytes and the dictionary.
//
// An encoded value is uvarint(length of the value) and then operations
// until that many bytes are out: uvarint(n<<1) and n literal bytes, or
// uvarint((n-minMatch)<<1 | 1) and uvarint(offset): n bytes of the
// dictionary from offset.

const (
	// minMatch is the shortest copy: a copy's two uvarints take 2 – 4
	// bytes.
	minMatch = 5
	// maxDict bounds a dictionary, so that its positions fit the hash
	// table's uint16 (and a leaf's dictionary stays small).
	maxDict = 4 << 10
	// hashBits is the size of the encoder's table of 4-byte sequences.
	hashBits = 10
)

// dictTable maps a hash of 4 bytes to 1 + the last dictionary position
// where they start (0: none).
type dictTable [1 << hashBits]uint16

func hash4(s string, i int) uint32 {
	u := uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
	return (u * 2654435761) >> (32 - hashBits)
}

// newDictTable indexes dict, which is at most maxDict bytes.
func newDictTable(dict string) *dictTable {
	var t dictTable
	for i := 0; i+4 <= len(dict); i++ {
		t[hash4(dict, i)] = uint16(i + 1)
	}
	return &t
}

// encoder encodes values against one dictionary.
type encoder struct {
	dict string
	tab  *dictTable
}

func newEncoder(dict string) *encoder {
	e := &encoder{dict: dict}
	if dict != "" {
		e.tab = newDictTable(dict)
	}
	return e
}

// encode returns v as a leaf with e's dictionary stores it: v itself
// when the dictionary is empty.
func (e *encoder) encode(v string) string {
	if e.dict == "" {
		return v
	}
	dict := e.dict
	out := make([]byte, 0, len(v)/2+16)
	out = appendUvarint(out, uint64(len(v)))
	lit := 0     // start of the literal bytes not yet written
	next := -1   // where in dict the last copy ended (the likely next match)
	nextAt := -1 // and where in v that was
	literal := func(end int) {
		if end > lit {
			out = appendUvarint(out, uint64(end-lit)<<1)
			out = append(out, v[lit:end]...)
		}
	}
	for i := 0; i+4 <= len(v); {
		// Two candidates: where the last copy's continuation would be
		// (records share their layout, so the bytes after a changed
		// field line up again), and the last place these 4 bytes were.
		best, bestLen, back := 0, 0, 0
		try := func(p int) {
			if p < 0 || p >= len(dict) {
				return
			}
			n := 0
			for p+n < len(dict) && i+n < len(v) && dict[p+n] == v[i+n] {
				n++
			}
			b := 0 // extend backwards over literal bytes not yet written
			for b < i-lit && b < p && dict[p-1-b] == v[i-1-b] {
				b++
			}
			if n+b > bestLen+back {
				best, bestLen, back = p, n, b
			}
		}
		if next >= 0 {
			try(next + (i - nextAt))
		}
		if c := e.tab[hash4(v, i)]; c != 0 {
			try(int(c) - 1)
		}
		if bestLen+back < minMatch {
			i++
			continue
		}
		start, n := i-back, bestLen+back
		literal(start)
		out = appendUvarint(out, uint64(n-minMatch)<<1|1)
		out = appendUvarint(out, uint64(best-back))
		i = start + n
		lit, next, nextAt = i, best+bestLen, i
	}
	literal(len(v))
	return string(out)
}

// decode returns a copy of the value that a leaf with dictionary dict
// stores as enc (nil for an empty value).
func decode(enc, dict string) []byte {
	if dict == "" {
		if enc == "" {
			return nil
		}
		return []byte(enc)
	}
	n, k := uvarint(enc)
	if n == 0 {
		return nil
	}
	out := make([]byte, 0, n)
	for p := k; len(out) < int(n); {
		x, k := uvarint(enc[p:])
		p += k
		l := int(x >> 1)
		if x&1 == 0 {
			out = append(out, enc[p:p+l]...)
			p += l
			continue
		}
		off, k := uvarint(enc[p:])
		p += k
		out = append(out, dict[off:int(off)+l+minMatch]...)
	}
	return out
}

// rawLen is the length of the value stored as enc.
func rawLen(enc, dict string) int {
	if dict == "" {
		return len(enc)
	}
	n, _ := uvarint(enc)
	return int(n)
}

// uvarint is binary.Uvarint of a string, for well-formed input.
func uvarint(s string) (uint64, int) {
	var x uint64
	for i := 0; i < len(s); i++ {
		b := s[i]
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return x, i + 1
		}
	}
	panic("storemem: corrupt leaf")
}

func appendUvarint(b []byte, x uint64) []byte {
	for x >= 0x80 {
		b = append(b, byte(x)|0x80)
		x >>= 7
	}
	return append(b, byte(x))
}

// uvarintLen is the length of x as a uvarint.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
