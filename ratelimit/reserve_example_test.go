package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// Reserve says how long to wait before committing to the wait: a client
// whose next call would have to wait longer than it may gives the events
// back with Cancel instead of sleeping.
func ExampleLimiter_Reserve() {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return clock }})
	defer store.Close()
	ctx := context.Background()
	limiter, _ := ratelimit.NewLimiter(store, ratelimit.TokenBucket, ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 2})

	for range 4 {
		r, err := limiter.Reserve(ctx, "api.example.com")
		if err != nil {
			panic(err) // the store failed
		}
		if r.Delay() > 1500*time.Millisecond {
			fmt.Println("too long:", r.Delay())
			r.Cancel(ctx)
			continue
		}
		fmt.Println("go in", r.Delay()) // time.Sleep(r.Delay()), then call
	}
	// Output:
	// go in 0s
	// go in 0s
	// go in 1s
	// too long: 2s
}

// SetLimit changes a limiter in place; what each key used stays used.
func ExampleLimiter_SetLimit() {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return clock }})
	defer store.Close()
	ctx := context.Background()
	limiter, _ := ratelimit.NewLimiter(store, ratelimit.GCRA, ratelimit.PerMinute(5))

	limiter.AllowN(ctx, "tenant:7", 3)
	// The tenant upgrades: 50 a minute, and its 3 used are still used.
	if err := limiter.SetLimit(ratelimit.Limit{Rate: 50, Period: time.Minute, Burst: 5}); err != nil {
		panic(err) // an invalid limit: the old one stays
	}
	d, _ := limiter.AllowN(ctx, "tenant:7", 0)
	fmt.Println(limiter.Limit(), d.Remaining)
	limiter.SetBurst(50)
	d, _ = limiter.AllowN(ctx, "tenant:7", 0)
	fmt.Println(limiter.Limit(), d.Remaining)
	// Output:
	// 50/1m0s burst 5 2
	// 50/1m0s 47
}
