package adaptive

import "math"

// GradientOptions configures a [Gradient] limiter. The zero value is the
// default.
type GradientOptions struct {
	LimiterOptions
	// Tolerance is how far the window's latency may rise above the
	// baseline before it counts as queueing: the limit settles where the
	// latency is Tolerance times the no-load latency. 0 means 1.1: a
	// queue that adds 10% to the latency (Envoy's adaptive_concurrency
	// filter keeps a 25% buffer, a queue of a quarter of the limit held
	// for ever; the median of a window of 64 samples moves by a few
	// percent, so 10% still tells a queue from noise).
	Tolerance float64
	// Smoothing is the weight of the new estimate when the limit falls,
	// in (0, 1]; 0 means 0.5.
	Smoothing float64
	// MaxCut is the most one window can cut, as a fraction of the limit;
	// 0 means 0.5 (the gradient is never below one half).
	MaxCut float64
	// DropBackoff multiplies the limit in a window with dropped requests
	// (timeouts, overload answers) and no other sign of queueing; 0 means
	// 0.9.
	DropBackoff float64
	// NoSlowStart grows the limit by its square root per window from the
	// start, instead of doubling it until the first sign of queueing.
	NoSlowStart bool
}

// Gradient is an adaptive concurrency limit that follows the gradient
// minRTT/sampleRTT, as Netflix's concurrency-limits Gradient2 and Envoy's
// adaptive_concurrency filter do. Once a window (Window, and MinSamples
// requests) is over, the window's latency at Percentile is compared with
// the no-load latency (see [ProbeOptions]):
//
//	gradient = Tolerance × minRTT / sampleRTT
//	gradient ≥ 1 (no queue):  limit + √limit × min(1, (gradient − 1)/(Tolerance − 1))
//	                          (×2 in slow start), if the window used at
//	                          least half the limit; else held
//	gradient < 1 (a queue):   limit × max(gradient, 1 − MaxCut), smoothed
//
// and kept between Min and Max. The step shrinks as the latency nears
// the tolerance (a whole √limit at the no-load latency, nothing at the
// tolerance), so the limit settles where the latency is Tolerance times
// the baseline instead of jumping past it every other window. A window
// that refused requests doubles the step of the one before it (up to half
// the limit), while it grows in a row: a service whose capacity came back
// is found in a few windows. Growth is bounded per window, and a
// queue never raises the limit: there is no constant queue allowance added
// to the cut (the second historical bug of these controllers: Gradient2's
// newLimit = limit × gradient + queueSize rises whenever the gradient is
// above 1 − queueSize/limit, so a limit of 100 with a queue allowance of 4
// keeps growing while latency is up to 4% over its baseline, for ever).
//
// A Gradient is safe for concurrent use.
type Gradient struct {
	limiter
	g gradient
}

type gradient struct {
	tol, smoothing, floor, dropBackoff float64
	slowStart                          bool
	grow                               growth
	// queueTerm, when set, adds a constant to every cut: the historical
	// bug, kept only so that a test can show that it fails.
	queueTerm float64
}

// NewGradient returns a Gradient limiter at its initial limit.
func NewGradient(o GradientOptions) *Gradient {
	if !(o.Tolerance >= 1) {
		o.Tolerance = 1.1
	}
	if !(o.Smoothing > 0 && o.Smoothing <= 1) {
		o.Smoothing = 0.5
	}
	if !(o.MaxCut > 0 && o.MaxCut < 1) {
		o.MaxCut = 0.5
	}
	if !(o.DropBackoff > 0 && o.DropBackoff < 1) {
		o.DropBackoff = 0.9
	}
	l := &Gradient{g: gradient{tol: o.Tolerance, smoothing: o.Smoothing, floor: 1 - o.MaxCut,
		dropBackoff: o.DropBackoff, slowStart: !o.NoSlowStart}}
	l.init(o.LimiterOptions.withDefaults(), &l.g)
	return l
}

func (g *gradient) next(limit float64, w window) float64 {
	grad := g.tol * w.minRTT / w.rtt
	if w.drops > 0 && w.drops*10 >= w.samples+w.drops {
		// One request in ten or more failed for lack of capacity.
		grad = min(grad, g.dropBackoff)
	}
	if grad >= 1 {
		switch {
		case float64(w.peak)*2 < limit:
			return limit // far from the limit: nothing learnt about it
		case g.slowStart:
			return 2 * limit
		}
		// The closer the latency to the tolerance, the smaller the step:
		// a full √limit at the baseline, nothing at the tolerance, so
		// that the limit settles there instead of jumping past it.
		step := math.Sqrt(limit)
		if g.tol > 1 {
			step *= min(1, (grad-1)/(g.tol-1))
		}
		return limit + g.grow.step(limit, step, w.rejected > 0)
	}
	g.slowStart = false
	g.grow.reset()
	target := limit*max(grad, g.floor) + g.queueTerm
	return limit*(1-g.smoothing) + target*g.smoothing
}

func (g *gradient) recalled() { g.grow.recalled() }
