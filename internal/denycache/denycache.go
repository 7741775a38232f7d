package denycache

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// EntryOverhead is the bytes an entry is counted as beyond its key: the
// map slot, the key's limit and the entry's times.
const EntryOverhead = 128

// shards is the number of independently locked parts of a Cache; each
// gets an equal share of its bounds.
const shards = 16

// Options bounds a Cache; at least one bound must be positive.
type Options struct {
	// Bytes is the most a Cache holds, counting each entry as its key's
	// length plus EntryOverhead; 0: no bound in bytes.
	Bytes int64
	// Entries is the most entries it holds; 0: no bound in entries.
	Entries int
}

// Key is what a denial is cached under.
type Key struct {
	Key       string
	Limit     ratelimit.Limit
	Algorithm ratelimit.Algorithm
}

// KeyOf is req's Key.
func KeyOf(req ratelimit.Request) Key { return Key{req.Key, req.Limit, req.Algorithm} }

// Denial is a cached denial, as of the time it is put or got.
type Denial struct {
	Remaining              int64
	RetryAfter, ResetAfter time.Duration // RetryAfter: denied for that long
}

// Stats are a Cache's counts since it was made.
type Stats struct {
	Hits, Misses, Lookups uint64 // lookups answered from the cache, not, and both
	Entries               uint64 // entries held now
	Evictions             uint64 // live entries dropped to make room
	Expired               uint64 // entries dropped because their time was over
	Overwrites            uint64 // entries replaced by a newer denial of the same key
	Bytes                 uint64 // bytes held now, as counted against Options.Bytes
}

// Cache remembers denials. It is safe for concurrent use.
type Cache struct {
	seed    maphash.Seed
	budget  int64 // bytes per shard
	entries int   // entries per shard
	shards  [shards]shard
}

type shard struct {
	mu    sync.Mutex
	m     map[Key]entry
	bytes int64
	st    Stats    // Entries and Bytes unused here
	_     [64]byte // keep shards' locks on their own cache lines
}

type entry struct {
	until   int64 // Unix ns: denied until then
	at      int64 // when cached
	n       int64 // the cost of the request denied; a smaller one may pass unless anyCost
	anyCost bool  // denied whatever a request costs
	d       Denial
}

// New returns a Cache bounded by o, or nil when o has no positive bound.
func New(o Options) *Cache {
	if o.Bytes <= 0 && o.Entries <= 0 {
		return nil
	}
	c := &Cache{seed: maphash.MakeSeed(), budget: int64(^uint64(0) >> 1), entries: int(^uint(0) >> 1)}
	if o.Bytes > 0 {
		c.budget = o.Bytes / shards
	}
	if o.Entries > 0 {
		c.entries = max(1, o.Entries/shards)
	}
	for i := range c.shards {
		c.shards[i].m = make(map[Key]entry)
	}
	return c
}

func (c *Cache) shard(key string) *shard {
	return &c.shards[maphash.String(c.seed, key)%shards]
}

func cost(key string) int64 { return int64(len(key)) + EntryOverhead }

// Get returns the denial cached for k at now that covers a request
// costing n (a cost at least the denied one's, or any cost when the
// denial was put with anyCost), its RetryAfter and ResetAfter counted down
// to now.
func (c *Cache) Get(k Key, n int64, now int64) (Denial, bool) {
	sh := c.shard(k.Key)
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && now >= e.until {
		sh.drop(k, &sh.st.Expired)
		ok = false
	}
	if ok && !e.anyCost && n < e.n {
		ok = false // a cheaper request may fit
	}
	sh.st.Lookups++
	if ok {
		sh.st.Hits++
	} else {
		sh.st.Misses++
	}
	sh.mu.Unlock()
	if !ok {
		return Denial{}, false
	}
	d := e.d
	d.RetryAfter = time.Duration(e.until - now)
	d.ResetAfter = max(0, d.ResetAfter-time.Duration(now-e.at))
	return d, true
}

// Put caches d, the denial at now of a request costing n under k, for
// d.RetryAfter; anyCost makes it cover every cost. A denial for no time is
// not cached.
func (c *Cache) Put(k Key, n int64, anyCost bool, d Denial, now int64) {
	if d.RetryAfter <= 0 {
		return
	}
	cost := cost(k.Key)
	if cost > c.budget {
		return
	}
	sh := c.shard(k.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[k]; ok {
		sh.st.Overwrites++
	} else {
		if sh.bytes+cost > c.budget || len(sh.m) >= c.entries {
			sh.makeRoom(cost, c.budget, c.entries, now)
		}
		sh.bytes += cost
		k.Key = string([]byte(k.Key)) // not the caller's memory
	}
	sh.m[k] = entry{until: now + int64(d.RetryAfter), at: now, n: n, anyCost: anyCost, d: d}
}

// Forget drops the denial cached under k (a refund has given capacity
// back).
func (c *Cache) Forget(k Key) {
	sh := c.shard(k.Key)
	sh.mu.Lock()
	if _, ok := sh.m[k]; ok {
		sh.drop(k, nil)
	}
	sh.mu.Unlock()
}

// ForgetKey drops every denial cached for key, under any limit and
// algorithm (the key was reset).
func (c *Cache) ForgetKey(key string) {
	sh := c.shard(key)
	sh.mu.Lock()
	for k := range sh.m {
		if k.Key == key {
			sh.drop(k, nil)
		}
	}
	sh.mu.Unlock()
}

// drop deletes k, held, counting it in count when not nil. sh.mu is held.
func (sh *shard) drop(k Key, count *uint64) {
	delete(sh.m, k)
	sh.bytes -= cost(k.Key)
	if count != nil {
		*count++
	}
}

// makeRoom drops entries until one more of cost bytes fits: expired ones
// among the first few, then any (map order is random). sh.mu is held.
func (sh *shard) makeRoom(cost, budget int64, entries int, now int64) {
	seen := 0
	for k, e := range sh.m {
		if seen++; seen > 32 {
			break
		}
		if now >= e.until {
			sh.drop(k, &sh.st.Expired)
		}
	}
	for k := range sh.m {
		if sh.bytes+cost <= budget && len(sh.m) < entries {
			return
		}
		sh.drop(k, &sh.st.Evictions)
	}
}

// Stats sums the shards' counts.
func (c *Cache) Stats() Stats {
	var st Stats
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		st.Hits += sh.st.Hits
		st.Misses += sh.st.Misses
		st.Lookups += sh.st.Lookups
		st.Evictions += sh.st.Evictions
		st.Expired += sh.st.Expired
		st.Overwrites += sh.st.Overwrites
		st.Entries += uint64(len(sh.m))
		st.Bytes += uint64(sh.bytes)
		sh.mu.Unlock()
	}
	return st
}
