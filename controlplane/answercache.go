package controlplane

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync"
)

// DefaultAnswerCacheBytes is the default Options.AnswerCacheBytes: 4 MiB,
// the wire JSON of a few thousand typical deployments.
const DefaultAnswerCacheBytes = 4 << 20

// answerCacheBytes is the bound of Options.AnswerCacheBytes o.
func answerCacheBytes(o int) int {
	if o == 0 {
		return DefaultAnswerCacheBytes
	}
	return max(o, 0)
}

// answerCache keeps the wire JSON that GetDeploymentJSON made of recently
// read deployments, each beside the stored record it was made from. The
// answer is a function of that record's bytes, its tenant and id (and of
// the secret key, fixed per ControlPlane), nothing else: a read still goes
// to the store, and serves the kept answer only when the record it finds
// is byte for byte the one the answer was made from. Every write of a
// deployment (a PATCH, a new revision, a status change, a redeploy, its
// removal) rewrites or deletes the record, so the next read sees it, on
// this ControlPlane or any other over the same store, with nothing to
// invalidate. (A rewrite that leaves the bytes as they were changes no
// answer either.)
//
// The answers hold secret values in plain text; they live only in this
// process's memory, bounded by Options.AnswerCacheBytes, and are dropped
// at random when a shard is full or when the deployment is not found.
type answerCache struct {
	seed     maphash.Seed
	maxShard int // bytes per shard; 0: no cache
	shards   [answerShards]answerShard
}

// answerShards spreads the entries over locks, so that concurrent GETs of
// different deployments do not share one.
const answerShards = 16

type answerShard struct {
	mu    sync.RWMutex
	m     map[string]*cachedAnswer // by deployment id
	bytes int                      // the size of the entries in m
}

// cachedAnswer is the wire JSON of a deployment of tenant, made from the
// stored record stored.
type cachedAnswer struct {
	tenant string
	stored []byte
	answer []byte
}

// answerOverhead approximates the memory of an entry beyond its bytes
// (the map slot, the struct, the id and slice headers).
const answerOverhead = 128

func (e *cachedAnswer) size(id string) int {
	return len(id) + len(e.tenant) + len(e.stored) + len(e.answer) + answerOverhead
}

// newAnswerCache returns a cache of at most limit bytes (approximately);
// limit <= 0 keeps nothing.
func newAnswerCache(limit int) *answerCache {
	c := &answerCache{seed: maphash.MakeSeed()}
	if limit > 0 {
		c.maxShard = max(limit/answerShards, 1)
	}
	return c
}

func (c *answerCache) shard(id string) *answerShard {
	return &c.shards[maphash.String(c.seed, id)%answerShards]
}

// get returns the answer kept for the deployment id of tenant when it was
// made from the record stored; nil otherwise. The caller must not modify
// it.
func (c *answerCache) get(tenant, id string, stored []byte) []byte {
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

// put keeps answer, the wire JSON made from the record stored of the
// deployment id of tenant, copying stored (a store's bytes may be valid
// only during its transaction) and owning answer from now on. An entry
// larger than a quarter of its shard is not kept.
func (c *answerCache) put(tenant, id string, stored, answer []byte) {
	if c.maxShard == 0 {
		return
	}
	// The strings may be parts of larger ones (a request's path).
	id = strings.Clone(id)
	e := &cachedAnswer{tenant: strings.Clone(tenant), stored: bytes.Clone(stored), answer: answer}
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
		s.m = map[string]*cachedAnswer{}
	}
	s.m[id] = e
	s.bytes += n
}

// drop forgets the answer kept for the deployment id (it was not found).
func (c *answerCache) drop(id string) {
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

// len is the number of entries kept and their size (for tests).
func (c *answerCache) len() (entries, size int) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		entries += len(s.m)
		size += s.bytes
		s.mu.RUnlock()
	}
	return entries, size
}
