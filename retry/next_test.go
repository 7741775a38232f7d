package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/retry"
)

// TestNextIsDo: a loop over Next in virtual time makes exactly the
// decisions Do makes in (synctest's) real time: the same waits, the same
// attempts, the same final error, budget included.
func TestNextIsDo(t *testing.T) {
	errs := func(attempt int) error {
		switch attempt % 3 {
		case 0:
			return retry.WithDelay(fmt.Errorf("429 #%d", attempt), time.Duration(attempt)*time.Second)
		default:
			return fmt.Errorf("503 #%d", attempt)
		}
	}
	opts := func() retry.Options {
		return retry.Options{
			MaxAttempts: 9,
			Backoff:     backoff.Func(func(n int) time.Duration { return time.Duration(n*n) * 100 * time.Millisecond }),
			MaxDelay:    5 * time.Second,
			Budget:      retry.NewBudget(retry.BudgetOptions{Capacity: 3}),
		}
	}
	var doTimes []time.Duration
	var doErr error
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		doErr = retry.Do(context.Background(), opts(), func(ctx context.Context, attempt int) error {
			doTimes = append(doTimes, time.Since(start))
			return errs(attempt)
		})
	})
	var simTimes []time.Duration
	var simErr error
	o := opts()
	now := time.Duration(0)
	for attempt := 1; ; attempt++ {
		simTimes = append(simTimes, now)
		s := retry.Next(o, attempt, errs(attempt), time.Unix(0, 0).Add(now), time.Time{})
		if s.Err != nil {
			simErr = s.Err
			break
		}
		now += s.Delay
	}
	if fmt.Sprint(doTimes) != fmt.Sprint(simTimes) || doErr.Error() != simErr.Error() {
		t.Errorf("Do: %v then %v\nNext: %v then %v", doTimes, doErr, simTimes, simErr)
	}
	if !errors.As(simErr, new(*retry.BudgetError)) {
		t.Errorf("final error %v, want the budget's", simErr)
	}
}

func TestNextDeadline(t *testing.T) {
	now := time.Unix(100, 0)
	s := retry.Next(retry.Options{Backoff: backoff.Constant(2 * time.Second)}, 1, errors.New("x"), now, now.Add(time.Second))
	if !errors.As(s.Err, new(*retry.InterruptedError)) {
		t.Errorf("a wait past the deadline: %+v, want an InterruptedError", s)
	}
	s = retry.Next(retry.Options{}, 1, retry.Permanent(errors.New("p")), now, time.Time{})
	if s.Err == nil || s.Err.Error() != "p" {
		t.Errorf("permanent: %+v", s)
	}
}

// ExampleNext runs the retry loop in virtual time, as a simulation does.
func ExampleNext() {
	opts := retry.Options{MaxAttempts: 4, Backoff: backoff.Constant(time.Second)}
	clock := time.Unix(0, 0)
	for attempt := 1; ; attempt++ {
		err := retry.WithDelay(errors.New("429 Too Many Requests"), 3*time.Second)
		if attempt == 2 {
			err = errors.New("503 Service Unavailable") // no Retry-After: the backoff
		}
		s := retry.Next(opts, attempt, err, clock, time.Time{})
		if s.Err != nil {
			fmt.Printf("t=%v: %v\n", clock.Sub(time.Unix(0, 0)), s.Err)
			return
		}
		fmt.Printf("t=%v: attempt %d failed, wait %v (server's: %v)\n", clock.Sub(time.Unix(0, 0)), attempt, s.Delay, s.ServerDelay)
		clock = clock.Add(s.Delay)
	}
	// Output:
	// t=0s: attempt 1 failed, wait 3s (server's: true)
	// t=3s: attempt 2 failed, wait 1s (server's: false)
	// t=4s: attempt 3 failed, wait 3s (server's: true)
	// t=7s: retry: gave up after 4 attempts: 429 Too Many Requests
}
