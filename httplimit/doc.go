// Package httplimit is net/http middleware that limits each caller before
// a handler runs: it turns a request into descriptors (lists of key/value
// entries, built with Envoy's rate_limits action vocabulary plus sluice's
// identity, tier, method and path), matches each descriptor to a rule, asks
// a ratelimit.Store for a decision per rule, sets the rate limit headers and
// either calls the next handler or answers 429 with an
// application/problem+json body (RFC 9457).
//
// Most callers build one [Middleware] per route and wrap the route's handler:
//
//	mw := &httplimit.Middleware{Store: store, Rules: set, Domain: "api",
//		Descriptors: []action.Descriptor{{Actions: []action.Action{action.IdentityKey{}}}}}
//	http.Handle("/api/", mw.Handler(api))
//
// # The admission pipeline
//
// Besides the rate limits, the package has three more admission layers.
// A server stacks them in this order (the gateway does), so that what a
// layer refuses costs nothing of the layers after it: a shed request
// spends no token, a request denied for its rate holds no lease.
//
//	order  layer       type         refuses               costs per admitted request                    wraps the ResponseWriter
//	1      shed        [Shedder]    503 (the server)      a few atomics; a lease in the fleet's store   no
//	2      rate limit  [Middleware] 429 (the caller)      one store call per rule (two with a peek)     only with RefundOn
//	3      in-flight   [InFlight]   429 (the caller)      a lease in the store, released at the end     no
//	4      adaptive    [Adaptive]   503 (the server)      a token of the limiter, released at the end   yes, to see the status
//
// Measured on the admitted path, memory stores, 2 shared cores
// (go test -run '^$' -bench 'Middleware' -benchmem ./httplimit, 2026-12-01):
// shed 0 allocations (utilization) or 4 and 256 B (with the fleet), rate
// limit 3 and 168 B for one rule (0.7 µs of CPU), in-flight 10 and 360 B,
// adaptive 1 and 24 B (the recorder). A refusal costs its problem body:
// 12 allocations and about 500 B for a rate limit 429 (BenchmarkRefusal).
//
// They share one identify step ([Identify]: the caller, or 401 for a bad
// credential), one refusal writer ([Refusals]: status, Retry-After and
// the application/problem+json body; the RateLimit headers are each
// layer's, set on admitted responses too) and one response recorder (the
// status the next handler answered, for refunds and the adaptive
// limiter's samples; it unwraps for http.ResponseController, so Flusher,
// Hijacker and the deadlines keep working). Give every layer the same
// *Refusals: its Observe then sees every refusal, whichever layer made it
// ([Refusal] names the layer, the cause, the policy and who was
// refused). A rate limit's or in-flight cap's [Denial] (Middleware.Denial,
// InFlight.Denial) replaces the status and body of its refusals over the
// limit, written by the same writer. A layer that does not wrap the
// ResponseWriter sets its headers before calling next.
//
// Envoy's rate_limits action vocabulary, which turns a request into the
// rate limit layer's descriptors, is package httplimit/action.
//
// # Decisions
//
// A request is denied if any enforced rule denies it. When more than one
// rule applies, the middleware first peeks at every rule (a zero-cost
// request) and denies without consuming anything when one of them cannot
// admit the cost; only then does it apply the cost to each rule in order,
// stopping at the first denial. Between the peek and the apply another
// request may take the last tokens of a later rule, in which case the
// earlier rules have already been charged: the peek makes that rare, not
// impossible, without a multi-key transaction the Store interface does not
// offer.
//
// Rules in shadow mode (the rule's shadow_mode, or [Middleware.Shadow] for
// all of them) are applied and counted, and a would-be denial is reported
// to [Middleware.Observe] and logged, but never denies and never shows in
// the headers. A rule with envoyproxy/ratelimit's quota_mode is counted the
// same way and never denies, but shows in the headers. Rules marked unlimited, rules listed in
// [Middleware.DisabledRules] and, with [Middleware.Disabled], all rules are
// skipped: that is the kill switch.
//
// A store error is a failure, not a denial: [Middleware.OnStoreError]
// decides (ratelimit.FailurePolicy, the vocabulary sluice rls and
// redisstore use, and InFlight and Shedder too): error (the zero value)
// answers 503, deny 503 "limiter unavailable" with Retry-After
// ([Refusals.UnavailableRetryAfter], the store's breaker cooldown) and
// the rule's RateLimit at r=0 with that reset, allow and local skip the
// rule. Not 429: the caller is not over its limit, the limiter cannot
// tell (Envoy's failure_mode_deny answers 500). The error is observed and
// logged either way.
//
// Where a descriptor becomes a store request (matching, replaces,
// unlimited, shadow, quota windows, the store key) is rules.Set.Resolve,
// which the RLS calls too: one rule file means the same through both.
//
// The cost header ([Middleware.CostHeader]) is believed only from a
// trusted proxy (identity.Identity.TrustedPeer): a client cannot lower the
// cost of its own requests.
//
// # Headers
//
// [IETF] (the default) sets RateLimit-Policy and RateLimit of
// draft-ietf-httpapi-ratelimit-headers, one list member per enforced
// policy, plus Retry-After (delta-seconds) on a refusal. [Legacy] sets
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds
// until the policy is full again, as envoyproxy/ratelimit sends it, not a
// Unix time) for the policy that denied, else the one
// closest to its limit, plus Retry-After on a refusal. The modes and their
// headers are header.Mode's, shared with the RLS. header.Off sets nothing and answers a bare 429 with no
// Retry-After and no quota information; a 503 keeps its Retry-After,
// which is about the server, not the caller's quota.
//
// # Quotas
//
// A rule with a calendar quota (a day or a month, in UTC) is counted in a
// fixed window exactly as long as the calendar period, keyed by the
// period's start, so months of 28 to 31 days are exact; see rules.QuotaLimit.
package httplimit
