package adaptive

import (
	"testing"
	"time"
)

// TestRecallAfterCapacityReturns: a service at a capacity of 20 (50 ms a
// request) halves for 10 s under a load of 2x its full capacity, then
// comes back. The limit recalls the level it held before the fall in the
// first window whose latency has dropped though the limit has not, and is
// back at the capacity sooner than growth steps alone bring it (virtual
// time, fixed seeds: Vegas 188 ms, growth alone 288 ms: 11, 13, 17 and 25
// a window each). Gradient grows in nearly every window, so the window it
// compares with is the last it cut in, whose limit it must first grow back
// to: here its own steps are as fast (305 ms, checked against 400 ms).
// While the capacity is halved, no window's noise is taken for a recall:
// the limit of either stays under twice the halved capacity (a recall
// compared with a window whose requests saw a lower limit took it to 23,
// from 12).
func TestRecallAfterCapacityReturns(t *testing.T) {
	const capacity, base = 20, 50 * time.Millisecond
	within := map[string]int{"vegas": 200, "gradient": 400} // ms
	rate := 2 * capacity / base.Seconds()
	for _, name := range []string{"gradient", "vegas"} {
		clock := newClock()
		l, _ := limiters(clock, ProbeOptions{Interval: time.Hour})[name]() // the first probe only
		srv := newIOServer(capacity, base, clock)
		srv.run(l, rate, 5*time.Second)
		srv.capacity = capacity / 2
		srv.run(l, rate, 2*time.Second)
		most := 0
		for range 8000 {
			srv.run(l, rate, time.Millisecond)
			most = max(most, l.Limit())
		}
		if most >= capacity {
			t.Errorf("%s: limit %d while the capacity was %d: a recall on noise", name, most, capacity/2)
		}
		srv.capacity = capacity
		reached := -1
		for ms := range 1000 {
			srv.run(l, rate, time.Millisecond)
			if l.Limit() >= capacity {
				reached = ms
				break
			}
		}
		limit := srv.run(l, rate, 5*time.Second)
		t.Logf("%s: back at %d after %d ms (at most %d while halved), then mean limit %.1f", name, capacity, reached, most, limit)
		if reached < 0 || reached > within[name] {
			t.Errorf("%s: capacity back to %d: the limit reached it after %d ms, want within %d ms", name, capacity, reached, within[name])
		}
		if limit < capacity || limit > 1.15*capacity {
			t.Errorf("%s: then mean limit %.1f, want within [%d, %v]", name, limit, capacity, 1.15*capacity)
		}
	}
}
