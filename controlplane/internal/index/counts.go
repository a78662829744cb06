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

// The order counts let an unfiltered page skip its offset in O(windows),
// not O(entries). cp_deployment_counts holds, per tenant, how many
// order records fall in each window of creation time, at four sizes: the
// windows are the prefixes of 3, 4, 5 and 6 bytes of the time key (about
// 12.7 days, 71.6 minutes, 16.8 seconds and 65.5 ms). The key is the tenant
// prefix, the prefix length as one byte, and the prefix; the value is the
// count as a uvarint. Each entry counts once at each size, written in
// the Update that writes or removes its order record, and a window whose
// count falls to zero is deleted.
//
// To skip an offset newest first, skipOrder walks the windows of 3 bytes
// newest first, subtracting whole windows, then descends into the window
// that holds the offset's place and does the same with its windows of 4,
// 5 and 6 bytes (at most 256 of each), and finally skips the rest over
// the order keys of one window of 65.5 ms. Creations bunched into one
// such window (a bulk import, a clock that stands still in tests) are
// skipped key by key.
//
// A Put of a new entry or a Remove does not touch the counts: it writes a
// pending change, its own record in cp_deployment_count_changes (the
// tenant prefix, the entry's tail, then '+' or '-'), which reads nothing
// and which no other entry's change writes. Counts that every create of
// the same 65 ms (and every create of the same 12.7 days) read and wrote
// would make creates into one tenant conflict with each other under
// PostgreSQL's serializable transactions. Fold folds the pending
// changes into the counts in batches (in one Update, it adds them and
// deletes them), and skipOrder adds the pending changes it reads in its
// own transaction to the counts it reads: a change is either pending or
// folded, never both, so the skip stays exact. The caller keeps the
// pending changes few by running Fold often, out of the way of the
// writes (controlplane's sequencer does, with the events it numbers).

// countLevels are the prefix lengths of the time key that are counted,
// widest first.
var countLevels = [...]int{3, 4, 5, 6}

var errCorruptCounts = errors.New("index: the order counts disagree with each other")

// countKey is the key of the count of window ts[:level].
func countKey(tp, ts string, level int) string {
	return tp + string([]byte{byte(level)}) + ts[:level]
}

// countChange records with write (a Tx's Put, or store.Insert for a new
// entry's) a pending change of the counts: +1 (added) or -1 for the entry
// at tail.
func countChange(write writeFunc, tp, tail string, added bool) error {
	sign := "-"
	if added {
		sign = "+"
	}
	return write(ColCountChanges, tp+tail+sign, nil)
}

// FoldOptions tune Fold. Zero fields take the defaults.
type FoldOptions struct {
	// Batch is the most pending changes folded in one Update. Default
	// 1024.
	Batch int
	// BlockTails is the most tails of a gram block (gramblocks.go).
	// Default DefaultBlockTails.
	BlockTails int
}

// Fold folds the pending changes of the order counts of every tenant
// into the counts, and packs the gram records of each entry added into
// the gram blocks (gramblocks.go), at most o.Batch changes per Update of
// st, until none is left; nil o means the defaults.
func Fold(ctx context.Context, st store.Store, o *FoldOptions) error {
	batch, most := 1024, DefaultBlockTails
	if o != nil {
		if o.Batch > 0 {
			batch = o.Batch
		}
		if o.BlockTails > 0 {
			most = o.BlockTails
		}
	}
	for {
		n := 0
		err := st.Update(ctx, func(tx store.Tx) error {
			sums := map[string]int64{}
			var keys []string
			lists := map[string][]string{}
			var grams []string
			err := tx.Scan(ColCountChanges, "", nil, func(k string, _ []byte) (bool, error) {
				tp, ts, delta, err := parseCountChange(k)
				if err != nil {
					return false, err
				}
				for _, level := range countLevels {
					sums[countKey(tp, ts, level)] += delta
				}
				if delta > 0 {
					if err := packGrams(tx, tp, k[len(tp):len(k)-1], lists, &grams); err != nil {
						return false, err
					}
				}
				keys = append(keys, k)
				return len(keys) < batch, nil
			})
			if err != nil {
				return err
			}
			n = len(keys)
			if err := putBlocks(tx, lists, grams, most); err != nil {
				return err
			}
			for _, k := range slices.Sorted(maps.Keys(sums)) {
				if err := addCount(tx, k, sums[k]); err != nil {
					return err
				}
			}
			for _, k := range keys {
				// A Discard: the key was just read, and a store may send
				// a run of Discards at once.
				if err := store.Discard(tx, ColCountChanges, k); err != nil {
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

// parseCountChange splits a key of cp_deployment_count_changes into the
// tenant prefix, the time key, and the change.
func parseCountChange(k string) (tp, ts string, delta int64, err error) {
	n := keyenc.TenantLen(k)
	if n <= 0 || len(k) < n+8+1 {
		return "", "", 0, fmt.Errorf("%w: a malformed pending change %q", errCorruptCounts, k)
	}
	switch k[len(k)-1] {
	case '+':
		delta = 1
	case '-':
		delta = -1
	default:
		return "", "", 0, fmt.Errorf("%w: a malformed pending change %q", errCorruptCounts, k)
	}
	return k[:n], k[n : n+8], delta, nil
}

// addCount adds delta to the count under k, deleting it at zero.
func addCount(tx store.Tx, k string, delta int64) error {
	var n int64
	b, err := tx.Get(ColCounts, k)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		v, w := binary.Varint(b)
		if w <= 0 {
			return fmt.Errorf("%w: malformed count %q", errCorruptCounts, b)
		}
		n = v
	}
	n += delta
	if n <= 0 {
		if err := tx.Delete(ColCounts, k); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	}
	return tx.Put(ColCounts, k, binary.AppendVarint(nil, n))
}

// skipOrder finds where a newest-first walk of the tenant's order records
// is after skipping offset of them: it returns start, a Start for a
// reverse Scan of ColOrder (the newest key of one window; ""
// when the offset is past the last record) and rest, how many records to
// skip from there. The counts it walks are the folded counts plus the
// pending changes, merged window by window as the counts are scanned.
func skipOrder(r store.Reader, tp string, offset int) (start string, rest int, err error) {
	var pending []pendingChange // by time key, oldest first
	err = r.Scan(ColCountChanges, tp, nil, func(k string, _ []byte) (bool, error) {
		_, ts, delta, err := parseCountChange(k)
		if err != nil {
			return false, err
		}
		pending = append(pending, pendingChange{ts, delta})
		return true, nil
	})
	if err != nil {
		return "", 0, err
	}
	rem := int64(offset)
	window := ""
	for _, level := range countLevels {
		prefix := tp + string([]byte{byte(level)}) + window
		pw := pendingWindows(pending, window, level) // newest first
		chosen := ""
		visit := func(w string, n int64) bool {
			if n <= 0 {
				return true
			}
			if n <= rem {
				rem -= n
				return true
			}
			chosen = w
			return false
		}
		more := true
		err := r.Scan(ColCounts, prefix, &store.ScanOptions{Reverse: true}, func(k string, v []byte) (bool, error) {
			n, w := binary.Varint(v)
			if w <= 0 {
				return false, fmt.Errorf("%w: malformed count %q", errCorruptCounts, v)
			}
			win := k[len(tp)+1:]
			for len(pw) > 0 && pw[0].ts > win { // windows only pending changes hold
				if more = visit(pw[0].ts, pw[0].delta); !more {
					return false, nil
				}
				pw = pw[1:]
			}
			if len(pw) > 0 && pw[0].ts == win {
				n += pw[0].delta
				pw = pw[1:]
			}
			more = visit(win, n)
			return more, nil
		})
		if err != nil {
			return "", 0, err
		}
		for ; more && len(pw) > 0; pw = pw[1:] {
			more = visit(pw[0].ts, pw[0].delta)
		}
		if chosen == "" {
			if level != countLevels[0] {
				return "", 0, errCorruptCounts
			}
			return "", 0, nil // past the end
		}
		window = chosen
	}
	// The newest key of the window: its remaining bytes of time key, then
	// the first byte of an id part, which is below 0xff.
	return tp + window + "\xff\xff\xff", int(rem), nil
}

// pendingChange is a pending change of the counts: an entry's time key
// and +1 or -1. In pendingWindows' answer, ts is a window (a prefix of
// time keys) and delta the sum of its changes.
type pendingChange struct {
	ts    string
	delta int64
}

// pendingWindows sums the pending changes (oldest first) under window by
// their windows of level bytes, newest window first.
func pendingWindows(pending []pendingChange, window string, level int) []pendingChange {
	var out []pendingChange
	for i := len(pending) - 1; i >= 0; i-- {
		p := pending[i]
		if p.ts[:len(window)] != window {
			continue
		}
		w := p.ts[:level]
		if len(out) > 0 && out[len(out)-1].ts == w {
			out[len(out)-1].delta += p.delta
			continue
		}
		out = append(out, pendingChange{w, p.delta})
	}
	return out
}
