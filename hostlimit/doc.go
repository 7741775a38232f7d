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
// A budget the server announces (Announce, Permit.Announce) holds the
// host too: what remains is sent, then requests go as it comes back. A
// server that keeps several budgets and names them (GitHub's
// X-RateLimit-Resource, an IETF policy's name) gets one model per name
// (at most MaxResources per host), and a request acquired with
// AcquireRoute waits for the budget its route's answers named (at most
// MaxRoutes routes per host), so that a spent budget holds only its own
// requests.
//
// Most callers use package httpclient, which drives a Limiter from an
// http.RoundTripper; a Limiter is also usable alone:
//
//	p, err := l.Acquire(ctx, "example.com")
//	if err != nil { ... }
//	resp, err := send()
//	p.Done(hostlimit.Feedback{Signal: classify(resp, err), Latency: ..., RetryAfter: ...})
package hostlimit
