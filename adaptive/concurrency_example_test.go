package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// A Gradient limiter on a virtual clock in front of a service that takes
// 10 ms per request up to 8 in flight and longer past that (processor
// sharing). Under 4x overload the limit settles where latency is
// Tolerance (1.1) times the no-load latency, 9 in flight, and stays there:
// a window's growth is the square root of the limit at the no-load
// latency and shrinks to nothing as the latency nears the tolerance.
func ExampleGradient() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := adaptive.NewGradient(adaptive.GradientOptions{
		LimiterOptions: adaptive.LimiterOptions{Initial: 4, Now: func() time.Time { return now }, Seed: 1},
	})
	const capacity = 8
	due := map[int][]adaptive.Token{} // completions by millisecond
	for ms := range 5000 {
		now = now.Add(time.Millisecond)
		for _, tok := range due[ms] {
			tok.Done()
		}
		delete(due, ms)
		for range 3 { // 3000 requests a second: 4x the 800 a second it serves
			if tok, ok := l.Acquire(); ok {
				lat := 10 * max(1, float64(l.InFlight())/capacity)
				due[ms+int(lat+0.5)] = append(due[ms+int(lat+0.5)], tok)
			}
		}
		if ms%1000 == 999 {
			fmt.Printf("%ds: limit %d, baseline %v\n", ms/1000+1, l.Limit(), l.MinRTT())
		}
	}
	// Output:
	// 1s: limit 9, baseline 10ms
	// 2s: limit 9, baseline 10ms
	// 3s: limit 9, baseline 10ms
	// 4s: limit 9, baseline 10ms
	// 5s: limit 9, baseline 10ms
}
