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
