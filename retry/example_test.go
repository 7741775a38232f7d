package retry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/retry"
)

func ExampleDo() {
	calls := 0
	err := retry.Do(context.Background(), retry.Options{
		MaxAttempts: 3,
		Backoff:     backoff.Constant(time.Millisecond),
	}, func(ctx context.Context, attempt int) error {
		calls++
		return errors.New("503 Service Unavailable")
	})
	fmt.Println(calls, "calls")
	fmt.Println(err)
	fmt.Println(errors.Is(err, retry.ErrExhausted))
	// Output:
	// 3 calls
	// retry: gave up after 3 attempts: 503 Service Unavailable
	// true
}

// A server delay longer than the caller will wait fails at once, with the
// delay in the error, instead of retrying early.
func ExampleWithDelay() {
	err := retry.Do(context.Background(), retry.Options{MaxDelay: 30 * time.Second},
		func(ctx context.Context, attempt int) error {
			return retry.WithDelay(errors.New("429 Too Many Requests"), 2*time.Minute)
		})
	fmt.Println(err)
	// Output:
	// retry: server asked to wait 2m0s, longer than the maximum 30s, after 1 attempt: 429 Too Many Requests
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, v := range []string{
		"120",
		"Sat, 21 Nov 2026 10:00:30 GMT",    // IMF-fixdate
		"Saturday, 21-Nov-26 10:01:00 GMT", // RFC 850
		"Sat Nov 21 10:00:05 2026",         // asctime
		"-3",                               // negative: clamped
		"9999999999",                       // absurd: clamped
		"soon",
	} {
		d, ok := retry.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 1m0s true
	// 5s true
	// 0s true
	// 24h0m0s true
	// 0s false
}

func ExampleRetryAfter() {
	// The server's clock is an hour ahead; its own Date field keeps the
	// delay right.
	h := http.Header{}
	h.Set("Date", "Sat, 21 Nov 2026 11:00:00 GMT")
	h.Set("Retry-After", "Sat, 21 Nov 2026 11:00:30 GMT")
	d, _ := retry.RetryAfter(h, time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	fmt.Println(d)
	// Output: 30s
}

func ExampleBudget() {
	b := retry.NewBudget(retry.BudgetOptions{Capacity: 2})
	fmt.Println(b.Withdraw(), b.Withdraw(), b.Withdraw())
	for range 10 {
		b.Deposit() // ten successes refill one token
	}
	fmt.Println(b.Withdraw())
	// Output:
	// true true false
	// true
}
