// Package answercache keeps answers made of stored records: each answer
// beside the bytes of the record it was made from, served again only
// while the store holds those very bytes.
//
// An answer must be a function of a record's bytes, its tenant and id
// (and of what is fixed for the cache's life), nothing else. A read still
// goes to the store and asks Get with the record it found: the kept
// answer is served only when that record is byte for byte the one it was
// made from. Every write of a record rewrites or deletes it, so the next
// read sees it, through this cache or any other over the same store, with
// nothing to invalidate (a rewrite that leaves the bytes as they were
// changes no answer either); a record found missing is Dropped.
//
// A Cache is bounded by bytes (approximately: an entry counts its bytes
// and a fixed overhead), spread over shards with a lock each, so that
// reads of different records do not share one; a full shard drops
// entries at random. It is safe for concurrent use.
package answercache

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync"
)

// Cache keeps answers, at most about its limit in bytes.
type Cache struct {
	seed     maphash.Seed
	maxShard int // bytes per shard; 0: no cache
	shards   [shards]shard
}

// shards spreads the entries over locks.
const shards = 16

type shard struct {
	mu    sync.RWMutex
	m     map[string]*entry // by id
	bytes int               // the size of the entries in m
}

// entry is the answer of the record stored of id of tenant.
type entry struct {
	tenant string
	stored []byte
	answer []byte
}

// overhead approximates the memory of an entry beyond its bytes (the map
// slot, the struct, the id and slice headers).
const overhead = 128

func (e *entry) size(id string) int {
	return len(id) + len(e.tenant) + len(e.stored) + len(e.answer) + overhead
}

// New returns a cache of at most limit bytes (approximately); limit <= 0
// keeps nothing.
func New(limit int) *Cache {
	c := &Cache{seed: maphash.MakeSeed()}
	if limit > 0 {
		c.maxShard = max(limit/shards, 1)
	}
	return c
}

func (c *Cache) shard(id string) *shard {
	return &c.shards[maphash.String(c.seed, id)%shards]
}

// Get returns the answer kept for id of tenant when it was made from the
// record stored; nil otherwise. The caller must not modify it.
func (c *Cache) Get(tenant, id string, stored []byte) []byte {
	if c.maxShard == 0 {
		return nil
	}
	s := c.shard(id)
	s.mu.RLock()
	e := s.m[id]
	s.mu.RUnlock()
	if e == nil || e.tenant != tenant || !bytes.Equal(e.stored, stored) {
		return nil
	}
	return e.answer
}

// Put keeps answer, made from the record stored of id of tenant, in place
// of any answer kept for id, copying stored (a store's bytes may be valid
// only during its transaction) and owning answer from now on. An entry
// larger than a quarter of its shard is not kept.
func (c *Cache) Put(tenant, id string, stored, answer []byte) {
	if c.maxShard == 0 {
		return
	}
	// The strings may be parts of larger ones (a request's path).
	id = strings.Clone(id)
	e := &entry{tenant: strings.Clone(tenant), stored: bytes.Clone(stored), answer: answer}
	n := e.size(id)
	if n > c.maxShard/4 {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[id]; old != nil {
		s.bytes -= old.size(id)
		delete(s.m, id)
	}
	for k, old := range s.m { // map order is random: drop entries at random
		if s.bytes+n <= c.maxShard {
			break
		}
		s.bytes -= old.size(k)
		delete(s.m, k)
	}
	if s.m == nil {
		s.m = map[string]*entry{}
	}
	s.m[id] = e
	s.bytes += n
}

// Drop forgets the answer kept for id (its record was not found).
func (c *Cache) Drop(id string) {
	if c.maxShard == 0 {
		return
	}
	s := c.shard(id)
	s.mu.Lock()
	if old := s.m[id]; old != nil {
		s.bytes -= old.size(id)
		delete(s.m, id)
	}
	s.mu.Unlock()
}

// Len returns the number of entries kept and their size in bytes, as the
// limit counts it.
func (c *Cache) Len() (entries, size int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		entries += len(s.m)
		size += s.bytes
		s.mu.RUnlock()
	}
	return entries, size
}
