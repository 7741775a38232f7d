package gcra_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

// The state is one int64 carried from step to step; time is an argument.
func ExampleStep() {
	req := ratelimit.Request{Limit: ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 2}, N: 1}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var tat int64
	for i := range 3 {
		var d ratelimit.Decision
		tat, d = gcra.Step(tat, now, req)
		fmt.Printf("%d: allowed=%v remaining=%d retry=%v reset=%v\n", i, d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
	}
	// Output:
	// 0: allowed=true remaining=1 retry=0s reset=1s
	// 1: allowed=true remaining=0 retry=0s reset=2s
	// 2: allowed=false remaining=0 retry=1s reset=2s
}

// The leaky bucket queue admits the same requests and delays each to its
// slot.
func ExampleStep_leakyBucket() {
	req := ratelimit.Request{Limit: ratelimit.Limit{Rate: 4, Period: time.Second, Burst: 3}, Algorithm: ratelimit.LeakyBucket, N: 1}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var tat int64
	for range 4 {
		var d ratelimit.Decision
		tat, d = gcra.Step(tat, now, req)
		fmt.Println(d.Allowed, d.Delay)
	}
	// Output:
	// true 0s
	// true 250ms
	// true 500ms
	// false 0s
}
