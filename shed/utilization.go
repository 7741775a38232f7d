package shed

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Stripe's figures (layer 4), the defaults of UtilizationOptions.
const (
	DefaultThreshold = 0.8               // shedding starts above 80% utilization
	DefaultRamp      = 120 * time.Second // the amount shed follows its target over two minutes
	DefaultInterval  = time.Second       // the amount is recomputed once a second
)

// UtilizationOptions configure a Utilization shedder. Capacity is
// required; the zero value of every other field is its documented
// default.
type UtilizationOptions struct {
	// Capacity is the number of requests the process works on at once
	// when fully utilized (its workers): utilization is in-flight
	// requests / Capacity. Required.
	Capacity int64
	// Threshold is the utilization above which shedding starts. Zero
	// means DefaultThreshold (0.8).
	Threshold float64
	// Full is the utilization at which the target is to shed every
	// class; between Threshold and Full the target grows linearly. Zero
	// means 1 (all workers busy). It must be above Threshold.
	Full float64
	// Ramp is how slowly the amount shed follows its target: each
	// Interval, the amount closes Interval/Ramp of its distance to the
	// target (1/120 a second with the defaults), so a sudden overload or
	// a sudden calm moves it gradually and a brief spike does not make
	// it flap. Zero means DefaultRamp (120 s).
	Ramp time.Duration
	// Interval is how often the amount is recomputed from the
	// utilization measured since the last time. Zero means
	// DefaultInterval (1 s).
	Interval time.Duration
	// Classes is the shedding order (see NewClasses). Zero means
	// DefaultClasses.
	Classes Classes
	// Now is the clock. Nil means time.Now. The shedder reads it once per
	// Acquire and recomputes the amount when an Interval has passed, so
	// a test that controls it controls the ramp exactly.
	Now func() time.Time
}

// Utilization is a per-process load shedder driven by worker utilization
// (Stripe's layer 4). It counts the requests in flight (Acquire to
// Release); once per Interval it measures the mean utilization seen by the
// requests that arrived, turns it into a target amount to shed (0 at
// Threshold and below, 1 at Full), and moves the amount it sheds toward
// that target by Interval/Ramp of the distance.
//
// The amount is spread over the classes in order: with N classes, class i
// is shed with probability clamp(amount·N − i, 0, 1), so the first class
// is shed entirely before the second is touched, and the last (critical)
// class only when the amount passes (N−1)/N. A class shed in part is shed
// deterministically, every k-th request of it, not at random.
//
// Utilization is safe for concurrent use. Acquire and Release take no
// lock (a few atomic operations); the once-per-Interval update takes one
// that no Acquire waits for.
type Utilization struct {
	capacity  float64
	threshold float64
	full      float64
	frac      float64 // Interval / Ramp
	interval  int64
	classes   Classes
	n         float64 // number of classes
	now       func() time.Time

	inflight atomic.Int64
	sum      atomic.Int64 // in-flight counts seen by arrivals since the last update
	samples  atomic.Int64
	next     atomic.Int64 // the next update, Unix ns
	amount   atomic.Uint64
	target   atomic.Uint64
	util     atomic.Uint64
	mu       sync.Mutex // one update at a time
	seen     [MaxClasses]atomic.Uint64
	shed     [MaxClasses]atomic.Uint64
}

// ErrOptions is wrapped by every error about shedder options.
var ErrOptions = errors.New("shed: invalid options")

// NewUtilization returns a Utilization shedder, or an error wrapping
// ErrOptions when the options are out of range.
func NewUtilization(o UtilizationOptions) (*Utilization, error) {
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Full == 0 {
		o.Full = 1
	}
	if o.Ramp == 0 {
		o.Ramp = DefaultRamp
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Classes.Len() == 0 {
		o.Classes, _ = NewClasses()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	bad := func(format string, args ...any) (*Utilization, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...)
	}
	switch {
	case o.Capacity <= 0:
		return bad("capacity %d: want at least 1", o.Capacity)
	case !(o.Threshold > 0 && o.Threshold < 10):
		return bad("threshold %v: want a utilization above 0 and below 10, such as 0.8", o.Threshold)
	case !(o.Full > o.Threshold && o.Full <= 10):
		return bad("full %v: want a utilization above the threshold %v, at most 10", o.Full, o.Threshold)
	case o.Ramp < 0 || o.Interval < 0:
		return bad("negative ramp or interval")
	case o.Interval < time.Millisecond:
		return bad("interval %v: want at least 1ms", o.Interval)
	}
	u := &Utilization{capacity: float64(o.Capacity), threshold: o.Threshold, full: o.Full,
		frac: float64(o.Interval) / float64(o.Ramp), interval: int64(o.Interval),
		classes: o.Classes, n: float64(o.Classes.Len()), now: o.Now}
	u.next.Store(o.Now().UnixNano() + u.interval)
	return u, nil
}

// Classes returns the shedding order.
func (u *Utilization) Classes() Classes { return u.classes }

// Acquire decides whether a request of class c may start. When it
// returns true the request counts as in flight until Release, which the
// caller must call exactly once when the request ends. A class outside
// the order counts as the last (critical) one.
func (u *Utilization) Acquire(c Class) bool {
	if now := u.now().UnixNano(); now >= u.next.Load() {
		u.update(now)
	}
	if int(c) >= u.classes.Len() {
		c = u.classes.Last()
	}
	busy := u.inflight.Add(1) - 1
	u.sum.Add(busy)
	u.samples.Add(1)
	p := shedFraction(math.Float64frombits(u.amount.Load()), u.n, c)
	if p <= 0 {
		return true
	}
	if p < 1 {
		k := u.seen[c].Add(1)
		if math.Floor(float64(k)*p) == math.Floor(float64(k-1)*p) {
			return true
		}
	}
	u.inflight.Add(-1)
	u.shed[c].Add(1)
	return false
}

// Release ends a request that Acquire admitted.
func (u *Utilization) Release() { u.inflight.Add(-1) }

// update recomputes the amount for every Interval that has passed.
func (u *Utilization) update(now int64) {
	if !u.mu.TryLock() {
		return // another caller is updating
	}
	defer u.mu.Unlock()
	next := u.next.Load()
	if now < next {
		return
	}
	ticks := (now-next)/u.interval + 1
	n, s := u.samples.Swap(0), u.sum.Swap(0)
	busy := float64(u.inflight.Load())
	if n > 0 {
		busy = float64(s) / float64(n)
	}
	util := max(busy, 0) / u.capacity
	target := Target(util, u.threshold, u.full)
	a := after(math.Float64frombits(u.amount.Load()), target, u.frac, ticks)
	u.util.Store(math.Float64bits(util))
	u.target.Store(math.Float64bits(target))
	u.amount.Store(math.Float64bits(a))
	u.next.Store(next + ticks*u.interval)
}

// Target is the amount to shed at utilization util: 0 at threshold and
// below, 1 at full and above, linear in between.
func Target(util, threshold, full float64) float64 {
	if !(util > threshold) {
		return 0
	}
	return min((util-threshold)/(full-threshold), 1)
}

// Step returns the amount shed one interval later: amount closes
// interval/ramp of its distance to target (all of it when interval ≥ ramp).
// With Stripe's figures a process resting at 28% shed with the load gone
// moves by (0−28)/120 = −0.233 points a second. Stripe's published Ruby
// sketch divides integers there, so the same step is −1 (Ruby floors
// −28/120), and every rise of less than 120 points is 0.
func Step(amount, target float64, interval, ramp time.Duration) float64 {
	if ramp <= 0 || interval >= ramp {
		return target
	}
	return amount + (target-amount)*(float64(interval)/float64(ramp))
}

// after is ticks Steps of frac from amount toward target, in closed form;
// an amount within 1e-4 of its target is the target (so that a shedder
// at rest sheds nothing at all, not one request in a billion).
func after(amount, target, frac float64, ticks int64) float64 {
	if frac >= 1 {
		return target
	}
	a := target + (amount-target)*math.Pow(1-frac, float64(ticks))
	if math.Abs(a-target) < 1e-4 {
		a = target
	}
	return min(max(a, 0), 1)
}

// shedFraction is the share of class c shed at amount over n classes.
func shedFraction(amount, n float64, c Class) float64 {
	return min(max(amount*n-float64(c), 0), 1)
}

// UtilizationStats is a snapshot of a Utilization shedder.
type UtilizationStats struct {
	InFlight    int64   // requests admitted and not yet released
	Utilization float64 // the mean utilization measured at the last update
	Target      float64 // the amount to shed that it implied (0..1)
	Amount      float64 // the amount being shed (0..1), moving toward Target
	// Shed counts the requests shed so far, by class.
	Shed []uint64
}

// Stats returns a snapshot of u.
func (u *Utilization) Stats() UtilizationStats {
	s := UtilizationStats{InFlight: u.inflight.Load(),
		Utilization: math.Float64frombits(u.util.Load()),
		Target:      math.Float64frombits(u.target.Load()),
		Amount:      math.Float64frombits(u.amount.Load()),
		Shed:        make([]uint64, u.classes.Len())}
	for i := range s.Shed {
		s.Shed[i] = u.shed[i].Load()
	}
	return s
}

// ShedFraction returns the share of class c's requests being shed now.
func (u *Utilization) ShedFraction(c Class) float64 {
	if int(c) >= u.classes.Len() {
		c = u.classes.Last()
	}
	return shedFraction(math.Float64frombits(u.amount.Load()), u.n, c)
}
