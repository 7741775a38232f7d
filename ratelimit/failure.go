package ratelimit

import "fmt"

// FailurePolicy is what a limiter does when its store cannot decide (an
// unreachable Redis, a full table that refuses a new key): the explicit
// policy of DESIGN's principle 4, with one vocabulary for every store and
// both front doors (the gateway's on_store_error, sluice rls's
// --on-store-error, redisstore.Options.OnError).
type FailurePolicy uint8

const (
	// FailError (the zero value) reports the failure: a store returns the
	// error, the gateway answers 503, the RLS answers gRPC Unavailable (and
	// Envoy's failure_mode_deny decides).
	FailError FailurePolicy = iota
	// FailAllow fails open: the request is admitted (Stripe's choice).
	FailAllow
	// FailDeny fails closed: the request is refused. The gateway answers
	// 503 "limiter unavailable" with Retry-After (the store's breaker
	// cooldown); the RLS answers OVER_LIMIT (Envoy's 429), the only denial
	// gRPC's answer has besides an error, which is FailError's.
	FailDeny
	// FailLocal falls back to a per-process memory store applying the same
	// limits (n instances admit up to n times the limit). Where the store
	// is already in process, it means FailAllow.
	FailLocal
)

var failureNames = [...]string{"error", "allow", "deny", "local"}

// String returns error, allow, deny or local.
func (p FailurePolicy) String() string {
	if int(p) < len(failureNames) {
		return failureNames[p]
	}
	return fmt.Sprintf("failurepolicy(%d)", uint8(p))
}

// ParseFailurePolicy returns the policy named error, allow, deny or local.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	for i, n := range failureNames {
		if n == s {
			return FailurePolicy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown failure policy %q (want error, allow, deny or local)", s)
}

// MarshalText implements encoding.TextMarshaler.
func (p FailurePolicy) MarshalText() ([]byte, error) {
	if int(p) >= len(failureNames) {
		return nil, fmt.Errorf("unknown failure policy %d", uint8(p))
	}
	return []byte(failureNames[p]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *FailurePolicy) UnmarshalText(b []byte) error {
	v, err := ParseFailurePolicy(string(b))
	if err == nil {
		*p = v
	}
	return err
}

// HeaderMode selects the rate limit headers a server sends with its
// answers: the gateway on its responses, the RLS in Envoy's
// response_headers_to_add. One set of modes, with one meaning, for both.
type HeaderMode uint8

const (
	// HeadersIETF (the zero value) sends RateLimit-Policy and RateLimit of
	// draft-ietf-httpapi-ratelimit-headers, one list member per enforced
	// policy, and Retry-After (delta-seconds) when denied:
	//
	//	RateLimit-Policy: "per-user";q=100;w=60
	//	RateLimit: "per-user";r=42;t=17
	HeadersIETF HeaderMode = iota
	// HeadersLegacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset for one policy: the one that denied, else the one
	// with the fewest remaining events (envoyproxy/ratelimit's choice), and
	// Retry-After when denied. X-RateLimit-Reset is the number of seconds
	// until the policy is back to full, as envoyproxy/ratelimit and the
	// IETF draft's t count (not a Unix time, which a skewed client clock
	// would misread).
	HeadersLegacy
	// HeadersOff sends no rate limit header: a denial carries no
	// Retry-After and no quota information (the gateway's 429 body names
	// no policy either). "opaque" is another name for it.
	HeadersOff
)

var headerModeNames = [...]string{"ietf", "legacy", "off"}

// String returns ietf, legacy or off.
func (m HeaderMode) String() string {
	if int(m) < len(headerModeNames) {
		return headerModeNames[m]
	}
	return fmt.Sprintf("headermode(%d)", uint8(m))
}

// ParseHeaderMode returns the mode named s: ietf, legacy, or off (also
// spelled opaque, or none).
func ParseHeaderMode(s string) (HeaderMode, error) {
	switch s {
	case "opaque", "none":
		return HeadersOff, nil
	}
	for i, n := range headerModeNames {
		if n == s {
			return HeaderMode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown header mode %q (want ietf, legacy or off)", s)
}
