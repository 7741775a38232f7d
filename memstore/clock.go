package memstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
)

// DefaultResolution is the period of the cached clock that a Store reads
// when Options.Resolution is zero: decisions see time at most this much
// (plus the scheduling delay of the clock's goroutine) late.
const DefaultResolution = time.Millisecond

// cachedClock is a clock read from memory: one goroutine a process per
// resolution stores the time every tick, and every open Store with that
// resolution reads it (one load, about 1 ns, against 20–50 ns for a
// monotonic clock read on a VM). It is shared so that a process with many
// stores (a test suite, a gateway with several listeners) runs one ticker,
// not one a store; it stops when the last store using it closes.
type cachedClock struct {
	_    [64]byte     // keep now on a line of its own: written every tick,
	now  atomic.Int64 // read by every request; Unix ns
	_    [56]byte
	res  time.Duration
	refs int // guarded by clocks.mu
	stop chan struct{}
	done chan struct{}
}

// The time base of the cached clocks: the wall time when the process
// started plus the monotonic time since, so a cached clock never jumps when
// the system's wall clock is stepped.
var (
	baseMono = time.Now()
	baseWall = baseMono.UnixNano()
)

var clocks struct {
	mu sync.Mutex
	m  map[time.Duration]*cachedClock
}

// acquireClock returns the running cached clock of resolution res,
// starting it if no store uses one. Each call is matched by a release.
func acquireClock(res time.Duration) *cachedClock {
	clocks.mu.Lock()
	defer clocks.mu.Unlock()
	if c := clocks.m[res]; c != nil {
		c.refs++
		return c
	}
	if clocks.m == nil {
		clocks.m = make(map[time.Duration]*cachedClock)
	}
	c := &cachedClock{res: res, refs: 1, stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(baseWall + int64(time.Since(baseMono)))
	clocks.m[res] = c
	go c.run()
	return c
}

func (c *cachedClock) run() {
	defer close(c.done)
	tick.Loop(c.stop, c.res, func(now time.Time) {
		// The tick's time can be older than a reading taken since
		// (acquireClock's): the clock never goes back.
		if v := baseWall + int64(now.Sub(baseMono)); v > c.now.Load() {
			c.now.Store(v)
		}
	})
}

// release ends a store's use of c; the last one stops its goroutine.
func (c *cachedClock) release() {
	clocks.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(clocks.m, c.res)
		close(c.stop)
	}
	clocks.mu.Unlock()
	if last {
		<-c.done
	}
}
