package controlplane

import (
	"bytes"
	"errors"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// The name blocks are the compact index that answers name_contains, a
// substring filter no key prefix can answer. Each block is one record of
// cp_deployment_name_blocks: the lowercased names of up to nameBlockMax
// deployments joined by '\n', in the order of their order records
// (tenant prefix, timeKey, encID(id)); the block's key is the order key of its first
// deployment. So the k-th name of a block belongs to the k-th order record
// at or after the block's key, and a block need not repeat the ids: it is
// a few kilobytes, and one bytes.Index over it finds its matches. Names are
// immutable, so a block changes only when a deployment is created (one name
// inserted, the block split in two when full) or removed. A name_contains
// list reads the blocks newest first, about 400 records for 100k
// deployments, and resolves only the matches to order keys.
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

// addName inserts the name of the deployment at orderKey, whose order
// record is already written, into the name blocks.
func addName(tx store.Tx, tp, orderKey, name string) error {
	key, names, err := nameBlockAt(tx, tp, orderKey)
	if err != nil {
		return err
	}
	first, i := orderKey, 0
	if key != "" && key < orderKey {
		first = key
		// Its place: the number of order records in [key, orderKey).
		err := orderKeys(tx, tp, key, func(j int, k string) bool {
			i = j
			return k >= orderKey
		})
		if err != nil {
			return err
		}
	}
	return putNameBlocks(tx, tp, key, first, slices.Insert(names, i, strings.ToLower(name)))
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

// scanNames calls fn with the order key of every deployment of the tenant
// whose lowercased name contains needle (lowercase, non-empty), newest
// first, until fn returns false.
func scanNames(r store.Reader, tp, needle string, fn func(orderKey string) (bool, error)) error {
	for i := 0; i < len(needle); i++ {
		if b := needle[i]; !isAlnum(b) && b != '.' && b != '_' && b != '-' {
			return nil // no name holds this byte
		}
	}
	nb := []byte(needle)
	var hits []int // name indexes of the block's matches
	return r.Scan(colDeploymentNameBlocks, tp, &store.ScanOptions{Reverse: true}, func(key string, names []byte) (bool, error) {
		hits = hits[:0]
		entry, counted := 0, 0
		for from := 0; ; {
			j := bytes.Index(names[from:], nb)
			if j < 0 {
				break
			}
			at := from + j
			entry += bytes.Count(names[counted:at], []byte{'\n'})
			counted = at
			hits = append(hits, entry)
			next := bytes.IndexByte(names[at:], '\n')
			if next < 0 {
				break
			}
			from = at + next + 1 // one hit per name
		}
		if len(hits) == 0 {
			return true, nil
		}
		keys := make([]string, 0, len(hits))
		err := orderKeys(r, tp, key, func(i int, k string) bool {
			if i == hits[len(keys)] {
				keys = append(keys, k)
			}
			return len(keys) == len(hits)
		})
		if err != nil {
			return false, err
		}
		if len(keys) != len(hits) {
			return false, errCorruptBlock
		}
		for _, k := range slices.Backward(keys) {
			if more, err := fn(k); !more || err != nil {
				return false, err
			}
		}
		return true, nil
	})
}
