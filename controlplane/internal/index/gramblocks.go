package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// Gram blocks keep the gram index small. A gram record of its own per
// (gram, place, entry) costs its key (the tenant prefix, 4 bytes of gram
// and place, a tail of 25 bytes) and a store's cost of a record (bbolt:
// 16 bytes), in pages two thirds full because the records of a create
// land at the ends of a dozen lists spread over the collection: about 870
// bytes an entry at 100k entries named like agent-0001234, more than a
// third of a deployment's space. A list's tails packed in blocks cost
// about 12 bytes each: the time key as a delta from the previous tail's,
// and of the id part (a version 7 UUID) the 10 bytes the time key does
// not give.
//
// # Records
//
//	cp_deployment_pgrams       T gram place 0x00  -> "" (the list has blocks)
//	cp_deployment_gram_blocks  T gram place first -> block
//
// A block holds the tails of one list (a gram at a place) from first, its
// oldest, up to the next block's first, oldest first: a format byte (1),
// then for each tail the uvarint of its time key less the previous tail's
// (the time keys as big-endian numbers; the first tail's less 0), then
// its id part: for a version 7 UUID made in the millisecond of the time
// key (controlplane's ids), a 0 and its last 10 bytes (the tag and the
// milliseconds follow from the time key); else the uvarint of 1 + how
// many bytes of id part it shares with the previous tail's, the uvarint
// of the count of the other bytes, and those bytes.
// Blocks hold at most FoldOptions.BlockTails tails (default
// DefaultBlockTails). A list with blocks has a marker record among the
// gram records, before its records (no time key of a tail starts with
// 0x00: Put refuses one), so that a list is still some key under its
// prefix in cp_deployment_pgrams: one seek finds whether a list exists
// and one seek from each list to the next lists a gram's places, as
// before blocks, and those seeks land on small records. The blocks have a
// collection of their own, so that a create's gram records go among small
// records (storemem compresses its nodes: a record put among blocks
// costs the recompression of a node of blocks).
//
// Put writes a new entry's gram records as ever (one record per gram and
// place, written by no other entry: creates do not conflict on a shared
// block), and Fold packs them into the blocks later, with the entry's
// pending change of the order counts (counts.go): for each added entry
// it reads the summary (for the name), takes each of the name's gram
// records still there and adds its tail to the list's blocks. A tail is
// in a gram record or in a block, never both, and every walk of a list
// (gramList) merges the two, newest first, so a list answers the same
// whatever has been folded. Remove deletes an entry's gram record, or
// takes its tail out of its block (a read and a write of the block).
//
// A store written before the blocks existed holds gram records only: it
// reads as it did; its entries' records stay records (their changes of
// the counts were folded already) until the entries are removed, and
// entries added since are packed.

// blockMark follows a list's prefix in the key of its marker.
const blockMark = "\x00"

// DefaultBlockTails is the most tails of a gram block by default. Blocks
// of 32 tails cost a few bytes a deployment more than blocks of 64 (their
// keys), and make a seek in a leapfrog (a block read, decoded up to the
// bound) cheaper: name lists run as fast as over a record each, or
// faster (BenchmarkNameBlocks).
const DefaultBlockTails = 32

// blockFormat is the first byte of a gram block.
const blockFormat = 1

var errCorruptBlock = errors.New("index: a malformed gram block")

// packGrams moves the gram records of the entry at tail, if it is still
// there, into the blocks: the tails of each list go to lists (by list
// prefix, ascending when changes are read in key order), the records'
// keys to done.
func packGrams(tx store.Tx, tp, tail string, lists map[string][]string, done *[]string) error {
	summary, err := tx.Get(ColSummaries, tp+tail)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // removed since
	case err != nil:
		return err
	}
	name, _, _ := strings.Cut(string(summary), "\x00")
	if name == "" || !nameBytesOK(name) || len(name) > MaxName {
		return fmt.Errorf("%w: the summary of %q holds no name", errCorruptBlock, tail)
	}
	for _, k := range gramKeys(tp, tail, name) {
		switch _, err := tx.Get(ColGrams, k); {
		case errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return err
		}
		l := k[:len(k)-len(tail)]
		lists[l] = append(lists[l], tail)
		*done = append(*done, k)
	}
	return nil
}

// putBlocks adds the tails of lists to their blocks and discards the gram
// records they came from.
func putBlocks(tx store.Tx, lists map[string][]string, done []string, most int) error {
	for _, l := range slices.Sorted(maps.Keys(lists)) {
		tails := lists[l]
		slices.Sort(tails)
		if err := insertTails(tx, l, slices.Compact(tails), most); err != nil {
			return err
		}
	}
	for _, k := range done {
		// A Discard: the key was just read.
		if err := store.Discard(tx, ColGrams, k); err != nil {
			return err
		}
	}
	return nil
}

// insertTails adds tails (ascending) to the blocks of the list at prefix
// l, blocks of at most most tails each.
func insertTails(tx store.Tx, l string, tails []string, most int) error {
	for len(tails) > 0 {
		// The block of the newest tail left: the one with the newest
		// first not newer than it, else the list's oldest block.
		last := tails[len(tails)-1]
		key, val, err := blockAt(tx, l, last)
		if err != nil {
			return err
		}
		var in []string
		if key == "" {
			// Older than every block: into the oldest, if any.
			if key, val, err = firstBlock(tx, l); err != nil {
				return err
			}
			in, tails = tails, nil
		} else {
			i, _ := slices.BinarySearch(tails, key[len(l):])
			in, tails = tails[i:], tails[:i]
		}
		var had []string
		if key != "" {
			if had, err = decodeBlock(val); err != nil {
				return fmt.Errorf("%w at %q", err, key)
			}
		} else if err := tx.Put(ColGrams, l+blockMark, nil); err != nil { // the list's first block: its marker
			return err
		}
		merged := mergeTails(had, in)
		if key != "" && key[len(l):] != merged[0] {
			if err := tx.Delete(ColGramBlocks, key); err != nil {
				return err
			}
		}
		for i := 0; i < len(merged); i += most {
			chunk := merged[i:min(i+most, len(merged))]
			if err := tx.Put(ColGramBlocks, l+chunk[0], encodeBlock(chunk)); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeTails merges two ascending lists of tails, each tail once.
func mergeTails(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// blockAt returns the key and value of the block of the list at prefix l
// that would hold tail: the one with the newest first not newer than
// tail; "" when there is none.
func blockAt(r store.Reader, l, tail string) (key string, val []byte, err error) {
	err = r.Scan(ColGramBlocks, l, &store.ScanOptions{Reverse: true, Start: l + tail}, func(k string, v []byte) (bool, error) {
		key, val = k, v
		return false, nil
	})
	return key, val, err
}

// firstBlock returns the key and value of the oldest block of the list at
// prefix l; "" when there is none.
func firstBlock(r store.Reader, l string) (key string, val []byte, err error) {
	err = r.Scan(ColGramBlocks, l, nil, func(k string, v []byte) (bool, error) {
		key, val = k, v
		return false, nil
	})
	return key, val, err
}

// removeFromBlock takes tail out of its block of the list at prefix l, if
// a block holds it.
func removeFromBlock(tx store.Tx, l, tail string) error {
	key, val, err := blockAt(tx, l, tail)
	if err != nil || key == "" {
		return err
	}
	tails, err := decodeBlock(val)
	if err != nil {
		return fmt.Errorf("%w at %q", err, key)
	}
	i, found := slices.BinarySearch(tails, tail)
	if !found {
		return nil
	}
	tails = slices.Delete(tails, i, i+1)
	if len(tails) == 0 || i == 0 {
		if err := tx.Delete(ColGramBlocks, key); err != nil {
			return err
		}
	}
	if len(tails) > 0 {
		return tx.Put(ColGramBlocks, l+tails[0], encodeBlock(tails))
	}
	// The list's last block gone, its marker goes.
	if other, _, err := firstBlock(tx, l); err != nil || other != "" {
		return err
	}
	return tx.Delete(ColGrams, l+blockMark)
}

// encodeBlock encodes tails (ascending) as a block.
func encodeBlock(tails []string) []byte {
	b := make([]byte, 1, 1+14*len(tails))
	b[0] = blockFormat
	var prevTS uint64
	prevID := ""
	for _, t := range tails {
		ts, id := binary.BigEndian.Uint64([]byte(t[:keyenc.TimeLen])), t[keyenc.TimeLen:]
		b = binary.AppendUvarint(b, ts-prevTS)
		if ms := uuidTime(ts); len(id) == uuidPartLen && id[0] == uuidTag && id[1:7] == string(ms[:]) {
			b = append(append(b, 0), id[7:]...)
		} else {
			shared := 0
			for shared < len(id) && shared < len(prevID) && id[shared] == prevID[shared] {
				shared++
			}
			b = binary.AppendUvarint(b, uint64(1+shared))
			b = binary.AppendUvarint(b, uint64(len(id)-shared))
			b = append(b, id[shared:]...)
		}
		prevTS, prevID = ts, id
	}
	return b
}

// The id part of a UUID (keyenc.ID): its tag, then its 16 bytes.
const (
	uuidTag     = 0x01
	uuidPartLen = 17
)

// uuidTime returns the first 6 bytes a version 7 UUID made at the time
// of time key ts holds: its Unix milliseconds, big-endian.
func uuidTime(ts uint64) (ms [6]byte) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(int64(ts^1<<63)/1000))
	copy(ms[:], b[2:])
	return ms
}

// decodeBlock returns the tails of a block, ascending. They share one
// allocation of their bytes.
func decodeBlock(b []byte) ([]string, error) {
	data, ends, err := decodeTails(b, "", nil)
	if err != nil {
		return nil, err
	}
	tails := make([]string, len(ends))
	start := 0
	for i, e := range ends {
		tails[i] = data[start:e]
		start = e
	}
	return tails, nil
}

// decodeTails decodes the tails of a block, ascending, up to the last one
// not newer than bound (every one, when bound is ""): their bytes one
// after the other, and where each ends, appended to ends.
func decodeTails(b []byte, bound string, ends []int) (string, []int, error) {
	if len(b) == 0 || b[0] != blockFormat {
		return "", nil, errCorruptBlock
	}
	var buf strings.Builder
	buf.Grow(2 * len(b))
	var prev [keyenc.TimeLen + 64]byte // the previous tail, when it fits
	var prevTail []byte
	var ts uint64
	var t []byte // the tail being decoded
	for p := 1; p < len(b); {
		d, w := binary.Uvarint(b[p:])
		if w <= 0 {
			return "", nil, errCorruptBlock
		}
		p += w
		h, w := binary.Uvarint(b[p:])
		if w <= 0 {
			return "", nil, errCorruptBlock
		}
		p += w
		ts += d
		t = binary.BigEndian.AppendUint64(t[:0], ts)
		if h == 0 { // a version 7 UUID of the tail's time
			if len(b)-p < uuidPartLen-7 {
				return "", nil, errCorruptBlock
			}
			ms := uuidTime(ts)
			t = append(append(append(t, uuidTag), ms[:]...), b[p:p+uuidPartLen-7]...)
			p += uuidPartLen - 7
		} else {
			shared := h - 1
			rest, w := binary.Uvarint(b[p:])
			p += w
			prevLen := 0
			if len(prevTail) > keyenc.TimeLen {
				prevLen = len(prevTail) - keyenc.TimeLen
			}
			if w <= 0 || shared > uint64(prevLen) || rest > uint64(len(b)-p) {
				return "", nil, errCorruptBlock
			}
			if shared > 0 {
				t = append(t, prevTail[keyenc.TimeLen:keyenc.TimeLen+int(shared)]...)
			}
			t = append(t, b[p:p+int(rest)]...)
			p += int(rest)
		}
		if bound != "" && string(t) > bound {
			break
		}
		buf.Write(t)
		ends = append(ends, buf.Len())
		prevTail = append(prev[:0], t...)
	}
	return buf.String(), ends, nil
}

// blockList walks the blocks of one list newest first, at bounds that
// only go older (gramList merges it with the list's gram records).
type blockList struct {
	prefix string // the list's prefix
	// data and ends are the tails of the block at key, decoded up to the
	// bound it was read at (decodeTails); the first n are not yet passed.
	data string
	ends []int
	n    int
	key  string // the key of the last block read; "" before the first
	end  bool   // no older block
}

// tail returns the i-th tail of the block read.
func (l *blockList) tail(i int) string {
	start := 0
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.data[start:l.ends[i]]
}

// seek returns the newest tail of the list's blocks that is not newer
// than bound (any, when bound is ""), or strictly older when strict.
func (l *blockList) seek(r store.Reader, bound string, strict bool) (string, bool, error) {
	for {
		for l.n > 0 && bound != "" {
			if t := l.tail(l.n - 1); t < bound || !strict && t == bound {
				break
			}
			l.n--
		}
		if l.n > 0 {
			return l.tail(l.n - 1), true, nil
		}
		if l.end {
			return "", false, nil
		}
		start := ""
		if bound != "" {
			start = l.prefix + bound
		}
		skip := ""
		if l.key != "" && (start == "" || start >= l.key) {
			start, skip = l.key, l.key // the block just passed, and every newer one
		}
		var val []byte
		key := ""
		err := r.Scan(ColGramBlocks, l.prefix, &store.ScanOptions{Reverse: true, Start: start}, func(k string, v []byte) (bool, error) {
			if k == skip {
				return true, nil
			}
			key, val = k, v
			return false, nil
		})
		if err != nil {
			return "", false, err
		}
		if key == "" {
			l.end = true
			return "", false, nil
		}
		// Only the tails up to the bound: later seeks go older.
		if l.data, l.ends, err = decodeTails(val, bound, l.ends[:0]); err != nil {
			return "", false, fmt.Errorf("%w at %q", err, key)
		}
		l.key, l.n = key, len(l.ends)
	}
}
