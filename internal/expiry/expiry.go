// Package expiry is how records that expire are kept and removed, for the
// packages that keep such records in a store (webhook deliveries and
// registry tokens in controlplane, install states in githubapp).
//
// A record stored under key in a collection has beside it an index entry
// "e/<ts>/<key>", ts being Key of its expiry time, so the entries sort by
// expiry. Each Update that adds a record calls Sweep, which removes a few
// of the entries whose time has passed, each with its record: more than
// the Update adds, so expired records never pile up, and few, so that no
// Update grows large.
package expiry

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/deployplane/deployplane/store"
)

// Batch is how many expired records one Sweep removes at most.
const Batch = 8

// Key encodes t so that byte order is time order, as 16 hex digits.
func Key(t time.Time) string {
	return fmt.Sprintf("%016x", uint64(t.UnixMicro())^(1<<63))
}

// Entry is the index entry of the record under key that expires at t.
func Entry(t time.Time, key string) string { return "e/" + Key(t) + "/" + key }

// Sweep removes up to Batch index entries of col whose time is before
// cutoff (a Key), each with the record it names (already gone is fine).
func Sweep(tx store.Tx, col, cutoff string) error {
	var expired []string
	err := tx.Scan(col, "e/", nil, func(k string, _ []byte) (bool, error) {
		if k[2:] >= cutoff {
			return false, nil
		}
		expired = append(expired, k)
		return len(expired) < Batch, nil
	})
	if err != nil {
		return err
	}
	for _, k := range expired {
		_, rest, _ := strings.Cut(k[2:], "/")
		if err := tx.Delete(col, k); err != nil {
			return err
		}
		if err := tx.Delete(col, rest); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}
