// Package redisinflight is an inflight.Store in Redis (standalone or
// Cluster), shared by every instance of a fleet: Stripe's concurrent
// requests limiter, a sorted set of in-flight lease ids per key.
//
// Each key's leases are a sorted set (members "<id>:<weight>", scored by
// expiry in microseconds) and a counter of their total weight, two Redis
// keys that share a hash tag, so a Cluster keeps them in one slot. Every
// operation is one script call:
//
//   - Acquire reclaims the expired leases (ZRANGEBYSCORE, ZREMRANGEBYSCORE,
//     DECRBY), counts, and enters (ZADD, INCRBY) if under the cap;
//   - Release removes the lease (ZREM, DECRBY), deleting both keys when the
//     last lease leaves;
//   - Renew moves a live lease's expiry (ZADD XX), or reclaims it if it
//     expired;
//   - Peek reclaims and counts.
//
// Time is the Redis server's clock (TIME), so the instances agree on when
// a lease expires; Options.Now replaces it for tests. Both keys expire
// with their latest lease, so a key whose holders all died leaves nothing
// behind. Lease IDs are random 63-bit numbers; a lease is identified by
// its key, ID and weight together, so an altered Lease frees nothing.
//
// When Redis cannot answer, Options.OnError decides: return the error,
// allow, deny, or fall back to an in-process inflight.Memory. A breaker
// stops waiting for a Redis that keeps failing, and one call per
// Options.BreakerTrial tries it again; with Options.Link the store uses
// a rate limit store's link (redisstore.Store.Link): one breaker
// per Cluster primary, shared by both stores. The scripts are in lua/
// (Script returns them).
package redisinflight
