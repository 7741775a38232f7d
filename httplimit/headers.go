package httplimit

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/sfv"
	"github.com/sluicehq/sluice/ratelimit"
)

// HeaderMode selects the rate limit headers of responses.
type HeaderMode uint8

const (
	// IETF sets RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers), and Retry-After on 429:
	//
	//	RateLimit-Policy: "per-user";q=100;w=60
	//	RateLimit: "per-user";r=42;t=17
	IETF HeaderMode = iota
	// Legacy sets X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (Unix time in seconds) for the policy with the
	// fewest remaining events, and Retry-After on 429.
	Legacy
	// Opaque sets no rate limit header: a 429 carries no Retry-After and
	// no quota information, and its body names no policy.
	Opaque
)

var headerModeNames = [...]string{"ietf", "legacy", "opaque"}

// String returns ietf, legacy or opaque.
func (h HeaderMode) String() string {
	if int(h) < len(headerModeNames) {
		return headerModeNames[h]
	}
	return "headermode(" + strconv.Itoa(int(h)) + ")"
}

// ParseHeaderMode returns the mode named s: ietf, legacy or opaque. The
// empty string is IETF.
func ParseHeaderMode(s string) (HeaderMode, error) {
	if s == "" {
		return IETF, nil
	}
	for i, n := range headerModeNames {
		if n == s {
			return HeaderMode(i), nil
		}
	}
	return 0, fmt.Errorf("httplimit: unknown header mode %q (want ietf, legacy or opaque)", s)
}

// quotaOf returns the q and w (seconds) of a policy: a bucket holds Burst
// events and refills completely in Burst·Interval; a window holds Rate
// events per Period; a calendar quota holds its limit per period.
func quotaOf(a *applied) (q, w int64) {
	lim := a.d.Limit
	if lim.Period == 0 {
		lim = a.Request.Limit.Normalize()
	}
	switch {
	case a.Rule != nil && a.Rule.Quota != nil:
		return a.Rule.Quota.Limit, ratelimit.DurationCeil(a.d.ResetAfter)
	default:
		q, window := lim.Policy(a.Request.Algorithm)
		return q, ratelimit.DurationCeil(window)
	}
}

func setHeaders(h http.Header, mode HeaderMode, as []applied, denied int, now time.Time) {
	switch mode {
	case IETF:
		// Both fields are built in one buffer and become one string and one
		// []string: two allocations for the pair.
		var buf [256]byte
		b := buf[:0]
		n := 0
		for pass := 0; pass < 2; pass++ {
			if pass == 1 {
				n = len(b)
			}
			first := true
			for i := range as {
				a := &as[i]
				if a.Shadow || a.failed {
					continue
				}
				if !first {
					b = append(b, ", "...)
				}
				first = false
				b = sfv.AppendString(b, a.policy)
				if pass == 0 {
					q, w := quotaOf(a)
					if !a.QuotaEnd.IsZero() {
						w = quotaSeconds(a)
					}
					b = append(b, ";q="...)
					b = strconv.AppendInt(b, q, 10)
					b = append(b, ";w="...)
					b = strconv.AppendInt(b, w, 10)
				} else {
					b = append(b, ";r="...)
					b = strconv.AppendInt(b, a.d.Remaining, 10)
					b = append(b, ";t="...)
					b = strconv.AppendInt(b, ratelimit.DurationCeil(a.d.ResetAfter), 10)
				}
			}
			if first {
				break // no enforced policy
			}
		}
		if n > 0 {
			str := string(b)
			vals := []string{str[:n], str[n:]}
			h["Ratelimit-Policy"] = vals[0:1:1]
			h["Ratelimit"] = vals[1:2:2]
		}
	case Legacy:
		best := -1
		if denied >= 0 {
			best = denied
		} else {
			for i := range as {
				if !as[i].Shadow && !as[i].failed && (best < 0 || as[i].d.Remaining < as[best].d.Remaining) {
					best = i
				}
			}
		}
		if best < 0 {
			break
		}
		a := &as[best]
		q, _ := quotaOf(a)
		h["X-Ratelimit-Limit"] = []string{strconv.FormatInt(q, 10)}
		h["X-Ratelimit-Remaining"] = []string{strconv.FormatInt(a.d.Remaining, 10)}
		h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(now.Add(a.d.ResetAfter).Unix()+boolInt(a.d.ResetAfter%time.Second != 0), 10)}
	case Opaque:
		return
	}
	if denied >= 0 && as[denied].d.RetryAfter > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(ratelimit.DurationCeil(as[denied].d.RetryAfter), 10)}
	}
}

// quotaSeconds is the length of a calendar quota's period in seconds.
func quotaSeconds(a *applied) int64 {
	if a.Rule.Quota.Period == "month" {
		start := time.Date(a.QuotaEnd.Year(), a.QuotaEnd.Month()-1, 1, 0, 0, 0, 0, time.UTC)
		return int64(a.QuotaEnd.Sub(start) / time.Second)
	}
	return 86400
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
