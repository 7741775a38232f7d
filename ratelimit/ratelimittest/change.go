package ratelimittest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// ChangeStep is one request of a LimitChange table: at T0+At, cost N
// (0 peeks) under Limit; the decision must be admitted or not as Admit
// says and report Remaining (and RetryAfter when it is not zero).
type ChangeStep struct {
	At         time.Duration
	Limit      ratelimit.Limit
	N          int64
	Admit      bool
	Remaining  int64
	RetryAfter time.Duration
}

// ChangeTable is a sequence of requests on one key whose limit changes:
// what was used under the old limit stays used under the new one
// (ratelimit.Store's limit-change rule, the x/time/rate model).
type ChangeTable struct {
	Name       string
	Algorithms []ratelimit.Algorithm
	Steps      []ChangeStep
}

var (
	buckets = []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.LeakyBucket}
	windows = []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog}
	all     = append(append([]ratelimit.Algorithm(nil), buckets...), windows...)
)

// ChangeTables returns the limit-change tables.
func ChangeTables() []ChangeTable {
	five, fifty := ratelimit.PerMinute(5), ratelimit.PerMinute(50)
	return []ChangeTable{{
		// A reload mid-window: 3 used at 5/min, raised to 50/min a second
		// later. The buckets' backlog of 35 s is 2 events and 11/12 of one
		// at 12 s each, so 2·1.2 s + ⌈11 s·1.2/12⌉ = 3.5 s at 1.2 s each:
		// 47 remaining (not 21, which 35 s of 1.2 s events would leave).
		Name: "raise", Algorithms: all,
		Steps: []ChangeStep{
			{At: 0, Limit: five, N: 1, Admit: true, Remaining: 4},
			{At: 0, Limit: five, N: 1, Admit: true, Remaining: 3},
			{At: 0, Limit: five, N: 1, Admit: true, Remaining: 2},
			{At: time.Second, Limit: fifty, N: 0, Admit: true, Remaining: 47},
			{At: time.Second, Limit: fifty, N: 1, Admit: true, Remaining: 46},
			{At: time.Second, Limit: fifty, N: 46, Admit: true, Remaining: 0},
			{At: time.Second, Limit: fifty, N: 1, Admit: false, Remaining: 0},
		},
	}, {
		// Back down: what was used under 50/min is more than 5/min holds,
		// and stays used: the key is in debt. Its backlog of 47 s is 39
		// events and 1/6 of one at 1.2 s, so 39·12 s + 2 s = 470 s at 12 s
		// each: the next event fits 470 + 12 − 60 = 422 s later. (Capping
		// the debt at the new burst would let a change and its reverse
		// mint capacity: TestLimitChangeContention.)
		Name: "lower bucket", Algorithms: buckets,
		Steps: []ChangeStep{
			{At: 0, Limit: fifty, N: 40, Admit: true, Remaining: 10},
			{At: time.Second, Limit: five, N: 0, Admit: true, Remaining: 0},
			{At: time.Second, Limit: five, N: 1, Admit: false, Remaining: 0, RetryAfter: 422 * time.Second},
			{At: 423 * time.Second, Limit: five, N: 1, Admit: true, Remaining: 0},
			// Back up: the debt is 39 + 1/6 + 1 − 35 used events of 5 at
			// 12 s (a backlog of 60 s), 5 of 50 at 1.2 s: 45 left.
			{At: 423 * time.Second, Limit: fifty, N: 0, Admit: true, Remaining: 45},
		},
	}, {
		// The windows: 40 counted in this minute's window stay counted
		// until it ends (the log: until they leave the window).
		Name: "lower window", Algorithms: []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowLog},
		Steps: []ChangeStep{
			{At: 0, Limit: fifty, N: 40, Admit: true, Remaining: 10},
			{At: time.Second, Limit: five, N: 0, Admit: true, Remaining: 0},
			{At: time.Second, Limit: five, N: 1, Admit: false, Remaining: 0, RetryAfter: 59 * time.Second},
			{At: time.Minute, Limit: five, N: 1, Admit: true, Remaining: 4},
		},
	}, {
		// A longer period: 3 used in this minute count in this hour.
		Name: "longer period", Algorithms: windows,
		Steps: []ChangeStep{
			{At: 30 * time.Second, Limit: five, N: 3, Admit: true, Remaining: 2},
			{At: 40 * time.Second, Limit: ratelimit.PerHour(50), N: 0, Admit: true, Remaining: 47},
			{At: 40 * time.Second, Limit: ratelimit.PerHour(50), N: 1, Admit: true, Remaining: 46},
			{At: 2 * time.Minute, Limit: ratelimit.PerHour(50), N: 0, Admit: true, Remaining: 46},
		},
	}, {
		// A shorter period: the hour's 80 fill the new minute's window
		// (their times are not kept) until it ends. The log keeps times:
		// only what is inside the new window counts.
		Name: "shorter period", Algorithms: []ratelimit.Algorithm{ratelimit.FixedWindow},
		Steps: []ChangeStep{
			{At: 0, Limit: ratelimit.PerHour(100), N: 80, Admit: true, Remaining: 20},
			{At: 30 * time.Minute, Limit: ratelimit.PerMinute(10), N: 1, Admit: false, Remaining: 0, RetryAfter: time.Minute},
			{At: 31 * time.Minute, Limit: ratelimit.PerMinute(10), N: 1, Admit: true, Remaining: 9},
		},
	}, {
		Name: "shorter period sliding", Algorithms: []ratelimit.Algorithm{ratelimit.SlidingWindowCounter},
		Steps: []ChangeStep{
			{At: 0, Limit: ratelimit.PerHour(100), N: 80, Admit: true, Remaining: 20},
			// In the next window the 80 are the previous window's, and
			// 80·(60 s − e)/60 s + 1 ≤ 10 from e = 53.25 s on.
			{At: 30 * time.Minute, Limit: ratelimit.PerMinute(10), N: 1, Admit: false, Remaining: 0, RetryAfter: time.Minute + 53250*time.Millisecond},
			{At: 31*time.Minute + 30*time.Second, Limit: ratelimit.PerMinute(10), N: 1, Admit: false, Remaining: 0, RetryAfter: 23250 * time.Millisecond},
			{At: 32 * time.Minute, Limit: ratelimit.PerMinute(10), N: 1, Admit: true, Remaining: 9},
		},
	}, {
		Name: "shorter period log", Algorithms: []ratelimit.Algorithm{ratelimit.SlidingWindowLog},
		Steps: []ChangeStep{
			{At: 0, Limit: ratelimit.PerHour(100), N: 80, Admit: true, Remaining: 20},
			{At: 30 * time.Second, Limit: ratelimit.PerMinute(10), N: 1, Admit: false, Remaining: 0, RetryAfter: 30 * time.Second},
			{At: 30 * time.Minute, Limit: ratelimit.PerMinute(10), N: 1, Admit: true, Remaining: 9},
		},
	}, {
		// Only the burst changes: the interval is the same, so is the
		// backlog; the used events count against the new burst.
		Name: "burst", Algorithms: buckets,
		Steps: []ChangeStep{
			{At: 0, Limit: ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 10}, N: 8, Admit: true, Remaining: 2},
			{At: 0, Limit: ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 20}, N: 0, Admit: true, Remaining: 12},
			{At: 0, Limit: ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 5}, N: 1, Admit: false, Remaining: 0, RetryAfter: 4 * time.Second},
		},
	}}
}

// testLimitChange runs ChangeTables on every algorithm they list.
func testLimitChange(t *testing.T, newStore NewStore) {
	for _, tb := range ChangeTables() {
		for _, alg := range tb.Algorithms {
			t.Run(tb.Name+"/"+alg.String(), func(t *testing.T) {
				clock := NewClock(T0)
				store := newStore(t, clock.Now)
				k := key(t, "k")
				for i, s := range tb.Steps {
					clock.Set(T0.Add(s.At))
					req := ratelimit.Request{Key: k, Limit: s.Limit, Algorithm: alg, N: s.N}
					d := apply(t, store, req)
					if d.Allowed != s.Admit || d.Remaining != s.Remaining || (s.RetryAfter != 0 && d.RetryAfter != s.RetryAfter) {
						t.Errorf("step %d: at %v, n %d under %v: got %+v, want allowed %v, remaining %d, retry after %v",
							i, s.At, s.N, s.Limit, d, s.Admit, s.Remaining, s.RetryAfter)
					}
				}
			})
		}
	}
}

// testRefund charges a key, refunds part of the charge and more than all of
// it, and checks that the key gets back what was refunded and never more
// than its full quota.
func testRefund(t *testing.T, newStore NewStore) {
	lim := ratelimit.PerMinute(5)
	for _, alg := range all {
		t.Run(alg.String(), func(t *testing.T) {
			clock := NewClock(T0)
			store := newStore(t, clock.Now)
			k := key(t, "k")
			req := ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: 1}
			refund := func(n int64) ratelimit.Decision {
				t.Helper()
				r := req
				r.N, r.Refund = n, true
				d := apply(t, store, r)
				if !d.Allowed {
					t.Errorf("refund of %d: %+v, want allowed", n, d)
				}
				return d
			}
			// A key the store does not hold is full: a refund adds nothing.
			if d := refund(3); d.Remaining != 5 {
				t.Errorf("refund on a fresh key: remaining %d, want 5", d.Remaining)
			}
			for range 3 {
				apply(t, store, req)
			}
			clock.Set(T0.Add(time.Second))
			if d := refund(2); d.Remaining != 4 {
				t.Errorf("3 charged, 2 refunded: remaining %d, want 4 (%+v)", d.Remaining, d)
			}
			if d := refund(0); d.Remaining != 4 {
				t.Errorf("refund of 0: remaining %d, want 4 (a peek)", d.Remaining)
			}
			if d := refund(100); d.Remaining != 5 || d.ResetAfter != 0 {
				t.Errorf("refund beyond full: %+v, want 5 remaining and nothing to reset", d)
			}
			// Never beyond full: 5 admitted, the sixth denied.
			admitted := 0
			for range 6 {
				if apply(t, store, req).Allowed {
					admitted++
				}
			}
			if admitted != 5 {
				t.Errorf("after refunds beyond full: %d of 6 admitted, want 5", admitted)
			}
			// An exhausted key admits again as much as is refunded.
			refund(2)
			admitted = 0
			for range 3 {
				if apply(t, store, req).Allowed {
					admitted++
				}
			}
			if admitted != 2 {
				t.Errorf("exhausted, 2 refunded: %d of 3 admitted, want 2", admitted)
			}
			// A refund under another limit converts like a charge: the used
			// events (5) less the refund (1) count against 50/min.
			r := req
			r.Limit, r.N, r.Refund = ratelimit.PerMinute(50), 1, true
			if d := apply(t, store, r); !d.Allowed || d.Remaining < 45 || d.Remaining > 46 {
				t.Errorf("refund of 1 under 50/min after 5 used at 5/min: %+v, want 45 or 46 remaining", d)
			}
		})
	}
}
