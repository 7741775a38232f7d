package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
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
		OnError: ratelimit.FailLocal, // Redis down: each instance limits alone
		Timeout: time.Second,         // default 100 ms
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

// A store opened while Redis is down answers with its failure policy from
// the first request, and goes to Redis once Redis is back; Health says
// which (servers export it as a metric and in their readiness detail).
func ExampleStore_Health() {
	srv, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	srv.Kill() // Redis down when the service starts
	ctx := context.Background()

	store, err := redisstore.Open(ctx, "redis://"+srv.Addr, redisstore.Options{
		OnError:         ratelimit.FailAllow, // fail open while Redis is away
		Timeout:         time.Second,
		BreakerCooldown: 50 * time.Millisecond, // first probe; default 1 s
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	fmt.Println("connected:", store.Health().Connected)
	req := ratelimit.Request{Key: "user-42", Limit: ratelimit.PerMinute(1), N: 1}
	d, err := store.Apply(ctx, req)
	fmt.Println("allowed by the policy:", d.Allowed, err)

	if err := srv.Restart(); err != nil {
		log.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !store.Health().Connected && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("connected:", store.Health().Connected)
	for range 2 {
		d, err = store.Apply(ctx, req) // decided in Redis: 1 a minute
		fmt.Println("allowed by Redis:", d.Allowed, err)
	}
	// Output:
	// connected: false
	// allowed by the policy: true <nil>
	// connected: true
	// allowed by Redis: true <nil>
	// allowed by Redis: false <nil>
}
