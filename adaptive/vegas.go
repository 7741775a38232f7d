package adaptive

import "math"

// VegasOptions configures a [Vegas] limiter. The zero value is the default.
type VegasOptions struct {
	LimiterOptions
	// Alpha and Beta bound the queue the limit aims for, in multiples of
	// log10(limit): below Alpha the limit grows, above Beta it falls.
	// 0 means 3 and 6, the values of TCP Vegas as Netflix's
	// concurrency-limits uses them.
	Alpha, Beta float64
	// MaxQueue caps Beta·L at this share of the limit (and Alpha·L at
	// half of it), though never below 2 (and 1) requests: log10 of a small
	// limit is a large share of it (Beta·L is 40% of a limit of 20, a
	// latency 40% over the baseline held for ever), while the queue a
	// limit of 1000 aims for stays log-sized. 0 means 0.1; negative, no cap
	// (the thresholds of TCP Vegas alone).
	MaxQueue float64
}

// Vegas is an adaptive concurrency limit after TCP Vegas, as Netflix's
// concurrency-limits VegasLimit applies it to requests. Once a window is
// over, it estimates the requests queued from the window's latency and
// the no-load latency (see [ProbeOptions]):
//
//	queue = limit × (1 − minRTT / sampleRTT)
//
// and, with L = log10(limit) and the bounds a = min(Alpha·L, MaxQueue/2 ×
// limit), b = min(Beta·L, MaxQueue × limit) (at least 1 and 2 requests):
//
//	queue < a, the window refused requests:  limit + b, doubled per such window in a row
//	queue ≤ min(L, a/2):  limit + b   (no queue)
//	queue < a:            limit + min(L, a)
//	queue > b:            limit − max(min(L, a), (queue − b)/2)
//	otherwise:            held
//
// A window with dropped requests takes L off instead. Growth only happens
// when the window used at least half the limit, and the limit stays
// between Min and Max.
//
// The bounds are TCP Vegas's for a large limit (a queue of 9 to 18 for a
// limit of 1000: under 2% of the latency), but capped at a share of a
// small one: Beta·L alone is 40% of a limit of 20, a latency 40% over the
// no-load one held for ever, where the cap holds a queue of 1 to 2. The
// cut above b removes half the excess queue per window, not L alone, so
// that a service whose capacity halves is back to a short queue within a
// few windows rather than after tens of them. Demand waiting at the door
// with a short queue is the surest sign of room, so a window that refused
// requests grows by b, the next such window by 2b, then 4b (at most half
// the limit per window; a held window takes the streak one step back, a
// cut ends it): a service whose capacity came back is found in a few
// windows, while a limit that sits at its target and dips below it grows
// by one step of b.
//
// A Vegas is safe for concurrent use.
type Vegas struct {
	limiter
	v vegas
}

type vegas struct {
	alpha, beta, maxQueue float64
	grow                  growth
}

// NewVegas returns a Vegas limiter at its initial limit.
func NewVegas(o VegasOptions) *Vegas {
	positiveOr(&o.Alpha, 3)
	positiveOr(&o.Beta, 6)
	o.Beta = max(o.Beta, o.Alpha)
	if o.MaxQueue == 0 {
		o.MaxQueue = 0.1
	}
	l := &Vegas{v: vegas{alpha: o.Alpha, beta: o.Beta, maxQueue: o.MaxQueue}}
	l.init(o.LimiterOptions.withDefaults(), &l.v)
	return l
}

// bounds returns, for limit, L = log10(limit) (at least 1) and the queue
// bounds Alpha·L and Beta·L, each capped at a share of the limit (half of
// MaxQueue, and MaxQueue), though never below 1 and 2 requests.
func (v *vegas) bounds(limit float64) (lg, alpha, beta float64) {
	lg = max(1, math.Log10(limit))
	alpha, beta = v.alpha*lg, v.beta*lg
	if v.maxQueue > 0 {
		alpha = min(alpha, max(1, v.maxQueue/2*limit))
		beta = max(alpha, min(beta, max(2, v.maxQueue*limit)))
	}
	return lg, alpha, beta
}

func (v *vegas) next(limit float64, w window) float64 {
	lg, alpha, beta := v.bounds(limit)
	if w.drops > 0 && w.drops*10 >= w.samples+w.drops {
		v.grow.reset()
		return limit - lg
	}
	queue := limit * (1 - w.minRTT/w.rtt)
	switch {
	case float64(w.peak)*2 < limit && queue < alpha:
		return limit // far from the limit: nothing learnt about it
	case queue < alpha && w.rejected > 0:
		return limit + v.grow.step(limit, beta, true) // refused demand and a short queue
	case queue <= min(lg, alpha/2):
		return limit + v.grow.step(limit, beta, false)
	case queue < alpha:
		return limit + v.grow.step(limit, min(lg, alpha), false)
	case queue > beta:
		v.grow.reset()
		return limit - max(min(lg, alpha), (queue-beta)/2)
	}
	v.grow.hold()
	return limit
}

func (v *vegas) recalled() { v.grow.recalled() }
