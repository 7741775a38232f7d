package header

import "fmt"

// Mode selects the rate limit headers a server sends with its answers:
// the gateway on its responses, the RLS in Envoy's
// response_headers_to_add. One set of modes, with one meaning, for both.
type Mode uint8

const (
	// IETF (the zero value) sends RateLimit-Policy and RateLimit of
	// draft-ietf-httpapi-ratelimit-headers, one list member per enforced
	// policy, and Retry-After (delta-seconds) when denied:
	//
	//	RateLimit-Policy: "per-user";q=100;w=60
	//	RateLimit: "per-user";r=42;t=17
	IETF Mode = iota
	// Legacy sends X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset for one policy: the one that denied, else the one
	// with the fewest remaining events (envoyproxy/ratelimit's choice), and
	// Retry-After when denied. X-RateLimit-Reset is the number of seconds
	// until the policy is back to full, as envoyproxy/ratelimit and the
	// IETF draft's t count (not a Unix time, which a skewed client clock
	// would misread). Names renames them (envoyproxy/ratelimit's
	// RateLimit-Limit, ... with EnvoyNames).
	Legacy
	// Off sends no rate limit header: a denial carries no Retry-After and
	// no quota information (the gateway's 429 body names no policy
	// either). "opaque" and "none" are other names for it.
	Off
)

var modeNames = [...]string{"ietf", "legacy", "off"}

// String returns ietf, legacy or off.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("header.Mode(%d)", uint8(m))
}

// ParseMode returns the mode named s: ietf, legacy, or off (also spelled
// opaque, or none). The empty string is no mode: each door states its own
// default (the gateway's is IETF, the zero value; sluice rls's flag says
// off).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "opaque", "none":
		return Off, nil
	}
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown header mode %q (want ietf, legacy or off)", s)
}
