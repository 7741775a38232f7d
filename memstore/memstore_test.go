package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

func TestConformance(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
		s := memstore.New(memstore.Options{Now: now})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestConformanceTinyShards(t *testing.T) {
	// One shard, evicting constantly: eviction must only ever drop state
	// the tables no longer need... so give it room for what they use.
	ratelimittest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
		s := memstore.New(memstore.Options{Now: now, Shards: 1, MaxKeys: 64, SweepInterval: -1})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestContention runs many goroutines on one key with the real clock and
// checks that what was admitted fits Burst + elapsed/Interval, elapsed
// measured around the whole run on the store's own clock (the cached
// clock may lag the wall clock by a scheduling delay: on the wall clock
// the bound failed about once in 300 runs).
func TestContention(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.LeakyBucket} {
		t.Run(alg.String(), func(t *testing.T) {
			s := memstore.New(memstore.Options{})
			defer s.Close()
			lim := ratelimit.Limit{Rate: 1000, Period: time.Second, Burst: 50}
			start := s.Clock()
			got := ratelimittest.Hammer(t, s, ratelimit.Request{Key: "hot", Limit: lim, Algorithm: alg, N: 1}, 32, 2000)
			elapsed := time.Duration(s.Clock() - start)
			bound := lim.Burst + int64(elapsed/lim.Interval()) + 1
			if got > bound || got < lim.Burst {
				t.Errorf("admitted %d in %v, want between Burst %d and Burst + elapsed/Interval = %d", got, elapsed, lim.Burst, bound)
			}
		})
	}
}

func TestMaxKeysEvictsDecayedFirst(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.T0)
	s := memstore.New(memstore.Options{Now: clock.Now, MaxKeys: 100, Shards: 1, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	// One key that stays exhausted for an hour…
	if d, _ := s.Apply(ctx, ratelimit.Request{Key: "victim?", Limit: lim, N: 1}); !d.Allowed {
		t.Fatal("first request denied")
	}
	// …and 99 that decay after a second.
	short := ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 1}
	for i := range 99 {
		s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("short-", i), Limit: short, N: 1})
	}
	if got := s.Len(); got != 100 {
		t.Fatalf("Len = %d, want 100", got)
	}
	clock.Set(ratelimittest.T0.Add(2 * time.Second))
	for i := range 500 {
		s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("new-", i), Limit: short, N: 1})
		if got := s.Len(); got > 100 {
			t.Fatalf("Len = %d after %d new keys, want at most MaxKeys 100", got, i+1)
		}
	}
	// The short keys had decayed and went first; by now the new keys have
	// had to displace each other, not the hour-long key, which denies.
	if d, _ := s.Apply(ctx, ratelimit.Request{Key: "victim?", Limit: lim, N: 1}); d.Allowed {
		t.Errorf("the exhausted key was evicted: %+v, want still denied", d)
	}
}

func TestMillionKeysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a lot")
	}
	// 20 times more distinct keys than MaxKeys, none of them decayed: every
	// new key past the bound evicts one (and leaves a tombstone in its
	// shard's table until the table is rebuilt).
	s := memstore.New(memstore.Options{MaxKeys: 5000, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	lim := ratelimit.PerMinute(10)
	for i := range 100000 {
		if d, err := s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("new key %d: %+v, %v", i, d, err)
		}
	}
	if got := s.Len(); got > 5000 || got < 4000 {
		t.Errorf("Len = %d after 100k distinct keys, want close to MaxKeys 5000, not over", got)
	}
}

func TestSweeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Options{SweepInterval: time.Second})
		defer s.Close()
		ctx := context.Background()
		for _, alg := range ratelimit.Algorithms() {
			for i := range 10 {
				s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint(alg, i), Limit: ratelimit.PerSecond(5), Algorithm: alg, N: 1})
			}
		}
		if got := s.Len(); got != 60 {
			t.Fatalf("Len = %d, want 60", got)
		}
		time.Sleep(3500 * time.Millisecond) // windows decay after up to two periods
		synctest.Wait()
		if got := s.Len(); got != 0 {
			t.Errorf("Len = %d after the sweeper ran, want 0", got)
		}
	})
}

func TestCachedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := memstore.New(memstore.Options{Resolution: time.Millisecond})
		defer s.Close()
		ctx := context.Background()
		lim := ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 1}
		req := ratelimit.Request{Key: "k", Limit: lim, N: 1}
		if d, _ := s.Apply(ctx, req); !d.Allowed {
			t.Fatal("first request denied")
		}
		d, _ := s.Apply(ctx, req)
		if d.Allowed {
			t.Fatal("second request admitted")
		}
		time.Sleep(d.RetryAfter + 2*time.Millisecond) // one resolution late at most
		if d, _ := s.Apply(ctx, req); !d.Allowed {
			t.Errorf("after RetryAfter plus the resolution: %+v, want allowed", d)
		}
	})
}

func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	s := memstore.New(memstore.Options{Resolution: time.Millisecond, SweepInterval: time.Millisecond})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := s.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), N: 1})
	if !errors.Is(err, ratelimit.ErrClosed) {
		t.Errorf("Apply after Close = %v, want ErrClosed", err)
	}
	for range 100 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("goroutines: %d before New, %d after Close", before, runtime.NumGoroutine())
}

func TestSnapshotRestore(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.T0)
	a := memstore.New(memstore.Options{Now: clock.Now})
	defer a.Close()
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 3, Period: 24 * time.Hour}
	for _, alg := range ratelimit.Algorithms() {
		for range 3 {
			a.Apply(ctx, ratelimit.Request{Key: "quota", Limit: lim, Algorithm: alg, N: 1})
		}
	}
	var buf bytes.Buffer
	if err := a.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	snap := buf.Bytes()

	clock.Set(ratelimittest.T0.Add(time.Hour))
	b := memstore.New(memstore.Options{Now: clock.Now})
	defer b.Close()
	if err := b.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	for _, alg := range ratelimit.Algorithms() {
		if d, _ := b.Apply(ctx, ratelimit.Request{Key: "quota", Limit: lim, Algorithm: alg, N: 1}); d.Allowed {
			t.Errorf("%v: after restore, a spent daily quota admitted %+v", alg, d)
		}
	}
	// Garbage is refused and changes nothing.
	c := memstore.New(memstore.Options{Now: clock.Now})
	defer c.Close()
	if err := c.Restore(bytes.NewReader(snap[:len(snap)/2])); err == nil {
		t.Error("Restore of a truncated snapshot succeeded")
	}
	if err := c.Restore(bytes.NewReader([]byte("not a snapshot"))); err == nil {
		t.Error("Restore of garbage succeeded")
	}
	if c.Len() != 0 {
		t.Errorf("Len = %d after failed restores, want 0", c.Len())
	}
}

func TestRestoreIntoNonEmptyStore(t *testing.T) {
	a := memstore.New(memstore.Options{})
	defer a.Close()
	a.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerHour(1), N: 1})
	var buf bytes.Buffer
	if err := a.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if err := a.Restore(&buf); !errors.Is(err, memstore.ErrNotEmpty) {
		t.Errorf("Restore into a store with keys = %v, want ErrNotEmpty", err)
	}
}

// TestManyLimitsNoAllocs checks that Apply with a gateway's worth of
// distinct limits in turn keeps them all in its memo cache: no
// validation allocates, after the first round. Each limit has its key, as
// each rule of a gateway has: a key applied under another limit is a limit
// change (TestLimitChange), whose conversion moves the key to a new slot.
func TestManyLimitsNoAllocs(t *testing.T) {
	s := memstore.New(memstore.Options{SweepInterval: -1, Resolution: time.Millisecond})
	defer s.Close()
	ctx := context.Background()
	var reqs []ratelimit.Request
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 32 {
		alg := ratelimit.Algorithms()[i%3] // GCRA, TokenBucket, LeakyBucket
		lim := ratelimit.Limit{Rate: 1 + rng.Int64N(1000), Period: time.Duration(1+rng.Int64N(3600)) * time.Second}
		reqs = append(reqs, ratelimit.Request{Key: "k" + strconv.Itoa(i), Limit: lim, Algorithm: alg, N: 1})
	}
	for _, r := range reqs {
		s.Apply(ctx, r)
	}
	allocs := testing.AllocsPerRun(50, func() {
		for _, r := range reqs {
			s.Apply(ctx, r)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations a round of %d limits, want 0", allocs, len(reqs))
	}
}

// TestExactWhileTablesMove spends hot keys from many goroutines while
// another goroutine keeps adding new keys to a store bounded at a few keys
// a shard, so that every shard keeps evicting and rebuilding its table
// (freezing and moving slots) under the lock-free updates. With the clock
// stopped, each hot key must admit exactly its capacity: an update lost in
// a move would admit more. (The hot keys are never evicted: eviction takes
// the key that has used the least of its limit, and each cold key has used
// one millionth.)
func TestExactWhileTablesMove(t *testing.T) {
	now := ratelimittest.T0
	s := memstore.New(memstore.Options{Now: func() time.Time { return now }, SweepInterval: -1, MaxKeys: 64, Shards: 4})
	defer s.Close()
	ctx := context.Background()
	const capacity = 20000
	lim := ratelimit.Limit{Rate: capacity, Period: time.Hour}
	hot := []string{"hot-a", "hot-b", "hot-c", "hot-d"}
	var admitted [4]atomic.Int64
	stop := make(chan struct{})
	cold := make(chan struct{})
	go func() {
		defer close(cold)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// A 3.6 ms state: closer to decay than any hot key's.
			s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("cold-", i), Limit: ratelimit.Limit{Rate: 1e6, Period: time.Hour}, N: 1})
		}
	}()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every hot key spent twice over between the 8 goroutines.
			for i := range 2 * capacity {
				k := (g + i) % len(hot)
				d, err := s.Apply(ctx, ratelimit.Request{Key: hot[k], Limit: lim, N: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-cold
	for k, name := range hot {
		if got := admitted[k].Load(); got != capacity {
			t.Errorf("%s admitted %d with the clock stopped, want exactly its capacity %d", name, got, capacity)
		}
	}
}

// TestLimitChangeContention spends one key from many goroutines that
// alternate two limits of different intervals (100/h burst 100 and 50/h
// burst 50) with the clock stopped, so that the key's state keeps being
// converted, and moved to a new slot, while lock-free updates under the
// other interval race with it. Used events only ever carry over, so
// nothing admits more than the larger burst: more would be an update made
// under one interval landing on a state converted to the other.
func TestLimitChangeContention(t *testing.T) {
	s := memstore.New(memstore.Options{Now: func() time.Time { return ratelimittest.T0 }, SweepInterval: -1})
	defer s.Close()
	limits := []ratelimit.Limit{{Rate: 100, Period: time.Hour, Burst: 100}, {Rate: 50, Period: time.Hour, Burst: 50}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				d, err := s.Apply(context.Background(), ratelimit.Request{Key: "hot", Limit: limits[(g+i)%2], N: 1})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got < 50 || got > 100 {
		t.Errorf("admitted %d of 640 requests alternating 100/h and 50/h, want 50 to 100", got)
	}
	d, err := s.Apply(context.Background(), ratelimit.Request{Key: "hot", Limit: limits[0]})
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 0 {
		t.Errorf("after the storm: %d remaining under 100/h, want 0", d.Remaining)
	}
}

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
