package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// NewStore builds the store under test. now is the suite's clock; the store
// must read time only through it. The store may be shared between calls:
// every test uses keys of its own.
type NewStore func(t *testing.T, now func() time.Time) ratelimit.Store

// T0 is the suite's starting time: midnight UTC, so windows of a second, a
// minute, an hour or a day all begin there.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the clock.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Step is one row of a timestamp table: at T0+At, apply cost N and expect
// Want (its Limit field is filled in from the table).
type Step struct {
	At   time.Duration
	N    int64
	Want ratelimit.Decision
}

// Table is a sequence of steps on one key under one limit and algorithm.
type Table struct {
	Name      string
	Algorithm ratelimit.Algorithm
	Limit     ratelimit.Limit
	MaxDelay  time.Duration
	Steps     []Step
}

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Tables", func(t *testing.T) {
		for _, tb := range Tables() {
			t.Run(tb.Name, func(t *testing.T) { RunTable(t, newStore, tb) })
		}
	})
	t.Run("Admitted", func(t *testing.T) {
		for _, tb := range AdmitTables() {
			t.Run(tb.Name, func(t *testing.T) { runAdmitTable(t, newStore, tb) })
		}
	})
	t.Run("TimeBackwards", func(t *testing.T) { testTimeBackwards(t, newStore) })
	t.Run("HugeCost", func(t *testing.T) { testHugeCost(t, newStore) })
	t.Run("ZeroRate", func(t *testing.T) { testZeroRate(t, newStore) })
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, newStore) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, newStore) })
	t.Run("Peek", func(t *testing.T) { testPeek(t, newStore) })
	t.Run("Invariants", func(t *testing.T) { testInvariants(t, newStore) })
	t.Run("Contention", func(t *testing.T) { testContention(t, newStore) })
	t.Run("LimitChange", func(t *testing.T) { testLimitChange(t, newStore) })
	t.Run("Refund", func(t *testing.T) { testRefund(t, newStore) })
	t.Run("Reserve", func(t *testing.T) { testReserve(t, newStore) })
	t.Run("Bound", func(t *testing.T) {
		if _, ok := newStore(t, NewClock(T0).Now).(ratelimit.Binder); !ok {
			t.Skip("the store is not a ratelimit.Binder")
		}
		// The whole suite again, every request through Bind and Take.
		Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
			return boundStore{newStore(t, now).(ratelimit.Binder)}
		})
	})
}

// boundStore sends every request through its store's Bind and Take, so the
// suite checks a Binder's prepared path against the same references as its
// Apply.
type boundStore struct{ b ratelimit.Binder }

func (s boundStore) Apply(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if req.Refund {
		return s.b.Apply(ctx, req) // a Bound only charges
	}
	bound, err := s.b.Bind(req.Algorithm, req.Limit)
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return bound.Take(ctx, req.Key, req.N, req.MaxDelay)
}

// Hammer applies req from goroutines goroutines at once, times times each,
// and returns how many of the calls were admitted. An error fails t and
// ends its goroutine's calls.
func Hammer(t testing.TB, s ratelimit.Store, req ratelimit.Request, goroutines, times int) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range times {
				d, err := s.Apply(context.Background(), req)
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
	return admitted.Load()
}

// testContention runs many goroutines on one key with the clock stopped:
// every algorithm must admit exactly its capacity, no more (lost updates)
// and no less.
func testContention(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	store := newStore(t, clock.Now)
	lim := ratelimit.Limit{Rate: 100, Period: time.Hour, Burst: 100}
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			req := ratelimit.Request{Key: key(t, "hot"), Limit: lim, Algorithm: alg, N: 1}
			if got := Hammer(t, store, req, 16, 20); got != 100 {
				t.Errorf("admitted %d of 320 concurrent requests on one key, want exactly the capacity 100", got)
			}
		})
	}
}

// key returns a key unique to the running test.
func key(t *testing.T, suffix string) string {
	return "sluice-conformance/" + t.Name() + "/" + suffix
}

// RunTable applies tb's steps in order and compares every decision.
func RunTable(t *testing.T, newStore NewStore, tb Table) {
	t.Helper()
	clock := NewClock(T0)
	store := newStore(t, clock.Now)
	k := key(t, "k")
	lim := tb.Limit.Normalize()
	for i, s := range tb.Steps {
		clock.Set(T0.Add(s.At))
		req := ratelimit.Request{Key: k, Limit: tb.Limit, Algorithm: tb.Algorithm, N: s.N, MaxDelay: tb.MaxDelay}
		got, err := store.Apply(context.Background(), req)
		if err != nil {
			t.Fatalf("step %d: Apply(at %v, n=%d): %v", i, s.At, s.N, err)
		}
		want := s.Want
		want.Limit = lim
		if got != want {
			t.Errorf("step %d: Apply(at %v, n=%d) = %+v, want %+v", i, s.At, s.N, got, want)
		}
	}
}

// AdmitStep is one request of an AdmitTable.
type AdmitStep struct {
	At    time.Duration
	N     int64
	Admit bool
}

// AdmitTable lists which requests are admitted, for algorithms whose
// reference only says yes or no (golang.org/x/time/rate).
type AdmitTable struct {
	Name      string
	Algorithm ratelimit.Algorithm
	Limit     ratelimit.Limit
	Steps     []AdmitStep
}

func runAdmitTable(t *testing.T, newStore NewStore, tb AdmitTable) {
	clock := NewClock(T0)
	store := newStore(t, clock.Now)
	k := key(t, "k")
	for i, s := range tb.Steps {
		clock.Set(T0.Add(s.At))
		got, err := store.Apply(context.Background(), ratelimit.Request{Key: k, Limit: tb.Limit, Algorithm: tb.Algorithm, N: s.N})
		if err != nil {
			t.Fatalf("step %d: Apply(at %v, n=%d): %v", i, s.At, s.N, err)
		}
		if got.Allowed != s.Admit {
			t.Errorf("step %d: Apply(at %v, n=%d).Allowed = %v, want %v (%+v)", i, s.At, s.N, got.Allowed, s.Admit, got)
		}
	}
}

func apply(t *testing.T, store ratelimit.Store, req ratelimit.Request) ratelimit.Decision {
	t.Helper()
	d, err := store.Apply(context.Background(), req)
	if err != nil {
		t.Fatalf("Apply(%+v): %v", req, err)
	}
	return d
}

// limitsFor returns a limit per algorithm used by the generic edge-case
// tests: 5 per second, burst 5.
func limitsFor() ratelimit.Limit { return ratelimit.Limit{Rate: 5, Period: time.Second, Burst: 5} }

// testTimeBackwards exhausts a key, moves the clock back and forward again,
// and checks that no capacity appeared.
func testTimeBackwards(t *testing.T, newStore NewStore) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			clock := NewClock(T0.Add(10 * time.Second))
			store := newStore(t, clock.Now)
			lim := limitsFor()
			req := ratelimit.Request{Key: key(t, "k"), Limit: lim, Algorithm: alg, N: 1}
			admitted := 0
			for range 5 {
				if apply(t, store, req).Allowed {
					admitted++
				}
			}
			if admitted != 5 {
				t.Fatalf("admitted %d of the first 5, want 5", admitted)
			}
			for _, back := range []time.Duration{-time.Millisecond, -500 * time.Millisecond, -3 * time.Second, -time.Hour} {
				clock.Set(T0.Add(10*time.Second + back))
				if d := apply(t, store, req); d.Allowed {
					t.Errorf("after going back %v: admitted %+v, want denied", back, d)
				}
			}
			clock.Set(T0.Add(10 * time.Second))
			if d := apply(t, store, req); d.Allowed {
				t.Errorf("back at the original time: admitted %+v, want denied", d)
			}
		})
	}
}

func testHugeCost(t *testing.T, newStore NewStore) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			clock := NewClock(T0)
			store := newStore(t, clock.Now)
			lim := limitsFor()
			k := key(t, "k")
			for _, n := range []int64{6, 1 << 40, math.MaxInt64} {
				d := apply(t, store, ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: n})
				if d.Allowed || !d.Unsatisfiable || d.RetryAfter != 0 || d.Remaining != 5 {
					t.Errorf("Apply(n=%d) = %+v, want denied, unsatisfiable, no retry, 5 remaining", n, d)
				}
			}
			// The huge requests consumed nothing.
			d := apply(t, store, ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: 5})
			if !d.Allowed {
				t.Errorf("Apply(n=5) after the huge ones = %+v, want allowed", d)
			}
		})
	}
}

func testZeroRate(t *testing.T, newStore NewStore) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			clock := NewClock(T0)
			store := newStore(t, clock.Now)
			lim := ratelimit.Limit{Rate: 0, Period: time.Second}
			req := ratelimit.Request{Key: key(t, "k"), Limit: lim, Algorithm: alg, N: 1}
			for i := range 3 {
				clock.Set(T0.Add(time.Duration(i) * time.Hour))
				if d := apply(t, store, req); d.Allowed || !d.Unsatisfiable || d.Remaining != 0 {
					t.Errorf("zero rate: Apply = %+v, want denied and unsatisfiable", d)
				}
			}
		})
	}
}

func testInvalid(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	store := newStore(t, clock.Now)
	k := key(t, "k")
	bad := []struct {
		name string
		req  ratelimit.Request
		want error
	}{
		{"negative rate", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: -1, Period: time.Second}, N: 1}, ratelimit.ErrInvalidLimit},
		{"zero period", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1}, N: 1}, ratelimit.ErrInvalidLimit},
		{"negative period", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1, Period: -time.Second}, N: 1}, ratelimit.ErrInvalidLimit},
		{"negative burst", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1, Period: time.Second, Burst: -1}, N: 1}, ratelimit.ErrInvalidLimit},
		{"sub-nanosecond interval", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 2, Period: 1}, N: 1}, ratelimit.ErrInvalidLimit},
		{"period too long", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1, Period: ratelimit.MaxPeriod + 1}, N: 1}, ratelimit.ErrInvalidLimit},
		{"a year is too long for a bucket", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1, Period: 365 * 24 * time.Hour}, Algorithm: ratelimit.TokenBucket, N: 1}, ratelimit.ErrInvalidLimit},
		{"window too long", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1, Period: ratelimit.MaxWindow + 1}, Algorithm: ratelimit.FixedWindow, N: 1}, ratelimit.ErrInvalidLimit},
		{"rate above MaxRate", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: ratelimit.MaxRate + 1, Period: time.Hour}, Algorithm: ratelimit.FixedWindow, N: 1}, ratelimit.ErrInvalidLimit},
		{"burst too long", ratelimit.Request{Key: k, Limit: ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: math.MaxInt64}, N: 1}, ratelimit.ErrInvalidLimit},
		{"negative cost", ratelimit.Request{Key: k, Limit: limitsFor(), N: -1}, ratelimit.ErrInvalidRequest},
		{"unknown algorithm", ratelimit.Request{Key: k, Limit: limitsFor(), Algorithm: 200, N: 1}, ratelimit.ErrInvalidRequest},
		{"negative max delay", ratelimit.Request{Key: k, Limit: limitsFor(), Algorithm: ratelimit.LeakyBucket, N: 1, MaxDelay: -1}, ratelimit.ErrInvalidRequest},
	}
	for _, tc := range bad {
		d, err := store.Apply(context.Background(), tc.req)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Apply = %+v, %v; want error wrapping %v", tc.name, d, err, tc.want)
		}
	}
	// Finer than a nanosecond is fine for the windows, which never divide
	// by Rate (envoyproxy/ratelimit configs say 4294967295 per second).
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		huge := ratelimit.Request{Key: k + "/huge/" + alg.String(), Limit: ratelimit.Limit{Rate: 4294967295, Period: time.Second}, Algorithm: alg, N: 1000}
		if d, err := store.Apply(context.Background(), huge); err != nil || !d.Allowed || d.Remaining != 4294967295-1000 {
			t.Errorf("%v with 4294967295/s: Apply = %+v, %v; want allowed with %d remaining", alg, d, err, 4294967295-1000)
		}
	}
	// The windows accept periods up to MaxWindow.
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		long := ratelimit.Request{Key: k + "/long/" + alg.String(), Limit: ratelimit.Limit{Rate: 2, Period: ratelimit.MaxWindow}, Algorithm: alg, N: 1}
		if d, err := store.Apply(context.Background(), long); err != nil || !d.Allowed || d.Remaining != 1 {
			t.Errorf("%v with a period of MaxWindow: Apply = %+v, %v; want allowed with 1 remaining", alg, d, err)
		}
	}
	// The bad requests left nothing behind.
	d := apply(t, store, ratelimit.Request{Key: k, Limit: limitsFor(), N: 5})
	if !d.Allowed {
		t.Errorf("Apply(n=5) after the invalid requests = %+v, want allowed", d)
	}
}

func testKeys(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	store := newStore(t, clock.Now)
	prefix := key(t, "")
	keys := []string{
		prefix + "plain",
		prefix + "ünïcødé/ключ/鍵/🔑",
		prefix + strings.Repeat("long", 16<<10), // 64 KiB
		prefix + "with\x00nul and {braces}",
		prefix + "{hash-tag}",
		prefix + "plain ", // differs from "plain" by a space
	}
	lim := ratelimit.Limit{Rate: 2, Period: time.Minute}
	for _, alg := range ratelimit.Algorithms() {
		for _, k := range keys {
			req := ratelimit.Request{Key: k + "/" + alg.String(), Limit: lim, Algorithm: alg, N: 1}
			got := []bool{apply(t, store, req).Allowed, apply(t, store, req).Allowed, apply(t, store, req).Allowed}
			if !got[0] || !got[1] || got[2] {
				t.Errorf("%v, key %.40q: admitted %v, want [true true false]: keys must be independent and exact", alg, k, got)
			}
		}
	}
}

func testPeek(t *testing.T, newStore NewStore) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			clock := NewClock(T0)
			store := newStore(t, clock.Now)
			lim := limitsFor()
			k := key(t, "k")
			peek := ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: 0}
			for range 3 {
				if d := apply(t, store, peek); !d.Allowed || d.Remaining != 5 {
					t.Errorf("peek on a fresh key = %+v, want allowed with 5 remaining", d)
				}
			}
			apply(t, store, ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: 3})
			if d := apply(t, store, peek); !d.Allowed || d.Remaining != 2 {
				t.Errorf("peek after spending 3 = %+v, want allowed with 2 remaining", d)
			}
			apply(t, store, ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: 2})
			if d := apply(t, store, peek); !d.Allowed || d.Remaining != 0 {
				t.Errorf("peek on an exhausted key = %+v, want allowed (peeks always are) with 0 remaining", d)
			}
		})
	}
}

// testInvariants drives random sequences through every algorithm and
// checks, against an independent count of what was admitted:
//   - no more than the bound is ever admitted: Burst + Rate·elapsed/Period
//     for the bucket algorithms, Rate in any window of Period for the exact
//     windows (2·Rate around a fixed window's boundary);
//   - Remaining is never negative nor above capacity;
//   - RetryAfter is honest: the same request after exactly RetryAfter, with
//     nothing in between, is admitted.
func testInvariants(t *testing.T, newStore NewStore) {
	clock := NewClock(T0)
	store := newStore(t, clock.Now)
	limits := []ratelimit.Limit{
		{Rate: 5, Period: time.Second, Burst: 5},
		{Rate: 3, Period: time.Second, Burst: 7},
		{Rate: 100, Period: time.Minute, Burst: 10},
		{Rate: 7, Period: 250 * time.Millisecond, Burst: 1},
	}
	for _, alg := range ratelimit.Algorithms() {
		for li, lim := range limits {
			t.Run(fmt.Sprintf("%v/%d", alg, li), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(li)+1, uint64(alg)+1))
				CheckInvariants(t, store, clock, key(t, "k"), alg, lim, rng, 400)
			})
		}
	}
}

// CheckInvariants applies steps random requests to one key and checks the
// invariants listed on the suite. It moves clock forward only.
func CheckInvariants(t *testing.T, store ratelimit.Store, clock *Clock, k string, alg ratelimit.Algorithm, lim ratelimit.Limit, rng *rand.Rand, steps int) {
	t.Helper()
	lim = lim.Normalize()
	capacity := lim.Capacity(alg)
	start := clock.Now()
	now := start
	type admit struct {
		at time.Time
		n  int64
	}
	var admitted []admit
	var total int64
	for i := 0; i < steps; i++ {
		now = now.Add(time.Duration(rng.Int64N(int64(lim.Period) / 4)))
		clock.Set(now)
		n := rng.Int64N(capacity + 1)
		if rng.IntN(10) == 0 {
			n = 0
		}
		req := ratelimit.Request{Key: k, Limit: lim, Algorithm: alg, N: n}
		d := apply(t, store, req)
		if d.Remaining < 0 || d.Remaining > capacity {
			t.Fatalf("step %d: Remaining %d outside [0, %d]: %+v", i, d.Remaining, capacity, d)
		}
		if d.Unsatisfiable {
			t.Fatalf("step %d: n=%d ≤ capacity %d reported unsatisfiable: %+v", i, n, capacity, d)
		}
		if n > 0 && d.Allowed {
			admitted = append(admitted, admit{now, n})
			total += n
		}
		if !d.Allowed {
			if d.RetryAfter <= 0 {
				t.Fatalf("step %d: denied with RetryAfter %v: %+v", i, d.RetryAfter, d)
			}
			now = now.Add(d.RetryAfter)
			clock.Set(now)
			d2 := apply(t, store, req)
			if !d2.Allowed {
				t.Fatalf("step %d: denied %+v; retried after RetryAfter %v and denied again: %+v", i, d, d.RetryAfter, d2)
			}
			admitted = append(admitted, admit{now, n})
			total += n
		}
		// The bound.
		if alg.Windowed() {
			// Count what was admitted in the window (now−Period, now]: at
			// most Rate for the exact log, 2·Rate for the others (the fixed
			// window's boundary; the counter's estimate can lag).
			var inWindow int64
			for _, a := range admitted {
				if a.at.After(now.Add(-lim.Period)) {
					inWindow += a.n
				}
			}
			bound := lim.Rate
			if alg != ratelimit.SlidingWindowLog {
				bound = 2 * lim.Rate
			}
			if inWindow > bound {
				t.Fatalf("step %d: %d admitted in the last %v, bound %d", i, inWindow, lim.Period, bound)
			}
		} else {
			// The interval is Period/Rate truncated to the nanosecond.
			elapsed := now.Sub(start)
			bound := lim.Burst + int64(elapsed/lim.Interval())
			if total > bound {
				t.Fatalf("step %d: %d admitted in %v, bound %d", i, total, elapsed, bound)
			}
		}
	}
}
