package hostlimit

import (
	"context"
	"slices"
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

// TestAnnouncedSchedule: what a server announces is sent at once (the
// concurrency allowing), and the rest at the pace the budget comes back:
// a token bucket's refill, a window's reset. The send times are exact, in
// virtual time.
func TestAnnouncedSchedule(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	tests := []struct {
		name string
		mode BudgetMode
		b    Budget
		n    int
		want []time.Duration // send time of each request after the first answer
	}{
		// sluice serve's demo key: a bucket of 20 refilled at 1 a second,
		// announced as q=20;w=20 and r=19;t=1 after the first request;
		// each refill is waited for with a margin of 50 ms (a server's
		// lagging clock), which does not add up.
		{"bucket", BudgetPace, Budget{Remaining: 19, Reset: s, Limit: 20, Window: 20 * s}, 22,
			append(repeat(19, 0), 1050*ms, 2050*ms, 3050*ms)},
		// Spending a bucket: what it holds, then wait until it is full.
		{"bucket, spend", BudgetSpend, Budget{Remaining: 4, Reset: s, Limit: 5, Window: 5 * s}, 6,
			append(repeat(4, 0), 5*s, 5*s)},
		// A window: what remains at once, then one request at the reset.
		{"window", BudgetPace, Budget{Remaining: 5, Reset: 10 * s}, 6, append(repeat(5, 0), 10*s)},
		{"window, spend", BudgetSpend, Budget{Remaining: 5, Reset: 10 * s}, 6, append(repeat(5, 0), 10*s)},
		{"window with a policy", BudgetPace, Budget{Remaining: 150, Reset: 2 * s, Limit: 200, Window: 2 * s}, 151,
			append(repeat(150, 0), 2*s)},
		{"spent window", BudgetPace, Budget{Remaining: 0, Reset: 5 * s}, 1, []time.Duration{5 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(Options{BudgetMode: tt.mode, Concurrency: 1000})
				ctx := context.Background()
				p, err := l.Acquire(ctx, "h")
				if err != nil {
					t.Fatal(err)
				}
				p.Announce(tt.b, time.Now())
				p.Done(Feedback{})
				start := time.Now()
				var got []time.Duration
				for range tt.n {
					p, err := l.Acquire(ctx, "h")
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, time.Since(start))
					p.Done(Feedback{})
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("sent at %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func repeat(n int, d time.Duration) []time.Duration { return slices.Repeat([]time.Duration{d}, n) }

// hold takes n permits of host "h" and keeps them.
func hold(t *testing.T, l *Limiter, n int) []*Permit {
	t.Helper()
	var ps []*Permit
	for range n {
		p, err := l.Acquire(context.Background(), "h")
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// sendTimes takes n permits of host "h" one after the other, each done
// at once, and returns when each was given, from now.
func sendTimes(t *testing.T, l *Limiter, n int) []time.Duration {
	t.Helper()
	start := time.Now()
	var got []time.Duration
	for range n {
		p := hold(t, l, 1)[0]
		got = append(got, time.Since(start))
		p.Done(Feedback{})
	}
	return got
}

// TestAnnouncedInFlight: an answer may not count the other requests in
// flight (the server counts in its own order), and an older answer's
// larger count is stale; after the reset, one request asks for the new
// quota and the others wait for its answer (here none: for a second).
func TestAnnouncedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Concurrency: 100})
		ps := hold(t, l, 4)
		// The 2nd's answer: 4 remain, of which the three others in
		// flight may take 3. The 1st's later answer (8 remain) is older
		// news.
		ps[1].Announce(Budget{Remaining: 4, Reset: 10 * time.Second}, time.Now())
		ps[0].Announce(Budget{Remaining: 8, Reset: 10 * time.Second}, time.Now())
		for _, p := range ps {
			p.Done(Feedback{})
		}
		if got, want := sendTimes(t, l, 3), []time.Duration{0, 10 * time.Second, 11 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("sent at %v, want %v", got, want)
		}
	})
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

// TestAnnouncedInFlightAbsoluteReset: with a reset given as an instant
// (GitHub's X-RateLimit-Reset in Unix seconds, a reset in milliseconds),
// which each answer turns into a different delay, the answers are of one
// window all the same: a later permit's answer saying more remain, the
// server having counted it before an earlier one, is stale, not a new
// window's quota (that took one request too many per answer so
// reordered).
func TestAnnouncedInFlightAbsoluteReset(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reset time.Duration // after a whole second of the virtual clock
	}{
		{"unix seconds", 10 * time.Second},
		{"milliseconds", 10*time.Second + 500*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := New(Options{Concurrency: 100, Rate: 1000, Burst: 10}) // the four at once
				reset := time.Now().Truncate(time.Second).Add(tt.reset)
				ps := hold(t, l, 4)
				// The server counted the 2nd before the 1st: the 1st's
				// answer says 4 remain (the three others in flight may
				// take 3), the 2nd's, a millisecond later, 5.
				for _, a := range []struct {
					p    *Permit
					left int64
				}{{ps[0], 4}, {ps[1], 5}} {
					time.Sleep(time.Millisecond)
					now := time.Now()
					a.p.Announce(Budget{Remaining: a.left, Reset: reset.Sub(now)}, now)
					a.p.Done(Feedback{})
				}
				ps[2].Done(Feedback{})
				ps[3].Done(Feedback{})
				first := reset.Sub(time.Now())
				if got, want := sendTimes(t, l, 3), []time.Duration{0, first, first + time.Second}; !slices.Equal(got, want) {
					t.Errorf("sent at %v, want %v", got, want)
				}
			})
		})
	}
}
