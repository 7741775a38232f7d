package tick_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
)

// A job that runs every 10 ms until its owner stops it.
func ExampleLoop() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ticks := make(chan time.Time, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick.Loop(stop, 10*time.Millisecond, func(now time.Time) {
			select {
			case ticks <- now:
			default:
			}
		})
	}()
	<-ticks
	close(stop)
	wg.Wait()
	fmt.Println("stopped after a tick")
	// Output: stopped after a tick
}
