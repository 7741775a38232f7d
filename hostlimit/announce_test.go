package hostlimit

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

func state(t *testing.T, l *Limiter) HostState {
	t.Helper()
	hs := l.Hosts()
	if len(hs) != 1 {
		t.Fatalf("%d hosts", len(hs))
	}
	return hs[0]
}

func TestAnnounce(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name   string
		b      []Budget
		rate   float64
		paused time.Duration
	}{
		// 9 left for 10 s (whole seconds: paced to 9.5 s), 10 intervals.
		{"window", []Budget{{Remaining: 9, Reset: 10 * time.Second}}, 10 / 9.5, 0},
		{"window, sub-second reset", []Budget{{Remaining: 4, Reset: 2500 * time.Millisecond}}, 5 / 2.5, 0},
		// 5 per minute, 2 left, full in 36 s: a bucket, refilling at 5/60.
		{"bucket", []Budget{{Remaining: 2, Reset: 36 * time.Second, Limit: 5, Window: time.Minute}}, 5.0 / 60, 0},
		// The same numbers with a reset that a bucket would not give.
		{"window with a policy", []Budget{{Remaining: 2, Reset: 10 * time.Second, Limit: 5, Window: time.Minute}}, 3 / 9.5, 0},
		{"spent window", []Budget{{Remaining: 0, Reset: 5 * time.Second}}, 2, 5 * time.Second},
		{"spent bucket: one refill", []Budget{{Remaining: 0, Reset: time.Minute, Limit: 5, Window: time.Minute}}, 5.0 / 60, 12 * time.Second},
		// A late answer's larger count, for the same window, is stale.
		{"stale answer", []Budget{{Remaining: 3, Reset: 10 * time.Second}, {Remaining: 8, Reset: 10 * time.Second}}, 4 / 9.5, 0},
		{"no reset: nothing", []Budget{{Remaining: 3}}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(Options{})
			l.host("h", now)
			for _, b := range tt.b {
				l.Announce("h", b, now)
			}
			s := state(t, l)
			if math.Abs(s.Rate-tt.rate) > 1e-9 {
				t.Errorf("rate %v, want %v", s.Rate, tt.rate)
			}
			if d := s.PausedFor - tt.paused; d < -time.Second || d > time.Second/10 {
				t.Errorf("paused for %v, want %v", s.PausedFor, tt.paused)
			}
		})
	}
}

// TestSpendCredit: spending, the host sends what remains at once and then
// waits for the reset; no more than remains goes out.
func TestSpendCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{BudgetMode: BudgetSpend, Concurrency: 100})
		ctx := context.Background()
		p, err := l.Acquire(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		p.Announce(Budget{Remaining: 5, Reset: 10 * time.Second}, time.Now())
		p.Done(Feedback{})
		start := time.Now()
		var at []time.Duration
		for range 6 {
			p, err := l.Acquire(ctx, "h")
			if err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
			p.Done(Feedback{})
		}
		for i, d := range at[:5] {
			if d > 10*time.Millisecond {
				t.Errorf("request %d of the 5 remaining waited %v", i, d)
			}
		}
		if at[5] < 10*time.Second {
			t.Errorf("the 6th went at %v, before the reset", at[5])
		}
	})
}
