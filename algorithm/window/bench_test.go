package window_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// BenchmarkStep: one Fixed or Sliding decision on a key that keeps being
// admitted, then refused, across window boundaries (a 1 ms step, a 1 s
// window of 100).
func BenchmarkStep(b *testing.B) {
	req := ratelimit.Request{Key: "k", Limit: ratelimit.Limit{Rate: 100, Period: time.Second}, N: 1}
	for _, c := range []struct {
		name string
		step func(window.State, int64, ratelimit.Request) (window.State, ratelimit.Decision)
	}{{"fixed", window.Fixed}, {"sliding", window.Sliding}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var s window.State
			now := int64(1_700_000_000) * int64(time.Second)
			for b.Loop() {
				now += int64(time.Millisecond)
				s, _ = c.step(s, now, req)
			}
		})
	}
}
