// Package denycache is sluice's one cache of denials, behind both the
// Redis store's Options.DenyCache and the RLS's local over-limit cache
// (envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES): a key found over
// its limit is answered from memory, without a store call, until the
// limit could admit it again. It is Cloudflare's "mitigation active" flag
// cached in each server's memory.
//
// A Cache is bounded: by bytes (each entry counted as its key's length
// plus EntryOverhead) and, when set, by entries. When a shard is full,
// expired entries go first, then any others (evictions); an entry larger
// than a shard's share is not cached. Times are Unix nanoseconds on the
// caller's clock, which must be the one its durations were measured on.
package denycache
