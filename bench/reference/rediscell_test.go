package reference

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// cell is an independent transcription of redis-cell's
// RateLimiter::rate_limit (redis-cell-impl/src/lib.rs), with its Redis key
// expiring when its TTL runs out: CL.THROTTLE key max_burst count period
// quantity. Durations are ns; -1 stands for redis-cell's "-1 seconds".
type cell struct {
	interval  int64 // emission_interval: (period_ns as f64 / count as f64) as i64
	tolerance int64 // delay_variation_tolerance: interval·(max_burst+1)
	limit     int64 // max_burst+1
	tat       int64 // stored TAT (ns since T0); -1 when the key is absent
}

type cellResult struct {
	limited                bool
	limit, remaining       int64
	retryAfter, resetAfter int64
}

func newCell(maxBurst, count int64, period time.Duration) *cell {
	iv := int64(float64(period.Nanoseconds()) / float64(count))
	return &cell{interval: iv, tolerance: iv * (maxBurst + 1), limit: maxBurst + 1, tat: -1}
}

func (c *cell) throttle(now, quantity int64) cellResult {
	r := cellResult{limit: c.limit, retryAfter: -1, resetAfter: -1}
	increment := c.interval * quantity
	if c.tat != -1 && c.tat <= now {
		c.tat = -1 // the key's TTL (tat − now) has run out: Redis dropped it
	}
	tat := c.tat
	if tat == -1 {
		tat = now
	}
	newTAT := tat + increment
	if now > tat {
		newTAT = now + increment
	}
	allowAt := newTAT - c.tolerance
	diff := now - allowAt
	var ttl int64
	if diff < 0 {
		if increment <= c.tolerance {
			r.retryAfter = -diff
		}
		r.limited = true
		ttl = tat - now
	} else {
		ttl = newTAT - now
		c.tat = newTAT
	}
	next := c.tolerance - ttl
	if next > -c.interval {
		// whole microseconds, as redis-cell computes it
		r.remaining = int64(float64(next/1000) / float64(c.interval/1000))
	}
	r.resetAfter = ttl
	return r
}

// TestGCRAAgainstRedisCell replays random sequences through sluice's GCRA
// (memstore, clock injected) and the transcription of redis-cell, and
// compares every number CL.THROTTLE reports. Intervals are whole
// microseconds, because redis-cell computes remaining from whole
// microseconds (sluice from nanoseconds) and the two differ otherwise.
func TestGCRAAgainstRedisCell(t *testing.T) {
	cases, steps := 2000, 300
	clock := ratelimittest.NewClock(ratelimittest.T0)
	store := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1, MaxKeys: -1})
	defer store.Close()
	rng := rand.New(rand.NewPCG(3, 2026))
	ctx := context.Background()
	compared := 0
	for c := range cases {
		lim := randomLimit(rng)
		for lim.Interval()%time.Microsecond != 0 {
			lim = randomLimit(rng)
		}
		lim = lim.Normalize()
		ref := newCell(lim.Burst-1, lim.Rate, lim.Period)
		key := fmt.Sprint("cell/", c)
		for i, s := range randomSequence(rng, lim, steps) {
			clock.Set(ratelimittest.T0.Add(s.at))
			got, err := store.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.GCRA, N: s.n})
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			w := ref.throttle(int64(s.at), s.n)
			want := ratelimit.Decision{
				Allowed:       !w.limited,
				Limit:         lim,
				Remaining:     w.remaining,
				ResetAfter:    time.Duration(w.resetAfter),
				Unsatisfiable: s.n > w.limit,
			}
			if w.retryAfter > 0 {
				want.RetryAfter = time.Duration(w.retryAfter)
			}
			if got != want {
				t.Fatalf("limit %v, step %d (T0+%v, CL.THROTTLE k %d %d %v %d):\n got %+v\nwant %+v (redis-cell %+v)",
					lim, i, s.at, lim.Burst-1, lim.Rate, lim.Period, s.n, got, want, w)
			}
			compared++
		}
	}
	t.Logf("%d decisions in %d sequences identical to redis-cell's", compared, cases)
}

// TestRedisCellTranscription checks the transcription against redis-cell's
// own test case (it_rate_limits), as ratelimittest's gcra/redis-cell table
// records it, so that the differential test above compares sluice with
// redis-cell and not with a second copy of sluice's mistakes.
func TestRedisCellTranscription(t *testing.T) {
	for _, tb := range ratelimittest.Tables() {
		if tb.Name != "gcra/redis-cell" {
			continue
		}
		lim := tb.Limit.Normalize()
		ref := newCell(lim.Burst-1, lim.Rate, lim.Period)
		for i, s := range tb.Steps {
			w := ref.throttle(int64(s.At), s.N)
			got := ratelimit.Decision{Allowed: !w.limited, Remaining: w.remaining, ResetAfter: time.Duration(w.resetAfter), Unsatisfiable: s.N > w.limit}
			if w.retryAfter > 0 {
				got.RetryAfter = time.Duration(w.retryAfter)
			}
			if got != s.Want {
				t.Errorf("step %d (at %v, n=%d): transcription %+v, table %+v", i, s.At, s.N, got, s.Want)
			}
		}
		return
	}
	t.Fatal("no gcra/redis-cell table in ratelimittest.Tables")
}
