package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// A host that takes 12 requests a second, driven on a virtual clock, one
// 429 in every second sent above 12/s: slow start doubles the rate four
// times a second until the first 429, which sets it just under what the host
// served; each later 429 cuts it by a fifth, and each second of success
// climbs halfway back to just under the rate that last failed, where it
// stays (for Hold seconds, then it probes above).
func ExampleAIMD() {
	c := adaptive.NewAIMD(adaptive.Options{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const capacity = 12.0
	for sec := 1; sec <= 12; sec++ {
		rate := c.Rate()
		n := int(rate)
		for i := range n {
			sig := adaptive.Success
			if rate > capacity && i == n-1 {
				sig = adaptive.Throttled
			}
			at := now.Add(time.Duration(i+1) * time.Second / time.Duration(n))
			c.OnResponse(at, adaptive.Sample{Signal: sig, Latency: 5 * time.Millisecond})
		}
		now = now.Add(time.Second)
		fmt.Printf("%2ds %5.2f/s\n", sec, c.Rate())
	}
	// Output:
	//  1s  7.55/s
	//  2s 26.95/s
	//  3s 23.40/s
	//  4s 17.60/s
	//  5s 12.80/s
	//  6s  9.60/s
	//  7s 10.68/s
	//  8s 11.68/s
	//  9s 11.76/s
	// 10s 11.76/s
	// 11s 11.76/s
	// 12s 11.76/s
}
