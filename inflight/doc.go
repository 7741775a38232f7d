// Package inflight limits how much work is in flight at once per key, with
// leases: Stripe's concurrent requests limiter (layer 2 of its four), and
// the fleet-wide in-flight count a load shedder builds on (layer 3).
//
// A rate limiter shapes how often an actor calls; it does nothing about an
// actor that opens thousands of slow requests at a modest rate. An
// in-flight limit counts the requests that have started and not yet
// ended: Acquire enters a key if the weight in flight plus the request's
// weight is at most the cap, and returns a Lease; Release gives the slots
// back when the work ends. GitHub's "no more than 100 concurrent requests"
// is Cap 100 per user.
//
// A holder that crashes never releases. Every lease therefore expires
// after its TTL, and the store reclaims expired leases (lazily, when the
// key is next used), so a dead process's slots come back. Work that lasts
// longer than its TTL renews its lease (Renew) while it runs; a renewal
// that fails with ErrExpired means the slot may have gone to someone else.
//
// The same lease-and-release pattern fixes the classic counter leak: a
// request counts while it runs, and stops counting when it ends, whatever
// its outcome.
//
// Two stores implement Store: Memory (this package: sharded, bounded, for
// one process) and inflight/redisinflight (Redis standalone or Cluster,
// shared by a fleet: one script call reclaims, counts and enters; one
// releases; one renews; time is the Redis server's clock). Both pass the
// conformance suite in inflight/inflighttest. A store that cannot decide
// applies a ratelimit.FailurePolicy: report the error, allow (a Lease that
// holds nothing), deny, or fall back to a local Memory store.
package inflight
