package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

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
// about 15 bytes each: the time key as a delta from the previous tail's,
// the id part as the bytes it does not share with the previous one's.
//
// # Records
//
//	cp_deployment_gram_blocks  T gram place first -> block
//
// A block holds the tails of one list (a gram at a place) from first, its
// oldest, up to the next block's first, oldest first: a format byte (1),
// then for each tail the uvarint of its time key less the previous tail's
// (the time keys as big-endian numbers; the first tail's less 0), the
// uvarint of how many bytes of id part it shares with the previous
// tail's, the uvarint of the count of the other bytes, and those bytes.
// Blocks hold at most FoldOptions.BlockTails tails (default
// DefaultBlockTails).
//
// Put writes a new entry's gram records as ever (cp_deployment_pgrams,
// one record per gram and place, written by no other entry: creates do
// not conflict on a shared block), and FoldGrams moves them into the
// blocks later, as FoldCounts folds the counts' changes: the caller runs
// both out of the way of the writes (controlplane's sequencer). A tail is
// in a gram record or in a block, never both, and every walk of a list
// (gramList) merges the two, newest first, so a list answers the same
// whatever has been folded. Remove deletes an entry's gram record, or
// takes its tail out of its block (a read and a write of the block).
//
// A store written before the blocks existed holds gram records only: it
// reads as it did, and FoldGrams packs its records as it packs new ones.

// ColGramBlocks is the collection of the gram blocks.
const ColGramBlocks = "cp_deployment_gram_blocks"

// DefaultBlockTails is the most tails of a gram block by default.
const DefaultBlockTails = 64

// blockFormat is the first byte of a gram block.
const blockFormat = 1

var errCorruptBlock = errors.New("index: a malformed gram block")

// FoldOptions tune FoldGrams. Zero fields take the defaults.
type FoldOptions struct {
	// Batch is the most gram records folded in one Update. Default 1024.
	Batch int
	// BlockTails is the most tails of a block. Default DefaultBlockTails.
	BlockTails int
}

// FoldGrams moves the gram records of every tenant into the gram blocks,
// o.Batch of them per Update of st, until none is left; nil o means the
// defaults.
func FoldGrams(ctx context.Context, st store.Store, o *FoldOptions) error {
	batch, most := 1024, DefaultBlockTails
	if o != nil {
		batch, most = cmpOr(o.Batch, batch), cmpOr(o.BlockTails, most)
	}
	for {
		n := 0
		err := st.Update(ctx, func(tx store.Tx) error {
			lists := map[string][]string{} // list prefix -> tails, oldest first
			var keys []string
			err := tx.Scan(ColGrams, "", nil, func(k string, _ []byte) (bool, error) {
				n := keyenc.TenantLen(k)
				if n == 0 || len(k) < n+gramLen+1+9 {
					return false, fmt.Errorf("%w: a malformed gram record %q", errCorruptBlock, k)
				}
				l := k[:n+gramLen+1]
				lists[l] = append(lists[l], k[len(l):])
				keys = append(keys, k)
				return len(keys) < batch, nil
			})
			if err != nil {
				return err
			}
			n = len(keys)
			for _, l := range slices.Sorted(maps.Keys(lists)) {
				if err := insertTails(tx, l, lists[l], most); err != nil {
					return err
				}
			}
			for _, k := range keys {
				if err := store.Discard(tx, ColGrams, k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || n < batch {
			return err
		}
	}
}

// cmpOr is v, or def when v is not positive.
func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
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

// removeFromBlock takes tail out of its block of the list at prefix l,
// if a block holds it.
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
	if len(tails) == 0 {
		return nil
	}
	return tx.Put(ColGramBlocks, l+tails[0], encodeBlock(tails))
}

// encodeBlock encodes tails (ascending) as a block.
func encodeBlock(tails []string) []byte {
	b := make([]byte, 1, 1+16*len(tails))
	b[0] = blockFormat
	var prevTS uint64
	prevID := ""
	for _, t := range tails {
		ts, id := binary.BigEndian.Uint64([]byte(t[:keyenc.TimeLen])), t[keyenc.TimeLen:]
		shared := 0
		for shared < len(id) && shared < len(prevID) && id[shared] == prevID[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, ts-prevTS)
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(id)-shared))
		b = append(b, id[shared:]...)
		prevTS, prevID = ts, id
	}
	return b
}

// decodeBlock returns the tails of a block, ascending. They share one
// allocation of their bytes.
func decodeBlock(b []byte) ([]string, error) {
	if len(b) == 0 || b[0] != blockFormat {
		return nil, errCorruptBlock
	}
	var buf []byte
	var ends []int
	var ts uint64
	prevID := 0 // where the previous tail's id part starts in buf
	for p := 1; p < len(b); {
		d, w1 := binary.Uvarint(b[p:])
		if w1 <= 0 {
			return nil, errCorruptBlock
		}
		shared, w2 := binary.Uvarint(b[p+w1:])
		if w2 <= 0 {
			return nil, errCorruptBlock
		}
		rest, w3 := binary.Uvarint(b[p+w1+w2:])
		p += w1 + w2 + w3
		prevLen := 0
		if len(ends) > 0 {
			prevLen = ends[len(ends)-1] - prevID
		}
		if w3 <= 0 || shared > uint64(prevLen) || rest > uint64(len(b)-p) {
			return nil, errCorruptBlock
		}
		ts += d
		start := len(buf)
		buf = binary.BigEndian.AppendUint64(buf, ts)
		buf = append(buf, buf[prevID:prevID+int(shared)]...)
		buf = append(buf, b[p:p+int(rest)]...)
		p += int(rest)
		prevID = start + keyenc.TimeLen
		ends = append(ends, len(buf))
	}
	s := string(buf)
	tails := make([]string, len(ends))
	start := 0
	for i, e := range ends {
		tails[i] = s[start:e]
		start = e
	}
	return tails, nil
}

// blockList walks the blocks of one list newest first, at bounds that
// only go older (gramList merges it with the list's gram records).
type blockList struct {
	prefix string
	buf    []string // tails of the block at key not yet passed, newest first
	key    string   // the key of the last block read; "" before the first
	end    bool     // no older block
}

// seek returns the newest tail of the list's blocks that is not newer
// than bound (any, when bound is ""), or strictly older when strict.
func (l *blockList) seek(r store.Reader, bound string, strict bool) (string, bool, error) {
	for {
		for len(l.buf) > 0 && bound != "" && (l.buf[0] > bound || strict && l.buf[0] == bound) {
			l.buf = l.buf[1:]
		}
		if len(l.buf) > 0 {
			return l.buf[0], true, nil
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
		tails, err := decodeBlock(val)
		if err != nil {
			return "", false, fmt.Errorf("%w at %q", err, key)
		}
		slices.Reverse(tails)
		l.key, l.buf = key, tails
	}
}
