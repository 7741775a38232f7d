package adaptive

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Signal classifies one response for a controller.
type Signal uint8

// The signals a response can send.
const (
	// Success: the server answered normally.
	Success Signal = iota
	// Throttled: a rate-limit answer (429, 503): slow down.
	Throttled
	// Overloaded: a server error (500, 502, 504) that signals strain.
	Overloaded
	// Timeout: no answer in time.
	Timeout
	// Block: the server refuses outright (403, a 429 challenge page).
	// Waiting does not help; the rate is left alone.
	Block
	// Neutral: says nothing about the server's load (a 404, a cancelled
	// request, a connection error before sending).
	Neutral
)

var signalNames = [...]string{"success", "throttled", "overloaded", "timeout", "block", "neutral"}

func (s Signal) String() string {
	if int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("signal(%d)", uint8(s))
}

// Congestion reports whether s asks for a lower rate.
func (s Signal) Congestion() bool { return s == Throttled || s == Overloaded || s == Timeout }

// Sample is one response, as a controller sees it.
type Sample struct {
	Signal Signal
	// Latency is the time from sending the request to the response, or 0
	// if unknown. It feeds the latency signal, and tells which window the
	// request was sent in.
	Latency time.Duration
	// RetryAfter is the server's delay, if it gave one.
	RetryAfter time.Duration
}

// Options configures an AIMD controller. The zero value is the default:
// start at 2 requests a second, slow start, +1/s per second of success,
// ×0.8 on congestion (×0.5 when leaving slow start), between 0.1/s and
// 10 000/s.
type Options struct {
	Initial  float64       // starting rate, per second; 0 means 2
	Min      float64       // lowest rate; 0 means 0.1 (one request every 10 s)
	Max      float64       // highest rate; 0 means 10 000
	Increase float64       // added per Interval of success; 0 means 1
	Decrease float64       // multiplies the rate on congestion, in (0, 1); 0 means 0.8
	Interval time.Duration // 0 means 1 s
	// Hold is the number of intervals the rate stays just under the rate
	// that last failed (2% under) before probing above it. Zero means 10;
	// negative probes at once.
	Hold int
	// NoSlowStart starts in additive increase instead of doubling the rate
	// every SlowStartInterval until the first congestion signal.
	NoSlowStart bool
	// SlowStartInterval is the time in which slow start doubles the rate
	// (it grows with each success, as TCP's window grows with each ack).
	// Zero means 250 ms: from 2/s, a host that takes 100/s is found in
	// about 1.5 s.
	SlowStartInterval time.Duration
	// Tolerance is how far above its baseline the smoothed latency may rise
	// before it counts as congestion. 0 means 2 (twice the baseline);
	// negative disables the latency signal.
	Tolerance float64
	// MinRise is the least rise of the smoothed latency over its baseline
	// that counts, whatever the ratio: sub-millisecond latencies double on
	// noise alone, and a busy client machine adds tens of milliseconds of
	// scheduling delay. Zero means 100 ms.
	MinRise time.Duration
}

// AIMD is an additive-increase, multiplicative-decrease rate controller.
// It is safe for concurrent use.
type AIMD struct {
	o Options

	mu           sync.Mutex
	rate         float64
	slowStart    bool
	started      bool
	windowStart  time.Time // start of the current increase interval
	windowOK     int       // successes in it
	windowBad    bool      // a congestion signal in it
	lastDecrease time.Time
	rateMax      float64 // the rate at the last decrease: where recovery aims
	probe        float64 // the next increase beyond rateMax; doubles each time
	held         int     // intervals spent just under rateMax
	// Delivery: successes in the current and previous half second, to
	// measure the rate the host actually served.
	dStart      time.Time
	dCur, dPrev int
	holdUntil   time.Time // Retry-After floor: no increase before
	baseline    float64   // latency baseline, ns (0: none yet)
	smoothed    float64   // latency EWMA, ns
	samples     int
}

// NewAIMD returns a controller at its initial rate.
func NewAIMD(o Options) *AIMD {
	positiveOr(&o.Min, 0.1)
	positiveOr(&o.Max, 10000)
	o.Max = max(o.Max, o.Min)
	positiveOr(&o.Initial, 2)
	positiveOr(&o.Increase, 1)
	if !(o.Decrease > 0 && o.Decrease < 1) {
		o.Decrease = 0.8
	}
	positiveOr(&o.Interval, time.Second)
	switch {
	case o.Hold == 0:
		o.Hold = 10
	case o.Hold < 0:
		o.Hold = 0
	}
	positiveOr(&o.SlowStartInterval, 250*time.Millisecond)
	if o.Tolerance == 0 {
		o.Tolerance = 2
	}
	positiveOr(&o.MinRise, 100*time.Millisecond)
	return &AIMD{o: o, rate: clamp(o.Initial, o.Min, o.Max), slowStart: !o.NoSlowStart}
}

// Rate returns the current rate, in requests per second.
func (c *AIMD) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// SlowStart reports whether the controller is still in slow start.
func (c *AIMD) SlowStart() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slowStart
}

// OnResponse feeds one response received at now and returns the new rate.
func (c *AIMD) OnResponse(now time.Time, s Sample) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		c.started, c.windowStart = true, now
	}
	congestion := s.Signal.Congestion()
	slow := s.Signal == Success && s.Latency > 0 && c.latencyHigh(float64(s.Latency))
	if s.RetryAfter > 0 && now.Add(s.RetryAfter).After(c.holdUntil) {
		c.holdUntil = now.Add(s.RetryAfter)
	}
	switch {
	case congestion || slow:
		if c.mayCut(now, s, congestion, slow) {
			c.cut(now, s.Signal)
		}
	case s.Signal == Success:
		c.windowOK++
		c.deliver(now)
		if c.slowStart && c.delivered(now) >= 0.25*c.rate {
			// Exponential growth, one step per success: ln 2 per
			// SlowStartInterval, spread over the successes that arrive
			// at the current rate.
			c.rate = clamp(c.rate+math.Ln2/c.o.SlowStartInterval.Seconds(), c.o.Min, c.o.Max)
		}
	}
	if now.Sub(c.windowStart) >= c.o.Interval {
		if !c.slowStart {
			c.endWindow(now)
		}
		c.windowStart, c.windowOK, c.windowBad = now, 0, false
	}
	return c.rate
}

// mayCut reports whether a congestion (or, slow, latency) signal may cut
// the rate, marking the window bad when it comes too soon after the last
// cut to cut again.
func (c *AIMD) mayCut(now time.Time, s Sample, congestion, slow bool) bool {
	if c.lastDecrease.IsZero() {
		return true
	}
	// One cut per window: a request sent before the last cut already
	// saw the rate it asks for, and says nothing about the new one.
	// Without a send time, and for the latency signal (which lags), one
	// cut per Interval.
	sent := now.Add(-max(s.Latency, 0))
	if congestion && s.Latency > 0 && !sent.After(c.lastDecrease) {
		return false
	}
	// Nor does a cut show its effect at once: a host whose bucket is
	// empty refuses for a while at any rate. At most two cuts an
	// Interval.
	c.windowBad = true
	if now.Sub(c.lastDecrease) < c.o.Interval/2 {
		return false
	}
	return !((slow || s.Latency <= 0) && now.Sub(c.lastDecrease) < c.o.Interval)
}

// cut decreases the rate on signal, at now, and starts a new window.
func (c *AIMD) cut(now time.Time, signal Signal) {
	if c.slowStart {
		// Leaving slow start, the rate has overshot by up to the growth
		// during the signal's delay, so halving it is not enough: fall
		// back to what the host actually served, which becomes the rate
		// recovery aims at.
		c.slowStart = false
		served := c.delivered(now)
		// What was served may be less than the host takes when the
		// client itself was slow (latency, a busy machine); half the
		// rate, one doubling ago, passed, unless the signal came late, so
		// trust it up to twice what was served.
		c.rateMax = max(served, min(c.rate/2, 2*served), c.o.Min)
		c.rate = clamp(0.9*c.rateMax, c.o.Min, c.o.Max)
	} else {
		// After a 429, cut the rate that was really getting through: a
		// rate set above what the host served overstates the load. Not
		// below half the rate, and not for the other signals, when what
		// got through was held back by latency.
		eff := c.rate
		if served := c.delivered(now); signal == Throttled && served > 0 && served < eff {
			eff = max(served, eff/2)
		}
		c.rateMax = eff
		c.rate = clamp(eff*c.o.Decrease, c.o.Min, c.o.Max)
	}
	c.probe = c.o.Increase
	c.held = 0
	c.lastDecrease = now
	c.windowStart, c.windowOK, c.windowBad = now, 0, false
}

// endWindow raises the rate at the end of a window (out of slow start)
// that was used, saw no congestion and is past any Retry-After.
func (c *AIMD) endWindow(now time.Time) {
	// Increase only a rate that was used (at least half of it), so an
	// idle host does not accumulate a rate it never tested.
	used := float64(c.windowOK) >= 0.5*c.rate*now.Sub(c.windowStart).Seconds()
	if c.windowBad || !used || now.Before(c.holdUntil) {
		return
	}
	aim := c.rateMax * (1 - holdMargin)
	switch {
	case c.rate+c.o.Increase < aim:
		// Binary-search recovery (BIC): halfway back to just under the
		// rate that last failed, at least the additive step.
		c.rate = min(max(c.rate+c.o.Increase, (c.rate+aim)/2), aim)
	case c.held < c.o.Hold:
		// Just under the last failure: stay a while before probing,
		// since the host said no a little above.
		c.rate = max(c.rate, aim)
		c.held++
	default:
		// Past the old maximum, probe for a new one (BIC's max probing):
		// +Increase, then twice that, and so on, at most a quarter of the
		// rate per interval.
		step := max(c.probe, c.o.Increase)
		c.rate += min(step, max(c.o.Increase, c.rate/4))
		c.probe = step * 2
	}
	c.rate = clamp(c.rate, c.o.Min, c.o.Max)
}

// holdMargin is how far under the rate that last failed recovery aims.
const holdMargin = 0.02

// deliverSpan is the length of each of the two buckets that measure the
// rate the host served.
const deliverSpan = 500 * time.Millisecond

// deliver counts a success at now.
func (c *AIMD) deliver(now time.Time) {
	c.roll(now)
	c.dCur++
}

func (c *AIMD) roll(now time.Time) {
	switch el := now.Sub(c.dStart); {
	case c.dStart.IsZero() || el >= 2*deliverSpan:
		c.dStart, c.dCur, c.dPrev = now, 0, 0
	case el >= deliverSpan:
		c.dStart, c.dPrev, c.dCur = c.dStart.Add(deliverSpan), c.dCur, 0
	}
}

// delivered returns the successes per second over the last half second
// to second (never over less than half a second, so that one quick answer
// does not read as a high rate).
func (c *AIMD) delivered(now time.Time) float64 {
	c.roll(now)
	span := now.Sub(c.dStart)
	if c.dPrev > 0 {
		span += deliverSpan
	}
	span = max(span, deliverSpan)
	return float64(c.dPrev+c.dCur) / span.Seconds()
}

// latencyHigh updates the latency estimates with one sample (ns) and reports
// whether the smoothed latency is above Tolerance × baseline.
func (c *AIMD) latencyHigh(l float64) bool {
	if c.o.Tolerance < 0 {
		return false
	}
	c.samples++
	if c.baseline == 0 {
		c.baseline, c.smoothed = l, l
		return false
	}
	c.smoothed += (l - c.smoothed) / 16
	// The baseline follows the smoothed latency down at once and up
	// slowly, so that one lucky sample does not set it, and a lasting
	// change of path (a new server, bigger pages) becomes the new normal.
	if c.smoothed < c.baseline {
		c.baseline = c.smoothed
	} else {
		c.baseline += (c.smoothed - c.baseline) / 64
	}
	return c.samples >= 20 && c.smoothed > c.o.Tolerance*c.baseline &&
		c.smoothed-c.baseline >= float64(c.o.MinRise)
}

func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) {
		return lo
	}
	return min(max(v, lo), hi)
}
