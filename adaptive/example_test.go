package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// A host that serves 12 requests a second and answers 429 to the rest,
// driven on a virtual clock: slow start doubles the rate four times a
// second until the first 429, which sets it just under what the host
// served; each later 429 cuts it by a fifth of what was served, and each
// second of success climbs halfway back to just under the rate that last
// failed, where it stays (for Hold seconds, then it probes above).
func ExampleAIMD() {
	c := adaptive.NewAIMD(adaptive.Options{})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const capacity = 12
	for sec := 1; sec <= 12; sec++ {
		n := int(c.Rate())
		for i := range n {
			sig := adaptive.Success
			if i >= capacity {
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
	//  3s 21.68/s
	//  4s 15.51/s
	//  5s 11.08/s
	//  6s 11.08/s
	//  7s 12.32/s
	//  8s 13.32/s
	//  9s  9.60/s
	// 10s 10.68/s
	// 11s 11.68/s
	// 12s 11.76/s
}
