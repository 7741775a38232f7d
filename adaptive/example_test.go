package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// A host that takes 12 requests a second, driven on a virtual clock: slow
// start finds it, the first 429 halves the rate, additive increase probes
// back up and each 429 cuts by a fifth.
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
	//  1s  2.00/s
	//  2s  4.00/s
	//  3s  8.00/s
	//  4s 16.00/s
	//  5s 16.00/s
	//  6s 12.80/s
	//  7s 10.24/s
	//  8s 11.24/s
	//  9s 12.24/s
	// 10s  9.79/s
	// 11s 10.79/s
	// 12s 11.79/s
}
