package redisstore_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

// year is envoyproxy/ratelimit's unit: year, 365 days.
const year = 365 * 24 * time.Hour

// periods mixes round periods, odd ones (intervals that truncate), the
// longest the buckets allow, where every duration is close to 2^53 ns, and
// the windows' longer ones up to MaxWindow (2^60 ns), which the scripts
// carry as seconds and nanoseconds. randomLimit skips the long ones for
// the buckets.
var periods = []time.Duration{
	time.Millisecond, 7*time.Millisecond + 3, time.Second, time.Second + 1, time.Minute,
	time.Hour, 24 * time.Hour, 7777777777, ratelimit.MaxPeriod - 1, ratelimit.MaxPeriod,
	ratelimit.MaxPeriod + 1, year, year + 123456789, 10*year + 7, ratelimit.MaxWindow - 1, ratelimit.MaxWindow,
}

// latest bounds the sequences' times (the scripts' times are exact until
// 2116): a sequence of long windows that passes it goes back 99 years.
var latest = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

func randomLimit(rng *rand.Rand, alg ratelimit.Algorithm) ratelimit.Limit {
	for {
		lim := ratelimit.Limit{Period: periods[rng.IntN(len(periods))]}
		switch rng.IntN(6) {
		case 0:
			lim.Rate = 1 + rng.Int64N(3)
		case 1:
			lim.Rate = 1 + rng.Int64N(1000)
		case 2:
			// Huge rates, up to MaxRate (and finer than a nanosecond, which
			// only the windows accept), where sums pass 2^53.
			lim.Rate = ratelimit.MaxRate - rng.Int64N(1000)
			if rng.IntN(2) == 0 {
				lim.Rate = 4294967295
			}
		default:
			lim.Rate = 1 + rng.Int64N(20)
		}
		if rng.IntN(3) > 0 {
			lim.Burst = rng.Int64N(2 * lim.Rate)
		}
		if (ratelimit.Request{Limit: lim, Algorithm: alg, N: 1}).Validate() == nil {
			return lim
		}
	}
}

// step returns the next time: mostly forward by a fraction of the
// interval, sometimes by nothing or a nanosecond, sometimes far, sometimes
// backwards.
func nextTime(rng *rand.Rand, now time.Time, lim ratelimit.Limit) time.Time {
	iv := max(lim.Normalize().Interval(), 1)
	switch r := rng.IntN(20); {
	case r < 3:
		return now
	case r < 5:
		return now.Add(time.Duration(rng.Int64N(1000)))
	case r < 6:
		return now.Add(-time.Duration(rng.Int64N(int64(iv)) + 1))
	case r < 7:
		return now.Add(time.Duration(rng.Int64N(int64(2 * lim.Period))))
	}
	return now.Add(time.Duration(rng.Int64N(3*int64(iv)/2 + 1)))
}

func randomCost(rng *rand.Rand, lim ratelimit.Limit, alg ratelimit.Algorithm) int64 {
	c := lim.Capacity(alg)
	switch r := rng.IntN(12); {
	case r == 0:
		return 0
	case r == 10:
		// Close to the capacity: with huge rates, sums pass 2^53.
		return max(1, c-rng.Int64N(3))
	case r == 11:
		return max(1, c/2+rng.Int64N(3)-1)
	case r < 6:
		return 1
	case r == 6:
		return lim.Capacity(alg) + 1 + rng.Int64N(3)
	}
	return 1 + rng.Int64N(max(1, lim.Capacity(alg)))
}

var (
	diffSeqs = flag.Int("diff.seqs", 40, "TestDifferential: random sequences per algorithm")
	diffSeed = flag.Uint64("diff.seed", 2026, "TestDifferential: random seed")
)

// goAndRedis returns memstore and a Redis store on e that read one manual
// clock, set to start; memstore is closed at the end of t.
func goAndRedis(t *testing.T, e env, start time.Time) (mem, red ratelimit.Store, clock *ratelimittest.Clock) {
	t.Helper()
	clock = ratelimittest.NewClock(start)
	m := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { m.Close() })
	return m, newStore(t, e, redisstore.Options{Now: clock.Now}), clock
}

// applyBoth applies req to the Go step (memstore) and to the script
// (Redis), in that order, and returns the script's decision and the Go
// step's.
func applyBoth(ctx context.Context, mem, red ratelimit.Store, req ratelimit.Request) (got, want ratelimit.Decision, err error) {
	if want, err = mem.Apply(ctx, req); err != nil {
		return got, want, fmt.Errorf("memstore: %w", err)
	}
	if got, err = red.Apply(ctx, req); err != nil {
		return got, want, fmt.Errorf("redis: %w", err)
	}
	return got, want, nil
}

// TestDifferential runs the Go steps (memstore) and the Lua scripts on the
// same random sequences, with the same now values, and requires identical
// decisions.
func TestDifferential(t *testing.T) {
	seqs, steps := *diffSeqs, 60
	if testing.Short() {
		seqs = 10
	}
	layouts(t, func(t *testing.T, e env) {
		n := seqs
		if e.name == "cluster" {
			n = seqs / 4
		}
		for _, alg := range ratelimit.Algorithms() {
			if packedSkips(e, alg) {
				continue
			}
			t.Run(alg.String(), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(alg)+1, *diffSeed))
				for seq := range n {
					differential(t, e, alg, rng, seq, steps)
				}
			})
		}
	})
}

func differential(t *testing.T, e env, alg ratelimit.Algorithm, rng *rand.Rand, seq, steps int) {
	t.Helper()
	// Start anywhere between 2001 and 2100, at any nanosecond.
	now := time.Unix(978307200+rng.Int64N(3155760000), rng.Int64N(1e9))
	mem, red, clock := goAndRedis(t, e, now)
	lim := randomLimit(rng, alg)
	keys := []string{"a", "b", "ключ{x}"}
	epoch := 0 // bumped, half the times the clock goes back 99 years, for fresh keys
	ctx := context.Background()
	for i := range steps {
		now = nextTime(rng, now, lim)
		if now.After(latest) {
			now = now.AddDate(-99, 0, 0)
			epoch += rng.IntN(2)
		}
		clock.Set(now)
		req := ratelimit.Request{Key: fmt.Sprintf("%s/%d", keys[rng.IntN(len(keys))], epoch), Limit: lim, Algorithm: alg, N: randomCost(rng, lim, alg)}
		if alg == ratelimit.LeakyBucket && rng.IntN(3) == 0 {
			req.MaxDelay = time.Duration(rng.Int64N(int64(lim.Normalize().Interval())*lim.Normalize().Burst + 1))
		}
		got, want, err := applyBoth(ctx, mem, red, req)
		if err != nil {
			t.Fatalf("seq %d step %d: %v", seq, i, err)
		}
		if got != want {
			t.Fatalf("seq %d step %d: limit %v, at %d, key %q, n %d, max delay %v:\nredis %+v\ngo    %+v",
				seq, i, lim, now.UnixNano(), req.Key, req.N, req.MaxDelay, got, want)
		}
	}
}

// TestExtremes replays, on memstore and on Redis, sequences built to reach
// the edges of the doubles: counts that sum past 2^53, and the largest
// periods.
func TestExtremes(t *testing.T) {
	e := standalone(t)
	mem, red, _ := goAndRedis(t, e, time.Date(2026, 1, 1, 0, 0, 0, 1, time.UTC))
	ctx := context.Background()
	big := ratelimit.Limit{Rate: ratelimit.MaxRate, Period: time.Hour}
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		for i, costs := range [][]int64{
			{ratelimit.MaxRate - 1, 2},    // 2^53 − 1 + 2 rounds to 2^53 in a double
			{ratelimit.MaxRate - 1, 1, 1}, // exactly full, then one more
			{ratelimit.MaxRate / 2, ratelimit.MaxRate/2 + 1},
			{3, ratelimit.MaxRate - 2, ratelimit.MaxRate - 3},
		} {
			for j, n := range costs {
				req := ratelimit.Request{Key: fmt.Sprintf("x%d", i), Limit: big, Algorithm: alg, N: n}
				got, want, err := applyBoth(ctx, mem, red, req)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%v, sequence %d, step %d (n %d):\nredis %+v\ngo    %+v", alg, i, j, n, got, want)
				}
			}
		}
	}
}

// TestLongLog fills a sliding log with hundreds of entries, so that
// dropping and the RetryAfter walk cross the script's chunks, and compares
// every decision with memstore's.
func TestLongLog(t *testing.T) {
	e := standalone(t)
	now := ratelimittest.T0
	mem, red, clock := goAndRedis(t, e, now)
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 500, Period: time.Second}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		now = now.Add(time.Duration(rng.Int64N(int64(4 * time.Millisecond))))
		clock.Set(now)
		n := int64(1)
		switch rng.IntN(20) {
		case 0:
			n = 1 + rng.Int64N(300) // a big cost: a long RetryAfter walk
		case 1:
			n = 0
		}
		req := ratelimit.Request{Key: "long", Limit: lim, Algorithm: ratelimit.SlidingWindowLog, N: n}
		got, want, err := applyBoth(ctx, mem, red, req)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("step %d (n %d):\nredis %+v\ngo    %+v", i, n, got, want)
		}
	}
}

// TestLongWindowEdges replays, on memstore and on Redis, requests at the
// nanoseconds around the window boundaries of periods past 2^53 ns (where
// the scripts compute with seconds and nanoseconds), up to MaxWindow, and
// requires identical decisions.
func TestLongWindowEdges(t *testing.T) {
	e := standalone(t)
	for _, p := range []time.Duration{ratelimit.MaxPeriod + 1, year, year + 123456789, 10*year + 7, ratelimit.MaxWindow - 1, ratelimit.MaxWindow} {
		for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
			t.Run(fmt.Sprintf("%v/%d", alg, p), func(t *testing.T) {
				t.Parallel()
				now := ratelimittest.T0
				mem, red, clock := goAndRedis(t, e, now)
				// The epoch-aligned window holding 2026-01-01, and the
				// nanoseconds around its edges and the next ones'.
				start := now.UnixNano() - now.UnixNano()%int64(p)
				var times []int64
				for _, edge := range []int64{start, start + int64(p), start + 2*int64(p), start + 3*int64(p)} {
					times = append(times, edge-1, edge, edge+1, edge+int64(p)/2, edge+int64(p)/4-1)
				}
				lim := ratelimit.Limit{Rate: 7, Period: p}
				ctx := context.Background()
				for i, at := range times {
					for j, n := range []int64{3, 0, 2, 3, 1} {
						clock.Set(time.Unix(0, at))
						req := ratelimit.Request{Key: "edge", Limit: lim, Algorithm: alg, N: n}
						got, want, err := applyBoth(ctx, mem, red, req)
						if err != nil {
							t.Fatal(err)
						}
						if got != want {
							t.Fatalf("time %d (%d), request %d (n %d):\nredis %+v\ngo    %+v", i, at, j, n, got, want)
						}
					}
				}
			})
		}
	}
}

// TestDifferentialChanges is TestDifferential with the limit changing
// between requests (each step picks one of three limits for the key, so
// states are converted: gcra.Convert, window.Rescale) and with refunds
// among the requests, and requires identical decisions from the Go steps
// and the scripts.
func TestDifferentialChanges(t *testing.T) {
	seqs, steps := *diffSeqs, 60
	if testing.Short() {
		seqs = 10
	}
	layouts(t, func(t *testing.T, e env) {
		n := seqs
		if e.name == "cluster" {
			n = seqs / 4
		}
		for _, alg := range ratelimit.Algorithms() {
			if packedSkips(e, alg) {
				continue
			}
			t.Run(alg.String(), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(alg)+101, *diffSeed))
				for seq := range n {
					now := time.Unix(978307200+rng.Int64N(3155760000), rng.Int64N(1e9))
					mem, red, clock := goAndRedis(t, e, now)
					lims := []ratelimit.Limit{randomLimit(rng, alg), randomLimit(rng, alg), randomLimit(rng, alg)}
					ctx := context.Background()
					var hist []string
					for i := range steps {
						lim := lims[rng.IntN(len(lims))]
						now = nextTime(rng, now, lim)
						if now.After(latest) {
							now = now.AddDate(-99, 0, 0)
						}
						clock.Set(now)
						req := ratelimit.Request{Key: fmt.Sprintf("k%d", rng.IntN(2)), Limit: lim, Algorithm: alg, N: randomCost(rng, lim, alg)}
						if rng.IntN(5) == 0 {
							req.Refund = true
						}
						got, want, err := applyBoth(ctx, mem, red, req)
						if err != nil {
							t.Fatalf("seq %d step %d: %v", seq, i, err)
						}
						hist = append(hist, fmt.Sprintf("%d: %v at %d key %s n %d refund %v: %+v", i, lim, now.UnixNano(), req.Key, req.N, req.Refund, want))
						if got != want {
							t.Fatalf("seq %d step %d: limit %v, at %d, key %q, n %d, refund %v:\nredis %+v\ngo    %+v\nbefore:\n%s",
								seq, i, lim, now.UnixNano(), req.Key, req.N, req.Refund, got, want, strings.Join(hist, "\n"))
						}
					}
				}
			})
		}
	})
}
