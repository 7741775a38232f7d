package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Point the store at Redis by URL, then decide requests: 3 a minute per
// user. The example starts its own redis-server; in production the URL is
// your Redis (redis://, rediss:// or redis-cluster://).
func ExampleOpen() {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	store, err := redisstore.Open(ctx, "redis://"+srv.Addr, redisstore.Options{
		OnError: redisstore.Local, // Redis down: each instance limits alone
		Timeout: time.Second,      // default 100 ms
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	limiter, err := ratelimit.NewLimiter(store, ratelimit.GCRA, ratelimit.PerMinute(3))
	if err != nil {
		log.Fatal(err)
	}
	for range 4 {
		d, err := limiter.Allow(ctx, "user-42")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 2
	// true 1
	// true 0
	// false 0
}

// Tests and simulations pass the time instead of reading Redis's clock.
func ExampleOptions_now() {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store, err := redisstore.Open(ctx, "redis://"+srv.Addr, redisstore.Options{
		Now:     func() time.Time { return now },
		Timeout: time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	req := ratelimit.Request{Key: "k", Limit: ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 1}, Algorithm: ratelimit.FixedWindow, N: 1}
	for _, at := range []time.Duration{0, 300 * time.Millisecond, time.Second} {
		now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(at)
		d, _ := store.Apply(ctx, req)
		fmt.Println(at, d.Allowed, d.RetryAfter)
	}
	// Output:
	// 0s true 0s
	// 300ms false 700ms
	// 1s true 0s
}
