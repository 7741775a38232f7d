package slidinglog_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/ratelimit"
)

const year = 365 * 24 * time.Hour

// t0 is 2026-01-01 in Unix ns.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// inWindow reports whether an entry at at is in the window (now−w, now],
// computed with big integers: the reference for the step's int64
// arithmetic.
func inWindow(at, now, w int64) bool {
	cut := new(big.Int).Sub(big.NewInt(now), big.NewInt(w))
	return big.NewInt(at).Cmp(cut) > 0
}

// FuzzStep compares Log.Step with a reference that keeps every admitted
// request and counts the window with big integers, over periods up to
// MaxWindow and times anywhere in int64: every field of every decision,
// and the expiry.
func FuzzStep(f *testing.F) {
	f.Add(int64(3), int64(time.Second), t0, uint64(1))
	f.Add(int64(3), int64(year), t0, uint64(2))
	f.Add(int64(2), int64(ratelimit.MaxPeriod)+1, t0, uint64(3))
	f.Add(int64(ratelimit.MaxRate), int64(ratelimit.MaxWindow), int64(math.MaxInt64), uint64(4))
	f.Add(int64(5), int64(ratelimit.MaxWindow), int64(math.MinInt64), uint64(5))
	f.Add(int64(4), int64(10*year)+7, int64(-1), uint64(6))
	f.Fuzz(func(t *testing.T, rate, period, now int64, seed uint64) {
		lim := ratelimit.Limit{Rate: rate, Period: time.Duration(period)}
		req := ratelimit.Request{Limit: lim, Algorithm: ratelimit.SlidingWindowLog}
		if req.Validate() != nil || rate == 0 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, uint64(period)))
		w := period
		var l slidinglog.Log
		var ref []slidinglog.Entry // the admitted requests still in the window, oldest first
		for i := range 64 {
			var d int64
			switch r := rng.IntN(12); {
			case r < 2:
			case r < 4:
				d = rng.Int64N(1000)
			case r < 5:
				d = -rng.Int64N(w) - 1
			case r < 6:
				d = w + rng.Int64N(3) - 1
			case r < 7:
				now = []int64{math.MaxInt64 - rng.Int64N(2*w), math.MinInt64 + rng.Int64N(2*w), t0}[rng.IntN(3)]
			default:
				d = rng.Int64N(w/2 + 1)
			}
			if d > 0 && now <= math.MaxInt64-d || d < 0 && now >= math.MinInt64-d {
				now += d
			}
			req.N = rng.Int64N(rate + 2)
			if rng.IntN(3) == 0 {
				req.N = min(rate, 1+rng.Int64N(2))
			}

			// The reference: time back is taken to be the newest entry's;
			// what has left the window is gone for good.
			eff := now
			if len(ref) > 0 && ref[len(ref)-1].At > eff {
				eff = ref[len(ref)-1].At
			}
			var live []slidinglog.Entry
			var sum int64
			for _, e := range ref {
				if inWindow(e.At, eff, w) {
					live = append(live, e)
					sum += e.N
				}
			}
			ref = live
			want := ratelimit.Decision{Limit: lim.Normalize(), Remaining: rate - sum}
			if len(live) > 0 {
				want.ResetAfter = time.Duration(live[len(live)-1].At - eff + w)
			}
			switch {
			case req.N == 0:
				want.Allowed = true
			case req.N > rate:
				want.Unsatisfiable = true
			case req.N > rate-sum:
				over := req.N - (rate - sum)
				for _, e := range live {
					if over -= e.N; over <= 0 {
						want.RetryAfter = time.Duration(e.At - eff + w)
						break
					}
				}
			default:
				ref = append(ref, slidinglog.Entry{At: eff, N: req.N})
				want.Allowed, want.Remaining, want.ResetAfter = true, rate-sum-req.N, time.Duration(w)
			}

			if got := l.Step(now, req); got != want {
				t.Fatalf("step %d: Step(at %d, %v, n %d) = %+v, want %+v", i, now, lim, req.N, got, want)
			}
			wantExp := int64(0)
			if len(ref) > 0 {
				wantExp = math.MaxInt64
				if at := ref[len(ref)-1].At; at <= math.MaxInt64-w {
					wantExp = at + w
				}
			}
			if got := l.Expiry(lim.Period); got != wantExp {
				t.Fatalf("step %d: Expiry = %d, want %d", i, got, wantExp)
			}
		}
	})
}
