package rls_test

import (
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// multiplierConfig uses envoyproxy/ratelimit's unit_multiplier. key1 and
// key2 are that server's own fixture (test/config/unit_multiplier.yaml);
// the others are periods that also are a longer unit (minute × 60, day × 7)
// and one that does not divide a minute (second × 7).
const multiplierConfig = `domain: test
descriptors:
  - key: key1
    rate_limit:
      unit: minute
      requests_per_unit: 20
      unit_multiplier: 5
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 25
  - key: hourly
    rate_limit:
      unit: minute
      requests_per_unit: 2
      unit_multiplier: 60
  - key: weekly
    rate_limit:
      unit: day
      requests_per_unit: 3
      unit_multiplier: 7
  - key: odd
    rate_limit:
      unit: second
      requests_per_unit: 2
      unit_multiplier: 7
`

// multiplierHarness serves multiplierConfig on store over gRPC, with the
// clock at t0 (2026-03-02 10:00:30 UTC, Unix 1772445630).
func multiplierHarness(t *testing.T, store storeFunc, opts rls.Options) *harness {
	t.Helper()
	cfg, err := rules.Parse("multiplier.yaml", []byte(multiplierConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{clock: &clock{t: t0}}
	h.start(t, store, set, opts)
	return h
}

// TestUnitMultiplier serves envoyproxy/ratelimit's unit_multiplier over a
// real gRPC client on every store. As that server computes it, the window
// is unit × unit_multiplier seconds aligned to the Unix epoch in multiples
// of it (Unix seconds divided by divider × multiplier, not by the unit),
// and duration_until_reset is that period − now mod that period. At t0
// (Unix 1772445630):
//
//	key1   5 minutes  1772445630 mod    300 =     30: reset    270 s (not 30, a minute's)
//	hourly 60 minutes 1772445630 mod   3600 =     30: reset   3570 s
//	weekly 7 days     1772445630 mod 604800 = 381630: reset 223170 s
//	odd    7 seconds  1772445630 mod      7 =      4: reset      3 s
func TestUnitMultiplier(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := multiplierHarness(t, store, rls.Options{})
		check := func(step string, hits uint32, desc *commonpb.RateLimitDescriptor, want st) *pb.RateLimitResponse_RateLimit {
			t.Helper()
			resp := h.call(t, hits, desc)
			if got := statusOf(resp.Statuses[0]); got != want {
				t.Errorf("%s: status = %+v, want %+v", step, got, want)
			}
			return resp.Statuses[0].CurrentLimit
		}

		// 20 per 5 minutes: the window holding t0 runs 10:00:00 to 10:05:00.
		check("key1", 19, d("key1", "a"), st{ok, 1, 20, 270})
		check("key1, the last one", 1, d("key1", "a"), st{ok, 0, 20, 270})
		check("key1, one more", 1, d("key1", "a"), st{over, 0, 20, 270})
		// At 10:01:00 a minute's window would begin; this one holds.
		h.clock.Add(30 * time.Second)
		check("key1 at the next minute", 1, d("key1", "a"), st{over, 0, 20, 240})
		// Its last nanosecond, 10:04:59.999999999: one second left,
		// rounded up as envoyproxy/ratelimit's whole seconds say it.
		h.clock.Add(240*time.Second - 1)
		check("key1, the window's last nanosecond", 1, d("key1", "a"), st{over, 0, 20, 1})
		// 10:05:00: a new window of five minutes.
		h.clock.Add(1)
		check("key1, the next window", 1, d("key1", "a"), st{ok, 19, 20, 300})

		// The odd window, 1772445626 to 1772445633 (Unix seconds), ends
		// three seconds after t0, not at a minute's boundary.
		h = multiplierHarness(t, store, rls.Options{}) // the clock at t0 again
		check("odd", 2, d("odd", "a"), st{ok, 0, 2, 3})
		check("odd, one more", 1, d("odd", "a"), st{over, 0, 2, 3})
		h.clock.Add(3*time.Second - 1)
		check("odd, the window's last nanosecond", 0, d("odd", "a"), st{over, 0, 2, 1})
		h.clock.Add(1)
		check("odd, the next window", 1, d("odd", "a"), st{ok, 1, 2, 7})
	})
}

// TestUnitMultiplierCurrentLimit checks current_limit: requests_per_unit,
// the unit and unit_multiplier as the file gives them (minute × 60 stays
// minute × 60, not an hour; day × 7 is not a week), as envoyproxy/ratelimit
// reports them, and no unit_multiplier for a rule without one. A limit
// override is reported as sent too. The resets are those of the table of
// TestUnitMultiplier.
func TestUnitMultiplierCurrentLimit(t *testing.T) {
	t.Parallel()
	h := multiplierHarness(t, memoryStore, rls.Options{})
	M, D := pb.RateLimitResponse_RateLimit_MINUTE, pb.RateLimitResponse_RateLimit_DAY
	override := d("user", "x")
	override.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 4, Unit: typepb.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(60)}
	for _, tc := range []struct {
		desc *commonpb.RateLimitDescriptor
		want st
		unit pb.RateLimitResponse_RateLimit_Unit
		mult uint32 // 0: no unit_multiplier
	}{
		{d("key1", "a"), st{ok, 19, 20, 270}, M, 5},
		{d("key2", "a"), st{ok, 24, 25, 30}, M, 0},
		{d("hourly", "a"), st{ok, 1, 2, 3570}, M, 60},
		{d("weekly", "a"), st{ok, 2, 3, 223170}, D, 7},
		{override, st{ok, 3, 4, 3570}, M, 60},
	} {
		s := h.call(t, 0, tc.desc).Statuses[0]
		if got := statusOf(s); got != tc.want {
			t.Errorf("%v: status = %+v, want %+v", tc.desc, got, tc.want)
		}
		cl := s.GetCurrentLimit()
		if cl.GetUnit() != tc.unit || (cl.GetUnitMultiplier() != nil) != (tc.mult != 0) || cl.GetUnitMultiplier().GetValue() != tc.mult {
			t.Errorf("%v: current_limit = %v, want unit %v, unit_multiplier %d", tc.desc, cl, tc.unit, tc.mult)
		}
	}
}

// TestUnitMultiplierHeaders: the IETF and legacy headers count the whole
// period, unit × unit_multiplier.
func TestUnitMultiplierHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode header.Mode
		want map[string]string
	}{
		{header.IETF, map[string]string{"RateLimit-Policy": `"test.key1";q=20;w=300`, "RateLimit": `"test.key1";r=19;t=270`}},
		{header.Legacy, map[string]string{"X-RateLimit-Limit": "20", "X-RateLimit-Remaining": "19", "X-RateLimit-Reset": "270"}},
	} {
		h := multiplierHarness(t, memoryStore, rls.Options{Headers: tc.mode})
		got := map[string]string{}
		for _, hv := range h.call(t, 0, d("key1", "a")).ResponseHeadersToAdd {
			got[hv.Key] = hv.Value
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%v: %s = %q, want %q (all: %v)", tc.mode, k, got[k], v, got)
			}
		}
	}
}
