package rls

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/denycache"
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
const LocalCacheEntryOverhead = denycache.EntryOverhead

// MinLocalCacheSize is the smallest local cache: a smaller positive size
// is raised to it, as envoyproxy/ratelimit's freecache raises its
// LOCAL_CACHE_SIZE_IN_BYTES (so that its test setting of 1000 bytes caches).
const MinLocalCacheSize = 512 << 10

// LocalCacheStats are the local over-limit cache's counts since the server
// started, named after envoyproxy/ratelimit's freecache gauges
// (ratelimit.localcache.hitCount, …): Hits, Misses and Lookups; Entries
// and Bytes held now; Evictions (live entries dropped to make room,
// evacuateCount), Expired and Overwrites. The cache is the one the Redis
// store's Options.DenyCache is made of.
type LocalCacheStats = denycache.Stats

// newLocalCache returns a cache of size bytes (at least
// MinLocalCacheSize), or nil when size is not positive.
func newLocalCache(size int) *denycache.Cache {
	if size <= 0 {
		return nil
	}
	return denycache.New(denycache.Options{Bytes: int64(max(size, MinLocalCacheSize))})
}

// lcWindow reports whether ck is kept as envoyproxy/ratelimit's fixed
// window: over until the window ends, whatever a request costs.
func lcWindow(ck *check) bool { return isEnvoyWindow(ck) }

// lcGet answers ck from the cache when its key is denied at now: it sets
// ck's outcome and reports true.
func lcGet(c *denycache.Cache, ck *check, now int64) bool {
	d, ok := c.Get(denycache.KeyOf(ck.Request), ck.Request.N, now)
	if !ok {
		return false
	}
	capacity := max(0, ck.Request.Limit.Capacity(ck.Request.Algorithm))
	ck.cached, ck.over, ck.remaining = true, true, 0
	ck.before, ck.after = capacity, capacity+ck.Request.N
	ck.d = ratelimit.Decision{Limit: ck.Request.Limit, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
	return true
}

// lcPut caches ck, found over its limit at now, until the limit could
// admit it again.
func lcPut(c *denycache.Cache, ck *check, now int64) {
	until := ck.d.RetryAfter
	window := lcWindow(ck)
	if window {
		until = ck.d.ResetAfter
		if until <= 0 && ck.Request.Limit.Period > 0 {
			p := int64(ck.Request.Limit.Period)
			until = time.Duration(p - now%p)
		}
	}
	c.Put(denycache.KeyOf(ck.Request), ck.Request.N, window, denycache.Denial{RetryAfter: until, ResetAfter: ck.d.ResetAfter}, now)
}

// lcResetter resets a key in the store, then forgets its denials in the
// local over-limit cache, so that a key reset through the admin API is not
// answered over from memory.
type lcResetter struct {
	ratelimit.Resetter
	lc *denycache.Cache
}

func (r lcResetter) Reset(ctx context.Context, key string) error {
	err := r.Resetter.Reset(ctx, key)
	r.lc.ForgetKey(key)
	return err
}

// LocalCacheStats returns the local over-limit cache's counts, and false
// when the server has none (Options.LocalCacheSize 0).
func (s *Server) LocalCacheStats() (LocalCacheStats, bool) {
	if s.lc == nil {
		return LocalCacheStats{}, false
	}
	return s.lc.Stats(), true
}

// registerLocalCache exports c's counts as envoyproxy/ratelimit names them
// (ratelimit.localcache.hitCount becomes ratelimit_localcache_hitCount in
// its Prometheus output), read when /metrics is scraped.
func registerLocalCache(reg prometheus.Registerer, c *denycache.Cache) error {
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
		}, func() float64 { return float64(v(c.Stats())) })); err != nil {
			return err
		}
	}
	return nil
}
