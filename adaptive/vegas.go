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
}

// Vegas is an adaptive concurrency limit after TCP Vegas, as Netflix's
// concurrency-limits VegasLimit applies it to requests. Once a window is
// over, it estimates the requests queued from the window's latency and
// the no-load latency (see [ProbeOptions]):
//
//	queue = limit × (1 − minRTT / sampleRTT)
//
// and, with L = log10(limit):
//
//	queue ≤ L:            limit + Beta·L   (no queue: grow fast)
//	queue < Alpha·L:      limit + L, or + Beta·L if the window refused requests
//	queue > Beta·L:       limit − max(L, (queue − Beta·L)/2)
//	otherwise:            held
//
// A window with dropped requests takes L off instead. Growth only happens
// when the window used at least half the limit, and the limit stays
// between Min and Max. The cut above Beta removes half the excess queue
// per window, not L alone, so that a service whose capacity halves is back
// to a short queue within a few windows rather than after tens of them.
// And a window that refused requests while the queue stayed under Alpha·L
// grows as fast as one with no queue: the estimate of a short queue is
// noisy (the median latency of a window moves a few percent), and demand
// waiting at the door is the surest sign of room, so a service whose
// capacity comes back is found in a few windows too.
//
// A Vegas is safe for concurrent use.
type Vegas struct {
	limiter
	v vegas
}

type vegas struct{ alpha, beta float64 }

// NewVegas returns a Vegas limiter at its initial limit.
func NewVegas(o VegasOptions) *Vegas {
	positiveOr(&o.Alpha, 3)
	positiveOr(&o.Beta, 6)
	o.Beta = max(o.Beta, o.Alpha)
	l := &Vegas{v: vegas{alpha: o.Alpha, beta: o.Beta}}
	l.init(o.LimiterOptions.withDefaults(), &l.v)
	return l
}

func (v *vegas) next(limit float64, w window) float64 {
	lg := max(1, math.Log10(limit))
	if w.drops > 0 && w.drops*10 >= w.samples+w.drops {
		return limit - lg
	}
	queue := limit * (1 - w.minRTT/w.rtt)
	appLimited := float64(w.peak)*2 < limit
	switch {
	case queue <= lg:
		if appLimited {
			return limit
		}
		return limit + v.beta*lg
	case queue < v.alpha*lg:
		if appLimited {
			return limit
		}
		if w.rejected > 0 {
			return limit + v.beta*lg // refused demand and a short queue
		}
		return limit + lg
	case queue > v.beta*lg:
		return limit - max(lg, (queue-v.beta*lg)/2)
	}
	return limit
}
