package memstore

import (
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
)

// DefaultResolution is the period of the cached clock that a Store reads
// when Options.Resolution is zero: denials see time this much (plus the
// scheduling delay of the clock's goroutine) late, admissions less than
// this much, whatever the scheduler does (see Options.Resolution).
const DefaultResolution = time.Millisecond

// cachedClock is a clock read from memory: one goroutine a process per
// resolution stores the time every tick, and every open Store with that
// resolution reads it (one load, about 1 ns, against 20–50 ns for a
// monotonic clock read on a VM). It is shared so that a process with many
// stores (a test suite, a gateway with several listeners) runs one ticker,
// not one a store; it stops when the last store using it closes.
//
// A reading may lag: the goroutine can be starved (a busy process, a
// loaded machine), and a lagging reading is harmless only where it makes a
// decision stricter. An admission bases state on its time (a new key, a
// bucket at rest, a new window), so it reads exact: the cached reading if
// it is provably less than the resolution old, else the system clock's,
// which it stores for the others. The proof is the processor's counter
// (ticks): each stored reading comes with the count until which it is
// fresh, and one counter read (about a third of a clock read) checks it.
type cachedClock struct {
	_     [64]byte     // keep now and fresh on a line of their own: written
	now   atomic.Int64 // every tick, read by every request; Unix ns
	fresh atomic.Int64 // ticks() below which now is less than res old; 0: never
	_     [48]byte
	res   time.Duration
	span  atomic.Int64 // res in ticks at tickRate, less a margin; 0 until measured
	refs  int          // guarded by clocks.mu
	stop  chan struct{}
	done  chan struct{}
}

// tickRate is the counter's rate against the monotonic clock, measured
// by the clocks' goroutines, once for the process: a first estimate from
// two readings calFirst apart, checked and refined every calEvery after.
// A measurement that differs from the last by more than rateMoved (a
// virtual machine moved to another host may see that) starts over, and
// until it is measured again no reading is trusted on an admission (every
// admission reads the system clock).
var tickRate calibration

type calibration struct {
	mu     sync.Mutex
	t0, m0 int64   // the anchor: counter, monotonic ns
	rate   float64 // ticks per ns; 0 until measured
}

const (
	calFirst   = 5 * time.Millisecond
	calEvery   = 100 * time.Millisecond
	calJitter  = 20 * time.Microsecond // the most a reading pair may take
	spanMargin = 0.9                   // span covers 90% of res at the measured rate
	rateMoved  = 0.05                  // a change of rate that starts over
)

// add takes the pair (t, m), counter and monotonic ns read within
// calJitter of each other, and returns the rate measured, 0 if none.
func (r *calibration) add(t, m int64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := r.rate
	if r.m0 == 0 || t <= r.t0 {
		r.t0, r.m0 = t, m
		return rate
	}
	need := calEvery
	if rate == 0 {
		need = calFirst
	}
	if m-r.m0 < int64(need) {
		return rate
	}
	got := float64(t-r.t0) / float64(m-r.m0)
	if rate != 0 && math.Abs(got/rate-1) > rateMoved {
		got = 0
	}
	r.rate = got
	r.t0, r.m0 = t, m
	return got
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
	c.now.Store(mono())
	clocks.m[res] = c
	go c.run()
	return c
}

func (c *cachedClock) run() {
	defer close(c.done)
	tick.Loop(c.stop, c.res, func(time.Time) { c.tick() })
}

// ticksTrusted reports whether the counter measures time alike on every
// processor: where Linux's own clock reads it (clocksource tsc, which the
// kernel chooses only for a counter that is invariant and synchronised
// across processors, and watches). Elsewhere every admission reads the
// system clock.
func ticksTrusted() bool {
	trustTicks.once.Do(func() {
		if haveTicks && runtime.GOOS == "linux" {
			b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
			trustTicks.ok = err == nil && strings.TrimSpace(string(b)) == "tsc"
		}
	})
	return trustTicks.ok
}

var trustTicks struct {
	once sync.Once
	ok   bool
}

// mono returns the monotonic clock on the cached clocks' base, Unix ns.
func mono() int64 { return baseWall + int64(time.Since(baseMono)) }

// tick stores a reading, fresh for span ticks, and calibrates span.
func (c *cachedClock) tick() {
	m1 := mono()
	t := ticks()
	m2 := mono()
	if ticksTrusted() && m2-m1 <= int64(calJitter) {
		sp := int64(spanMargin * tickRate.add(t, (m1+m2)/2) * float64(c.res))
		if sp == 0 {
			c.fresh.Store(0) // before the store: a reader that sees 0 reads the system clock
		}
		c.span.Store(sp)
	}
	c.store(m2, t)
}

// store advances the clock to now, read at or after the counter read t,
// and marks it fresh until span ticks after t. Neither moves back.
func (c *cachedClock) store(now, t int64) {
	advance(&c.now, now)
	if sp := c.span.Load(); sp > 0 {
		advance(&c.fresh, t+sp)
	}
}

func advance(v *atomic.Int64, to int64) {
	for cur := v.Load(); cur < to && !v.CompareAndSwap(cur, to); cur = v.Load() {
	}
}

// exact returns a reading less than res behind the system clock at the
// call: the cached one when its counter bound says so (a load, a counter
// read and a comparison), else the system clock, which it stores. It is no
// earlier than any reading stored before the call.
func (c *cachedClock) exact() int64 {
	// now is stored before fresh: a reading loaded after fresh is at least
	// as recent as the one fresh was set for.
	if f := c.fresh.Load(); ticks() < f {
		return c.now.Load()
	}
	t := ticks()
	c.store(mono(), t)
	return c.now.Load()
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
