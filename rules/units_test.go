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

// TestUnitMultiplier parses envoyproxy/ratelimit's unit_multiplier: the
// period is unit × unit_multiplier, for every algorithm, and the rule keeps
// the unit and the multiplier as the file gives them (current_limit
// reports them).
func TestUnitMultiplier(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/good/unit_multiplier.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("unit_multiplier.yaml", data)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	const year = 365 * 24 * time.Hour
	for _, tc := range []struct {
		key   string
		alg   ratelimit.Algorithm
		limit ratelimit.Limit
		unit  string
		mult  uint32
	}{
		{"key1", ratelimit.FixedWindow, ratelimit.Limit{Rate: 20, Period: 5 * time.Minute}, "minute", 5},
		{"key2", ratelimit.FixedWindow, ratelimit.Limit{Rate: 25, Period: time.Minute}, "minute", 0},
		{"key3", ratelimit.FixedWindow, ratelimit.Limit{Rate: 7, Period: time.Hour}, "hour", 1},
		{"key4", ratelimit.FixedWindow, ratelimit.Limit{Rate: 1000000, Period: 36 * year}, "year", 36},
		{"key5", ratelimit.TokenBucket, ratelimit.Limit{Rate: 10, Period: 30 * time.Second, Burst: 4}, "second", 30},
	} {
		r := cfg.Match(e(tc.key, "x"))
		if r == nil {
			t.Errorf("Match(%s) = nil", tc.key)
			continue
		}
		if r.Algorithm != tc.alg || r.Limit != tc.limit || r.Unit != tc.unit || r.UnitMultiplier != tc.mult {
			t.Errorf("Match(%s) = %v %v unit %q × %d, want %v %v unit %q × %d", tc.key, r.Algorithm, r.Limit, r.Unit, r.UnitMultiplier, tc.alg, tc.limit, tc.unit, tc.mult)
		}
		if err := (ratelimit.Request{Limit: r.Limit, Algorithm: r.Algorithm, N: 1}).Validate(); err != nil {
			t.Errorf("%s: the parsed limit does not validate: %v", tc.key, err)
		}
	}
	if r := cfg.Match(e("key6", "x")); r == nil || !r.Unlimited || r.Unit != "" || r.UnitMultiplier != 0 {
		t.Errorf("Match(key6) = %+v, want unlimited with no unit", r)
	}
	// A sluice window has no envoy unit.
	w, err := Parse("w.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 90s, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := w.Match(e("k", "v")); r == nil || r.Unit != "" || r.UnitMultiplier != 0 || r.Limit.Period != 90*time.Second {
		t.Errorf("window rule = %+v, want 1/90s with no unit", r)
	}
}
