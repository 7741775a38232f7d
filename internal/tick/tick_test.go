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

// TestWhile: the loop ends on the tick where f says it is done, without
// stop being closed.
func TestWhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		tick.While(make(chan struct{}), time.Second, func(time.Time) bool { n++; return n < 3 })
		if n != 3 || time.Since(start) != 3*time.Second {
			t.Fatalf("f ran %d times over %v, want 3 over 3s", n, time.Since(start))
		}
	})
}
