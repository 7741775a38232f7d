package rules

import (
	"os"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestLongUnits parses envoyproxy/ratelimit's week, month and year (7, 30
// and 365 days, as its UnitToDivider says) and a sluice window of ten
// years: the windows take periods past the buckets' MaxPeriod.
func TestLongUnits(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/good/long_units.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("long_units.yaml", data)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	const day = 24 * time.Hour
	for _, tc := range []struct {
		key    string
		alg    ratelimit.Algorithm
		period time.Duration
		rate   int64
	}{
		{"week", ratelimit.FixedWindow, 604800 * time.Second, 1000},
		{"month", ratelimit.FixedWindow, 2592000 * time.Second, 4000},
		{"year", ratelimit.FixedWindow, 31536000 * time.Second, 50000},
		{"sliding_year", ratelimit.SlidingWindowCounter, 365 * day, 50000},
		{"decade_log", ratelimit.SlidingWindowLog, 3650 * day, 3},
	} {
		r := cfg.Match(e(tc.key, "x"))
		if r == nil {
			t.Errorf("Match(%s) = nil", tc.key)
			continue
		}
		if want := (ratelimit.Limit{Rate: tc.rate, Period: tc.period}); r.Algorithm != tc.alg || r.Limit != want {
			t.Errorf("Match(%s) = %v %v, want %v %v", tc.key, r.Algorithm, r.Limit, tc.alg, want)
		}
		if err := (ratelimit.Request{Limit: r.Limit, Algorithm: r.Algorithm, N: 1}).Validate(); err != nil {
			t.Errorf("%s: the parsed limit does not validate: %v", tc.key, err)
		}
	}
}
