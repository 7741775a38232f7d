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
//		Descriptors: []httplimit.Descriptor{{Actions: []httplimit.Action{httplimit.IdentityKey{}}}}}
//	http.Handle("/api/", mw.Handler(api))
//
// The middleware sets headers before calling next and never wraps the
// ResponseWriter, so Flusher, Hijacker and http.ResponseController keep
// working for the next handler.
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
// redisstore use): error (the zero value) answers 503, deny 429, allow and
// local skip the rule. The error is observed and logged either way.
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
// policy, plus Retry-After (delta-seconds) on 429. [Legacy] sets
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (seconds
// until the policy is full again, as envoyproxy/ratelimit sends it, not a
// Unix time) for the policy that denied, else the one
// closest to its limit, plus Retry-After on 429. The modes and their
// headers are ratelimit.HeaderMode's, shared with the RLS. [Opaque] sets nothing and answers a bare 429 with no
// Retry-After and no quota information.
//
// # Quotas
//
// A rule with a calendar quota (a day or a month, in UTC) is counted in a
// fixed window exactly as long as the calendar period, keyed by the
// period's start, so months of 28 to 31 days are exact; see rules.QuotaLimit.
package httplimit
