package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// The name blocks are the index that answered name_contains before the
// gram index (grams.go): stores written by earlier builds hold them, and
// Migrate turns each into the gram records and order counts of its
// deployments (migrateNameBlocks). Until then, removing one of its
// deployments edits its block (removeName), and lists of a tenant that
// has blocks check names on the summaries. Each block is one record of
// cp_deployment_name_blocks: the lowercased names of up to nameBlockMax
// deployments joined by '\n', in the order of their order records
// (tenant prefix, timeKey, encID(id)); the block's key is the order key of its first
// deployment. So the k-th name of a block belongs to the k-th order record
// at or after the block's key, and a block need not repeat the ids: it is
// a few kilobytes, and one bytes.Index over it finds its matches. Names are
// immutable, so a block changed only when a deployment was created (one
// name inserted, the block split in two when full) or removed. Since every
// create rewrote the tenant's newest block, creates into one tenant
// conflicted with each other over storepg.
const nameBlockMax = 256

var errCorruptBlock = errors.New("controlplane: a name block names more deployments than there are")

// nameBlockAt finds the block that holds (or would hold) the deployment at
// orderKey: the last block whose key is <= orderKey, else the first block.
// key is "" when the tenant has no block.
func nameBlockAt(r store.Reader, tp, orderKey string) (key string, names []string, err error) {
	prefix := tp
	var val []byte
	take := func(k string, v []byte) (bool, error) { key, val = k, v; return false, nil }
	if err := r.Scan(colDeploymentNameBlocks, prefix, &store.ScanOptions{Reverse: true, Start: orderKey}, take); err != nil {
		return "", nil, err
	}
	if key == "" {
		if err := r.Scan(colDeploymentNameBlocks, prefix, nil, take); err != nil {
			return "", nil, err
		}
	}
	if key != "" {
		names = strings.Split(string(val), "\n")
	}
	return key, names, nil
}

// orderKeys calls fn with the order keys of the tenant (prefix tp) from
// start on (ascending), stopping when it returns stop.
func orderKeys(r store.Reader, tp, start string, fn func(i int, k string) (stop bool)) error {
	i := 0
	return r.Scan(colDeploymentOrder, tp, &store.ScanOptions{Start: start}, func(k string, _ []byte) (bool, error) {
		stop := fn(i, k)
		i++
		return !stop, nil
	})
}

// putNameBlocks replaces the block stored under old (if any) by names, the
// names of the order records from first on, split into blocks of at most
// nameBlockMax names.
func putNameBlocks(tx store.Tx, tp, old, first string, names []string) error {
	if old != "" {
		if err := tx.Delete(colDeploymentNameBlocks, old); err != nil {
			return err
		}
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) <= nameBlockMax {
		return tx.Put(colDeploymentNameBlocks, first, []byte(strings.Join(names, "\n")))
	}
	half := len(names) / 2
	var second string
	err := orderKeys(tx, tp, first, func(i int, k string) bool {
		second = k
		return i == half
	})
	if err != nil {
		return err
	}
	if err := tx.Put(colDeploymentNameBlocks, first, []byte(strings.Join(names[:half], "\n"))); err != nil {
		return err
	}
	return tx.Put(colDeploymentNameBlocks, second, []byte(strings.Join(names[half:], "\n")))
}

// removeName deletes the name of the deployment at orderKey from the name
// blocks; call it before deleting the order record.
func removeName(tx store.Tx, tp, orderKey string) error {
	key, names, err := nameBlockAt(tx, tp, orderKey)
	if err != nil || key == "" || key > orderKey {
		return err
	}
	i, next := -1, ""
	err = orderKeys(tx, tp, key, func(j int, k string) bool {
		if k == orderKey {
			i = j
			return false
		}
		if i >= 0 {
			next = k
			return true
		}
		return j >= len(names)
	})
	if err != nil || i < 0 || i >= len(names) {
		return err
	}
	first := key
	if i == 0 {
		first = next
	}
	return putNameBlocks(tx, tp, key, first, slices.Delete(names, i, i+1))
}

// migrateNameBlocks gives the deployments of each name block their gram
// records and order counts and deletes the block, one block per Update,
// until none is left; it returns how many deployments it indexed. Each
// Update is whole (the block goes with the records that replace it), so
// the work may stop anywhere and resume, and replicas may run it at once.
// A deployment already indexed (created by this build among the block's
// order records) is passed over, so none is counted twice.
func (cp *ControlPlane) migrateNameBlocks(ctx context.Context) (int, error) {
	total := 0
	for {
		n, more := 0, false
		err := cp.st.Update(ctx, func(tx store.Tx) error {
			n, more = 0, false
			var key string
			var val []byte
			err := tx.Scan(colDeploymentNameBlocks, "", nil, func(k string, v []byte) (bool, error) {
				if tenantPrefixLen(k) > 0 {
					key, val = k, v
				}
				return false, nil
			})
			if err != nil || key == "" {
				return err
			}
			more = true
			tp := key[:tenantPrefixLen(key)]
			want := bytes.Count(val, []byte{'\n'}) + 1
			for start := key; n < want && start != ""; {
				// A chunk of order keys from start; the members are
				// indexed once the scan is over (no write while it runs).
				var tails []string
				err = orderKeys(tx, tp, start, func(i int, k string) bool {
					tails = append(tails, k[len(tp):])
					return i == want-n+16
				})
				if err != nil {
					return err
				}
				start = ""
				if len(tails) > want-n+16 {
					start, tails = tp+tails[len(tails)-1], tails[:len(tails)-1]
				}
				if err := indexBlockMembers(tx, tp, tails, want, &n); err != nil {
					return err
				}
			}
			if n != want {
				return fmt.Errorf("%w (block %q: %d names, %d deployments)", errCorruptBlock, key, want, n)
			}
			return tx.Delete(colDeploymentNameBlocks, key)
		})
		if err != nil || !more {
			return total, err
		}
		total += n
	}
}

// indexBlockMembers gives the block members among tails (order tails,
// oldest first) their grams and counts, counting them in *n, until *n is
// want; tails already indexed are passed over.
func indexBlockMembers(tx store.Tx, tp string, tails []string, want int, n *int) error {
	for _, tail := range tails {
		if *n == want {
			return nil
		}
		sum, err := tx.Get(colDeploymentSums, tp+tail)
		if err != nil {
			return fmt.Errorf("controlplane: deployment %s has no summary record: %w", tailID(tail), err)
		}
		name, _, _ := strings.Cut(string(sum), "\x00")
		gen, err := gramsOf(tx, tp, tail, name)
		if err != nil {
			return err
		}
		if gen != gramsNone {
			continue
		}
		if err := putGrams(tx.Put, tp, tail, name); err != nil {
			return err
		}
		if err := addOrderCount(tx, tp, tail[:8], 1); err != nil {
			return err
		}
		*n++
	}
	return nil
}
