package retry

import (
	"net/http"
	"strings"
	"time"
)

// MaxRetryAfter is the longest delay ParseRetryAfter returns: a longer
// Retry-After is absurd for a request a client is holding, and is clamped to
// it (and then, in Do, refused by any sane MaxDelay).
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses the value of a Retry-After header: delta-seconds
// ("120") or an HTTP-date in any of the three forms of RFC 9110
// ("Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
// "Sun Nov  6 08:49:37 1994"), a date being read relative to now.
//
// ok is false when value is neither. Values are clamped, never refused:
// a negative number of seconds or a date in the past means no delay, and
// anything longer than MaxRetryAfter (including numbers too large for any
// integer) means MaxRetryAfter. Fractional seconds ("1.5"), which RFC 9110
// does not allow but some servers send, are rounded up.
func ParseRetryAfter(value string, now time.Time) (delay time.Duration, ok bool) {
	return parseRetryAfter(value, "", now)
}

// RetryAfter returns the delay asked for by the Retry-After field of h, or
// ok false when there is none or it cannot be parsed.
//
// A date is read against the response's own Date field when it has a valid
// one, so that a skewed clock on either side does not change the delay: a
// server whose clock runs an hour fast and says "retry at 10:00:30, it is
// 10:00:00" means 30 seconds. Without a Date field it is read against now.
func RetryAfter(h http.Header, now time.Time) (delay time.Duration, ok bool) {
	return parseRetryAfter(h.Get("Retry-After"), h.Get("Date"), now)
}

// parseRetryAfter is ParseRetryAfter reading a date against date, the
// response's Date field, when that is a valid HTTP-date, else against now.
func parseRetryAfter(value, date string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if d, ok := parseSeconds(v); ok {
		return d, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	ref := now
	if date != "" {
		if d, err := http.ParseTime(date); err == nil {
			ref = d
		}
	}
	return clampDate(t.Sub(ref), t, ref), true
}

// clampDate clamps the delay d between a Retry-After date t and its
// reference time; Sub saturates, so far dates already land at the extremes.
func clampDate(d time.Duration, t, ref time.Time) time.Duration {
	switch {
	case d <= 0 || t.Before(ref):
		return 0
	case d > MaxRetryAfter:
		return MaxRetryAfter
	}
	return d
}

// parseSeconds parses delta-seconds leniently: [-]digits[.digits].
func parseSeconds(v string) (time.Duration, bool) {
	neg := false
	if v[0] == '-' {
		neg, v = true, v[1:]
	}
	intPart, frac, hasDot := strings.Cut(v, ".")
	if intPart == "" && (!hasDot || frac == "") {
		return 0, false
	}
	if !digits(intPart) || !digits(frac) {
		return 0, false
	}
	if neg {
		return 0, true
	}
	const maxSecs = int64(MaxRetryAfter / time.Second)
	var secs int64
	for i := 0; i < len(intPart); i++ {
		secs = secs*10 + int64(intPart[i]-'0')
		if secs > maxSecs {
			return MaxRetryAfter, true
		}
	}
	if strings.Trim(frac, "0") != "" {
		secs++ // round a fraction up: never retry early
	}
	return min(time.Duration(secs)*time.Second, MaxRetryAfter), true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
