package adaptive

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Limiter is an adaptive concurrency limit: a cap on the requests in
// flight that follows the latency they see. [Gradient] and [Vegas]
// implement it.
//
// Acquire never blocks: it admits a request (and returns a [Token] that
// must be released exactly once) or refuses it at once, so a server can
// answer 503 without queueing and a client can fail fast or wait by its
// own rules.
type Limiter interface {
	Acquire() (Token, bool)
	// Limit returns the current limit on requests in flight.
	Limit() int
	// InFlight returns the requests admitted and not yet released.
	InFlight() int
}

// Token is one admitted request. Release it exactly once, with [Token.Done]
// (it succeeded: its latency is a sample), [Token.Dropped] (it failed in a
// way that signals overload: a timeout, a 503 from upstream) or
// [Token.Ignore] (it says nothing about load: a client error, a cancelled
// request). The zero Token releases nothing. A Token is a small value:
// acquiring and releasing it allocates nothing.
type Token struct {
	l        *limiter
	start    int64 // limiter clock, ns
	inflight int32 // requests in flight once this one was admitted
}

// Done releases t and records its latency, measured on the limiter's clock
// from Acquire.
func (t Token) Done() {
	switch {
	case t.l == nil:
	case t.start < 0: // not timed (LimiterOptions.Sample)
		t.l.inflight.Add(-1)
	default:
		now := t.l.clock()
		t.l.release(t, now-t.start, false, now)
	}
}

// DoneRTT releases t with a latency the caller measured (for instance the
// upstream's time only, without the time spent reading the request). It
// does not read the clock: the release is taken to happen rtt after
// Acquire, which makes it the cheapest release where reading the clock is
// slow (one read per request instead of two).
func (t Token) DoneRTT(rtt time.Duration) {
	switch {
	case t.l == nil:
	case t.start < 0:
		t.l.release(t, int64(rtt), false, t.l.clock())
	default:
		t.l.release(t, int64(rtt), false, t.start+int64(max(rtt, 0)))
	}
}

// Dropped releases t as a request that failed for lack of capacity (a
// timeout, an overload answer): the limit comes down.
func (t Token) Dropped() {
	if t.l != nil {
		now := t.l.clock()
		t.l.release(t, now-max(t.start, 0), true, now)
	}
}

// Ignore releases t without a sample.
func (t Token) Ignore() {
	if t.l != nil {
		t.l.inflight.Add(-1)
	}
}

// ProbeOptions configures the measure of the no-load latency (minRTT) that
// both limiters compare the current latency with. The zero value is the
// default.
//
// Between probes the baseline only ever goes down: a window whose latency
// is lower than the baseline lowers it, and nothing else can raise it, so
// a long overload cannot drag the baseline up with it (one of the two bugs
// in the history of these controllers: a baseline that follows the
// overloaded latency makes the limit stop falling).
//
// Every Interval, plus a random Jitter (so that a fleet does not probe in
// step, as Envoy's adaptive_concurrency filter does), the baseline is
// measured afresh, since the service may really have become slower. If the
// last window was far from the limit (the peak in flight under half of it,
// nothing refused), its latency is a no-load latency and becomes the
// baseline. Otherwise the limit is pinned to Factor of itself until
// Samples requests admitted under the pinned limit have completed; their
// latency (at Percentile) becomes the baseline, and the limit comes back.
//
// The very first baseline is measured the same way, under a limit of
// First, before the limit starts at Initial: a baseline taken at Initial
// would already be queued in a service whose knee is below it (a
// CPU-bound server with two cores queues past two requests).
type ProbeOptions struct {
	Interval time.Duration // 0 means 30 s; negative never measures (the first window's latency is the baseline)
	Jitter   float64       // extra delay, up to this fraction of Interval; 0 means 0.15, negative none
	Factor   float64       // the pinned limit, as a fraction of the limit; 0 means 0.5
	Samples  int           // completions measured under the pinned limit; 0 means 32
	// First is the pinned limit of the first probe, which measures the
	// baseline before anything is known (Envoy's min_concurrency); the
	// limit then starts at Initial. 0 means 3.
	First int
}

// LimiterOptions are the options [Gradient] and [Vegas] share. The zero
// value is the default.
type LimiterOptions struct {
	Initial int // the starting limit; 0 means 20
	Min     int // the floor; 0 means 1
	Max     int // the ceiling; 0 means 1000
	// Window is the time over which latency samples are gathered before
	// the limit changes (Envoy's concurrency_update_interval); a window
	// also waits for MinSamples. 0 means 100 ms.
	Window     time.Duration
	MinSamples int     // 0 means 10
	Percentile float64 // the latency of a window, in (0, 1]; 0 means 0.5 (the median)
	Probe      ProbeOptions
	// Now is the clock; nil means time.Now. A simulation passes its
	// virtual clock.
	Now func() time.Time
	// Seed seeds the probe jitter; 0 picks a random seed.
	Seed uint64
	// Sample times one request in Sample; 0 means 1, every request.
	// Reading the clock is most of the cost of Acquire and Done (two
	// reads of about 25-50 ns each on a VM); at thousands of requests a
	// second, one in 4 still fills the windows, and at a few hundred it
	// makes them longer. Drops are always counted.
	Sample int
}

// window is one window's summary, handed to an algorithm's update.
type window struct {
	rtt      float64 // the window's latency at the percentile, ns
	minRTT   float64 // the baseline, ns
	samples  int
	drops    int
	rejected int64
	peak     int // the most in flight seen by a request of the window
}

// algorithm computes the next limit from the current one and a window.
type algorithm interface {
	next(limit float64, w window) float64
	// recalled tells the algorithm that the limit jumped back to the
	// level it held before the service slowed (see limiter.recall).
	recalled()
}

// bufSize is the number of latency samples kept per window; beyond it the
// window keeps a uniform random sample (reservoir sampling).
const bufSize = 64

// limiter is what Gradient and Vegas share: admission, release, windows
// and probes.
type limiter struct {
	limit    atomic.Int64 // the admission limit (the pinned one while probing)
	inflight atomic.Int64
	rejected atomic.Int64
	acquired atomic.Uint64 // counts admissions when Sample > 1
	now      func() time.Time
	epoch    time.Time
	wall     bool // now is time.Now

	o   LimiterOptions
	alg algorithm

	mu          sync.Mutex
	est         float64 // the estimated limit
	minRTT      float64 // ns; 0 until the first window
	windowStart int64
	buf         [bufSize]int64
	seen        int // samples offered to buf this window
	drops       int
	peak        int
	rng         rand.PCG
	nextProbe   int64
	probing     bool
	probeStart  int64
	probeN      int
	probeSeen   int
	// What recall remembers: level is a moving average of the limit
	// (over about 16 windows); before, the level from before the limit
	// last fell under 3/4 of it (0: none); refRTT and refLimit, the
	// latency and the limit of the last window that did not grow.
	level, before, refRTT, refLimit, lastLimit float64
	recalledLast                               bool
	// probeInPlace re-measures the baseline at the current limit however
	// loaded the window: the historical bug, kept only so that a test can
	// show that it fails.
	probeInPlace bool
}

// positiveOr sets *v to def unless it is positive (a NaN is not).
func positiveOr[T int | float64 | time.Duration](v *T, def T) {
	if !(*v > 0) {
		*v = def
	}
}

func (o LimiterOptions) withDefaults() LimiterOptions {
	positiveOr(&o.Min, 1)
	positiveOr(&o.Max, 1000)
	o.Max = max(o.Max, o.Min)
	positiveOr(&o.Initial, 20)
	o.Initial = min(max(o.Initial, o.Min), o.Max)
	positiveOr(&o.Window, 100*time.Millisecond)
	positiveOr(&o.MinSamples, 10)
	if !(o.Percentile > 0 && o.Percentile <= 1) {
		o.Percentile = 0.5
	}
	if o.Probe.Interval == 0 {
		o.Probe.Interval = 30 * time.Second
	}
	switch {
	case o.Probe.Jitter == 0:
		o.Probe.Jitter = 0.15
	case o.Probe.Jitter < 0:
		o.Probe.Jitter = 0
	}
	if !(o.Probe.Factor > 0 && o.Probe.Factor <= 1) {
		o.Probe.Factor = 0.5
	}
	positiveOr(&o.Probe.Samples, 32)
	positiveOr(&o.Probe.First, 3)
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return o
}

func (l *limiter) init(o LimiterOptions, alg algorithm) {
	l.o, l.alg = o, alg
	l.now, l.wall = o.Now, o.Now == nil
	if l.wall {
		l.now = time.Now
	}
	l.epoch = l.now()
	l.est = float64(o.Initial)
	l.limit.Store(int64(o.Initial))
	l.rng.Seed(o.Seed, 0x5eed)
	l.scheduleProbe(0)
	if o.Probe.Interval >= 0 {
		l.probing = true
		l.limit.Store(int64(min(max(o.Probe.First, o.Min), o.Initial)))
	}
}

// clock reads the limiter's clock in ns since its creation. On the real
// clock that is time.Since, which reads only the monotonic clock: half
// the cost of time.Now, which reads the wall clock too.
func (l *limiter) clock() int64 {
	if l.wall {
		return int64(time.Since(l.epoch))
	}
	return int64(l.now().Sub(l.epoch))
}

func (l *limiter) scheduleProbe(now int64) {
	if l.o.Probe.Interval < 0 {
		l.nextProbe = math.MaxInt64
		return
	}
	iv := float64(l.o.Probe.Interval)
	jitter := iv * l.o.Probe.Jitter * float64(l.rng.Uint64()>>11) / (1 << 53)
	l.nextProbe = now + int64(iv+jitter)
}

// Acquire admits a request if fewer than the limit are in flight.
func (l *limiter) Acquire() (Token, bool) {
	lim := l.limit.Load()
	for {
		n := l.inflight.Load()
		if n >= lim {
			l.rejected.Add(1)
			return Token{}, false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			t := Token{l: l, start: -1, inflight: int32(min(n+1, math.MaxInt32))}
			if l.o.Sample <= 1 || l.acquired.Add(1)%uint64(l.o.Sample) == 0 {
				t.start = l.clock()
			}
			return t, true
		}
	}
}

// Limit returns the current admission limit.
func (l *limiter) Limit() int { return int(l.limit.Load()) }

// InFlight returns the requests admitted and not released.
func (l *limiter) InFlight() int { return int(l.inflight.Load()) }

// MinRTT returns the no-load latency the limiter compares with (0 before
// the first window).
func (l *limiter) MinRTT() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.minRTT)
}

// Probing reports whether the limiter is measuring its baseline, its
// limit pinned low.
func (l *limiter) Probing() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.probing
}

func (l *limiter) release(t Token, rtt int64, dropped bool, now int64) {
	l.inflight.Add(-1)
	rtt = max(rtt, 0)
	l.mu.Lock()
	if l.probing {
		// Only requests admitted under the pinned limit measure the
		// no-load latency. Drops count towards the end of the probe (a
		// service that fails everything must not keep the limit pinned
		// for ever) but not in the measure; with no success at all the
		// baseline stays as it was.
		if t.start >= l.probeStart {
			if !dropped {
				l.offer(rtt, &l.probeSeen)
			}
			l.probeN++
			if l.probeN >= l.o.Probe.Samples {
				if l.probeSeen > 0 {
					l.minRTT = l.percentile(min(l.probeSeen, bufSize))
				}
				l.probing = false
				l.seen, l.drops, l.peak, l.windowStart = 0, 0, 0, now
				l.rejected.Store(0)
				l.limit.Store(l.admission())
				l.scheduleProbe(now)
			}
		}
		l.mu.Unlock()
		return
	}
	l.peak = max(l.peak, int(t.inflight))
	if dropped {
		l.drops++
	} else {
		l.offer(rtt, &l.seen)
	}
	n := min(l.seen, bufSize)
	if now-l.windowStart >= int64(l.o.Window) && n+l.drops >= l.o.MinSamples {
		l.closeWindow(now, n)
	}
	l.mu.Unlock()
}

// offer adds a sample to the window's buffer (reservoir sampling past
// bufSize); seen counts the samples offered.
func (l *limiter) offer(rtt int64, seen *int) {
	if *seen < bufSize {
		l.buf[*seen] = rtt
	} else if j := (l.rng.Uint64() >> 32) * uint64(*seen+1) >> 32; j < bufSize {
		// j is uniform in [0, seen] (Lemire's multiply-shift, no division).
		l.buf[j] = rtt
	}
	*seen++
}

func (l *limiter) percentile(n int) float64 {
	if n == 0 {
		return 0
	}
	s := l.buf[:n]
	slices.Sort(s)
	i := int(math.Ceil(l.o.Percentile*float64(n))) - 1
	return float64(s[min(max(i, 0), n-1)])
}

func (l *limiter) closeWindow(now int64, n int) {
	w := window{samples: n, drops: l.drops, peak: l.peak, rejected: l.rejected.Swap(0)}
	if n > 0 {
		w.rtt = l.percentile(n)
		if l.minRTT == 0 || w.rtt < l.minRTT {
			l.minRTT = w.rtt // the baseline only goes down between probes
		}
	}
	w.minRTT = l.minRTT
	if w.rtt > 0 || w.drops > 0 {
		if w.rtt == 0 {
			w.rtt = w.minRTT
		}
		prev := l.est
		l.est = min(max(l.alg.next(l.est, w), float64(l.o.Min)), float64(l.o.Max))
		l.recall(prev, w)
	}
	l.seen, l.drops, l.peak, l.windowStart = 0, 0, 0, now
	if now >= l.nextProbe {
		if l.probeInPlace || w.peak*2 < int(l.est) && w.rejected == 0 && w.drops == 0 && w.rtt > 0 {
			// Far from the limit: this window's latency is a no-load one.
			l.minRTT = w.rtt
			l.scheduleProbe(now)
		} else {
			l.probing, l.probeStart, l.probeN, l.probeSeen = true, now, 0, 0
			l.limit.Store(max(int64(l.o.Min), int64(l.est*l.o.Probe.Factor)))
			return
		}
	}
	l.limit.Store(l.admission())
}

// recallDrop is how much lower than the last window that did not grow
// a window's latency must be, at a limit no lower, to say that the
// service got faster: 7%, over three standard errors of the median of a
// window of 64 samples of a service whose latency varies by 10%.
const recallDrop = 0.93

// recall brings the limit back at once to the level it held before the
// service slowed, when the service is seen to be fast again: a window
// that grows on refused demand (the algorithm saw room) with a latency
// under recallDrop of the last window that did not grow, though the limit
// is no lower than that window's, and within 1/recallDrop of the
// baseline. The level is a moving average of the limit, remembered when
// the limit falls under 3/4 of it; the recall takes the limit at most to
// twice itself, and the window after it may not grow (its requests were
// admitted under the old limit). A service whose capacity halves and
// comes back is then found in one window instead of the few that growth
// steps take; a window that sees only noise (rare: three standard errors)
// or a capacity that came back only in part costs a queue until the
// algorithm's cuts remove it. The level is used once.
func (l *limiter) recall(prev float64, w window) {
	if l.level == 0 {
		l.level = prev
	}
	l.level += (prev - l.level) / 16
	switch {
	case l.before == 0 && l.est < 0.75*l.level:
		l.before = l.level
	case l.est >= l.before:
		l.before = 0 // back at it
	}
	grew := l.est > prev
	if grew && l.recalledLast {
		// The window after a recall still holds requests admitted under
		// the old limit: it may cut, not grow.
		l.est, grew = prev, false
	}
	l.recalledLast = false
	// The window's requests were admitted under this limit and the one
	// before it: the least of the two must be no lower than the most the
	// reference window's requests saw.
	least, most := min(prev, l.lastLimit), max(prev, l.lastLimit)
	l.lastLimit = prev
	if grew && l.before > 0 && w.rejected > 0 && least >= l.refLimit &&
		w.rtt <= recallDrop*l.refRTT && w.rtt*recallDrop <= w.minRTT {
		l.est = min(l.before, 2*prev, float64(l.o.Max))
		l.before, l.recalledLast = 0, true
		l.alg.recalled()
	}
	if !grew {
		l.refRTT, l.refLimit = w.rtt, most
	}
}

func (l *limiter) admission() int64 { return max(int64(l.o.Min), int64(l.est)) }

// growth is a streak of windows in a row that grew on refused demand:
// each doubles the step, up to half the limit, so that a service whose
// capacity came back is found in a few windows, while a limit that sits
// at its target and only dips below it grows by one step.
type growth struct{ streak int }

// step returns the growth of limit by base, doubled once per window of
// the streak if the window refused requests; else the streak ends.
func (g *growth) step(limit, base float64, refused bool) float64 {
	if !refused {
		g.streak = 0
		return base
	}
	s := min(base*math.Exp2(float64(g.streak)), limit/2)
	g.streak++
	return s
}

// hold shortens the streak by one window (the limit held); reset ends it
// (the limit came down).
func (g *growth) hold()  { g.streak = max(0, g.streak-1) }
func (g *growth) reset() { g.streak = 0 }

// recalled starts the streak afresh after a recall (limiter.recall): the
// next growth is one step, not the streak's doubled one.
func (g *growth) recalled() { g.streak = 0 }
