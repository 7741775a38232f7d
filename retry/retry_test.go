package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

var errBoom = errors.New("boom")

// failN returns an op that fails n times with err, then succeeds, and
// records when each attempt started.
func failN(n int, err error, starts *[]time.Duration) Op {
	t0 := time.Now()
	return func(ctx context.Context, attempt int) error {
		*starts = append(*starts, time.Since(t0))
		if attempt <= n {
			return err
		}
		return nil
	}
}

func TestDoSchedule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		opts := Options{Backoff: backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second}}
		if err := Do(t.Context(), opts, failN(5, errBoom, &starts)); err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		// Waits of 200, 400, 800, 1000, 1000 ms.
		want := []time.Duration{0, 200, 600, 1400, 2400, 3400}
		if len(starts) != len(want) {
			t.Fatalf("attempts = %d, want %d", len(starts), len(want))
		}
		for i := range want {
			if starts[i] != want[i]*time.Millisecond {
				t.Errorf("attempt %d started at %v, want %v", i+1, starts[i], want[i]*time.Millisecond)
			}
		}
	})
}

// TestDoDefaults checks the 429 guide's caps: 7 attempts, with the
// recommended schedule's bounds between them, then an error that says how
// many attempts were made and what the last one returned.
func TestDoDefaults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		last := errors.New("429 Too Many Requests")
		err := Do(t.Context(), Options{}, failN(100, last, &starts))
		if !errors.Is(err, ErrExhausted) || !errors.Is(err, last) {
			t.Fatalf("Do = %v, want ErrExhausted wrapping the last error", err)
		}
		if got, want := err.Error(), "retry: gave up after 7 attempts: 429 Too Many Requests"; got != want {
			t.Errorf("Do error = %q, want %q", got, want)
		}
		if len(starts) != 7 {
			t.Fatalf("attempts = %d, want 7", len(starts))
		}
		for i := 1; i < len(starts); i++ {
			wait := starts[i] - starts[i-1]
			lo, hi := 500*time.Millisecond<<(i-1), 500*time.Millisecond<<i
			if wait < lo || wait > hi {
				t.Errorf("wait before retry %d = %v, want in [%v, %v]", i, wait, lo, hi)
			}
		}
	})
}

func TestDoServerDelay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		var events []Event
		opts := Options{OnRetry: func(e Event) { events = append(events, e) }}
		err := Do(t.Context(), opts, failN(2, WithDelay(errBoom, 3*time.Second), &starts))
		if err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if want := []time.Duration{0, 3 * time.Second, 6 * time.Second}; fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Errorf("attempts started at %v, want %v", starts, want)
		}
		if len(events) != 2 || !events[0].ServerDelay || events[0].Delay != 3*time.Second || events[1].Attempt != 2 {
			t.Errorf("events = %+v, want two server delays of 3s", events)
		}
	})
}

func TestDoDelayTooLong(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var starts []time.Duration
		t0 := time.Now()
		err := Do(t.Context(), Options{MaxDelay: 10 * time.Second}, failN(5, WithDelay(errBoom, time.Minute), &starts))
		var de *DelayTooLongError
		if !errors.As(err, &de) || !errors.Is(err, ErrDelayTooLong) || !errors.Is(err, errBoom) {
			t.Fatalf("Do = %v, want a DelayTooLongError wrapping errBoom", err)
		}
		if de.Delay != time.Minute || de.Attempts != 1 || time.Since(t0) != 0 {
			t.Errorf("DelayTooLongError = %+v after %v, want 1m after 1 attempt, at once", de, time.Since(t0))
		}
		if !strings.Contains(err.Error(), "1m0s") {
			t.Errorf("error %q does not name the server's delay", err)
		}
	})
}

func TestDoPermanent(t *testing.T) {
	t.Parallel()
	var starts []time.Duration
	err := Do(t.Context(), Options{}, failN(5, Permanent(errBoom), &starts))
	if err != errBoom || len(starts) != 1 {
		t.Errorf("Do = %v after %d attempts, want errBoom after 1", err, len(starts))
	}
	if Permanent(nil) != nil || WithDelay(nil, time.Second) != nil {
		t.Errorf("Permanent(nil) or WithDelay(nil) is not nil")
	}
}

func TestDoRetryable(t *testing.T) {
	t.Parallel()
	var starts []time.Duration
	opts := Options{Retryable: func(err error) bool { return !errors.Is(err, errBoom) }}
	if err := Do(t.Context(), opts, failN(5, errBoom, &starts)); err != errBoom || len(starts) != 1 {
		t.Errorf("Do = %v after %d attempts, want errBoom after 1", err, len(starts))
	}
}

func TestDoCancel(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		var starts []time.Duration
		t0 := time.Now()
		err := Do(ctx, Options{Backoff: backoff.Constant(time.Second)}, failN(100, errBoom, &starts))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
			t.Fatalf("Do = %v, want context.Canceled and errBoom", err)
		}
		if time.Since(t0) != 1500*time.Millisecond || len(starts) != 2 {
			t.Errorf("Do returned after %v and %d attempts, want 1.5s and 2", time.Since(t0), len(starts))
		}
	})
}

func TestDoCancelledBefore(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	called := false
	err := Do(ctx, Options{}, func(context.Context, int) error { called = true; return nil })
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("Do = %v (op called: %v), want context.Canceled without calling op", err, called)
	}
}

// TestDoDeadline: a wait that would pass the deadline fails at once.
func TestDoDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var starts []time.Duration
		t0 := time.Now()
		err := Do(ctx, Options{Backoff: backoff.Constant(2 * time.Second)}, failN(100, errBoom, &starts))
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errBoom) {
			t.Fatalf("Do = %v, want DeadlineExceeded and errBoom", err)
		}
		// Attempts at 0, 2 s, 4 s; the next wait would end at 6 s > 5 s.
		if len(starts) != 3 || time.Since(t0) != 4*time.Second {
			t.Errorf("Do returned after %v and %d attempts, want 4s and 3", time.Since(t0), len(starts))
		}
		if !strings.Contains(err.Error(), "would pass the deadline") {
			t.Errorf("error %q does not say why", err)
		}
	})
}

func TestDoBudget(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetOptions{Capacity: 3, Refill: 0.5})
		opts := Options{Budget: b, Backoff: backoff.Constant(time.Millisecond), MaxAttempts: 100}
		var starts []time.Duration
		err := Do(t.Context(), opts, failN(100, errBoom, &starts))
		if !errors.Is(err, ErrBudgetExhausted) || !errors.Is(err, errBoom) || len(starts) != 4 {
			t.Fatalf("Do = %v after %d attempts, want ErrBudgetExhausted after 4", err, len(starts))
		}
		// A failing target gets no retries at all now, only first attempts.
		starts = nil
		err = Do(t.Context(), opts, failN(100, errBoom, &starts))
		if !errors.Is(err, ErrBudgetExhausted) || len(starts) != 1 {
			t.Fatalf("drained: Do = %v after %d attempts, want ErrBudgetExhausted after 1", err, len(starts))
		}
		// Two successes buy one retry.
		for range 2 {
			if err := Do(t.Context(), opts, failN(0, errBoom, &starts)); err != nil {
				t.Fatal(err)
			}
		}
		starts = nil
		if err := Do(t.Context(), opts, failN(1, errBoom, &starts)); err != nil || len(starts) != 2 {
			t.Errorf("refilled: Do = %v after %d attempts, want nil after 2", err, len(starts))
		}
	})
}

func TestBudget(t *testing.T) {
	t.Parallel()
	var nilb *Budget
	if !nilb.Withdraw() || !nilb.Full() {
		t.Errorf("nil Budget refuses")
	}
	nilb.Deposit()
	b := NewBudget(BudgetOptions{})
	n := 0
	for b.Withdraw() {
		n++
	}
	if n != 20 || b.Tokens() != 0 || b.Full() {
		t.Errorf("default budget allowed %d retries (tokens %v), want 20", n, b.Tokens())
	}
	for range 10 {
		b.Deposit()
	}
	if got := b.Tokens(); got < 0.999 || got > 1.001 {
		t.Errorf("after 10 successes: Tokens = %v, want 1", got)
	}
	for range 1000 {
		b.Deposit()
	}
	if !b.Full() || b.Tokens() != 20 {
		t.Errorf("after many successes: Tokens = %v, want full (20)", b.Tokens())
	}
}

func BenchmarkDo(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	op := func(context.Context, int) error { return nil }
	for b.Loop() {
		_ = Do(ctx, Options{}, op)
	}
}
