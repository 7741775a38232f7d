// Package hostlimit makes a client limit itself per host, before the server
// has to.
//
// A request to a host may start only when it holds both a slot of the
// host's concurrency semaphore and a token of the host's token bucket
// (rate, burst). The bucket lives in a ratelimit.Store: in process by
// default, or in Redis (redisstore) so that a fleet of workers shares one
// budget per host. The rate is fixed (Options.Rate) or found by an AIMD
// controller (package adaptive) from the host's answers.
//
// After a 429 or 503 the whole host pauses: no request to it starts, first
// attempt or retry, until max(Retry-After, the pause backoff) has passed.
// The other requests in flight do not each retry on their own; they queue
// behind the pause like everything else. Then the host ramps back up over
// Options.Ramp: a quarter of the concurrency (at least one request) and a
// burst of one at first, both growing linearly back to their limits (and,
// with a fixed rate, the rate growing from a quarter of it), so that
// recovery is not a spike.
//
// Most callers use package httpclient, which drives a Limiter from an
// http.RoundTripper; a Limiter is also usable alone:
//
//	p, err := l.Acquire(ctx, "example.com")
//	if err != nil { ... }
//	resp, err := send()
//	p.Done(hostlimit.Feedback{Signal: classify(resp, err), Latency: ..., RetryAfter: ...})
package hostlimit
