package controlplane

import (
	"bytes"
	"slices"
	"strings"

	"github.com/deployplane/deployplane/store"
)

// The name blocks are the compact index that answers name_contains, a
// substring filter no key prefix can answer. Each block is one record of
// cp_deployment_name_blocks holding up to nameBlockMax entries
// "tail\x00lowercased name", sorted by tail (createdKey/id, the order of
// the deployment order records), joined by '\n'; its key is tenant/ and
// the block's first tail. Names are immutable, so a block changes only
// when a deployment is created (one entry inserted, the block split in two
// when full) or removed. A name_contains list reads the blocks newest first
// and matches names in place: about 400 records for 100k deployments
// instead of 100k.
const nameBlockMax = 256

// nameBlockAt finds the block that holds (or would hold) tail: the last
// block whose key is <= tail, else the first block. key is "" when the
// tenant has no block.
func nameBlockAt(r store.Reader, tenant, tail string) (key string, val []byte, err error) {
	prefix := tenant + "/"
	take := func(k string, v []byte) (bool, error) { key, val = k, v; return false, nil }
	if err := r.Scan(colDeploymentNameBlocks, prefix, &store.ScanOptions{Reverse: true, Start: prefix + tail}, take); err != nil {
		return "", nil, err
	}
	if key == "" {
		err = r.Scan(colDeploymentNameBlocks, prefix, nil, take)
	}
	return key, val, err
}

func splitBlock(v []byte) []string {
	if len(v) == 0 {
		return nil
	}
	return strings.Split(string(v), "\n")
}

// putNameBlocks replaces the block stored under old (if any) by es, split
// into blocks of at most nameBlockMax entries.
func putNameBlocks(tx store.Tx, tenant, old string, es []string) error {
	if old != "" {
		if err := tx.Delete(colDeploymentNameBlocks, old); err != nil {
			return err
		}
	}
	for len(es) > 0 {
		n := len(es)
		if n > nameBlockMax {
			n = len(es) / 2
		}
		first, _, _ := strings.Cut(es[0], "\x00")
		if err := tx.Put(colDeploymentNameBlocks, tenant+"/"+first, []byte(strings.Join(es[:n], "\n"))); err != nil {
			return err
		}
		es = es[n:]
	}
	return nil
}

// addName inserts a deployment's entry into the name blocks.
func addName(tx store.Tx, tenant, tail, name string) error {
	key, val, err := nameBlockAt(tx, tenant, tail)
	if err != nil {
		return err
	}
	es := splitBlock(val)
	entry := tail + "\x00" + strings.ToLower(name)
	i, _ := slices.BinarySearch(es, entry)
	return putNameBlocks(tx, tenant, key, slices.Insert(es, i, entry))
}

// removeName deletes a deployment's entry from the name blocks.
func removeName(tx store.Tx, tenant, tail string) error {
	key, val, err := nameBlockAt(tx, tenant, tail)
	if err != nil {
		return err
	}
	es := splitBlock(val)
	i := slices.IndexFunc(es, func(e string) bool { return strings.HasPrefix(e, tail+"\x00") })
	if i < 0 {
		return nil
	}
	return putNameBlocks(tx, tenant, key, slices.Delete(es, i, i+1))
}

// scanNames calls fn with the tail of every deployment of the tenant whose
// lowercased name contains needle (lowercase), newest first, until fn
// returns false.
func scanNames(r store.Reader, tenant, needle string, fn func(tail string) (bool, error)) error {
	nb := []byte(needle)
	return r.Scan(colDeploymentNameBlocks, tenant+"/", &store.ScanOptions{Reverse: true}, func(_ string, v []byte) (bool, error) {
		for end := len(v); end > 0; {
			start := bytes.LastIndexByte(v[:end], '\n') + 1
			e := v[start:end]
			end = start - 1
			sep := bytes.IndexByte(e, 0)
			if sep < 0 || !bytes.Contains(e[sep+1:], nb) {
				continue
			}
			if more, err := fn(string(e[:sep])); !more || err != nil {
				return false, err
			}
		}
		return true, nil
	})
}
