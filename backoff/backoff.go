package backoff

import (
	"math"
	"math/rand/v2"
	"time"
)

// Default values of the strategies' zero fields.
const (
	DefaultBase = 500 * time.Millisecond
	DefaultMax  = 60 * time.Second
)

// Strategy computes the delay before retry number attempt (1 for the first
// retry). Implementations must be safe for concurrent use and must return a
// delay in [0, their maximum] for every attempt, including attempt < 1 (read
// as 1) and very large attempts.
type Strategy interface {
	Delay(attempt int) time.Duration
}

// Func is an adapter to allow the use of ordinary functions as a Strategy.
type Func func(attempt int) time.Duration

// Delay returns f(attempt).
func (f Func) Delay(attempt int) time.Duration { return f(attempt) }

// Constant waits the same delay before every retry.
type Constant time.Duration

// Delay returns d.
func (d Constant) Delay(int) time.Duration { return time.Duration(d) }

// Exponential waits ceiling(attempt) = min(Max, Base·2^attempt), with no
// jitter. Brooker calls it "the clear loser": clients that fail together
// retry together. It exists for comparison and for deterministic tests.
type Exponential struct {
	Base time.Duration // 0 means DefaultBase (500 ms)
	Max  time.Duration // 0 means DefaultMax (60 s)
}

// Delay returns min(Max, Base·2^attempt).
func (e Exponential) Delay(attempt int) time.Duration {
	return ceiling(e.Base, e.Max, attempt)
}

// FullJitter waits a uniform random time in [0, ceiling(attempt)], the
// variant Brooker found to do the least total work. It can retry almost at
// once, which a server without Retry-After may not forgive: prefer
// EqualJitter after a 429.
type FullJitter struct {
	Base time.Duration  // 0 means DefaultBase (500 ms)
	Max  time.Duration  // 0 means DefaultMax (60 s)
	Rand func() float64 // uniform in [0, 1); nil means math/rand/v2's Float64
}

// Delay returns U(0, min(Max, Base·2^attempt)).
func (f FullJitter) Delay(attempt int) time.Duration {
	c := ceiling(f.Base, f.Max, attempt)
	return scale(c, uniform(f.Rand))
}

// EqualJitter waits half of ceiling(attempt) plus a uniform random time in
// the other half: between Base·2^(attempt-1) and Base·2^attempt, capped at
// Max. Its zero value is [Recommended].
type EqualJitter struct {
	Base time.Duration  // 0 means DefaultBase (500 ms)
	Max  time.Duration  // 0 means DefaultMax (60 s)
	Rand func() float64 // uniform in [0, 1); nil means math/rand/v2's Float64
}

// Delay returns c/2 + U(0, c/2) with c = min(Max, Base·2^attempt).
func (e EqualJitter) Delay(attempt int) time.Duration {
	c := ceiling(e.Base, e.Max, attempt)
	half := c / 2
	return c - half + scale(half, uniform(e.Rand))
}

// Recommended returns the backoff schedule of the 429 handling guide sluice
// follows: retry n waits between 500·2^(n-1) ms and 500·2^n ms (500 ms–1 s,
// 1–2 s, 2–4 s, 4–8 s, 8–16 s, …), never more than 60 s. It is the zero
// EqualJitter, spelled out.
func Recommended() EqualJitter {
	return EqualJitter{Base: DefaultBase, Max: DefaultMax}
}

// Decorrelated is Brooker's decorrelated jitter: each delay is drawn from
// U(Base, 3·previous), capped at Max, starting from previous = Base.
//
// The recurrence needs the previous delay. Next computes one step from it
// for callers that keep it; Delay stays stateless by replaying the
// recurrence from the first retry with fresh random draws, so Delay(n) has
// the distribution of the n-th delay of a chain (between Base and
// min(Max, Base·3^n)), at the cost of n draws.
type Decorrelated struct {
	Base time.Duration  // 0 means DefaultBase (500 ms)
	Max  time.Duration  // 0 means DefaultMax (60 s)
	Rand func() float64 // uniform in [0, 1); nil means math/rand/v2's Float64
}

// maxReplay bounds Delay's replay: after this many steps the chain has long
// reached Max for any sane Base (3^64 overflows every duration).
const maxReplay = 64

// Delay returns the delay before retry attempt, drawn as the attempt-th step
// of the decorrelated chain.
func (d Decorrelated) Delay(attempt int) time.Duration {
	base, _ := defaults(d.Base, d.Max)
	prev := base
	attempt = min(max(attempt, 1), maxReplay)
	for range attempt {
		prev = d.Next(prev)
	}
	return prev
}

// Next returns the delay that follows prev: min(Max, U(Base, 3·prev)).
// A prev below Base counts as Base.
func (d Decorrelated) Next(prev time.Duration) time.Duration {
	base, maxd := defaults(d.Base, d.Max)
	prev = max(prev, base)
	hi := maxd
	if prev <= maxd/3 {
		hi = 3 * prev
	}
	if hi <= base {
		return min(base, maxd)
	}
	return min(maxd, base+scale(hi-base, uniform(d.Rand)))
}

// Multiplicative is the schedule of the 429 guide's pseudocode:
// Base·2^(attempt-1), multiplied by a uniform factor in [1-Spread, 1+Spread]
// (±50% by default), capped at Max. With the defaults retry n waits between
// 250·2^(n-1) ms and 750·2^(n-1) ms.
type Multiplicative struct {
	Base   time.Duration  // 0 means DefaultBase (500 ms)
	Max    time.Duration  // 0 means DefaultMax (60 s)
	Spread float64        // in (0, 1]; 0 (or anything out of range) means 0.5
	Rand   func() float64 // uniform in [0, 1); nil means math/rand/v2's Float64
}

// Delay returns min(Max, Base·2^(attempt-1)·U(1-Spread, 1+Spread)).
func (m Multiplicative) Delay(attempt int) time.Duration {
	base, maxd := defaults(m.Base, m.Max)
	attempt = max(attempt, 1)
	spread := m.Spread
	if !(spread > 0 && spread <= 1) {
		spread = 0.5
	}
	d := float64(base) * math.Exp2(float64(attempt-1)) * (1 - spread + 2*spread*uniform(m.Rand))
	if d >= float64(maxd) || math.IsNaN(d) {
		return maxd
	}
	return time.Duration(d)
}

func defaults(base, maxd time.Duration) (time.Duration, time.Duration) {
	if base <= 0 {
		base = DefaultBase
	}
	if maxd <= 0 {
		maxd = DefaultMax
	}
	return base, maxd
}

// ceiling returns min(max, base·2^attempt) without overflow.
func ceiling(base, maxd time.Duration, attempt int) time.Duration {
	base, maxd = defaults(base, maxd)
	attempt = max(attempt, 1)
	if attempt >= 62 || base > maxd>>attempt {
		return maxd
	}
	return min(maxd, base<<attempt)
}

// uniform returns a draw in [0, 1] from r, or from math/rand/v2 when r is nil.
// Draws outside [0, 1] (a broken source) are clamped.
func uniform(r func() float64) float64 {
	var u float64
	if r == nil {
		u = rand.Float64()
	} else {
		u = r()
	}
	if !(u >= 0) { // also NaN
		return 0
	}
	return min(u, 1)
}

// scale returns d·u for u in [0, 1].
func scale(d time.Duration, u float64) time.Duration {
	return time.Duration(float64(d) * u)
}
