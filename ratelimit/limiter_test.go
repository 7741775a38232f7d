package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

func newLimiter(t *testing.T, a ratelimit.Algorithm, lim ratelimit.Limit) *ratelimit.Limiter {
	t.Helper()
	return newLimiterOpts(t, memstore.Options{}, a, lim)
}

// newLimiterOpts is newLimiter on a memstore made with opts.
func newLimiterOpts(t *testing.T, opts memstore.Options, a ratelimit.Algorithm, lim ratelimit.Limit) *ratelimit.Limiter {
	t.Helper()
	s := memstore.New(opts)
	t.Cleanup(func() { s.Close() })
	l, err := ratelimit.NewLimiter(s, a, lim)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewLimiterInvalid(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	for _, tc := range []struct {
		name  string
		store ratelimit.Store
		alg   ratelimit.Algorithm
		lim   ratelimit.Limit
	}{
		{"nil store", nil, ratelimit.GCRA, ratelimit.PerSecond(1)},
		{"zero period", s, ratelimit.GCRA, ratelimit.Limit{Rate: 1}},
		{"negative rate", s, ratelimit.GCRA, ratelimit.Limit{Rate: -1, Period: time.Second}},
		{"unknown algorithm", s, 99, ratelimit.PerSecond(1)},
	} {
		if l, err := ratelimit.NewLimiter(tc.store, tc.alg, tc.lim); err == nil {
			t.Errorf("%s: NewLimiter = %v, nil; want an error", tc.name, l)
		}
	}
}

func TestWaitSleepsUntilAdmitted(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, alg, ratelimit.Limit{Rate: 2, Period: time.Second, Burst: 2})
				ctx := context.Background()
				start := time.Now()
				for range 6 {
					if err := l.Wait(ctx, "k"); err != nil {
						t.Fatal(err)
					}
				}
				// 2 at once, then 2 a second: the 6th at 2 s for the buckets
				// and the fixed window; the sliding counter, which still
				// weighs the previous window, takes until 4 s.
				if got := time.Since(start); got < 2*time.Second || got > 4*time.Second {
					t.Errorf("6 waits took %v, want between 2 s and 4 s", got)
				}
			})
		})
	}
}

func TestWaitLeakyBucketSpacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.LeakyBucket, ratelimit.Limit{Rate: 4, Period: time.Second, Burst: 10})
		ctx := context.Background()
		start := time.Now()
		var at []time.Duration
		for range 5 {
			if err := l.Wait(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
		}
		want := []time.Duration{0, 250 * time.Millisecond, 500 * time.Millisecond, 750 * time.Millisecond, time.Second}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("request %d left at %v, want %v (all: %v)", i, at[i], want[i], at)
			}
		}
	})
}

func TestWaitFailsAtOnceWhenDeadlineTooClose(t *testing.T) {
	for _, alg := range ratelimit.Algorithms() {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newLimiter(t, alg, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 1})
				if err := l.Wait(context.Background(), "k"); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				start := time.Now()
				err := l.Wait(ctx, "k")
				if !errors.Is(err, ratelimit.ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Wait = %v, want ErrDeadline (and DeadlineExceeded)", err)
				}
				if waited := time.Since(start); waited != 0 {
					t.Errorf("Wait slept %v before failing, want 0", waited)
				}
				// Nothing was taken: once the first request has aged out
				// (two windows for the sliding counter), one more is
				// admitted at once.
				time.Sleep(2 * time.Second)
				if d, _ := l.Allow(context.Background(), "k"); !d.Allowed {
					t.Errorf("after the failed wait: %+v, want allowed", d)
				}
			})
		})
	}
}

func TestWaitCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Minute, Burst: 1})
		l.Allow(context.Background(), "k")
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		start := time.Now()
		if err := l.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("Wait returned after %v, want 1s (when cancelled)", got)
		}
	})
}

func TestWaitUnsatisfiable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 3})
		if _, err := l.WaitN(context.Background(), "k", 4); !errors.Is(err, ratelimit.ErrUnsatisfiable) {
			t.Errorf("WaitN(4) with burst 3 = %v, want ErrUnsatisfiable", err)
		}
	})
}

func TestAlgorithmText(t *testing.T) {
	for _, a := range ratelimit.Algorithms() {
		b, err := a.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var got ratelimit.Algorithm
		if err := got.UnmarshalText(b); err != nil || got != a {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, got, err, a)
		}
	}
	var a ratelimit.Algorithm
	for _, bad := range []string{"", "GCRA", "token-bucket", "leaky"} {
		if err := a.UnmarshalText([]byte(bad)); !errors.Is(err, ratelimit.ErrInvalidRequest) {
			t.Errorf("UnmarshalText(%q) = %v, want ErrInvalidRequest", bad, err)
		}
	}
	if _, err := ratelimit.Algorithm(77).MarshalText(); err == nil {
		t.Error("MarshalText of an unknown algorithm succeeded")
	}
	want := []string{"gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window_counter", "sliding_window_log"}
	for i, a := range ratelimit.Algorithms() {
		if a.String() != want[i] {
			t.Errorf("Algorithm(%d).String() = %q, want %q", i, a, want[i])
		}
	}
}

func TestDurationCeil(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{0, 0}, {-time.Second, 0}, {1, 1}, {time.Second, 1}, {time.Second + 1, 2}, {90 * time.Second, 90}} {
		if got := ratelimit.DurationCeil(tc.d); got != tc.want {
			t.Errorf("DurationCeil(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestLimitString(t *testing.T) {
	for _, tc := range []struct {
		l    ratelimit.Limit
		want string
	}{
		{ratelimit.PerSecond(10), "10/1s"},
		{ratelimit.Limit{Rate: 100, Period: time.Minute, Burst: 20}, "100/1m0s burst 20"},
	} {
		if got := tc.l.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.l, got, tc.want)
		}
	}
}

func TestLimitPolicy(t *testing.T) {
	for _, tc := range []struct {
		l      ratelimit.Limit
		a      ratelimit.Algorithm
		q      int64
		window time.Duration
	}{
		{ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 20}, ratelimit.TokenBucket, 20, 20 * time.Second},
		{ratelimit.PerMinute(5), ratelimit.GCRA, 5, time.Minute},
		{ratelimit.Limit{Rate: 100, Period: time.Minute, Burst: 7}, ratelimit.FixedWindow, 100, time.Minute},
		{ratelimit.Limit{Rate: 10, Period: time.Hour}, ratelimit.SlidingWindowCounter, 10, time.Hour},
	} {
		if q, w := tc.l.Policy(tc.a); q != tc.q || w != tc.window {
			t.Errorf("%v.Policy(%v) = %d, %v; want %d, %v", tc.l, tc.a, q, w, tc.q, tc.window)
		}
	}
}
