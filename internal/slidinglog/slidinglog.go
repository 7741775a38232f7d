// Package slidinglog is the sliding window log as a pure step: the time and
// cost of every admitted request in the last Limit.Period, so the count is
// exact at every instant. A request is admitted when the costs logged in
// (now−Period, now] plus its own are at most Limit.Rate.
//
// Memory per key is O(Rate): up to Rate entries of 16 bytes (fewer with
// weighted costs). Use it where exactness matters and rates are low (login,
// payments); prefer SlidingWindowCounter (two counters) at scale.
package slidinglog

import (
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Entry is one admitted request.
type Entry struct {
	At int64 // Unix ns
	N  int64 // its cost
}

// Expiry returns the time (Unix ns) from which log holds nothing: when its
// newest entry leaves the window.
func Expiry(log []Entry, period time.Duration) int64 {
	if len(log) == 0 {
		return 0
	}
	return log[len(log)-1].At + int64(period)
}

// Step applies req at now (Unix ns) to log, oldest entry first, and returns
// the new log and the decision. It reuses log's array. req must be valid.
//
// When time goes backwards, now is taken to be the newest entry's time:
// nothing leaves the window early.
func Step(log []Entry, now int64, req ratelimit.Request) ([]Entry, ratelimit.Decision) {
	lim := req.Limit.Normalize()
	d := ratelimit.Decision{Limit: lim}
	if lim.Rate == 0 {
		d.Allowed = req.N == 0
		d.Unsatisfiable = req.N > 0
		return log, d
	}
	w := int64(lim.Period)
	if n := len(log); n > 0 && log[n-1].At > now {
		now = log[n-1].At
	}
	// Drop what has left the window (now−w, now].
	i := 0
	for i < len(log) && log[i].At <= now-w {
		i++
	}
	if i > 0 {
		log = log[:copy(log, log[i:])]
	}
	var sum int64
	for _, e := range log {
		sum += e.N
	}
	d.Remaining = max(0, lim.Rate-sum)
	if len(log) > 0 {
		d.ResetAfter = time.Duration(log[len(log)-1].At + w - now)
	}
	switch {
	case req.N == 0:
		d.Allowed = true
		return log, d
	case req.N > lim.Rate:
		d.Unsatisfiable = true
		return log, d
	case req.N > lim.Rate-sum: // not sum+N: no overflow
		// Wait until enough of the oldest entries have left the window.
		over := req.N - (lim.Rate - sum)
		for _, e := range log {
			over -= e.N
			if over <= 0 {
				d.RetryAfter = time.Duration(e.At + w - now)
				break
			}
		}
		return log, d
	}
	if n := len(log); n > 0 && log[n-1].At == now {
		log[n-1].N += req.N // same instant: one entry
	} else {
		log = append(log, Entry{At: now, N: req.N})
	}
	d.Allowed = true
	d.Remaining = lim.Rate - sum - req.N
	d.ResetAfter = time.Duration(w)
	return log, d
}
