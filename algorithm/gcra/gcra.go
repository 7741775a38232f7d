package gcra

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Step applies req at time now (Unix nanoseconds) to the state tat (0 for an
// absent key) and returns the new state and the decision. req must be valid
// (ratelimit.Request.Validate). Only GCRA, TokenBucket and LeakyBucket are
// meaningful here; LeakyBucket adds Decision.Delay and honours MaxDelay.
//
// Time going backwards never adds capacity: an earlier now only makes
// TAT − now larger.
func Step(tat, now int64, req ratelimit.Request) (int64, ratelimit.Decision) {
	return StepParams(tat, now, req, NewParams(req.Limit))
}

// Params is what Step derives from a limit: the limit normalized, the
// emission interval T and the tolerance τ = Burst·T. A store that applies the
// same limit many times computes it once (two divisions fewer a call).
type Params struct {
	Limit ratelimit.Limit // normalized
	T     int64           // Period/Rate, ns; 0 for a zero rate
	Tau   int64           // Burst·T, ns
}

// NewParams derives the parameters of l, which must be valid.
func NewParams(l ratelimit.Limit) Params {
	l = l.Normalize()
	t := int64(l.Interval())
	return Params{Limit: l, T: t, Tau: l.Burst * t} // τ ≤ ratelimit.MaxPeriod by Limit.Validate
}

// StepParams is Step with the limit's parameters derived beforehand by
// NewParams(req.Limit).
func StepParams(tat, now int64, req ratelimit.Request, p Params) (int64, ratelimit.Decision) {
	var d ratelimit.Decision
	tat = StepInto(tat, now, &req, &p, &d)
	return tat, d
}

// StepInto is StepParams writing the decision through d: on a store's hot
// path this saves copying a Request, the Params and the Decision across
// calls (about a quarter of memstore's time on one key). It returns the new
// state.
func StepInto(tat, now int64, req *ratelimit.Request, p *Params, d *ratelimit.Decision) int64 {
	return StepCost(tat, now, req.N, req.Algorithm == ratelimit.LeakyBucket, req.MaxDelay, p, d)
}

// StepCost is StepInto with the request's fields that matter passed alone:
// its cost n, whether it queues (LeakyBucket) and, if so, the longest wait
// it accepts. A store's hot path then builds no Request.
func StepCost(tat, now, n int64, leaky bool, maxDelay time.Duration, p *Params, d *ratelimit.Decision) int64 {
	lim := p.Limit
	*d = ratelimit.Decision{Limit: lim}
	if lim.Rate == 0 {
		d.Allowed = n == 0
		d.Unsatisfiable = n > 0
		return tat
	}
	t, tau := p.T, p.Tau
	base := max(tat, now)
	backlog := base - now // time until the bucket is full again, ≥ 0

	remaining := func(ttl int64) int64 {
		if ttl >= tau {
			return 0
		}
		return (tau - ttl) / t
	}
	switch {
	case n == 0: // peek
		d.Allowed = true
		d.Remaining = remaining(backlog)
		d.ResetAfter = time.Duration(backlog)
		return tat
	case n > lim.Burst:
		d.Unsatisfiable = true
		d.Remaining = remaining(backlog)
		d.ResetAfter = time.Duration(backlog)
		return tat
	}

	newTAT := base + n*t // N·T ≤ τ: no overflow
	if ttl := newTAT - now; ttl > tau {
		d.RetryAfter = time.Duration(ttl - tau)
		d.Remaining = remaining(backlog)
		d.ResetAfter = time.Duration(backlog)
		return tat
	}
	if leaky {
		if maxDelay > 0 && backlog > int64(maxDelay) {
			// The queue has room, but the slot is later than the caller
			// can wait.
			d.RetryAfter = time.Duration(backlog) - maxDelay
			d.Remaining = remaining(backlog)
			d.ResetAfter = time.Duration(backlog)
			return tat
		}
		d.Delay = time.Duration(backlog)
	}
	ttl := newTAT - now
	d.Allowed = true
	d.Remaining = remaining(ttl)
	d.ResetAfter = time.Duration(ttl)
	return newTAT
}

// Convert returns the state tat, made under the emission interval from
// (ns), as the state of a key that has used as many events under p at now:
// the x/time/rate model of a limit change, where what was spent stays
// spent. The used events (TAT − now)/from become a backlog of as many
// intervals p.T, the fraction of an event rounded up, so a change never
// mints capacity, and a change and its reverse give back nothing: a key
// that had used more than the new Burst is in debt, and admits again once
// the excess has drained at the new rate. The backlog is bounded only by
// ratelimit.MaxPeriod, the longest a bucket's state may hold. A state at
// or before now (a full bucket) is returned as it is, and so is every
// state when from is p.T, from is not positive (the interval is unknown:
// the state is taken as made under p), p's rate is zero, or the backlog is
// MaxPeriod or more (the clock went back that far: nothing to convert
// without minting).
//
// The fraction is computed in float64 as ⌈r·p.T/from⌉, in this order, so
// that the Redis store's script (IEEE doubles too) converts to the same
// nanosecond.
func Convert(tat, now, from int64, p *Params) int64 {
	if from <= 0 || from == p.T || p.T <= 0 || tat <= now {
		return tat
	}
	backlog := tat - now
	if backlog < 0 || backlog >= int64(ratelimit.MaxPeriod) {
		return tat // overflowed, or beyond any limit's tolerance
	}
	q, r := backlog/from, backlog%from
	if q > (int64(ratelimit.MaxPeriod)-p.T)/p.T {
		return now + int64(ratelimit.MaxPeriod)
	}
	b := q * p.T // q·T + T ≤ MaxPeriod: no overflow
	if r > 0 {
		b += int64(math.Ceil(float64(r) * float64(p.T) / float64(from)))
	}
	return now + min(b, int64(ratelimit.MaxPeriod))
}

// Refund returns the state tat after giving back n events at now: the
// backlog shrinks by n·T, down to none (a full bucket, never beyond). A
// state at or before now is full already and is returned as it is. More
// than Burst events count as Burst (a backlog beyond τ is the clock's
// doing, not a charge's).
func Refund(tat, now, n int64, p *Params) int64 {
	if tat <= now || n <= 0 || p.T <= 0 {
		return tat
	}
	n = min(n, p.Limit.Burst)
	if n >= (tat-now)/p.T+1 { // n·T ≥ backlog, without overflow
		return now
	}
	return tat - n*p.T
}
