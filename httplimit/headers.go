package httplimit

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/server/rlheader"
	"github.com/sluicehq/sluice/ratelimit"
)

// HeaderMode selects the rate limit headers of responses; see
// ratelimit.HeaderMode, shared with the RLS.
type HeaderMode = ratelimit.HeaderMode

// The header modes.
const (
	// IETF (the default) sets RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers), and Retry-After on 429.
	IETF = ratelimit.HeadersIETF
	// Legacy sets X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds until the policy is full again) for the
	// policy that denied, else the one with the fewest remaining events,
	// and Retry-After on 429.
	Legacy = ratelimit.HeadersLegacy
	// Opaque sets no rate limit header: a 429 carries no Retry-After and
	// no quota information, and its body names no policy.
	Opaque = ratelimit.HeadersOff
)

// ParseHeaderMode returns the mode named s: ietf, legacy, or off (also
// opaque). The empty string is IETF.
func ParseHeaderMode(s string) (HeaderMode, error) {
	if s == "" {
		return IETF, nil
	}
	return ratelimit.ParseHeaderMode(s)
}

// setHeaders writes the headers of mode for the enforced rules of as;
// denied is the index of the rule that denied (-1: none).
func setHeaders(h http.Header, mode HeaderMode, as []applied, denied int) {
	if mode == Opaque {
		return
	}
	var buf [4]rlheader.State
	ps := buf[:0]
	for i := range as {
		a := &as[i]
		if a.Shadow || a.failed {
			continue
		}
		q, w := a.Quota()
		ps = append(ps, rlheader.State{Name: a.policy, Quota: q, Window: ratelimit.DurationCeil(w),
			Remaining: a.d.Remaining, Reset: ratelimit.DurationCeil(a.d.ResetAfter),
			Over: i == denied, RetryAfter: ratelimit.DurationCeil(a.d.RetryAfter)})
	}
	// One array holds every header's value: one allocation for all.
	vals := make([]string, 0, 3)
	rlheader.Write(mode, ps, func(name, value string) {
		vals = append(vals, value)
		n := len(vals)
		h[canonical(name)] = vals[n-1 : n : n]
	})
}

// canonical is name in net/http's canonical form, without allocating.
func canonical(name string) string {
	switch name {
	case rlheader.Policy:
		return "Ratelimit-Policy"
	case rlheader.RateLimit:
		return "Ratelimit"
	case rlheader.Limit:
		return "X-Ratelimit-Limit"
	case rlheader.Remaining:
		return "X-Ratelimit-Remaining"
	case rlheader.Reset:
		return "X-Ratelimit-Reset"
	}
	return http.CanonicalHeaderKey(name)
}
