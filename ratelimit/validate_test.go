package ratelimit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestValidatePeriodBounds checks the two period bounds: MaxPeriod for the
// bucket algorithms, MaxWindow for the window algorithms (which take
// envoyproxy/ratelimit's unit: year).
func TestValidatePeriodBounds(t *testing.T) {
	t.Parallel()
	const year = 365 * 24 * time.Hour
	windows := []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog}
	buckets := []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.LeakyBucket}
	for _, tc := range []struct {
		period     time.Duration
		rate       int64
		windowsOK  bool
		bucketsOK  bool
		limitValid bool // Limit.Validate, which does not know the algorithm
	}{
		{ratelimit.MaxPeriod, 1, true, true, true},
		{ratelimit.MaxPeriod + 1, 1, true, false, true},
		{30 * 24 * time.Hour, 1, true, true, true}, // envoy's month
		{year, 1, true, false, true},
		{year, ratelimit.MaxRate, true, false, true},
		{year, 0, true, false, true}, // a zero rate blocks everything, but no bucket takes a year
		{10 * year, 7, true, false, true},
		{ratelimit.MaxWindow, 1, true, false, true},
		{ratelimit.MaxWindow + 1, 1, false, false, false},
		{1<<63 - 1, 1, false, false, false},
	} {
		lim := ratelimit.Limit{Rate: tc.rate, Period: tc.period}
		if err := lim.Validate(); (err == nil) != tc.limitValid || (err != nil && !errors.Is(err, ratelimit.ErrInvalidLimit)) {
			t.Errorf("%v.Validate() = %v, want valid %v", lim, err, tc.limitValid)
		}
		for _, algs := range []struct {
			list []ratelimit.Algorithm
			ok   bool
		}{{windows, tc.windowsOK}, {buckets, tc.bucketsOK}} {
			for _, a := range algs.list {
				err := ratelimit.Request{Limit: lim, Algorithm: a, N: 1}.Validate()
				if (err == nil) != algs.ok || (err != nil && !errors.Is(err, ratelimit.ErrInvalidLimit)) {
					t.Errorf("Request{%v, %v}.Validate() = %v, want valid %v", lim, a, err, algs.ok)
				}
			}
		}
	}
	// An unknown algorithm is a request error, whatever the period.
	err := ratelimit.Request{Limit: ratelimit.Limit{Rate: 1, Period: year}, Algorithm: 200, N: 1}.Validate()
	if !errors.Is(err, ratelimit.ErrInvalidRequest) {
		t.Errorf("unknown algorithm with a year: Validate() = %v, want ErrInvalidRequest", err)
	}
}

func TestFailurePolicyText(t *testing.T) {
	for _, p := range []ratelimit.FailurePolicy{ratelimit.FailError, ratelimit.FailAllow, ratelimit.FailDeny, ratelimit.FailLocal} {
		b, err := p.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var q ratelimit.FailurePolicy
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Errorf("%v: round trip gave %v, %v", p, q, err)
		}
	}
	if _, err := ratelimit.ParseFailurePolicy("open"); err == nil {
		t.Error("ParseFailurePolicy(open) = nil error")
	}
}

// TestPrefetchable: the one answer of what prefetch mode may decide, for
// every algorithm: gcra, token_bucket and fixed_window; the others an
// error wrapping ErrInvalidRequest that names the algorithm.
func TestPrefetchable(t *testing.T) {
	for _, a := range ratelimit.Algorithms() {
		err := a.Prefetchable()
		want := a == ratelimit.GCRA || a == ratelimit.TokenBucket || a == ratelimit.FixedWindow
		if (err == nil) != want {
			t.Errorf("%v: Prefetchable() = %v, want prefetchable %v", a, err, want)
		}
		if err != nil && (!errors.Is(err, ratelimit.ErrInvalidRequest) || !strings.Contains(err.Error(), a.String()) || !strings.HasPrefix(err.Error(), "ratelimit: ")) {
			t.Errorf("%v: Prefetchable() = %q, want an ErrInvalidRequest naming it", a, err)
		}
	}
}
