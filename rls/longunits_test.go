package rls_test

import (
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// envoyHarness serves the unmodified envoyproxy/ratelimit config directory
// examples/envoy/config over gRPC, on store, with the clock at t0
// (2026-03-02 10:00:30 UTC, Unix 1772445630).
func envoyHarness(t *testing.T, store storeFunc) *harness {
	t.Helper()
	set, err := rules.LoadDir("../examples/envoy/config")
	if err != nil {
		t.Fatalf("LoadDir(examples/envoy/config) = %v", err)
	}
	h := &harness{clock: &clock{t: t0}}
	h.start(t, store, set, rls.Options{})
	return h
}

// TestLongUnits serves envoyproxy/ratelimit's week, month and year (7, 30
// and 365 days, its UnitToDivider) from the unmodified example config, over
// a real gRPC client, on every store. Like that server, each is a fixed
// window aligned to the Unix epoch, and duration_until_reset is
// divider − now mod divider in seconds. At t0 (Unix 1772445630):
//
//	year   1772445630 mod 31536000 = 6429630: reset 25106370 s (the window ends 2026-12-18)
//	month  1772445630 mod  2592000 = 2109630: reset   482370 s
//	week   1772445630 mod   604800 =  381630: reset   223170 s
func TestLongUnits(t *testing.T) {
	const yearReset = 25106370
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := envoyHarness(t, store)
		call := func(hits uint64, quota string) *pb.RateLimitResponse_DescriptorStatus {
			t.Helper()
			resp, err := h.client.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{
				Domain:      "messaging",
				Descriptors: []*commonpb.RateLimitDescriptor{withHits(d("account", "acme", "quota", quota), hits)},
			})
			if err != nil {
				t.Fatalf("ShouldRateLimit = %v", err)
			}
			return resp.Statuses[0]
		}
		check := func(step string, s *pb.RateLimitResponse_DescriptorStatus, want st, unit pb.RateLimitResponse_RateLimit_Unit) {
			t.Helper()
			if got := statusOf(s); got != want {
				t.Errorf("%s: status = %+v, want %+v", step, got, want)
			}
			if got := s.GetCurrentLimit(); got.GetUnit() != unit || got.GetUnitMultiplier() != nil {
				t.Errorf("%s: current_limit = %v, want unit %v and no multiplier", step, got, unit)
			}
		}
		Y, M, W := pb.RateLimitResponse_RateLimit_YEAR, pb.RateLimitResponse_RateLimit_MONTH, pb.RateLimitResponse_RateLimit_WEEK

		check("week", call(1, "weekly"), st{ok, 19999, 20000, 223170}, W)
		check("month", call(1, "monthly"), st{ok, 59999, 60000, 482370}, M)
		check("year, a check", call(0, "yearly"), st{ok, 500000, 500000, yearReset}, Y)
		check("year", call(499999, "yearly"), st{ok, 1, 500000, yearReset}, Y)
		check("year, the last one", call(1, "yearly"), st{ok, 0, 500000, yearReset}, Y)
		check("year, one more", call(1, "yearly"), st{over, 0, 500000, yearReset}, Y)

		// A nanosecond before 2026-12-18 the year-long window still holds:
		// one second left, rounded up as envoyproxy/ratelimit's whole
		// seconds would say at that (whole) second.
		h.clock.Add(yearReset*time.Second - 1)
		check("the window's last nanosecond", call(1, "yearly"), st{over, 0, 500000, 1}, Y)
		// On 2026-12-18 a new year begins: the whole quota, a year to go.
		h.clock.Add(1)
		check("a new year", call(1, "yearly"), st{ok, 499999, 500000, 31536000}, Y)
	})
}

// TestLongUnitOverride applies limit overrides in YEAR (times
// unit_multiplier) as fixed windows of 365 days (times it), up to
// ratelimit.MaxWindow: 36 years, not 37.
func TestLongUnitOverride(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		h := newHarness(t, store, rls.Options{})
		o := d("user", "erin")
		o.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typepb.RateLimitUnit_YEAR}
		runSteps(t, h, []step{
			{0, o, st{ok, 1, 2, 25106370}},
			{0, o, st{ok, 0, 2, 25106370}},
			{0, o, st{over, 0, 2, 25106370}},
		})
		if cl := h.call(t, 0, o).Statuses[0].CurrentLimit; cl.GetUnit() != pb.RateLimitResponse_RateLimit_YEAR || cl.GetUnitMultiplier() != nil {
			t.Errorf("current_limit = %v, want 2 per YEAR", cl)
		}

		// Two years: the epoch-aligned window of 63072000 s holding t0
		// began 1766016000 (28·63072000) too, so the same reset.
		o2 := d("user", "frank")
		o2.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typepb.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(2)}
		resp := h.call(t, 0, o2)
		if got, want := statusOf(resp.Statuses[0]), (st{ok, 0, 1, 63072000 - 6429630}); got != want {
			t.Errorf("2 YEAR override: status = %+v, want %+v", got, want)
		}
		if cl := resp.Statuses[0].CurrentLimit; cl.GetUnit() != pb.RateLimitResponse_RateLimit_YEAR || cl.GetUnitMultiplier().GetValue() != 2 {
			t.Errorf("current_limit = %v, want 1 per 2 YEAR", cl)
		}

		for _, m := range []uint32{36, 37} {
			o3 := d("user", "gina")
			o3.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typepb.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(m)}
			_, err := h.client.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "test", Descriptors: []*commonpb.RateLimitDescriptor{o3}})
			if (err == nil) != (m == 36) {
				t.Errorf("override of %d YEAR: err = %v, want an error only past MaxWindow (36 years)", m, err)
			}
		}
	})
}
