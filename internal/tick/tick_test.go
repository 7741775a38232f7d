package tick_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
)

// TestLoop: f runs once a period, with the tick's time, and not after
// stop is closed; Loop returns once it is.
func TestLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		stop := make(chan struct{})
		var got []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick.Loop(stop, time.Second, func(now time.Time) { got = append(got, now.Sub(start)) })
		}()
		time.Sleep(3500 * time.Millisecond)
		close(stop)
		<-done
		time.Sleep(2 * time.Second)
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
		if len(got) != len(want) {
			t.Fatalf("ticks at %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("ticks at %v, want %v", got, want)
			}
		}
	})
}
