package memstore_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// FuzzInvariants drives random limits and random request sequences through
// every algorithm's step and checks the suite's invariants: never more than
// the bound, never a negative Remaining, an honest RetryAfter.
func FuzzInvariants(f *testing.F) {
	f.Add(uint8(0), int64(5), int64(1000), int64(5), uint64(1))
	f.Add(uint8(1), int64(3), int64(1000), int64(7), uint64(2))
	f.Add(uint8(2), int64(10), int64(60000), int64(1), uint64(3))
	f.Add(uint8(3), int64(100), int64(250), int64(0), uint64(4))
	f.Add(uint8(4), int64(7), int64(3600000), int64(0), uint64(5))
	f.Add(uint8(5), int64(13), int64(1), int64(0), uint64(6))
	// envoyproxy/ratelimit's year (365 days) and the longest period
	// here (400 days), which only the window algorithms accept.
	f.Add(uint8(3), int64(3), int64(31536000000), int64(0), uint64(7))
	f.Add(uint8(4), int64(10), int64(31536000000), int64(0), uint64(8))
	f.Add(uint8(5), int64(5), int64(31536000000), int64(0), uint64(9))
	f.Add(uint8(4), int64(7), int64(34560000000), int64(0), uint64(10))
	f.Fuzz(func(t *testing.T, alg uint8, rate, periodMs, burst int64, seed uint64) {
		a := ratelimit.Algorithm(alg % 6)
		lim := ratelimit.Limit{Rate: rate, Period: time.Duration(periodMs) * time.Millisecond, Burst: burst}
		// CheckInvariants moves the clock forward from 2026, 60 times by up
		// to Period/4 and after a denial by RetryAfter (up to 2·Period):
		// with periods past 400 days it could pass 2262, where Unix
		// nanoseconds end. (FuzzExtremes, and internal/window's and
		// internal/slidinglog's fuzz tests, take periods up to MaxWindow.)
		if periodMs > 34560000000 || (ratelimit.Request{Limit: lim, Algorithm: a}).Validate() != nil ||
			rate == 0 || lim.Capacity(a) > 1<<20 || lim.Period < 4 {
			return
		}
		clock := ratelimittest.NewClock(ratelimittest.T0)
		s := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
		defer s.Close()
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		ratelimittest.CheckInvariants(t, s, clock, "k", a, lim, rng, 60)
	})
}

// FuzzExtremes feeds arbitrary limits, costs and times, including invalid
// and huge ones: Apply must return an error or a sane decision, never panic
// or overflow into nonsense.
func FuzzExtremes(f *testing.F) {
	f.Add(uint8(0), int64(1), int64(1), int64(1), int64(1), int64(0))
	f.Add(uint8(3), int64(1<<62), int64(1<<53), int64(1<<62), int64(1<<62), int64(-1<<62))
	f.Add(uint8(5), int64(2), int64(1<<53), int64(0), int64(9223372036854775807), int64(1<<62))
	// Long windows (a year, MaxWindow) early and late in int64 time.
	f.Add(uint8(3), int64(3), int64(31536000000000000), int64(0), int64(1), int64(1767225600000000000))
	f.Add(uint8(4), int64(1<<53), int64(1<<60), int64(0), int64(1<<52), int64(9223372036854775807))
	f.Add(uint8(5), int64(4), int64(1<<60), int64(0), int64(2), int64(-9223372036854775808))
	f.Add(uint8(0), int64(1), int64(31536000000000000), int64(0), int64(1), int64(0))
	f.Fuzz(func(t *testing.T, alg uint8, rate, period, burst, n, at int64) {
		now := time.Unix(0, at)
		s := memstore.New(memstore.Options{Now: func() time.Time { return now }, SweepInterval: -1})
		defer s.Close()
		req := ratelimit.Request{Key: "k", Limit: ratelimit.Limit{Rate: rate, Period: time.Duration(period), Burst: burst}, Algorithm: ratelimit.Algorithm(alg % 7), N: n}
		for range 3 {
			d, err := s.Apply(context.Background(), req)
			if err != nil {
				if req.Validate() == nil {
					t.Fatalf("Apply(%+v) = %v for a valid request", req, err)
				}
				return
			}
			capacity := req.Limit.Capacity(req.Algorithm)
			if d.Remaining < 0 || d.Remaining > capacity || d.RetryAfter < 0 || d.ResetAfter < 0 || d.Delay < 0 {
				t.Fatalf("Apply(%+v) = %+v: out of range (capacity %d)", req, d, capacity)
			}
			if d.Allowed && n > capacity {
				t.Fatalf("Apply(%+v) = %+v: admitted more than the capacity %d", req, d, capacity)
			}
			if d.Unsatisfiable != (n > capacity) {
				t.Fatalf("Apply(%+v) = %+v: Unsatisfiable %v, cost %d, capacity %d", req, d, d.Unsatisfiable, n, capacity)
			}
		}
	})
}
