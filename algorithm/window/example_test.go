package window_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// The sliding window counter still weighs the previous window: half-way
// through the next minute, 100 requests of the last one count as 50.
func ExampleSliding() {
	req := ratelimit.Request{Limit: ratelimit.Limit{Rate: 100, Period: time.Minute}, N: 100}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, d := window.Sliding(window.State{}, t0.UnixNano(), req)
	fmt.Println(d.Allowed, d.Remaining)
	req.N = 51
	_, d = window.Sliding(s, t0.Add(90*time.Second).UnixNano(), req)
	fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	req.N = 50
	_, d = window.Sliding(s, t0.Add(90*time.Second).UnixNano(), req)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 0
	// false 50 600ms
	// true 0
}

// The fixed window's boundary burst: Rate at the end of one window and Rate
// at the start of the next.
func ExampleFixed() {
	req := ratelimit.Request{Limit: ratelimit.Limit{Rate: 10, Period: time.Minute}, N: 10}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, d1 := window.Fixed(window.State{}, t0.Add(59*time.Second).UnixNano(), req)
	_, d2 := window.Fixed(s, t0.Add(61*time.Second).UnixNano(), req)
	fmt.Println(d1.Allowed, d2.Allowed)
	// Output: true true
}
