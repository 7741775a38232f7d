package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// A token bucket per user: 10 requests a second, bursts of 20.
func Example() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	limiter, err := ratelimit.NewLimiter(store, ratelimit.TokenBucket,
		ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 20})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	admitted := 0
	for range 25 {
		d, err := limiter.Allow(ctx, "user:42")
		if err != nil {
			panic(err) // the store failed; a denial is not an error
		}
		if d.Allowed {
			admitted++
		} else if admitted == 20 {
			fmt.Printf("denied: retry in about %v\n", d.RetryAfter.Round(10*time.Millisecond))
			admitted = -1
		}
	}
	// Output:
	// denied: retry in about 100ms
}

// The README's quick start.
func Example_quickStart() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	defer store.Close()
	limiter, err := ratelimit.NewLimiter(store, ratelimit.TokenBucket,
		ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 20})
	if err != nil {
		panic(err) // an invalid limit
	}
	d, err := limiter.Allow(ctx, "user:42")
	if err != nil {
		panic(err) // the store failed: a denial is not an error
	}
	if !d.Allowed {
		fmt.Println("429, Retry-After:", ratelimit.DurationCeil(d.RetryAfter))
	}
	fmt.Println(d.Allowed, d.Remaining)
	// Output: true 19
}

// Store.Apply is the whole interface: one request in, one decision out.
func ExampleStore() {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return clock }})
	defer store.Close()

	req := ratelimit.Request{Key: "ip:203.0.113.7", Limit: ratelimit.PerMinute(2), Algorithm: ratelimit.SlidingWindowLog, N: 1}
	for range 3 {
		d, _ := store.Apply(context.Background(), req)
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=1m0s
}

// Wait delays a client until it may proceed, and fails at once when the
// wait would not fit before the context's deadline.
func ExampleLimiter_Wait() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	limiter, _ := ratelimit.NewLimiter(store, ratelimit.GCRA, ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1})

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fmt.Println(limiter.Wait(ctx, "crawler"))
	fmt.Println(limiter.Wait(ctx, "crawler"))
	// Output:
	// <nil>
	// ratelimit: wait would exceed the context deadline
}

// A cost above the limit's capacity can never be admitted, and says so.
func ExampleDecision_unsatisfiable() {
	store := memstore.New(memstore.Options{})
	defer store.Close()
	d, _ := store.Apply(context.Background(), ratelimit.Request{
		Key: "upload", Limit: ratelimit.Limit{Rate: 100, Period: time.Second, Burst: 500}, N: 501,
	})
	fmt.Println(d.Allowed, d.Unsatisfiable, d.RetryAfter)
	// Output: false true 0s
}

func ExampleParseAlgorithm() {
	a, err := ratelimit.ParseAlgorithm("sliding_window_counter")
	fmt.Println(a, err, a == ratelimit.SlidingWindowCounter)
	// Output: sliding_window_counter <nil> true
}
