package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// newClockedLimiter is newLimiter on a memstore whose clock stands still.
func newClockedLimiter(t *testing.T, a ratelimit.Algorithm, lim ratelimit.Limit) *ratelimit.Limiter {
	t.Helper()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return newLimiterOpts(t, memstore.Options{Now: func() time.Time { return at }}, a, lim)
}

func TestSetLimitInvalidKeepsLimit(t *testing.T) {
	l := newClockedLimiter(t, ratelimit.GCRA, ratelimit.PerSecond(10))
	if err := l.SetLimit(ratelimit.Limit{Rate: -1, Period: time.Second}); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("SetLimit(negative rate) = %v, want ErrInvalidLimit", err)
	}
	if err := l.SetBurst(-1); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("SetBurst(-1) = %v, want ErrInvalidLimit", err)
	}
	if got := l.Limit(); got != ratelimit.PerSecond(10) {
		t.Errorf("after invalid changes the limit is %v, want 10/s unchanged", got)
	}
	if err := l.SetBurst(0); err != nil || l.Limit().Burst != 10 {
		t.Errorf("SetBurst(0) = %v, limit %v; want the burst back to the rate", err, l.Limit())
	}
}

// TestSetLimitConcurrent changes the limit back and forth while requests
// run on one key with the clock stopped: no decision mixes two limits
// (the race detector), and the changes mint nothing: never more than the
// larger burst is admitted.
func TestSetLimitConcurrent(t *testing.T) {
	small := ratelimit.Limit{Rate: 10, Period: time.Hour, Burst: 10}
	large := ratelimit.Limit{Rate: 100, Period: time.Hour, Burst: 100}
	l := newClockedLimiter(t, ratelimit.GCRA, small)
	ctx := context.Background()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				d, err := l.Allow(ctx, "hot")
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			lim := small
			if i%2 == 0 {
				lim = large
			}
			if err := l.SetLimit(lim); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	if got := admitted.Load(); got > 100 || got < 10 {
		t.Errorf("admitted %d of 800 with the limit changing, want between 10 and 100", got)
	}
}

func TestReserveNotOK(t *testing.T) {
	l := newClockedLimiter(t, ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 2})
	ctx := context.Background()
	r, err := l.ReserveN(ctx, "k", 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || !r.Decision().Unsatisfiable || r.Delay() != 0 {
		t.Errorf("ReserveN beyond the burst: OK %v, %+v; want not OK, unsatisfiable", r.OK(), r.Decision())
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	// Nothing was taken, and the Cancel gave nothing: the burst is there.
	if d, _ := l.AllowN(ctx, "k", 2); !d.Allowed {
		t.Errorf("after a reservation that was not OK, AllowN(2) = %+v, want allowed", d)
	}
	// Allow went before the reservation: Cancel of a reservation that was
	// not OK must not refund Allow's events.
	if d, _ := l.Allow(ctx, "k"); d.Allowed {
		t.Errorf("the burst spent, Allow = %+v, want denied", d)
	}
}

// TestReserveDebtBound: the debt a reservation may run up is bounded by
// MaxPeriod, the longest state a bucket holds.
func TestReserveDebtBound(t *testing.T) {
	p := ratelimit.MaxPeriod / 4
	l := newClockedLimiter(t, ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: p, Burst: 1})
	ctx := context.Background()
	for i := range 5 {
		r, err := l.Reserve(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		wantOK, wantDelay := i < 4, time.Duration(i)*p
		if !wantOK {
			wantDelay = 0
		}
		if r.OK() != wantOK || r.Delay() != wantDelay {
			t.Errorf("reservation %d: OK %v, delay %v; want %v, %v", i, r.OK(), r.Delay(), wantOK, wantDelay)
		}
	}
}

// TestReserveStoreError: a failed store is an error and no reservation,
// on both paths (the reserve queue and the algorithms that reserve as they
// decide).
func TestReserveStoreError(t *testing.T) {
	s := memstore.New(memstore.Options{})
	s.Close()
	for _, a := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		l, err := ratelimit.NewLimiter(s, a, ratelimit.PerSecond(1))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := l.Reserve(context.Background(), "k"); !errors.Is(err, ratelimit.ErrClosed) || r != nil {
			t.Errorf("%v: Reserve on a closed store = %v, %v; want nil, ErrClosed", a, r, err)
		}
	}
}
