// Package rules is sluice's policy file: envoyproxy/ratelimit's YAML rate
// limit configuration, parsed strictly, validated completely and matched
// exactly as that server matches it.
//
// Every valid envoyproxy/ratelimit config loads unchanged: a domain and
// nested descriptors with key, value (a '*' anywhere makes it a wildcard,
// each '*' matching any run of characters), rate_limit {unit,
// unit_multiplier, requests_per_unit, unlimited, name, replaces},
// shadow_mode, quota_mode, detailed_metric, value_to_metric,
// share_threshold and metadata (kept, deciding nothing). A rule without an algorithm is a
// fixed window of its unit times its unit_multiplier, aligned to the Unix
// epoch in multiples of that period, as in envoyproxy/ratelimit, so an
// imported config changes no decision. sluice adds optional fields:
//
//	rate_limit:
//	  algorithm: token_bucket  # any ratelimit.Algorithm text form
//	  burst: 20                # bucket algorithms only
//	  window: 10s              # instead of unit: requests_per_unit per window
//	  prefetch: true              # gcra, token_bucket, fixed_window: prefetched decisions (Set.Bind)
//	quota:                     # instead of rate_limit: a calendar quota (UTC)
//	  period: day              # or month
//	  limit: 10000
//
// Parse reads one file into a [Config] (one domain); [LoadDir] reads a
// directory into a [Set] (several domains). Both report every problem at
// once, as an [*Errors] whose lines read "file:line: path: message":
//
//	rules.yaml:7: descriptors[0].descriptors[1].rate_limit.unit: unknown unit "minutes" (want second, minute, hour, day, week, month or year)
//
// [Config.Match] and [Set.Match] map a descriptor (a list of [Entry]) to at
// most one [Rule] and do not allocate. Configs and Sets are immutable and
// safe for concurrent use; to change rules, parse again and swap.
//
// A front door binds its Set to its store with [Set.Bind], at load and on
// every reload: each rule's algorithm and limit are prepared once on the
// store (a [ratelimit.Binder]) instead of on every request, and a rule
// with prefetch: true is sent to a prefetch view of the Redis store
// ([BindOptions].Prefetch). [Check.Decide] charges a resolved check through
// its rule's binding.
package rules
