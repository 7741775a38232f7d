package header

import (
	"strconv"
)

// Header names, as they are written.
const (
	Policy     = "RateLimit-Policy"
	RateLimit  = "RateLimit"
	RetryAfter = "Retry-After"
	Limit      = "X-RateLimit-Limit"
	Remaining  = "X-RateLimit-Remaining"
	Reset      = "X-RateLimit-Reset"

	// envoyproxy/ratelimit's names for the legacy mode's three headers
	// (the defaults of its LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
	// LIMIT_RESET_HEADER).
	EnvoyLimit     = "RateLimit-Limit"
	EnvoyRemaining = "RateLimit-Remaining"
	EnvoyReset     = "RateLimit-Reset"
)

// Names renames what Legacy writes. The zero value is the legacy
// mode as it is: X-RateLimit-Limit, -Remaining, -Reset and Retry-After.
type Names struct {
	// Limit, Remaining and Reset replace Limit, Remaining and Reset when
	// not empty.
	Limit, Remaining, Reset string
	// NoRetryAfter leaves Retry-After out, as envoyproxy/ratelimit does
	// (it never sends one).
	NoRetryAfter bool
}

// EnvoyNames are envoyproxy/ratelimit's headers with
// LIMIT_RESPONSE_HEADERS_ENABLED and the default names.
var EnvoyNames = Names{Limit: EnvoyLimit, Remaining: EnvoyRemaining, Reset: EnvoyReset, NoRetryAfter: true}

func orDefault(name, def string) string {
	if name == "" {
		return def
	}
	return name
}

// State is one enforced policy's state after a request.
type State struct {
	Name      string // the policy name
	Quota     int64  // q: events the policy admits per window
	Window    int64  // w: the window, in seconds
	Remaining int64  // r: events admitted right now
	Reset     int64  // t: seconds until the policy is back to full
	// Over: this policy denied the request. RetryAfter is then the
	// seconds after which the same request would be admitted (0: none
	// known).
	Over       bool
	RetryAfter int64
}

// AppendPolicy appends the RateLimit-Policy value of ps to b. It depends
// only on each policy's name, quota and window, not on the request, so a
// caller can cache it.
func AppendPolicy(b []byte, ps []State) []byte { return appendMembers(b, ps, true) }

// AppendRateLimit appends the RateLimit value of ps to b.
func AppendRateLimit(b []byte, ps []State) []byte { return appendMembers(b, ps, false) }

// appendMembers appends one list member a policy: its name and either q
// and w (policy) or r and t.
func appendMembers(b []byte, ps []State, policy bool) []byte {
	k1, k2 := ";r=", ";t="
	if policy {
		k1, k2 = ";q=", ";w="
	}
	for i := range ps {
		p := &ps[i]
		v1, v2 := max(0, p.Remaining), max(0, p.Reset)
		if policy {
			v1, v2 = p.Quota, p.Window
		}
		if i > 0 {
			b = append(b, ", "...)
		}
		b = AppendString(b, p.Name)
		b = append(b, k1...)
		b = strconv.AppendInt(b, v1, 10)
		b = append(b, k2...)
		b = strconv.AppendInt(b, v2, 10)
	}
	return b
}

// RetryAfterOf returns the Retry-After seconds of ps: the largest
// RetryAfter of the policies that are Over (0: no header).
func RetryAfterOf(ps []State) int64 {
	retry := int64(0)
	for i := range ps {
		if ps[i].Over {
			retry = max(retry, ps[i].RetryAfter)
		}
	}
	return retry
}

// Write calls set once per header that mode sends for ps (the enforced
// policies, in order). For IETF the two fields share one string.
func Write(mode Mode, ps []State, set func(name, value string)) {
	WriteNamed(mode, Names{}, ps, set)
}

// WriteNamed is Write with the legacy mode's headers named by names.
func WriteNamed(mode Mode, names Names, ps []State, set func(name, value string)) {
	if len(ps) == 0 || mode == Off {
		return
	}
	retry := RetryAfterOf(ps)
	switch mode {
	case IETF:
		var buf [256]byte
		b := AppendPolicy(buf[:0], ps)
		n := len(b)
		s := string(AppendRateLimit(b, ps))
		set(Policy, s[:n])
		set(RateLimit, s[n:])
	case Legacy:
		// envoyproxy/ratelimit's choice: an over-limit policy (the last)
		// wins outright, else the fewest remaining (the first of equals).
		best, over := -1, false
		for i := range ps {
			switch {
			case ps[i].Over:
				best, over = i, true
			case !over && (best < 0 || ps[i].Remaining < ps[best].Remaining):
				best = i
			}
		}
		p := &ps[best]
		set(orDefault(names.Limit, Limit), strconv.FormatInt(p.Quota, 10))
		set(orDefault(names.Remaining, Remaining), strconv.FormatInt(max(0, p.Remaining), 10))
		set(orDefault(names.Reset, Reset), strconv.FormatInt(max(0, p.Reset), 10))
		if names.NoRetryAfter {
			return
		}
	default:
		return
	}
	if retry > 0 {
		set(RetryAfter, strconv.FormatInt(retry, 10))
	}
}
