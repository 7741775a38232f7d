package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/redisstore"
)

// prefetchedOrExact sends the algorithms prefetch mode decides to a Prefetch and
// the others to its Store, so that the conformance suite, which runs every
// algorithm, can run on it.
type prefetchedOrExact struct{ l *redisstore.Prefetch }

func (s prefetchedOrExact) Apply(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if req.Algorithm.Prefetchable() != nil {
		return s.l.Store().Apply(ctx, req)
	}
	return s.l.Apply(ctx, req)
}

func newPrefetch(t testing.TB, s *redisstore.Store, o redisstore.PrefetchOptions) *redisstore.Prefetch {
	t.Helper()
	l, err := redisstore.NewPrefetch(s, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestPrefetchConformance runs the conformance suite on prefetch mode with its
// defaults: the suite's limits are small (their largest slice is below
// MinSlice), so prefetch mode must decide them exactly, with every number
// Store.Apply gives.
func TestPrefetchConformance(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		ratelimittest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
			return prefetchedOrExact{newPrefetch(t, newStore(t, e, redisstore.Options{Now: now}), redisstore.PrefetchOptions{})}
		})
	})
}

// TestPrefetchConformanceHot runs the checks of the suite that hold for a
// prefetched key on keys prefetched from their first events (every key hot, slices
// up to the whole capacity): concurrent callers on one key with the clock
// stopped get exactly the capacity (a slice is charged before it is spent,
// and the rest comes back on Close), and the randomized invariants (never
// more than the bound, Remaining in range, an honest RetryAfter).
func TestPrefetchConformanceHot(t *testing.T) {
	hot := redisstore.PrefetchOptions{Instances: 1, MaxShare: 1, MinSlice: 1}
	both(t, func(t *testing.T, e env) {
		t.Run("Contention", func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.T0)
			s := newStore(t, e, redisstore.Options{Now: clock.Now})
			lim := ratelimit.Limit{Rate: 100, Period: time.Hour, Burst: 100}
			for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.FixedWindow} {
				t.Run(alg.String(), func(t *testing.T) {
					l := newPrefetch(t, s, hot)
					req := ratelimit.Request{Key: "hot" + alg.String(), Limit: lim, Algorithm: alg, N: 1}
					if got := ratelimittest.Hammer(t, l, req, 16, 20); got != 100 {
						t.Errorf("admitted %d of 320 concurrent requests on one key, want exactly the capacity 100", got)
					}
					if st := l.Stats(); st.Takes == 0 || st.Local == 0 {
						t.Errorf("no slice taken or spent: %+v", st)
					}
					// Nothing is left in hand: the exact store sees the key
					// exhausted.
					l.Close()
					d, err := s.Apply(context.Background(), ratelimit.Request{Key: "hot" + alg.String(), Limit: lim, Algorithm: alg})
					if err != nil || d.Remaining != 0 {
						t.Errorf("after Close: remaining %d, %v; want 0", d.Remaining, err)
					}
				})
			}
		})
		t.Run("Invariants", func(t *testing.T) {
			clock := ratelimittest.NewClock(ratelimittest.T0)
			s := newStore(t, e, redisstore.Options{Now: clock.Now})
			for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.TokenBucket, ratelimit.FixedWindow} {
				for li, lim := range []ratelimit.Limit{{Rate: 50, Period: time.Second, Burst: 50}, {Rate: 100, Period: time.Minute, Burst: 30}} {
					t.Run(fmt.Sprintf("%v/%d", alg, li), func(t *testing.T) {
						l := newPrefetch(t, s, redisstore.PrefetchOptions{Instances: 1, MaxShare: 1, MinSlice: 1, Now: clock.Now})
						rng := rand.New(rand.NewPCG(uint64(li)+1, uint64(alg)+1))
						ratelimittest.CheckInvariants(t, l, clock, fmt.Sprintf("inv%v%d", alg, li), alg, lim, rng, 400)
					})
				}
			}
		})
	})
}

// TestPrefetchRefuses checks that prefetch mode decides every algorithm
// ratelimit.Algorithm.Prefetchable allows and refuses the others with its
// answer: the one rule, the rules engine's too.
func TestPrefetchRefuses(t *testing.T) {
	e := standalone(t)
	l := newPrefetch(t, newStore(t, e, redisstore.Options{}), redisstore.PrefetchOptions{})
	for _, alg := range ratelimit.Algorithms() {
		_, err := l.Apply(context.Background(), ratelimit.Request{Key: "k" + alg.String(), Limit: ratelimit.PerSecond(10), Algorithm: alg, N: 1})
		why := alg.Prefetchable()
		if why == nil && err != nil {
			t.Errorf("%v: err %v, want it decided", alg, err)
		}
		if why != nil && (!errors.Is(err, ratelimit.ErrInvalidRequest) || err == nil || err.Error() != why.Error()) {
			t.Errorf("%v: err %v, want Prefetchable's %q", alg, err, why)
		}
	}
	if _, err := redisstore.NewPrefetch(newStore(t, e, redisstore.Options{}), redisstore.PrefetchOptions{MaxShare: 2}); err == nil {
		t.Error("MaxShare 2 accepted")
	}
}

// TestPrefetchColdKeysExact checks that a key seen fewer than MinSlice times
// in a TTL, and a key whose limit is too small to slice, go to Redis one
// by one, and that a hot key takes slices.
func TestPrefetchColdKeysExact(t *testing.T) {
	e := standalone(t)
	s := newStore(t, e, redisstore.Options{})
	l := newPrefetch(t, s, redisstore.PrefetchOptions{TTL: time.Hour})
	ctx := context.Background()
	big := ratelimit.PerHour(100000) // largest slice 100; refills 28 a second
	for i := range 7 {
		if d, err := l.Apply(ctx, ratelimit.Request{Key: "cold", Limit: big, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("cold %d: %+v %v", i, d, err)
		}
	}
	for range 50 {
		if _, err := l.Apply(ctx, ratelimit.Request{Key: "small", Limit: ratelimit.PerSecond(1000), N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.Exact != 57 || st.Takes != 0 || st.Local != 0 {
		t.Fatalf("cold keys: %+v, want 57 exact decisions and no slice", st)
	}
	for range 100 {
		if _, err := l.Apply(ctx, ratelimit.Request{Key: "cold", Limit: big, N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stats()
	if st.Takes == 0 || st.Local < 80 {
		t.Fatalf("hot key: %+v, want slices and most decisions local", st)
	}
	// Redis has been charged for what was spent and what is in hand.
	d, err := s.Apply(ctx, ratelimit.Request{Key: "cold", Limit: big})
	if err != nil {
		t.Fatal(err)
	}
	if used := big.Burst - d.Remaining; used < 107-10 || used > 107+100 {
		t.Errorf("redis counted %d used, want 107 spent plus at most one slice of 100", used)
	}
	l.Close()
	d, _ = s.Apply(ctx, ratelimit.Request{Key: "cold", Limit: big})
	if used := big.Burst - d.Remaining; used > 107 {
		t.Errorf("after Close redis counts %d used, want at most the 107 spent", used)
	}
}

// The multi-process over-admission test: the parent starts a redis-server
// and runs several copies of the test binary as children
// (TestPrefetchChild), each a prefetched store hammering one key.
const (
	childEnv         = "SLUICE_PREFETCH_CHILD"
	prefetchChildren = 4
	childWorkers     = 8
)

// TestPrefetchChild is one instance of TestPrefetchOverAdmission; alone it
// skips.
func TestPrefetchChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("run by TestPrefetchOverAdmission")
	}
	// addr alg rate periodNs burst durationNs prefix
	f := strings.Fields(spec)
	alg, err := ratelimit.ParseAlgorithm(f[1])
	if err != nil {
		t.Fatal(err)
	}
	num := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	lim := ratelimit.Limit{Rate: num(f[2]), Period: time.Duration(num(f[3])), Burst: num(f[4])}
	dur := time.Duration(num(f[5]))
	s, err := redisstore.Open(context.Background(), "redis://"+f[0], redisstore.Options{Prefix: f[6], Timeout: 2 * time.Second, RequireAtStart: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := redisstore.NewPrefetch(s, redisstore.PrefetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var admitted, calls, ambiguous atomic.Int64
	var mu sync.Mutex
	perWindow := map[int64]int64{} // fixed window: the window's end, in periods
	start := time.Now()
	var wg sync.WaitGroup
	for range childWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < dur {
				before := time.Now()
				d, err := l.Apply(context.Background(), ratelimit.Request{Key: "hot", Limit: lim, Algorithm: alg, N: 1})
				if err != nil {
					t.Error(err)
					return
				}
				calls.Add(1)
				if d.Allowed {
					admitted.Add(1)
					if alg == ratelimit.FixedWindow {
						// The window's end is the decision's time plus
						// ResetAfter; the decision was made between
						// before and after. A call that took more than a
						// quarter window is left out (a miscount could
						// only hide events, never add some).
						after := time.Now()
						took := after.Sub(before)
						if took > lim.Period/4 {
							ambiguous.Add(1)
							continue
						}
						end := before.Add(took / 2).Add(d.ResetAfter).UnixNano()
						w := (end + int64(lim.Period)/2) / int64(lim.Period)
						mu.Lock()
						perWindow[w]++
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st := l.Stats()
	ws := []string{}
	if n := ambiguous.Load(); n > 0 {
		t.Logf("%d admitted events left out of the per-window count (slow calls)", n)
	}
	for w, n := range perWindow {
		ws = append(ws, fmt.Sprintf("%d:%d", w, n))
	}
	fmt.Printf("PREFETCHCHILD %d %d %d %d %d %d %d %d %s\n", admitted.Load(), calls.Load(), start.UnixNano(), end.UnixNano(),
		st.Local, st.Exact, st.Takes, st.Returned, strings.Join(ws, ","))
}

// TestPrefetchOverAdmission runs prefetchChildren processes, each a prefetched store
// with the default options and childWorkers goroutines hammering one key
// of one real redis-server, and checks the stated bound: the events
// admitted never exceed what exact mode admits in the same time plus
// instances × the largest slice (1% of the capacity with the defaults);
// for the fixed window, never more than Rate in a window.
func TestPrefetchOverAdmission(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("a child")
	}
	srv := redistest.Start(t)
	cases := []struct {
		alg ratelimit.Algorithm
		lim ratelimit.Limit
		dur time.Duration
	}{
		// A budget that refills slowly: the run spends it and lives on
		// what comes back.
		{ratelimit.GCRA, ratelimit.Limit{Rate: 20000, Period: time.Hour, Burst: 20000}, 2 * time.Second},
		// Refills at 20k/s, more than exact mode decides on this machine
		// for 4 processes, less than prefetch mode does.
		{ratelimit.TokenBucket, ratelimit.Limit{Rate: 20000, Period: time.Second, Burst: 20000}, 3 * time.Second},
		// Windows of a second: each is checked.
		{ratelimit.FixedWindow, ratelimit.Limit{Rate: 20000, Period: time.Second}, 3 * time.Second},
	}
	for i, tc := range cases {
		t.Run(tc.alg.String(), func(t *testing.T) {
			lim := tc.lim.Normalize()
			spec := fmt.Sprintf("%s %s %d %d %d %d oa%d:", srv.Addr, tc.alg, lim.Rate, int64(lim.Period), lim.Burst, int64(tc.dur), i)
			type result struct {
				admitted, calls, start, end, local, exact, takes, returned int64
				windows                                                    map[int64]int64
			}
			results := make([]result, prefetchChildren)
			var wg sync.WaitGroup
			for c := range prefetchChildren {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(os.Args[0], "-test.run=^TestPrefetchChild$", "-test.count=1", "-test.v")
					cmd.Env = append(os.Environ(), childEnv+"="+spec)
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Errorf("child %d: %v\n%s", c, err, out)
						return
					}
					sc := bufio.NewScanner(strings.NewReader(string(out)))
					for sc.Scan() {
						f := strings.Fields(sc.Text())
						if len(f) < 9 || f[0] != "PREFETCHCHILD" {
							continue
						}
						var r result
						for j, p := range []*int64{&r.admitted, &r.calls, &r.start, &r.end, &r.local, &r.exact, &r.takes, &r.returned} {
							*p, _ = strconv.ParseInt(f[j+1], 10, 64)
						}
						r.windows = map[int64]int64{}
						if len(f) > 9 {
							for _, kv := range strings.Split(f[9], ",") {
								k, v, _ := strings.Cut(kv, ":")
								w, _ := strconv.ParseInt(k, 10, 64)
								n, _ := strconv.ParseInt(v, 10, 64)
								r.windows[w] = n
							}
						}
						results[c] = r
						return
					}
					t.Errorf("child %d: no result line\n%s", c, out)
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			var total, calls, local, takes, returned int64
			first, last := results[0].start, results[0].end
			windows := map[int64]int64{}
			for _, r := range results {
				total += r.admitted
				calls += r.calls
				local += r.local
				takes += r.takes
				returned += r.returned
				first, last = min(first, r.start), max(last, r.end)
				for w, n := range r.windows {
					windows[w] += n
				}
			}
			slice := lim.Capacity(tc.alg) * int64(redisstore.DefaultPrefetchMaxShare*1000) / (1000 * redisstore.DefaultPrefetchInstances)
			bound := prefetchChildren * slice
			t.Logf("%v %v: %d processes × %d goroutines, %d decisions in %v (%.0f/s), %d admitted, %d local, %d slices taken, %d events given back; largest slice %d, bound %d",
				tc.alg, lim, prefetchChildren, childWorkers, calls, time.Duration(last-first), float64(calls)/time.Duration(last-first).Seconds(), total, local, takes, returned, slice, bound)
			if takes == 0 || local == 0 {
				t.Errorf("the key was never prefetched (%d slices, %d local decisions): the test checks nothing", takes, local)
			}
			if tc.alg == ratelimit.FixedWindow {
				for w, n := range windows {
					t.Logf("window ending at %v: %d admitted (limit %d, over %d)", time.Unix(0, w*int64(lim.Period)).UTC().Format("15:04:05"), n, lim.Rate, n-lim.Rate)
					if n > lim.Rate {
						t.Errorf("window %d: %d admitted, more than the limit %d (the fixed window's bound is 0)", w, n, lim.Rate)
					}
				}
				return
			}
			// What exact mode admits at most from first to last: a full
			// bucket and its refill.
			exact := lim.Burst + int64(float64(lim.Rate)*float64(last-first)/float64(lim.Period))
			t.Logf("exact-mode bound %d, admitted %d: over-admission %d (%.3f%% of the burst; stated bound %d)", exact, total, total-exact, 100*float64(total-exact)/float64(lim.Burst), bound)
			if total > exact+bound {
				t.Errorf("admitted %d, more than the exact bound %d + %d instances × slice %d", total, exact, prefetchChildren, slice)
			}
		})
	}
}

// TestPrefetchBoundReached drives the worst case of the bound on a virtual
// clock: four instances take slices of a full bucket and hold them while
// the bucket refills; then, at one instant, they spend their slices and the
// refilled bucket. Exact mode admits the capacity C at that instant;
// prefetch mode admits C plus the slices held, and never more than C + n·s.
func TestPrefetchBoundReached(t *testing.T) {
	e := standalone(t)
	clock := ratelimittest.NewClock(ratelimittest.T0)
	s := newStore(t, e, redisstore.Options{Now: clock.Now})
	lim := ratelimit.Limit{Rate: 1000, Period: time.Hour, Burst: 1000} // C = 1000, one event every 3.6 s
	const n = 4
	o := redisstore.PrefetchOptions{TTL: 3 * time.Hour, Instances: n, MaxShare: 0.04, MinSlice: 1, Now: clock.Now}
	var ls [n]*redisstore.Prefetch
	for i := range ls {
		ls[i] = newPrefetch(t, s, o)
	}
	slice := ls[0].MaxSlice(ratelimit.GCRA, lim) // 10
	ctx := context.Background()
	req := ratelimit.Request{Key: "worst", Limit: lim, N: 1}
	for _, l := range ls {
		for range 21 {
			if d, err := l.Apply(ctx, req); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
		}
	}
	d, err := s.Apply(ctx, ratelimit.Request{Key: "worst", Limit: lim})
	if err != nil {
		t.Fatal(err)
	}
	held := lim.Burst - d.Remaining - n*21
	if held <= 0 || held > n*slice {
		t.Fatalf("the instances hold %d events, want some and at most %d", held, n*slice)
	}
	clock.Set(ratelimittest.T0.Add(2 * time.Hour)) // the bucket is full again; the slices live on
	var admitted int64
	for range 3 {
		for _, l := range ls {
			admitted += ratelimittest.Hammer(t, l, req, 1, 600)
		}
	}
	over := admitted - lim.Burst
	t.Logf("held %d; admitted %d at one instant against exact mode's %d: over-admission %d, bound n·s = %d", held, admitted, lim.Burst, over, n*slice)
	if over > n*slice {
		t.Errorf("over-admission %d above the bound %d", over, n*slice)
	}
	if over <= 0 {
		t.Errorf("over-admission %d: the held slices (%d) were not spent", over, held)
	}
}

// TestPrefetchRedisDown: with Redis gone, a prefetched store spends what it holds
// and answers the rest with the failure policy, without errors; slices it
// cannot give back are lost (under-admission), never spent twice.
func TestPrefetchRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.Open(context.Background(), "redis://"+srv.Addr, redisstore.Options{OnError: ratelimit.FailDeny, Timeout: time.Second, RequireAtStart: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := newPrefetch(t, s, redisstore.PrefetchOptions{TTL: time.Hour})
	ctx := context.Background()
	req := ratelimit.Request{Key: "hot", Limit: ratelimit.PerHour(1000000), N: 1} // largest slice 1000
	for range 100 {
		if d, err := l.Apply(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	st := l.Stats()
	if st.Takes == 0 {
		t.Fatalf("no slice: %+v", st)
	}
	srv.Kill()
	var admitted, denied int
	for range 5000 {
		d, err := l.Apply(ctx, req)
		if err != nil {
			t.Fatalf("with Redis down: %v, want the failure policy's decision", err)
		}
		if d.Allowed {
			admitted++
		} else {
			denied++
		}
	}
	// What was in hand is spent; then the policy (deny) answers.
	if admitted == 0 || denied == 0 || int64(admitted) > l.MaxSlice(ratelimit.GCRA, req.Limit) {
		t.Errorf("admitted %d and denied %d with Redis down; want the slice in hand (at most %d) spent, then denials", admitted, denied, l.MaxSlice(ratelimit.GCRA, req.Limit))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
