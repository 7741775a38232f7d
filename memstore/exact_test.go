package memstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// The bounds below hold over any interval of real time of length L with
// the default Options, whatever the scheduler does: every admission is
// decided on a reading at most memstore.DefaultResolution (R) behind the
// system clock at the call, so the readings of the admissions in [S, E]
// lie in [S − R, E].

// bucketBound is a bucket's (GCRA, token, leaky): each admission's TAT is
// max(TAT, now) + T and needs TAT − Burst·T ≤ now, so n admissions need
// S − R + n·T − Burst·T ≤ E.
func bucketBound(l ratelimit.Limit, elapsed time.Duration) int64 {
	return l.Burst + int64(elapsed+memstore.DefaultResolution)*l.Rate/int64(l.Period)
}

// fixedBound is a fixed window's: Rate in each aligned window that
// [S − R, E] touches, at most ⌈(L + R)/P⌉ + 1 of them.
func fixedBound(l ratelimit.Limit, elapsed time.Duration) int64 {
	return l.Rate * (int64((elapsed+memstore.DefaultResolution+l.Period-1)/l.Period) + 1)
}

// slidingBound is a sliding window counter's: its estimate Prev·(1 − e/P)
// + Curr is at most Rate after each admission, grows only by admissions
// and decays at most Rate/P, so admissions over [S − R, E] are at most
// Rate + Rate·(L + R)/P.
func slidingBound(l ratelimit.Limit, elapsed time.Duration) int64 {
	return l.Rate + int64(elapsed+memstore.DefaultResolution)*l.Rate/int64(l.Period)
}

// logBound is a sliding log's: Rate in any half-open interval of length P,
// and [S − R, E] is covered by ⌊(L + R)/P⌋ + 1 of them.
func logBound(l ratelimit.Limit, elapsed time.Duration) int64 {
	return l.Rate * (int64((elapsed+memstore.DefaultResolution)/l.Period) + 1)
}

var (
	spinBucket = ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 100}
	spinWindow = ratelimit.Limit{Rate: 50, Period: 40 * time.Millisecond}
)

var spinCases = []struct {
	alg   ratelimit.Algorithm
	limit ratelimit.Limit
	bound func(ratelimit.Limit, time.Duration) int64
}{
	{ratelimit.GCRA, spinBucket, bucketBound},
	{ratelimit.TokenBucket, spinBucket, bucketBound},
	{ratelimit.LeakyBucket, spinBucket, bucketBound},
	{ratelimit.FixedWindow, spinWindow, fixedBound},
	{ratelimit.SlidingWindowCounter, spinWindow, slidingBound},
	{ratelimit.SlidingWindowLog, spinWindow, logBound},
}

// TestSpinningOneKeyIsExact has many goroutines on the two CPUs spin on
// one key of a store with the default Options (the cached clock), and
// checks that each algorithm admits no more than its bound over the real
// time from before the first request to after the last. The goroutines
// first spin on another key, so that the cached clock's goroutine is as
// starved as it gets when the measured key is made: a decision that based
// state on a lagging reading (a new bucket, a new window) would credit the
// key the lag. The assertion is a count against a bound: a slow run only
// admits less.
func TestSpinningOneKeyIsExact(t *testing.T) {
	const (
		spinners = 24
		warm     = 30 * time.Millisecond
		measure  = 100 * time.Millisecond
		runs     = 3
		maxCalls = 2_000_000 // per goroutine and run: the loops end whatever the clock
	)
	s := memstore.New(memstore.Options{SweepInterval: -1})
	defer s.Close()
	for _, c := range spinCases {
		for run := range runs {
			key := c.alg.String() + ":" + time.Now().String()
			var (
				phase    atomic.Int32 // 0 warm (another key), 1 measured, 2 stop
				admitted atomic.Int64
				wg       sync.WaitGroup
			)
			for range spinners {
				wg.Go(func() {
					ctx := context.Background()
					reqs := [2]ratelimit.Request{
						{Key: key + ":warm", Limit: c.limit, Algorithm: c.alg, N: 1},
						{Key: key, Limit: c.limit, Algorithm: c.alg, N: 1},
					}
					n := int64(0)
					for range maxCalls {
						p := phase.Load()
						if p == 2 {
							break
						}
						d, err := s.Apply(ctx, reqs[p])
						if err != nil {
							t.Error(err)
							break
						}
						if p == 1 && d.Allowed {
							n++
						}
					}
					admitted.Add(n)
				})
			}
			time.Sleep(warm)
			start := time.Now()
			phase.Store(1)
			time.Sleep(measure)
			phase.Store(2)
			wg.Wait()
			elapsed := time.Since(start)
			if got, bound := admitted.Load(), c.bound(c.limit, elapsed); got > bound {
				t.Errorf("%v run %d: %d goroutines admitted %d in %v, bound %d", c.alg, run, spinners, got, elapsed, bound)
			}
		}
	}
}
