// Package rls is a drop-in Envoy rate limit service: it answers
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit from an
// envoyproxy/ratelimit configuration (package rules) and a ratelimit.Store,
// so an operator can swap it in for envoyproxy/ratelimit with no change to
// Envoy and no change to a decision.
//
// A request names a domain and carries descriptors; each descriptor is
// matched to at most one rule and decided on its own, and the response is
// OVER_LIMIT when any descriptor is. The semantics are those of
// envoyproxy/ratelimit wherever it defines them:
//
//   - a rule without an algorithm is a fixed window of its unit times its
//     unit_multiplier (aligned to the Unix epoch in multiples of that
//     period, a 30-day month), current_limit reports the unit and
//     unit_multiplier as the file gives them, and every hit counts, even
//     over the limit, as envoyproxy/ratelimit's INCRBY counts them: once a
//     request has overflowed a window, every later request of that window
//     is over, even a check with hits_addend 0;
//   - hits_addend: a descriptor's own hits_addend wins (an explicit 0 checks
//     without counting), else the request's, where 0 (the proto default)
//     counts as 1;
//   - a descriptor's limit override replaces the configured rule (never in
//     shadow mode), within a known domain;
//   - shadow_mode rules are counted and reported but answer OK;
//     Options.ShadowMode is the global shadow mode;
//   - a quota_mode descriptor over its limit says OVER_LIMIT in its status,
//     but the answer is OVER_LIMIT only when a regular descriptor is over or
//     every quota_mode descriptor of the request is (envoyproxy/ratelimit
//     since its #1059); Options.QuotaMode is the global quota mode;
//   - Options.StopIncrementWhenOverLimit, Options.HeaderNames (with
//     header.EnvoyNames) and Options.MetricLabels follow
//     STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, LIMIT_*_HEADER and the
//     Prometheus mapping's key1/key2 labels (docs/rls.md lists every setting);
//   - Options.LocalCacheSize is LOCAL_CACHE_SIZE_IN_BYTES, the local
//     over-limit cache, on any store (LocalCacheStats); Options.Statsd
//     (DialStatsd) sends the stats with upstream's statsd names, summed in
//     process and flushed on an interval as its gostats store does;
//   - unlimited rules answer OK with limit_remaining 4294967295 and count
//     nothing;
//   - a matched rule's replaces drops the named rules matched by other
//     descriptors of the same request;
//   - wildcard values, nested descriptors, detailed_metric and
//     value_to_metric match and name metrics as package rules documents.
//
// sluice adds what envoyproxy/ratelimit lacks: rules may name any
// ratelimit.Algorithm (token buckets, sliding windows…), the store may be
// Redis with an explicit failure policy, and a request that sluice cannot
// honour (an empty domain, no descriptors, a hits_addend above 2³²−1, a
// negative hits_addend, an override with an unknown unit) is answered with
// codes.InvalidArgument instead of a panic or a silent guess.
//
// Server implements the gRPC service; Register adds it and the gRPC health
// service to any grpc.ServiceRegistrar: a grpc.Server (made with
// ServerOptions), or the lean HTTP/2 server `sluice rls` serves with by
// default (internal/transport/h2grpc). With a remote store,
// Options.ParallelDescriptors applies a request's descriptors concurrently,
// about one round trip a request, as envoyproxy/ratelimit's pipeline.
// Handler serves envoyproxy/ratelimit's HTTP
// endpoints: POST /json (a RateLimitRequest in protojson), /healthcheck and
// /metrics (Prometheus, with envoyproxy/ratelimit's stat names per rule:
// ratelimit_service_rate_limit_total_hits, _over_limit, _near_limit,
// _within_limit and _shadow_mode, labelled domain and key). Watch reloads a
// configuration directory when its files change and keeps the last good
// configuration when a change is invalid.
//
// A Server is safe for concurrent use.
package rls
