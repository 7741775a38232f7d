package slidinglog

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Entry is one admitted request.
type Entry struct {
	At int64 // Unix ns
	N  int64 // its cost
}

// Expiry returns the time (Unix ns) from which log holds nothing: when its
// newest entry leaves the window, or math.MaxInt64 when that is past the
// last int64 nanosecond (a long window late in int64 time must not wrap
// around to an expiry in the past).
func Expiry(log []Entry, period time.Duration) int64 {
	if len(log) == 0 {
		return 0
	}
	at := log[len(log)-1].At
	if at > math.MaxInt64-int64(period) {
		return math.MaxInt64
	}
	return at + int64(period)
}

// Step applies req at now (Unix ns) to log, oldest entry first, and returns
// the new log and the decision. It reuses log's array. req must be valid.
// It costs O(len(log)) a call; a store keeps a Log instead, which costs
// O(1) amortized.
func Step(log []Entry, now int64, req ratelimit.Request) ([]Entry, ratelimit.Decision) {
	l := Log{entries: log}
	for _, e := range log {
		l.sum += e.N
	}
	d := l.Step(now, req)
	return l.Entries(), d
}

// Log is a key's log with a running sum: the entries of the current window
// are entries[head:], and sum is their total cost. The zero Log is empty.
type Log struct {
	entries []Entry
	head    int
	sum     int64
}

// NewLog returns a Log holding entries, oldest first.
func NewLog(entries []Entry) Log {
	l := Log{entries: entries}
	for _, e := range entries {
		l.sum += e.N
	}
	return l
}

// Entries returns the live entries, oldest first. The slice aliases the
// log's array.
func (l *Log) Entries() []Entry { return l.entries[l.head:] }

// Expiry returns the time (Unix ns) from which the log holds nothing.
func (l *Log) Expiry(period time.Duration) int64 { return Expiry(l.Entries(), period) }

// Step applies req at now (Unix ns) and returns the decision. req must be
// valid.
//
// When time goes backwards, now is taken to be the newest entry's time:
// nothing leaves the window early.
func (l *Log) Step(now int64, req ratelimit.Request) ratelimit.Decision {
	lim := req.Limit.Normalize()
	d := ratelimit.Decision{Limit: lim}
	if lim.Rate == 0 {
		d.Allowed = req.N == 0
		d.Unsatisfiable = req.N > 0
		return d
	}
	w := int64(lim.Period)
	if n := len(l.entries); n > l.head && l.entries[n-1].At > now {
		now = l.entries[n-1].At
	}
	// Drop what has left the window (now−w, now]; nothing has when now−w
	// is before the first int64 nanosecond.
	for now >= math.MinInt64+w && l.head < len(l.entries) && l.entries[l.head].At <= now-w {
		l.sum -= l.entries[l.head].N
		l.head++
	}
	if l.head == len(l.entries) {
		l.entries, l.head = l.entries[:0], 0
	} else if l.head > len(l.entries)/2 {
		// Compact once half the array is dead: amortized O(1) a call.
		l.entries = l.entries[:copy(l.entries, l.entries[l.head:])]
		l.head = 0
	}
	live := l.entries[l.head:]
	d.Remaining = max(0, lim.Rate-l.sum)
	if len(live) > 0 {
		d.ResetAfter = time.Duration(live[len(live)-1].At + w - now)
	}
	switch {
	case req.N == 0:
		d.Allowed = true
		return d
	case req.N > lim.Rate:
		d.Unsatisfiable = true
		return d
	case req.N > lim.Rate-l.sum: // not sum+N: no overflow
		// Wait until enough of the oldest entries have left the window.
		over := req.N - (lim.Rate - l.sum)
		for _, e := range live {
			over -= e.N
			if over <= 0 {
				d.RetryAfter = time.Duration(e.At + w - now)
				break
			}
		}
		return d
	}
	if n := len(l.entries); n > l.head && l.entries[n-1].At == now {
		l.entries[n-1].N += req.N // same instant: one entry
	} else {
		l.entries = append(l.entries, Entry{At: now, N: req.N})
	}
	l.sum += req.N
	d.Allowed = true
	d.Remaining = lim.Rate - l.sum
	d.ResetAfter = time.Duration(w)
	return d
}

// Refund gives back n events at now: the entries that have left the
// window are dropped (as Step drops them), then the newest entries' costs
// are reduced, newest first, by n in all, never below an empty log. A
// refund does not know which entry charged the events; the newest is the
// likeliest. period is the limit's Period.
func (l *Log) Refund(now int64, period time.Duration, n int64) {
	if n <= 0 {
		return
	}
	l.Step(now, ratelimit.Request{Limit: ratelimit.Limit{Rate: 1, Period: period}}) // a peek: drops what has left
	for n > 0 && len(l.entries) > l.head {
		last := &l.entries[len(l.entries)-1]
		take := min(n, last.N)
		last.N -= take
		l.sum -= take
		n -= take
		if last.N == 0 {
			l.entries = l.entries[:len(l.entries)-1]
		}
	}
	if l.head == len(l.entries) {
		l.entries, l.head = l.entries[:0], 0
	}
}
