package window_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

const year = 365 * 24 * time.Hour

// t0 is 2026-01-01 in Unix ns.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// floorBig returns the start of the window of length w holding now,
// computed with big integers: the reference for the steps' int64 arithmetic.
func floorBig(now, w int64) int64 {
	q := new(big.Int).Div(big.NewInt(now), big.NewInt(w)) // Euclidean: rounds down for w > 0
	return q.Mul(q, big.NewInt(w)).Int64()
}

// addSat returns a + b (b ≥ 0) or math.MaxInt64 when the sum does not fit.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// nextNow moves now the way the fuzz tests do: mostly forward by a
// fraction of the window, sometimes not at all, by whole windows, back, or
// to the ends of int64 time. It never wraps.
func nextNow(rng *rand.Rand, now, w int64) int64 {
	var d int64
	switch r := rng.IntN(16); {
	case r < 2:
		return now
	case r < 4:
		d = rng.Int64N(1000)
	case r < 5:
		d = -rng.Int64N(w) - 1
	case r < 6:
		d = w
	case r < 7:
		d = w*(1+rng.Int64N(3)) + rng.Int64N(3) - 1
	case r < 8:
		switch rng.IntN(3) {
		case 0:
			return math.MaxInt64 - rng.Int64N(2*w)
		case 1:
			return math.MinInt64 + rng.Int64N(2*w)
		}
		return t0 + rng.Int64N(w)
	default:
		d = rng.Int64N(w/2 + 1)
	}
	if d > 0 && now > math.MaxInt64-d || d < 0 && now < math.MinInt64-d {
		return now
	}
	return now + d
}

// FuzzFixed compares Fixed with a reference that computes its windows with
// big integers, over periods up to MaxWindow and times anywhere in int64:
// every field of every decision, the window start and the expiry.
func FuzzFixed(f *testing.F) {
	f.Add(int64(3), int64(time.Second), t0, uint64(1))
	f.Add(int64(3), int64(year), t0, uint64(2))
	f.Add(int64(1), int64(ratelimit.MaxPeriod)+1, t0, uint64(3))
	f.Add(int64(ratelimit.MaxRate), int64(ratelimit.MaxWindow), int64(math.MaxInt64), uint64(4))
	f.Add(int64(5), int64(ratelimit.MaxWindow), int64(math.MinInt64), uint64(5))
	f.Add(int64(2), int64(10*year)+7, int64(-1), uint64(6))
	f.Fuzz(func(t *testing.T, rate, period, now int64, seed uint64) {
		lim := ratelimit.Limit{Rate: rate, Period: time.Duration(period)}
		req := ratelimit.Request{Limit: lim, Algorithm: ratelimit.FixedWindow}
		if req.Validate() != nil || rate == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, uint64(period)))
		w := period
		var s window.State
		// The reference's state: the window and count of the last admitted
		// request, which is all a fixed window keeps.
		var refStart, refCount int64
		started := false
		for i := range 64 {
			now = nextNow(rng, now, w)
			req.N = rng.Int64N(rate + 2)
			if rng.IntN(4) == 0 {
				req.N = min(rate, 1+rng.Int64N(3))
			}
			// The reference: time back into an earlier window stays in the
			// newest one, at its start; a time in the first window of int64
			// time counts as MinInt64+w.
			eff := max(now, math.MinInt64+w)
			start, count := floorBig(eff, w), int64(0)
			switch {
			case !started:
			case start < refStart:
				start, count, eff = refStart, refCount, refStart
			case start == refStart:
				count = refCount
			}
			untilEnd := time.Duration(new(big.Int).Sub(new(big.Int).Add(big.NewInt(start), big.NewInt(w)), big.NewInt(eff)).Int64())
			want := ratelimit.Decision{Limit: lim.Normalize(), Remaining: rate - count}
			if count > 0 {
				want.ResetAfter = untilEnd
			}
			switch {
			case req.N == 0:
				want.Allowed = true
			case req.N > rate:
				want.Unsatisfiable = true
			case req.N > rate-count:
				want.RetryAfter = untilEnd
			default:
				refStart, refCount, started = start, count+req.N, true
				want.Allowed, want.Remaining, want.ResetAfter = true, rate-refCount, untilEnd
			}
			var d ratelimit.Decision
			s, d = window.Fixed(s, now, req)
			if d != want {
				t.Fatalf("step %d: Fixed(at %d, %v, n %d) = %+v, want %+v", i, now, lim, req.N, d, want)
			}
			if !started {
				continue
			}
			if s.Start != refStart || s.Curr != refCount || s.Prev != 0 {
				t.Fatalf("step %d: state %+v, want start %d count %d", i, s, refStart, refCount)
			}
			if got, want := s.Expiry(false, lim.Period), addSat(refStart, w); got != want {
				t.Fatalf("step %d: Expiry = %d, want %d", i, got, want)
			}
		}
	})
}

// FuzzSliding drives Sliding over periods up to MaxWindow and times
// anywhere in int64, and checks what does not depend on its float64
// estimate: the window start (against big integers), the counters, the
// ranges of the durations, the expiry, and that RetryAfter is honest.
func FuzzSliding(f *testing.F) {
	f.Add(int64(10), int64(time.Second), t0, uint64(1))
	f.Add(int64(10), int64(year), t0, uint64(2))
	f.Add(int64(3), int64(ratelimit.MaxPeriod)+1, t0, uint64(3))
	f.Add(int64(ratelimit.MaxRate), int64(ratelimit.MaxWindow), int64(math.MaxInt64), uint64(4))
	f.Add(int64(5), int64(ratelimit.MaxWindow), int64(math.MinInt64), uint64(5))
	f.Add(int64(2), int64(10*year)+7, int64(-1), uint64(6))
	f.Fuzz(func(t *testing.T, rate, period, now int64, seed uint64) {
		lim := ratelimit.Limit{Rate: rate, Period: time.Duration(period)}
		req := ratelimit.Request{Limit: lim, Algorithm: ratelimit.SlidingWindowCounter}
		if req.Validate() != nil || rate == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, uint64(period)))
		w := period
		var s window.State
		for i := range 64 {
			now = nextNow(rng, now, w)
			req.N = rng.Int64N(rate + 2)
			if rng.IntN(4) == 0 {
				req.N = min(rate, 1+rng.Int64N(3))
			}
			old := s
			var d ratelimit.Decision
			s, d = window.Sliding(old, now, req)
			if d.Remaining < 0 || d.Remaining > rate || d.RetryAfter < 0 || d.RetryAfter > 2*lim.Period ||
				d.ResetAfter < 0 || d.ResetAfter > 2*lim.Period || d.Delay != 0 || d.Unsatisfiable != (req.N > rate) {
				t.Fatalf("step %d: Sliding(at %d, %v, n %d) = %+v: out of range", i, now, lim, req.N, d)
			}
			if !d.Allowed || req.N == 0 {
				if s != old {
					t.Fatalf("step %d: a request that consumed nothing changed the state %+v to %+v", i, old, s)
				}
			} else {
				// The window holding now, or the newest seen when time went
				// back.
				eff := max(now, math.MinInt64+w)
				ws := floorBig(eff, w)
				if old != (window.State{}) && ws < old.Start {
					eff, ws = old.Start, old.Start
				}
				if s.Start != ws {
					t.Fatalf("step %d: start %d, want %d", i, s.Start, ws)
				}
				switch {
				case old == (window.State{}) || ws > addSat(old.Start, w):
					if s.Prev != 0 || s.Curr != req.N {
						t.Fatalf("step %d: state %+v after %+v, want a fresh window", i, s, old)
					}
				case ws == old.Start:
					if s.Prev != old.Prev || s.Curr != old.Curr+req.N {
						t.Fatalf("step %d: state %+v after %+v, want the same window", i, s, old)
					}
				default: // the next window
					if s.Prev != old.Curr || s.Curr != req.N {
						t.Fatalf("step %d: state %+v after %+v, want the next window", i, s, old)
					}
				}
				if got, want := s.Expiry(true, lim.Period), addSat(eff, int64(d.ResetAfter)); got != want {
					t.Fatalf("step %d: Expiry = %d, want now+ResetAfter = %d", i, got, want)
				}
			}
			if !d.Allowed && !d.Unsatisfiable {
				// The same request after RetryAfter is admitted.
				eff := max(now, math.MinInt64+w)
				if old != (window.State{}) && floorBig(eff, w) < old.Start {
					eff = old.Start
				}
				if at := eff + int64(d.RetryAfter); d.RetryAfter <= 0 || eff > math.MaxInt64-int64(d.RetryAfter) {
					if d.RetryAfter <= 0 {
						t.Fatalf("step %d: denied with RetryAfter %v: %+v", i, d.RetryAfter, d)
					}
				} else if _, d2 := window.Sliding(old, at, req); !d2.Allowed {
					t.Fatalf("step %d: denied %+v at %d; at %d, after RetryAfter, denied again: %+v", i, d, now, at, d2)
				}
			}
		}
	})
}

// TestExpiryEndOfTime checks that a long window late in int64 time does not
// wrap its expiry into the past (memstore would drop a live key).
func TestExpiryEndOfTime(t *testing.T) {
	t.Parallel()
	w := int64(ratelimit.MaxWindow)
	start := floorBig(math.MaxInt64, w)
	for _, tc := range []struct {
		s       window.State
		sliding bool
		want    int64
	}{
		{window.State{Start: start, Curr: 1}, false, math.MaxInt64},
		{window.State{Start: start, Curr: 1}, true, math.MaxInt64},
		{window.State{Start: start, Prev: 1}, true, math.MaxInt64},
		{window.State{Start: start - w, Curr: 1}, false, start},
		{window.State{Start: start - w, Curr: 1}, true, math.MaxInt64},
		{window.State{Start: t0, Curr: 1}, true, t0 + 2*w},
	} {
		if got := tc.s.Expiry(tc.sliding, ratelimit.MaxWindow); got != tc.want {
			t.Errorf("%+v.Expiry(%v, MaxWindow) = %d, want %d", tc.s, tc.sliding, got, tc.want)
		}
	}
}
