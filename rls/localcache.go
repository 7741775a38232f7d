package rls

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/ratelimit"
)

// The local over-limit cache is envoyproxy/ratelimit's
// LOCAL_CACHE_SIZE_IN_BYTES, on every store: once a descriptor's counter
// is over its limit, this server answers it OVER_LIMIT from memory, without
// calling the store, until the limit could admit it again — the end of the
// window for a fixed window (as upstream, whose cached key lives as long as
// its window's key), the Retry-After of the denial for sluice's other
// algorithms (and then only for requests costing at least as much). Hits
// answered so count as over_limit and over_limit_with_local_cache, and are
// not added to the store's counter, as upstream does not add them.
//
// The cache holds at most its size in bytes, counting each entry as its
// key's length plus LocalCacheEntryOverhead. When a shard is full, expired
// entries go first, then any others (evacuations); an entry larger than a
// shard's share is not cached.

// LocalCacheEntryOverhead is the bytes an entry of the local over-limit
// cache is counted as beyond its key: the map slot, the key's limit and the
// entry's times.
const LocalCacheEntryOverhead = 128

// MinLocalCacheSize is the smallest local cache: a smaller positive size
// is raised to it, as envoyproxy/ratelimit's freecache raises its
// LOCAL_CACHE_SIZE_IN_BYTES (so that its test setting of 1000 bytes caches).
const MinLocalCacheSize = 512 << 10

// localCacheShards is the number of independently locked parts of the
// cache; each gets an equal share of the bytes.
const localCacheShards = 16

// LocalCacheStats are the local over-limit cache's counts since the server
// started, named after envoyproxy/ratelimit's freecache gauges
// (ratelimit.localcache.hitCount, …).
type LocalCacheStats struct {
	Hits, Misses, Lookups uint64 // lookups answered from the cache, not, and both
	Entries               uint64 // entries held now
	Evictions             uint64 // live entries dropped to make room (evacuateCount)
	Expired               uint64 // entries dropped because their time was over
	Overwrites            uint64 // entries replaced by a newer denial of the same key
	Bytes                 uint64 // bytes held now, as counted against the size
}

type localCache struct {
	seed   maphash.Seed
	budget int64 // bytes per shard
	shards [localCacheShards]lcShard
}

type lcShard struct {
	mu    sync.Mutex
	m     map[lcKey]lcEntry
	bytes int64
	st    LocalCacheStats // Entries and Bytes unused here
	_     [64]byte        // keep shards' locks on their own cache lines
}

type lcKey struct {
	key  string
	lim  ratelimit.Limit
	algo ratelimit.Algorithm
}

type lcEntry struct {
	until int64 // Unix ns: denied until then
	at    int64 // when cached
	n     int64 // the hits of the request denied; a smaller one may pass (not for windows)
	reset time.Duration
}

// newLocalCache returns a cache of size bytes (at least
// MinLocalCacheSize), or nil when size is not positive.
func newLocalCache(size int) *localCache {
	if size <= 0 {
		return nil
	}
	size = max(size, MinLocalCacheSize)
	c := &localCache{seed: maphash.MakeSeed(), budget: int64(size) / localCacheShards}
	for i := range c.shards {
		c.shards[i].m = make(map[lcKey]lcEntry)
	}
	return c
}

func (c *localCache) shard(key string) *lcShard {
	return &c.shards[maphash.String(c.seed, key)%localCacheShards]
}

// window reports whether ck is kept as envoyproxy/ratelimit's fixed window:
// over until the window ends, whatever a request costs.
func lcWindow(ck *check) bool { return isEnvoyWindow(ck) }

// get answers ck from the cache when its key is denied at now: it sets
// ck's outcome and reports true.
func (c *localCache) get(ck *check, now int64) bool {
	k := lcKey{ck.Request.Key, ck.Request.Limit, ck.Request.Algorithm}
	sh := c.shard(k.key)
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && now >= e.until {
		delete(sh.m, k)
		sh.bytes -= lcCost(k.key)
		sh.st.Expired++
		ok = false
	}
	if ok && !lcWindow(ck) && ck.Request.N < e.n {
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
		return false
	}
	capacity := max(0, ck.Request.Limit.Capacity(ck.Request.Algorithm))
	ck.cached, ck.over, ck.remaining = true, true, 0
	ck.before, ck.after = capacity, capacity+ck.Request.N
	ck.d = ratelimit.Decision{Limit: ck.Request.Limit, RetryAfter: time.Duration(e.until - now),
		ResetAfter: max(0, e.reset-time.Duration(now-e.at))}
	return true
}

// put caches ck, found over its limit at now, until the limit could admit
// it again.
func (c *localCache) put(ck *check, now int64) {
	var until time.Duration
	if lcWindow(ck) {
		until = ck.d.ResetAfter
		if until <= 0 && ck.Request.Limit.Period > 0 {
			p := int64(ck.Request.Limit.Period)
			until = time.Duration(p - now%p)
		}
	} else {
		until = ck.d.RetryAfter
	}
	if until <= 0 {
		return
	}
	k := lcKey{ck.Request.Key, ck.Request.Limit, ck.Request.Algorithm}
	cost := lcCost(k.key)
	if cost > c.budget {
		return
	}
	sh := c.shard(k.key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[k]; ok {
		sh.st.Overwrites++
	} else {
		if sh.bytes+cost > c.budget {
			sh.makeRoom(cost, c.budget, now)
		}
		sh.bytes += cost
		k.key = string([]byte(k.key)) // not the request's memory
	}
	sh.m[k] = lcEntry{until: now + int64(until), at: now, n: ck.Request.N, reset: ck.d.ResetAfter}
}

// makeRoom drops entries until cost more bytes fit: expired ones among
// the first few, then any (map order is random). sh.mu is held.
func (sh *lcShard) makeRoom(cost, budget, now int64) {
	seen := 0
	for k, e := range sh.m {
		if seen++; seen > 32 {
			break
		}
		if now >= e.until {
			delete(sh.m, k)
			sh.bytes -= lcCost(k.key)
			sh.st.Expired++
		}
	}
	for k := range sh.m {
		if sh.bytes+cost <= budget {
			return
		}
		delete(sh.m, k)
		sh.bytes -= lcCost(k.key)
		sh.st.Evictions++
	}
}

func lcCost(key string) int64 { return int64(len(key)) + LocalCacheEntryOverhead }

// stats sums the shards' counts.
func (c *localCache) stats() LocalCacheStats {
	var st LocalCacheStats
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

// LocalCacheStats returns the local over-limit cache's counts, and false
// when the server has none (Options.LocalCacheSize 0).
func (s *Server) LocalCacheStats() (LocalCacheStats, bool) {
	if s.lc == nil {
		return LocalCacheStats{}, false
	}
	return s.lc.stats(), true
}

// registerLocalCache exports c's counts as envoyproxy/ratelimit names them
// (ratelimit.localcache.hitCount becomes ratelimit_localcache_hitCount in
// its Prometheus output), read when /metrics is scraped.
func registerLocalCache(reg prometheus.Registerer, c *localCache) error {
	for _, g := range []struct {
		name, help string
		v          func(LocalCacheStats) uint64
	}{
		{"hitCount", "Lookups of the local over-limit cache that found the key over its limit.", func(s LocalCacheStats) uint64 { return s.Hits }},
		{"missCount", "Lookups of the local over-limit cache that did not.", func(s LocalCacheStats) uint64 { return s.Misses }},
		{"lookupCount", "Lookups of the local over-limit cache.", func(s LocalCacheStats) uint64 { return s.Lookups }},
		{"entryCount", "Keys held in the local over-limit cache.", func(s LocalCacheStats) uint64 { return s.Entries }},
		{"evacuateCount", "Live keys dropped from the local over-limit cache to make room.", func(s LocalCacheStats) uint64 { return s.Evictions }},
		{"expiredCount", "Keys dropped from the local over-limit cache when their time was over.", func(s LocalCacheStats) uint64 { return s.Expired }},
		{"overwriteCount", "Keys of the local over-limit cache replaced by a newer denial.", func(s LocalCacheStats) uint64 { return s.Overwrites }},
		{"bytes", "Bytes held by the local over-limit cache, as counted against --local-cache-size-bytes.", func(s LocalCacheStats) uint64 { return s.Bytes }},
	} {
		v := g.v
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "ratelimit", Subsystem: "localcache", Name: g.name, Help: g.help,
		}, func() float64 { return float64(v(c.stats())) })); err != nil {
			return err
		}
	}
	return nil
}
