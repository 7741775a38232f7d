package sim

import (
	"testing"
	"time"
)

// BenchmarkEvents measures the event queue: schedule and run one event with
// a thousand others pending.
func BenchmarkEvents(b *testing.B) {
	s := newEngine(1, 0)
	var tick func()
	tick = func() { s.After(time.Duration(s.Rand.IntN(1000)), tick) }
	for range 1000 {
		s.After(time.Duration(s.Rand.IntN(1000)), tick)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.step()
	}
}

// BenchmarkBrooker100 is one run of the brooker scenario at 100 clients
// with full jitter (about 800 writes, 3200 events).
func BenchmarkBrooker100(b *testing.B) {
	o, err := brookerOptions{}.withDefaults()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	run := uint64(0)
	for b.Loop() {
		run++
		brookerRun(o, "full-jitter", 100, newEngine(1, run))
	}
}
