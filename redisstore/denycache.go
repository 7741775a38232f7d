package redisstore

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// denyCache remembers denials: a key denied with RetryAfter d is denied
// locally, without a round trip, until d has passed, for requests costing
// at least as much. It is Cloudflare's "mitigation active" flag cached in
// each server's memory.
type denyCache struct {
	seed   maphash.Seed
	shards [16]denyShard
	per    int // most entries per shard
}

type denyShard struct {
	mu sync.Mutex
	m  map[denyKey]denial
}

type denyKey struct {
	key  string
	lim  ratelimit.Limit
	algo ratelimit.Algorithm
}

type denial struct {
	until int64 // Unix ns on the store's clock
	at    int64
	n     int64
	d     ratelimit.Decision
}

func newDenyCache(size int) *denyCache {
	c := &denyCache{seed: maphash.MakeSeed(), per: max(1, size/16)}
	for i := range c.shards {
		c.shards[i].m = make(map[denyKey]denial)
	}
	return c
}

func (c *denyCache) shard(k denyKey) *denyShard {
	return &c.shards[maphash.String(c.seed, k.key)&15]
}

// get returns the cached denial for req at now, if any.
func (c *denyCache) get(req ratelimit.Request, now int64) (ratelimit.Decision, bool) {
	k := denyKey{req.Key, req.Limit, req.Algorithm}
	sh := c.shard(k)
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && now >= e.until {
		delete(sh.m, k)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || req.N < e.n {
		return ratelimit.Decision{}, false
	}
	d := e.d
	d.RetryAfter = time.Duration(e.until - now)
	d.ResetAfter = max(0, d.ResetAfter-time.Duration(now-e.at))
	return d, true
}

// put caches a denial decided at now.
func (c *denyCache) put(req ratelimit.Request, d ratelimit.Decision, now int64) {
	k := denyKey{req.Key, req.Limit, req.Algorithm}
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.m) >= c.per {
		for kk, e := range sh.m {
			if now >= e.until {
				delete(sh.m, kk)
			}
		}
		if len(sh.m) >= c.per {
			return
		}
	}
	sh.m[k] = denial{until: now + int64(d.RetryAfter), at: now, n: req.N, d: d}
}

// forget drops the denial cached for req's key, limit and algorithm: a
// refund has given capacity back.
func (c *denyCache) forget(req ratelimit.Request) {
	k := denyKey{req.Key, req.Limit, req.Algorithm}
	sh := c.shard(k)
	sh.mu.Lock()
	delete(sh.m, k)
	sh.mu.Unlock()
}

// cached answers req from the store's denial cache, when it holds a
// denial for it; a refund forgets the key's denial instead.
func (s *Store) cached(req ratelimit.Request, now time.Time) (ratelimit.Decision, bool) {
	switch {
	case s.deny == nil:
		return ratelimit.Decision{}, false
	case req.Refund:
		s.deny.forget(req)
		return ratelimit.Decision{}, false
	case req.Algorithm == ratelimit.LeakyBucket && req.MaxDelay != 0:
		return ratelimit.Decision{}, false // a place in a queue, not a denial
	}
	return s.deny.get(req, s.cacheClock(now))
}
