package window

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// State is a key's counters. The zero State is an absent key.
type State struct {
	Start int64 // start of the current window, Unix ns
	Prev  int64 // count of the window before Start (sliding counter only)
	Curr  int64 // count of the current window
}

// Expiry returns the time (Unix ns) from which s no longer holds anything:
// the end of the window after the current one for the sliding counter (its
// count still weighs there), the end of the current one for the fixed
// window. period is the limit's Period. An expiry past the last int64
// nanosecond is math.MaxInt64: a long window late in int64 time must not
// wrap around to an expiry in the past.
func (s State) Expiry(sliding bool, period time.Duration) int64 {
	switch {
	case s.Curr > 0 && sliding:
		return after(s.Start, 2*int64(period))
	case s.Curr > 0:
		return after(s.Start, int64(period))
	case s.Prev > 0 && sliding:
		return after(s.Start, int64(period))
	}
	return 0
}

// after returns t + d for d ≥ 0, or math.MaxInt64 when the sum does not
// fit an int64.
func after(t, d int64) int64 {
	if t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// floorTo returns the start of the window of length w holding now.
func floorTo(now, w int64) int64 {
	m := now % w
	if m < 0 {
		m += w
	}
	return now - m
}

// roll moves s to the window holding now and returns the effective now.
// When time went backwards into an earlier window, the newest window seen
// stays current and now is clamped to its start: going back never resets a
// count. A now less than one window after the first int64 nanosecond
// (before the year 1678 for a short window) counts as MinInt64+w, so that
// the start of its window is an int64 too.
func roll(s State, now, w int64) (State, int64) {
	now = max(now, math.MinInt64+w)
	ws := floorTo(now, w)
	switch {
	case s.Start == 0 && s.Prev == 0 && s.Curr == 0:
		return State{Start: ws}, now
	case ws < s.Start:
		return s, s.Start
	case ws == s.Start:
		return s, now
	case ws == s.Start+w:
		return State{Start: ws, Prev: s.Curr}, now
	}
	return State{Start: ws}, now
}

// begin is req's normalized limit and the decision's start; none when
// the limit admits nothing (rate 0), and d is then the whole decision: a
// peek is allowed, anything more unsatisfiable.
func begin(req ratelimit.Request) (lim ratelimit.Limit, d ratelimit.Decision, none bool) {
	lim = req.Limit.Normalize()
	d.Limit = lim
	return lim, d, lim.Rate == 0 && settled(req, lim, &d)
}

// settled reports whether req is decided whatever the counts, and sets d
// so: a peek (N 0) is allowed, more than the limit's rate never is
// (Unsatisfiable).
func settled(req ratelimit.Request, lim ratelimit.Limit, d *ratelimit.Decision) bool {
	switch {
	case req.N == 0:
		d.Allowed = true
	case req.N > lim.Rate:
		d.Unsatisfiable = true
	default:
		return false
	}
	return true
}

// Fixed applies req at now (Unix ns) to a fixed window. req must be valid.
func Fixed(s State, now int64, req ratelimit.Request) (State, ratelimit.Decision) {
	lim, d, none := begin(req)
	if none {
		return s, d
	}
	w := int64(lim.Period)
	ns, now := roll(s, now, w)
	ns.Prev = 0
	untilEnd := time.Duration(ns.Start + w - now)
	reset := func(count int64) time.Duration {
		if count == 0 {
			return 0
		}
		return untilEnd
	}
	d.Remaining = max(0, lim.Rate-ns.Curr)
	d.ResetAfter = reset(ns.Curr)
	switch {
	case settled(req, lim, &d):
		return s, d
	case req.N > lim.Rate-ns.Curr: // not Curr+N: no overflow
		d.RetryAfter = untilEnd // the next window is empty and N ≤ Rate
		return s, d
	}
	ns.Curr += req.N
	d.Allowed = true
	d.Remaining = lim.Rate - ns.Curr
	d.ResetAfter = untilEnd
	return ns, d
}

// used is the sliding estimate of events in the last window, at elapsed
// nanoseconds into the current window.
func used(prev, curr, elapsed, w int64) float64 {
	est := float64(prev) * float64(w-elapsed) / float64(w)
	return est + float64(curr)
}

func admits(prev, curr, elapsed, w, n, rate int64) bool {
	return used(prev, curr, elapsed, w)+float64(n) <= float64(rate)
}

// earliest returns the smallest elapsed time in [from, w) at which a
// window with counts prev and curr admits n, or false if none does. The
// estimate only falls as elapsed grows, so a binary search finds it with the
// very comparison the step makes: retrying after the returned time is
// admitted, whatever the rounding.
func earliest(prev, curr, from, w, n, rate int64) (int64, bool) {
	if !admits(prev, curr, w-1, w, n, rate) {
		return 0, false
	}
	lo, hi := from, w-1 // admits(hi) holds
	for lo < hi {
		mid := lo + (hi-lo)/2
		if admits(prev, curr, mid, w, n, rate) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, true
}

// Sliding applies req at now (Unix ns) to a sliding window counter. req must
// be valid.
func Sliding(s State, now int64, req ratelimit.Request) (State, ratelimit.Decision) {
	lim, d, none := begin(req)
	if none {
		return s, d
	}
	w := int64(lim.Period)
	ns, now := roll(s, now, w)
	elapsed := now - ns.Start
	remaining := func(prev, curr int64) int64 {
		return max(0, int64(math.Floor(float64(lim.Rate)-used(prev, curr, elapsed, w))))
	}
	reset := func(prev, curr int64) time.Duration {
		switch {
		case curr > 0:
			return time.Duration(2*w - elapsed)
		case prev > 0:
			return time.Duration(w - elapsed)
		}
		return 0
	}
	d.Remaining = remaining(ns.Prev, ns.Curr)
	d.ResetAfter = reset(ns.Prev, ns.Curr)
	switch {
	case settled(req, lim, &d):
		return s, d
	case !admits(ns.Prev, ns.Curr, elapsed, w, req.N, lim.Rate):
		if e, ok := earliest(ns.Prev, ns.Curr, elapsed, w, req.N, lim.Rate); ok {
			d.RetryAfter = time.Duration(e - elapsed)
		} else {
			if e, ok := earliest(ns.Curr, 0, 0, w, req.N, lim.Rate); ok {
				// In the next window the current count becomes prev.
				d.RetryAfter = time.Duration(w - elapsed + e)
			} else {
				// Only the window after that is empty enough.
				d.RetryAfter = time.Duration(2*w - elapsed)
			}
		}
		return s, d
	}
	ns.Curr += req.N
	d.Allowed = true
	d.Remaining = remaining(ns.Prev, ns.Curr)
	d.ResetAfter = reset(ns.Prev, ns.Curr)
	return ns, d
}

// Rescale returns s, counted in windows of from (ns), as the counts of
// windows of to at now: what a key has used carries over when its limit's
// period changes (the rate needs nothing: the counts are events). s is
// first rolled to now in its own windows, so what the old period had
// already forgotten stays forgotten. The times of the events counted are
// not kept, only their window, so each count goes where its latest
// possible event falls among the new windows: the current window's count
// (events up to now) into the new current window, and, for the sliding
// counter, the previous window's count (events up to its end) into the new
// current or previous window, or nowhere when that is earlier still. A
// shorter period thus keeps the old window's count for the whole of the
// new current window: never more admitted than either period allows. The
// fixed window's previous count is not carried (it no longer counts).
// s is returned as it is when from equals to, from is not positive (the
// period is unknown), or s is empty.
func Rescale(s State, now, from, to int64, sliding bool) State {
	if from <= 0 || to <= 0 || from == to || s == (State{}) {
		return s
	}
	rs, now := roll(s, now, from)
	if !sliding {
		rs.Prev = 0
	}
	out, _ := roll(State{}, now, to) // the empty new window holding now
	out.Curr = rs.Curr
	if rs.Prev > 0 {
		switch last := rs.Start - 1; {
		case last >= out.Start:
			out.Curr = min(out.Curr+rs.Prev, ratelimit.MaxRate) // no count passes MaxRate
		case last >= out.Start-to:
			out.Prev = rs.Prev
		}
	}
	if out.Prev == 0 && out.Curr == 0 {
		return State{}
	}
	return out
}

// Refund returns s after giving back n events at now, in windows of w:
// taken from the current window's count first, then (sliding counter
// only) from the previous window's, never below zero. A refund does not
// know which window charged the events; the newest is the likeliest. It
// reports whether anything was given back; the state returned is rolled
// to now either way.
func Refund(s State, now, w, n int64, sliding bool) (State, bool) {
	if n <= 0 || s == (State{}) {
		return s, false
	}
	ns, _ := roll(s, now, w)
	if !sliding {
		ns.Prev = 0
	}
	if ns.Curr == 0 && ns.Prev == 0 {
		return State{}, false
	}
	n = min(n, ratelimit.MaxRate) // no count passes it
	take := min(n, ns.Curr)
	ns.Curr -= take
	if sliding {
		ns.Prev -= min(n-take, ns.Prev)
	}
	if ns.Prev == 0 && ns.Curr == 0 {
		return State{}, true
	}
	return ns, true
}
