package slidinglog_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/ratelimit"
)

// The log is exact: a request is admitted again the moment the oldest one
// leaves the window.
func ExampleStep() {
	req := ratelimit.Request{Limit: ratelimit.Limit{Rate: 2, Period: time.Second}, N: 1}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var log []slidinglog.Entry
	var d ratelimit.Decision
	for _, at := range []time.Duration{0, 400 * time.Millisecond, 700 * time.Millisecond, time.Second} {
		log, d = slidinglog.Step(log, t0.Add(at).UnixNano(), req)
		fmt.Println(at, d.Allowed, d.RetryAfter)
	}
	// Output:
	// 0s true 0s
	// 400ms true 0s
	// 700ms false 300ms
	// 1s true 0s
}
