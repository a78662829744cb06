package controlplane

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// migrateBatchSize is how many records one Update of Migrate moves (a
// variable for the tests).
var migrateBatchSize = 512

// Migrate brings records written by earlier builds into the current key
// layout, and does nothing when there are none. Call it once after
// opening a store that an earlier build wrote, before serving from it;
// cmd/deployplane does so at every start. It works in batches of a few
// hundred records, each its own Update that writes the new records and
// deletes the old ones, so it may be stopped at any point (a crash, a
// cancelled ctx) and run again to carry on, and several replicas sharing
// one storepg database may run it at once (their batches serialize; each
// record moves once). Until it has finished, reads do not see the records
// not yet moved, and the worker reports pending work in the old layout
// as an error.
//
// The old layout keyed the deployment collections by the tenant's name,
// the ids' text and 16-hex-digit times joined with "/"; the current one
// (records.go, keys.go) uses a per-tenant prefix, 16-byte ids and 8-byte
// times. Record values are unchanged.
//
// Then it replaces the name blocks that earlier builds kept for
// name_contains (nameblocks.go) by the gram index (grams.go) and the order
// counts (ordercounts.go), one block of up to 256 deployments per Update,
// resumable and safe to run from several replicas the same way. Until a
// tenant has no block left, its lists check names on the summaries and
// skip offsets record by record (correct, at the earlier cost).
//
// Last, it replaces the unpositioned trigram records of earlier builds
// (cp_deployment_grams) by the positioned grams (grams.go), a batch of
// deployments per Update, resumable the same way; until a tenant has none
// left, name_contains checks its names on the summaries.
func (cp *ControlPlane) Migrate(ctx context.Context) error {
	for _, m := range []struct {
		col, prefix string
		conv        func(tx store.Tx, k string, parts []string) (string, error)
	}{
		{colDeployments, "", cp.migrateDeploymentKey},
		{colDeploymentOrder, "", cp.migrateOrderKey},
		{colDeploymentSums, "", cp.migrateOrderKey},
		{colDeploymentNameBlocks, "", cp.migrateOrderKey},
		{colDeploymentIndex, "", cp.migrateIndexKey},
		{colDeploymentNames, "", cp.migrateNameKey},
		{colRevisions, "", cp.migrateRevisionKey},
		{colRevisionOrder, "", cp.migrateRevisionOrderKey},
		{colTracingProjects, "", cp.migrateDeploymentKey},
		{colPending, pendingRevision + "/", cp.migratePendingKey(pendingRevision)},
		{colPending, pendingDelete + "/", cp.migratePendingKey(pendingDelete)},
	} {
		old := false
		err := cp.st.View(ctx, func(r store.Reader) error { // a migrated store writes nothing
			return r.Scan(m.col, m.prefix, &store.ScanOptions{Start: oldKeyStart}, func(string, []byte) (bool, error) {
				old = true
				return false, nil
			})
		})
		if err != nil {
			return cp.storeErr("migrate "+m.col, err)
		}
		for old {
			n, err := cp.migrateBatch(ctx, m.col, m.prefix, m.conv)
			if err != nil {
				return cp.storeErr("migrate "+m.col, err)
			}
			if n > 0 {
				cp.log.Info("controlplane: migrated records to the current key layout", "collection", m.col, "records", n)
			}
			old = n == migrateBatchSize
		}
	}
	var blocks bool
	err := cp.st.View(ctx, func(r store.Reader) error {
		return r.Scan(colDeploymentNameBlocks, "", nil, func(string, []byte) (bool, error) {
			blocks = true
			return false, nil
		})
	})
	if err != nil {
		return cp.storeErr("migrate "+colDeploymentNameBlocks, err)
	}
	if blocks {
		n, err := cp.migrateNameBlocks(ctx) // nameblocks.go
		if err != nil {
			return cp.storeErr("migrate "+colDeploymentNameBlocks, err)
		}
		cp.log.Info("controlplane: moved name blocks to the gram index and order counts", "deployments", n)
	}
	n, err := cp.migrateGramsV1(ctx) // grams.go; after the blocks, which index at once in the current grams
	if err != nil {
		return cp.storeErr("migrate "+colDeploymentGramsV1, err)
	}
	if n > 0 {
		cp.log.Info("controlplane: moved the trigram index to positioned grams", "deployments", n)
	}
	cp.notify()
	return nil
}

// oldKeyStart is where keys of the old layout begin: a tenant's name
// starts with a printable byte, a tenant prefix with 0x01-0x1f.
const oldKeyStart = " "

// migrateBatch moves up to migrateBatchSize old records of col (with prefix)
// and returns how many it moved.
func (cp *ControlPlane) migrateBatch(ctx context.Context, col, prefix string, conv func(store.Tx, string, []string) (string, error)) (int, error) {
	var n int
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		n = 0
		type rec struct {
			k string
			v []byte
		}
		var recs []rec
		err := tx.Scan(col, prefix, &store.ScanOptions{Start: oldKeyStart}, func(k string, v []byte) (bool, error) {
			recs = append(recs, rec{k, v})
			return len(recs) < migrateBatchSize, nil
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			nk, err := conv(tx, r.k, strings.Split(r.k[len(prefix):], "/"))
			if err != nil {
				return err
			}
			v := r.v
			if col == colDeploymentNames {
				v = nil // the name record's presence is all it says
			}
			if err := tx.Put(col, nk, v); err != nil {
				return err
			}
			if err := tx.Delete(col, r.k); err != nil {
				return err
			}
		}
		n = len(recs)
		return nil
	})
	return n, err
}

var errOldKey = errors.New("controlplane: a key of the earlier layout is malformed")

func oldKeyErr(k string) error { return fmt.Errorf("%w: %q", errOldKey, k) }

// oldTime converts a 16-hex-digit createdKey to its timeKey.
func oldTime(s string) (string, bool) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 8 {
		return "", false
	}
	return string(b), true
}

// tenant/id
func (cp *ControlPlane) migrateDeploymentKey(tx store.Tx, k string, p []string) (string, error) {
	if len(p) != 2 {
		return "", oldKeyErr(k)
	}
	tp, err := cp.writeTenant(tx, p[0])
	return deploymentKey(tp, p[1]), err
}

// tenant/ts/id
func (cp *ControlPlane) migrateOrderKey(tx store.Tx, k string, p []string) (string, error) {
	ts, ok := oldTime(p[min(1, len(p)-1)])
	if len(p) != 3 || !ok {
		return "", oldKeyErr(k)
	}
	tp, err := cp.writeTenant(tx, p[0])
	return tp + ts + encID(p[2]), err
}

// tenant/field/value/ts/id
func (cp *ControlPlane) migrateIndexKey(tx store.Tx, k string, p []string) (string, error) {
	if len(p) != 5 {
		return "", oldKeyErr(k)
	}
	ts, ok := oldTime(p[3])
	field, known := map[string]string{"status": idxStatus, "type": idxType, "source": idxSource, "image": idxImage,
		"tag": idxTag, "listener": idxListener, "push": idxPush}[p[1]]
	if !ok || !known {
		return "", oldKeyErr(k)
	}
	value := p[2]
	if field == idxImage {
		var err error
		if value, err = url.QueryUnescape(value); err != nil {
			return "", oldKeyErr(k)
		}
	}
	tp, err := cp.writeTenant(tx, p[0])
	return indexPrefix(tp, field, value) + ts + encID(p[4]), err
}

// tenant/name (names hold no "/")
func (cp *ControlPlane) migrateNameKey(tx store.Tx, k string, p []string) (string, error) {
	if len(p) != 2 {
		return "", oldKeyErr(k)
	}
	tp, err := cp.writeTenant(tx, p[0])
	return tp + p[1], err
}

// tenant/deployment/id
func (cp *ControlPlane) migrateRevisionKey(tx store.Tx, k string, p []string) (string, error) {
	if len(p) != 3 {
		return "", oldKeyErr(k)
	}
	tp, err := cp.writeTenant(tx, p[0])
	return revisionKey(tp, p[1], p[2]), err
}

// tenant/deployment/ts/id
func (cp *ControlPlane) migrateRevisionOrderKey(tx store.Tx, k string, p []string) (string, error) {
	if len(p) != 4 {
		return "", oldKeyErr(k)
	}
	ts, ok := oldTime(p[2])
	if !ok {
		return "", oldKeyErr(k)
	}
	tp, err := cp.writeTenant(tx, p[0])
	return deploymentKey(tp, p[1]) + ts + encID(p[3]), err
}

// r/tenant/deployment/ts/revision and d/tenant/deployment
func (cp *ControlPlane) migratePendingKey(kind string) func(store.Tx, string, []string) (string, error) {
	return func(tx store.Tx, k string, p []string) (string, error) {
		if kind == pendingDelete {
			nk, err := cp.migrateDeploymentKey(tx, k, p)
			return pendingDelete + nk, err
		}
		nk, err := cp.migrateRevisionOrderKey(tx, k, p)
		return pendingRevision + nk, err
	}
}
