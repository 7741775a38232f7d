package ratelimittest

import (
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

const (
	ms = time.Millisecond
	s  = time.Second
	d  = 24 * time.Hour
	// year is envoyproxy/ratelimit's unit: year, 365 days (31536000 s), and
	// like its windows the suite's are aligned to the Unix epoch: T0,
	// 2026-01-01 (1767225600 s), is 1767225600 mod 31536000 = 1209600 s =
	// 14 days into the year-long window that began on 2025-12-18 (56·year)
	// and ends 351 days after T0, on 2026-12-18. A year is past the buckets'
	// MaxPeriod (2^53 ns, about 104 days): only the windows accept it.
	year = 365 * d
)

func allow(rem int64, reset time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Allowed: true, Remaining: rem, ResetAfter: reset}
}

func deny(rem int64, reset, retry time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Remaining: rem, ResetAfter: reset, RetryAfter: retry}
}

func never(rem int64, reset time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Unsatisfiable: true, Remaining: rem, ResetAfter: reset}
}

func delayed(rem int64, reset, delay time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Allowed: true, Remaining: rem, ResetAfter: reset, Delay: delay}
}

// Tables returns the timestamp tables of the suite, one or more per
// algorithm, with every field of every decision.
func Tables() []Table {
	return []Table{
		{
			// redis-cell's own test case (src lib.rs, it_rate_limits):
			// CL.THROTTLE key 4 1 1 (max_burst 4, 1 per second), so
			// Burst = max_burst+1 = 5. Its "-1" retry_after (allowed, or
			// can never be allowed) is our zero RetryAfter, plus
			// Unsatisfiable for the latter.
			Name:      "gcra/redis-cell",
			Algorithm: ratelimit.GCRA,
			Limit:     ratelimit.Limit{Rate: 1, Period: s, Burst: 5},
			Steps: []Step{
				{0, 6, never(5, 0)}, // you can never make a request larger than the maximum
				{0, 1, allow(4, 1*s)},
				{0, 1, allow(3, 2*s)},
				{0, 1, allow(2, 3*s)},
				{0, 1, allow(1, 4*s)},
				{0, 1, allow(0, 5*s)},
				{0, 1, deny(0, 5*s, 1*s)},
				{3000 * ms, 1, allow(2, 3000*ms)},
				{3100 * ms, 1, allow(1, 3900*ms)},
				{4000 * ms, 1, allow(1, 4000*ms)},
				{8000 * ms, 1, allow(4, 1000*ms)},
				{9500 * ms, 1, allow(4, 1000*ms)},
				{9500 * ms, 0, allow(4, 1*s)}, // a zero-volume request just peeks
				{9500 * ms, 2, allow(2, 3*s)}, // a high-volume request uses more
				{9500 * ms, 5, deny(2, 3*s, 3*s)},
			},
		},
		{
			// The same numbers through the token-bucket face.
			Name:      "token_bucket/weighted",
			Algorithm: ratelimit.TokenBucket,
			Limit:     ratelimit.Limit{Rate: 10, Period: s, Burst: 3},
			Steps: []Step{
				{0, 2, allow(1, 200*ms)},
				{0, 2, deny(1, 200*ms, 100*ms)},
				{0, 1, allow(0, 300*ms)},
				{100 * ms, 1, allow(0, 300*ms)},
				{250 * ms, 1, allow(0, 250*ms)},
				{260 * ms, 1, deny(0, 240*ms, 40*ms)},
				{1 * s, 4, never(3, 0)},
				{1 * s, 3, allow(0, 300*ms)},
			},
		},
		{
			// nginx limit_req rate=2r/s burst=2 (no nodelay): the first
			// request passes at once, the next ones wait their turn, the
			// one after the queue is full is rejected. Burst = 2+1.
			Name:      "leaky_bucket/nginx",
			Algorithm: ratelimit.LeakyBucket,
			Limit:     ratelimit.Limit{Rate: 2, Period: s, Burst: 3},
			Steps: []Step{
				{0, 1, delayed(2, 500*ms, 0)},
				{0, 1, delayed(1, 1000*ms, 500*ms)},
				{0, 1, delayed(0, 1500*ms, 1000*ms)},
				{0, 1, deny(0, 1500*ms, 500*ms)},
				{600 * ms, 1, delayed(0, 1400*ms, 900*ms)},
				{5 * s, 1, delayed(2, 500*ms, 0)},
			},
		},
		{
			Name:      "leaky_bucket/max-delay",
			Algorithm: ratelimit.LeakyBucket,
			Limit:     ratelimit.Limit{Rate: 2, Period: s, Burst: 3},
			MaxDelay:  700 * ms,
			Steps: []Step{
				{0, 1, delayed(2, 500*ms, 0)},
				{0, 1, delayed(1, 1000*ms, 500*ms)},
				{0, 1, deny(1, 1000*ms, 300*ms)}, // the queue has room, the caller can't wait
				{300 * ms, 1, delayed(0, 1200*ms, 700*ms)},
			},
		},
		{
			Name:      "fixed_window",
			Algorithm: ratelimit.FixedWindow,
			Limit:     ratelimit.Limit{Rate: 3, Period: s},
			Steps: []Step{
				{0, 1, allow(2, 1*s)},
				{400 * ms, 2, allow(0, 600*ms)},
				{999 * ms, 1, deny(0, 1*ms, 1*ms)},
				{1000 * ms, 3, allow(0, 1*s)}, // the boundary burst: 6 in 600 ms
				{1500 * ms, 0, allow(0, 500*ms)},
				{1500 * ms, 4, never(0, 500*ms)},
				{2100 * ms, 1, allow(2, 900*ms)},
			},
		},
		{
			Name:      "sliding_window_counter",
			Algorithm: ratelimit.SlidingWindowCounter,
			Limit:     ratelimit.Limit{Rate: 10, Period: s},
			Steps: []Step{
				{0, 4, allow(6, 2*s)},
				{500 * ms, 6, allow(0, 1500*ms)},
				{900 * ms, 1, deny(0, 1100*ms, 200*ms)}, // next window, once 10·(1−e) ≤ 9
				{1100 * ms, 1, allow(0, 1900*ms)},       // 10·0.9 + 0 + 1 = 10
				{1500 * ms, 3, allow(1, 1500*ms)},       // 10·0.5 + 1 + 3 = 9
				{1500 * ms, 2, deny(1, 1500*ms, 100*ms)},
				{3000 * ms, 1, allow(9, 2*s)},
			},
		},
		{
			Name:      "sliding_window_log",
			Algorithm: ratelimit.SlidingWindowLog,
			Limit:     ratelimit.Limit{Rate: 3, Period: s},
			Steps: []Step{
				{0, 1, allow(2, 1*s)},
				{300 * ms, 1, allow(1, 1*s)},
				{600 * ms, 1, allow(0, 1*s)},
				{900 * ms, 1, deny(0, 700*ms, 100*ms)},
				{1000 * ms, 1, allow(0, 1*s)},
				{1000 * ms, 2, deny(0, 1*s, 600*ms)},
				{1000 * ms, 4, never(0, 1*s)},
			},
		},
		{
			// envoyproxy/ratelimit's unit: year (see year): 3 a year.
			Name:      "fixed_window/year",
			Algorithm: ratelimit.FixedWindow,
			Limit:     ratelimit.Limit{Rate: 3, Period: year},
			Steps: []Step{
				{0, 1, allow(2, 351*d)},
				{0, 2, allow(0, 351*d)},
				{100 * d, 1, deny(0, 251*d, 251*d)},
				{351*d - 1, 1, deny(0, 1, 1)}, // the last nanosecond of the window
				{351 * d, 3, allow(0, year)},  // 2026-12-18: a new year-long window
				{351*d + 1, 0, allow(0, year-1)},
				{551 * d, 4, never(0, 165*d)},
				{716 * d, 1, allow(2, year)}, // 351 + 365 days: the next one
			},
		},
		{
			// 10 a year, sliding. The first request is 14 days into its
			// window; the window after it begins 351 days after T0.
			Name:      "sliding_window_counter/year",
			Algorithm: ratelimit.SlidingWindowCounter,
			Limit:     ratelimit.Limit{Rate: 10, Period: year},
			Steps: []Step{
				{0, 4, allow(6, 2*year-14*d)},
				{351 * d, 6, allow(0, 2*year)}, // 4·1 + 6 = 10
				// 73 days (a fifth) into that window: 4·4/5 + 6 = 9.2, so
				// one more is refused. Exactly, it would pass from a
				// quarter of the window on (4·3/4 + 6 + 1 = 10), 91 days 6
				// hours in. In doubles (the formula's, see algorithm/window)
				// it passes 10 ns sooner: the sums +6 and +1 round an
				// estimate 4·(year−e)/year of up to 3 + 2^-50 down to 10,
				// which holds while year−e, rounded to the 4 ns doubles
				// have above 2^54, is at most 3/4·year + 8 ns, that is for
				// every e ≥ year/4 − 10 ns. Every store must agree to that
				// nanosecond.
				{424 * d, 1, deny(0, 2*year-73*d, 18*d+6*time.Hour-10)},
				{351*d + year/4 - 11, 1, deny(0, 2*year-year/4+11, 1)},
				{351*d + year/4 - 10, 1, allow(0, 2*year-year/4+10)},
				// Half-way into the next window the 7 weigh 3.5.
				{351*d + year + year/2, 0, allow(6, year/2)},
			},
		},
		{
			Name:      "sliding_window_log/year",
			Algorithm: ratelimit.SlidingWindowLog,
			Limit:     ratelimit.Limit{Rate: 3, Period: year},
			Steps: []Step{
				{0, 1, allow(2, year)},
				{100 * d, 1, allow(1, year)},
				{200 * d, 1, allow(0, year)},
				{300 * d, 1, deny(0, 265*d, 65*d)}, // the first leaves a year after T0
				{year - 1, 1, deny(0, 200*d+1, 1)},
				{year, 1, allow(0, year)},
				{year, 1, deny(0, year, 100*d)},
			},
		},
	}
}

// AdmitTables returns tables that only say which requests are admitted.
// The token-bucket ones are what golang.org/x/time/rate's
// NewLimiter(Rate/Period, Burst).AllowN(T0+At, N) answers for the same
// sequence; sluice's bench/reference module checks them against x/time
// itself.
func AdmitTables() []AdmitTable {
	return []AdmitTable{
		{
			Name:      "token_bucket/x-time-burst-1",
			Algorithm: ratelimit.TokenBucket,
			Limit:     ratelimit.Limit{Rate: 10, Period: s, Burst: 1},
			Steps: []AdmitStep{
				{0, 1, true}, {0, 1, false}, {100 * ms, 1, true}, {100 * ms, 1, false},
				{150 * ms, 1, false}, {200 * ms, 1, true}, {350 * ms, 1, true}, {400 * ms, 1, false},
				{450 * ms, 1, true}, {450 * ms, 2, false},
			},
		},
		{
			Name:      "token_bucket/x-time-weighted",
			Algorithm: ratelimit.TokenBucket,
			Limit:     ratelimit.Limit{Rate: 10, Period: s, Burst: 3},
			Steps: []AdmitStep{
				{0, 2, true}, {0, 2, false}, {0, 1, true}, {0, 1, false},
				{100 * ms, 1, true}, {100 * ms, 2, false}, {300 * ms, 2, true}, {300 * ms, 1, false},
				{1 * s, 3, true}, {1 * s, 1, false}, {5 * s, 4, false}, {5 * s, 3, true},
			},
		},
		{
			// 3 per second: the interval, 333.33… ms, is not a whole
			// number of nanoseconds.
			Name:      "token_bucket/x-time-thirds",
			Algorithm: ratelimit.TokenBucket,
			Limit:     ratelimit.Limit{Rate: 3, Period: s, Burst: 1},
			Steps: []AdmitStep{
				{0, 1, true}, {333 * ms, 1, false}, {334 * ms, 1, true}, {667 * ms, 1, false},
				{668 * ms, 1, true}, {1000 * ms, 1, false}, {1002 * ms, 1, true},
			},
		},
		{
			// A burst of 5 at 2 per second, drained and refilled.
			Name:      "token_bucket/x-time-burst-5",
			Algorithm: ratelimit.TokenBucket,
			Limit:     ratelimit.Limit{Rate: 2, Period: s, Burst: 5},
			Steps: []AdmitStep{
				{0, 1, true}, {0, 1, true}, {0, 1, true}, {0, 1, true}, {0, 1, true}, {0, 1, false},
				{499 * ms, 1, false}, {500 * ms, 1, true}, {500 * ms, 1, false},
				{3 * s, 5, true}, {3 * s, 1, false}, {4 * s, 2, true}, {4 * s, 1, false},
			},
		},
	}
}
