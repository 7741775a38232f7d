package gcra

import (
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
