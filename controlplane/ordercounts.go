package controlplane

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/deployplane/deployplane/store"
)

// The order counts let an unfiltered page skip its offset in O(windows),
// not O(deployments). cp_deployment_counts holds, per tenant, how many
// order records fall in each window of creation time, at four sizes: the
// windows are the prefixes of 3, 4, 5 and 6 bytes of timeKey (about 12.7
// days, 71.6 minutes, 16.8 seconds and 65.5 ms). The key is the tenant
// prefix, the prefix length as one byte, and the prefix; the value is the
// count as a uvarint. Each deployment counts once at each size, written in
// the Update that writes or removes its order record, and a window whose
// count falls to zero is deleted.
//
// To skip an offset newest first, skipOrder walks the windows of 3 bytes
// newest first, subtracting whole windows, then descends into the window
// that holds the offset's place and does the same with its windows of 4,
// 5 and 6 bytes (at most 256 of each), and finally skips the rest over
// the order keys of one window of 65.5 ms. Creations bunched into one
// such window (a bulk import, a clock that stands still in tests) are
// skipped key by key, which is what every skip cost before.
const colDeploymentCounts = "cp_deployment_counts"

// countLevels are the prefix lengths of timeKey that are counted, widest
// first.
var countLevels = [...]int{3, 4, 5, 6}

var errCorruptCounts = errors.New("controlplane: the order counts disagree with each other")

// countKey is the key of the count of window ts[:level].
func countKey(tp, ts string, level int) string {
	return tp + string([]byte{byte(level)}) + ts[:level]
}

// addOrderCount adds delta to the counts of the windows holding ts (a
// deployment's timeKey).
func addOrderCount(tx store.Tx, tp, ts string, delta int64) error {
	for _, level := range countLevels {
		k := countKey(tp, ts, level)
		var n int64
		b, err := tx.Get(colDeploymentCounts, k)
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
			if err := tx.Delete(colDeploymentCounts, k); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			continue
		}
		if err := tx.Put(colDeploymentCounts, k, binary.AppendVarint(nil, n)); err != nil {
			return err
		}
	}
	return nil
}

// skipOrder finds where a newest-first walk of the tenant's order records
// is after skipping offset of them: it returns start, a Start for a
// reverse Scan of colDeploymentOrder (the newest key of one window; ""
// when the offset is past the last record) and rest, how many records to
// skip from there.
func skipOrder(r store.Reader, tp string, offset int) (start string, rest int, err error) {
	rem := int64(offset)
	window := ""
	for _, level := range countLevels {
		prefix := tp + string([]byte{byte(level)}) + window
		chosen := ""
		err := r.Scan(colDeploymentCounts, prefix, &store.ScanOptions{Reverse: true}, func(k string, v []byte) (bool, error) {
			n, w := binary.Varint(v)
			if w <= 0 {
				return false, fmt.Errorf("%w: malformed count %q", errCorruptCounts, v)
			}
			if n <= rem {
				rem -= n
				return true, nil
			}
			chosen = k[len(tp)+1:]
			return false, nil
		})
		if err != nil {
			return "", 0, err
		}
		if chosen == "" {
			if level != countLevels[0] {
				return "", 0, errCorruptCounts
			}
			return "", 0, nil // past the end
		}
		window = chosen
	}
	// The newest key of the window: its remaining bytes of timeKey, then
	// an id's tag byte (0x01 or 0x02), all below 0xff.
	return tp + window + "\xff\xff\xff", int(rem), nil
}
