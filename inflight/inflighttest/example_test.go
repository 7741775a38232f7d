package inflighttest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
)

// A Clock drives a store on virtual time, as the conformance suite does: a
// lease that is never released comes back after its TTL.
func ExampleClock() {
	clock := inflighttest.NewClock(inflighttest.Epoch)
	s := inflight.NewMemory(inflight.MemoryOptions{Now: clock.Now})
	defer s.Close()
	ctx := context.Background()
	req := inflight.Request{Key: "k", Cap: 1, TTL: 10 * time.Second}

	_, d, _ := s.Acquire(ctx, req) // never released
	fmt.Println(d.Allowed)
	_, d, _ = s.Acquire(ctx, req)
	fmt.Println(d.Allowed, d.RetryAfter)
	clock.Advance(10 * time.Second)
	_, d, _ = s.Acquire(ctx, req)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false 10s
	// true
}
