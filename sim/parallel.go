package sim

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// parallel calls f(i) for every i in [0, n) on GOMAXPROCS goroutines and
// returns when all are done. f must write its result to a slot of its own;
// the order the calls run in is not defined, so results never depend on it.
// progress, when set, is called after each call (serialized).
func parallel(n int, progress func(done, total int), f func(i int)) {
	var next atomic.Int64
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
				if progress != nil {
					mu.Lock()
					done++
					progress(done, n)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
}
