package inflight_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// GitHub's rule of 100 concurrent requests per user, here 2: the third
// request waits for one of the first two to end.
func Example() {
	ctx := context.Background()
	store := inflight.NewMemory(inflight.MemoryOptions{})
	defer store.Close()

	req := inflight.Request{Key: "user:42", Cap: 2, TTL: time.Minute}
	a, d, _ := store.Acquire(ctx, req)
	fmt.Println("first:", d.Allowed, d.InFlight, "of", d.Cap)
	_, d, _ = store.Acquire(ctx, req)
	fmt.Println("second:", d.Allowed, d.InFlight, "of", d.Cap)
	_, d, _ = store.Acquire(ctx, req)
	fmt.Println("third:", d.Allowed, d.InFlight, "of", d.Cap)

	store.Release(ctx, a) // the first request ends
	_, d, _ = store.Acquire(ctx, req)
	fmt.Println("after a release:", d.Allowed, d.InFlight, "of", d.Cap)
	// Output:
	// first: true 1 of 2
	// second: true 2 of 2
	// third: false 2 of 2
	// after a release: true 2 of 2
}

// A holder that dies without releasing loses its lease after the TTL, and
// its slots come back; a long job renews its lease while it runs.
func ExampleMemory_Renew() {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store := inflight.NewMemory(inflight.MemoryOptions{Now: func() time.Time { return now }})

	req := inflight.Request{Key: "export", Cap: 1, TTL: 10 * time.Second}
	crashed, _, _ := store.Acquire(ctx, req) // never released
	now = now.Add(11 * time.Second)
	long, d, _ := store.Acquire(ctx, req)
	fmt.Println("after the TTL:", d.Allowed)

	for range 3 { // the long job renews every 5 s
		now = now.Add(5 * time.Second)
		long, _ = store.Renew(ctx, long, 10*time.Second)
	}
	_, d, _ = store.Acquire(ctx, req)
	fmt.Println("while renewed:", d.Allowed, "retry after", d.RetryAfter)
	_, err := store.Renew(ctx, crashed, 10*time.Second)
	fmt.Println("the crashed holder's renewal:", err)
	// Output:
	// after the TTL: true
	// while renewed: false retry after 10s
	// the crashed holder's renewal: inflight: lease expired or released
}

// Weighted requests: an export counts as 5 of the 10 slots.
func ExampleRequest_weight() {
	ctx := context.Background()
	store := inflight.NewMemory(inflight.MemoryOptions{})
	_, d, _ := store.Acquire(ctx, inflight.Request{Key: "tenant:7", Cap: 10, Weight: 5})
	fmt.Println(d.Allowed, d.Remaining())
	_, d, _ = store.Acquire(ctx, inflight.Request{Key: "tenant:7", Cap: 10, Weight: 6})
	fmt.Println(d.Allowed, d.Remaining())
	_, d, _ = store.Acquire(ctx, inflight.Request{Key: "tenant:7", Cap: 10, Weight: 11})
	fmt.Println(d.Allowed, d.Unsatisfiable)
	n, _ := store.Peek(ctx, "tenant:7")
	fmt.Println("in flight:", n)
	// Output:
	// true 5
	// false 5
	// false true
	// in flight: 5
}
