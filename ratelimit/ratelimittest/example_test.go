package ratelimittest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// A Clock drives a store on virtual time, as the conformance suite does.
func ExampleClock() {
	clock := ratelimittest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now})
	defer s.Close()
	req := ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(2), N: 1}
	for range 3 {
		d, _ := s.Apply(context.Background(), req)
		fmt.Println(d.Allowed, d.Remaining)
	}
	clock.Set(clock.Now().Add(500 * time.Millisecond)) // one token back
	d, _ := s.Apply(context.Background(), req)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 1
	// true 0
	// false 0
	// true 0
}
