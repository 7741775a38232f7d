package redisstore

import (
	"time"

	"github.com/sluicehq/sluice/internal/denycache"
	"github.com/sluicehq/sluice/ratelimit"
)

// The denial cache (Options.DenyCache) is internal/denycache's, the one the
// RLS's local over-limit cache is made of: a key denied with RetryAfter d
// is denied locally, without a round trip, until d has passed, for
// requests costing at least as much.

// newDenyCache returns the cache of Options.DenyCache, nil when it is off.
func newDenyCache(o Options) *denycache.Cache {
	if !o.DenyCache {
		return nil
	}
	return denycache.New(denycache.Options{Entries: o.DenyCacheSize, Bytes: int64(o.DenyCacheSize) * denyCacheEntryBytes})
}

// denyCacheEntryBytes is the bytes each of DenyCacheSize's entries may
// take on average, counting its key: entries of keys longer than
// denycache.EntryOverhead bytes fit fewer.
const denyCacheEntryBytes = 2 * denycache.EntryOverhead

// cached answers req from the store's denial cache, when it holds a
// denial for it; a refund forgets the key's denial instead.
func (s *Store) cached(req ratelimit.Request, now time.Time) (ratelimit.Decision, bool) {
	switch {
	case s.deny == nil:
		return ratelimit.Decision{}, false
	case req.Refund:
		s.deny.Forget(denycache.KeyOf(req))
		return ratelimit.Decision{}, false
	case req.Algorithm == ratelimit.LeakyBucket && req.MaxDelay != 0:
		return ratelimit.Decision{}, false // a place in a queue, not a denial
	}
	d, ok := s.deny.Get(denycache.KeyOf(req), req.N, s.cacheClock(now))
	if !ok {
		return ratelimit.Decision{}, false
	}
	return ratelimit.Decision{Limit: req.Limit.Normalize(), Remaining: d.Remaining, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}, true
}

// remember caches d, a denial of req decided at now.
func (s *Store) remember(req ratelimit.Request, d ratelimit.Decision, now time.Time) {
	s.deny.Put(denycache.KeyOf(req), req.N, false, denycache.Denial{Remaining: d.Remaining, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}, s.cacheClock(now))
}
