package hostlimit

import (
	"math"
	"time"
)

// Budget is what a host's server announced about a client's allowance:
// the RateLimit or X-RateLimit-* fields of an answer (package httpclient
// reads them).
type Budget struct {
	Remaining int64         // requests the server will still take before Reset
	Reset     time.Duration // until the allowance is back (the window's end, or the bucket full)
	Limit     int64         // the policy's quota; 0 if not announced
	Window    time.Duration // the policy's window; 0 if not announced
	// Resource names the budget, when the server keeps several (GitHub's
	// X-RateLimit-Resource, an IETF policy's name); "" is the host's
	// unnamed budget.
	Resource string
	// MaxInFlight, when positive, is the most requests at once the host
	// takes, whatever its budgets hold: GitHub's guide asks for one at a
	// time (its secondary limits, which nothing announces, refuse
	// requests at once long before the budget is spent). The host keeps
	// the latest one.
	MaxInFlight int
}

// bucket reports whether b reads as a token bucket rather than a window:
// its Reset is the time the missing requests take to come back at
// Limit/Window, as a bucket's "until full" is, give or take the rounding
// to seconds and one interval. A window read as a bucket would be
// overspent (its requests are sent now, and its refill would start
// before the reset), so the reading needs the first refill to come no
// sooner than the reset (one missing request, or a slow refill), or a
// host already read as the same bucket (prev). Otherwise it is a window,
// which is safe for a bucket too: what it holds is sent, and the rest
// after the reset.
func (b Budget) bucket(prev *announced) bool {
	if b.Limit <= 0 || b.Window <= 0 || b.Remaining > b.Limit || b.Remaining <= 0 && prev.rate == 0 {
		return false
	}
	interval := b.Window / time.Duration(b.Limit)
	full := time.Duration(b.Limit-b.Remaining) * interval
	slack := interval
	if b.Reset%time.Second == 0 {
		slack += time.Second // rounded up to whole seconds
	}
	if b.Reset < full-slack || b.Reset > full+slack {
		return false
	}
	same := prev.rate > 0 && prev.size == float64(b.Limit) && math.Abs(prev.rate-float64(b.Limit)/b.Window.Seconds()) < 1e-9
	return same || interval >= b.Reset
}

// announced is a host's model of the server's budget: the requests it
// will take now (level at at, less those sent since), and how that grows
// (a token bucket's refill, or a window's reset).
type announced struct {
	until time.Time // the model holds until then; zero: no model
	seq   int64     // the permit whose answer set it (-1: unknown)
	// first is the first permit the model speaks of: an answer to an
	// earlier one is of an earlier window (or bucket state).
	first int64
	level float64 // requests the server takes at at, less those sent since
	at    time.Time
	// A token bucket refills at rate (per second) up to size; a window
	// (rate 0) has its quota back at reset.
	rate  float64
	size  float64
	reset time.Time
	// The window's reset, rounded up to whole seconds by the server, is
	// somewhere in (lo, hi]: each answer narrows it.
	lo, hi time.Time
	// rmin is the fewest requests an answer said remain, at rminAt (and
	// refilled since, for a bucket): an answer saying more is older.
	rmin   float64
	rminAt time.Time
	// refilling: spending a bucket, the host waits for it to be full.
	refilling bool
	probing   bool // a window's reset passed: one request asks for the new quota
	aligned   bool // reset is the window's guessed alignment, before hi
}

// misaligned reports whether a refusal of a request sent at start says
// the window is not aligned as guessed: it went after the guessed reset
// and before the latest one.
func (a *announced) misaligned(start time.Time) bool {
	return a.aligned && !start.Before(a.reset) && start.Before(a.hi)
}

func (a *announced) active(now time.Time) bool { return now.Before(a.until) }

// tokens is the level at now.
func (a *announced) tokens(now time.Time) float64 {
	if a.rate <= 0 {
		return a.level
	}
	return min(a.size, a.level+a.rate*now.Sub(a.at).Seconds())
}

// wait is how long a request must wait for the announced budget at now
// (0: it may go). mode is the Limiter's.
func (a *announced) wait(now time.Time, mode BudgetMode, next uint64) time.Duration {
	if !a.active(now) {
		return 0
	}
	tk := a.tokens(now)
	if a.rate > 0 {
		if mode == BudgetSpend {
			if !a.refilling && tk < 1 {
				a.refilling = true
			}
			if a.refilling {
				if tk < a.size-1e-9 {
					return durationOf((a.size - tk) / a.rate)
				}
				a.refilling = false
			}
		}
		if tk >= 1 {
			return 0
		}
		// The margin covers a server whose clock lags; the refill during
		// it counts in take, so it does not add up from one request to
		// the next.
		return durationOf((1-tk)/a.rate) + min(firstAlignMargin, durationOf(0.05/a.rate))
	}
	if now.Before(a.reset) {
		if tk >= 1 {
			return 0
		}
		return a.reset.Sub(now)
	}
	if !a.probing {
		// The window is over: one request finds out the new quota; the
		// others wait for its answer (or for the model to lapse).
		a.probing, a.level, a.at, a.first = true, 1, now, int64(next)
		a.until = now.Add(max(a.reset.Sub(a.lo), time.Second))
	}
	if a.level >= 1 {
		return 0
	}
	return a.until.Sub(now)
}

func durationOf(s float64) time.Duration {
	return max(time.Duration(math.Ceil(s*float64(time.Second))), time.Microsecond)
}

// take counts a request sent at now.
func (a *announced) take(now time.Time) {
	if !a.active(now) {
		return
	}
	a.level = a.tokens(now) - 1
	a.at = now
}

// apply sets the model from b, announced at now for the answer to permit
// seq (-1: unknown), with unseen requests sent that b may not count; rtt
// is how long that answer took (0: unknown).
func (a *announced) apply(b Budget, now time.Time, seq, unseen int64, margin, rtt time.Duration) {
	avail := float64(b.Remaining - unseen)
	live := a.active(now)
	if live && seq >= 0 && seq < a.first {
		return // sent before what the model speaks of: stale
	}
	prev := a
	if !live {
		prev = &announced{}
	}
	if b.bucket(prev) {
		rate := float64(b.Limit) / b.Window.Seconds()
		if live && a.rate == rate && a.size == float64(b.Limit) {
			// The same bucket: each answer bounds what it holds.
			if a.stale(b.Remaining, now) {
				return
			}
			a.level, a.at = bound(a.tokens(now), avail), now
			a.seq, a.until = max(a.seq, seq), later(a.until, now.Add(b.Reset+b.Window))
			return
		}
		if live && seq >= 0 && seq < a.seq {
			return // older than the model: stale
		}
		*a = announced{until: now.Add(b.Reset + b.Window), seq: seq, first: seq, level: avail, at: now, rmin: float64(b.Remaining), rminAt: now,
			rate: rate, size: float64(b.Limit), refilling: a.refilling && a.rate > 0}
		return
	}
	lo, hi := resetBounds(b.Reset, now, rtt)
	if live && a.rate == 0 && !a.probing && a.hi.After(lo) && hi.After(a.lo) {
		// The same window: each answer bounds what remains, and narrows
		// where the reset is.
		if a.stale(b.Remaining, now) {
			return
		}
		a.lo, a.hi = later(lo, a.lo), earlier(hi, a.hi)
		a.level, a.at, a.seq = bound(a.level, avail), now, max(a.seq, seq)
	} else if live && seq >= 0 && seq < a.seq {
		return // an older window's answer
	} else {
		*a = announced{seq: seq, first: seq, level: avail, at: now, lo: lo, hi: hi, rmin: float64(b.Remaining), rminAt: now}
	}
	a.reset, a.aligned = a.hi, false
	if w := b.Window; margin > 0 && w >= 2*time.Second && w%time.Second == 0 && a.hi.Sub(a.lo) > 0 {
		// A fixed window aligned to the Unix epoch (sluice's and
		// envoyproxy/ratelimit's are) resets at a multiple of its length:
		// if one is where the reset can be, it is the reset, up to a
		// second sooner than the rounded-up one. A window of a second
		// has a multiple in every second, which says nothing, so its
		// rounded-up reset is waited for.
		// The margin covers a server whose clock lags (a cached clock,
		// a loaded machine).
		m := time.Unix(0, (a.lo.UnixNano()/int64(w)+1)*int64(w))
		if !m.After(a.hi) {
			a.reset, a.aligned = earlier(m.Add(margin), a.hi), true
		}
	}
	a.until = a.hi.Add(time.Second)
}

// resetBounds is where the reset of a window announced at now to be reset
// away is: in (lo, hi]. A reset rounded to whole seconds (a delay in
// seconds, a Unix time in seconds as GitHub's) is up to a second sooner;
// an exact one (a Unix time in milliseconds) was said up to rtt ago, or
// is hi itself. Answers of one window say different delays to one reset,
// and each interval holds it, so those of one window overlap.
func resetBounds(reset time.Duration, now time.Time, rtt time.Duration) (lo, hi time.Time) {
	hi = now.Add(reset)
	if reset >= time.Second && (reset%time.Second == 0 || hi.Nanosecond() == 0) {
		return hi.Add(-time.Second), hi
	}
	return hi.Add(-max(rtt, time.Nanosecond)), hi
}

// stale reports whether an answer saying remaining at now is older news
// than the fewest yet (the server counted fewer requests when it wrote
// it); if not, it is the fewest.
func (a *announced) stale(remaining int64, now time.Time) bool {
	least := a.rmin
	if a.rate > 0 {
		least = min(a.size, least+a.rate*now.Sub(a.rminAt).Seconds())
	}
	if float64(remaining) > least+1e-9 {
		return true
	}
	a.rmin, a.rminAt = float64(remaining), now
	return false
}

// bound is what an answer that says avail remain leaves of level: each
// is the fewest requests the server can have left (avail counts every
// request the answer may not, level every request sent since an earlier
// answer), so the larger holds.
func bound(level, avail float64) float64 { return max(level, avail) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Announce tells the Limiter what host's server announced at now about
// its budget (the one named b.Resource, see AcquireRoute), so that the host spends what the server will take and then
// goes at the pace the budget comes back:
//
//   - a window (Remaining requests until Reset, then a fresh quota): what
//     remains, less what the requests already sent will use, is sent as
//     fast as the concurrency allows; then the host waits for the reset,
//     and one request asks for the new quota;
//   - a token bucket (its Reset is how long the missing requests take to
//     come back at Limit per Window): what it holds is sent at once, and
//     then requests go at Limit/Window, the rate the server refills at
//     (BudgetPace), or wait for the bucket to be full again (BudgetSpend).
//
// No more than the server said it will take is sent: the requests in
// flight are counted. A Reset of 0 or less says nothing and is ignored.
//
// Limiter.Announce cannot tell which requests in flight the server had
// counted, and assumes none; Permit.Announce, for the answer to that
// permit's request, assumes those sent before it were.
func (l *Limiter) Announce(host string, b Budget, now time.Time) {
	if b.Reset <= 0 {
		return
	}
	h := l.host(host, now)
	h.mu.Lock()
	defer h.mu.Unlock()
	l.announce(h, h.budgetFor(b.Resource, now), b, now, -1, 0, 0)
}

// Announce is Limiter.Announce for the answer to p's request: the server
// counted it and, in all likelihood, the requests sent before it, so only
// those sent after it may be missing from Remaining. Call it before Done.
//
// The answer names the budget that counted the request (b.Resource, ""
// for none): it is applied to that budget of the host, and the permit's
// route is paced by it from now on (see AcquireRoute).
func (p *Permit) Announce(b Budget, now time.Time) {
	if b.Reset <= 0 {
		return
	}
	h := p.h
	h.mu.Lock()
	defer h.mu.Unlock()
	bu := h.budgetFor(b.Resource, now)
	h.learnRoute(p.route, bu)
	p.answered = bu
	if bu == p.b {
		p.l.announce(h, bu, b, now, int64(p.seq), 0, now.Sub(p.start))
		return
	}
	// Paced by another budget (its route was not known to count against
	// bu): its place in bu is unknown, and the others in flight that p's
	// budget paced may count against bu too.
	p.l.announce(h, bu, b, now, -1, max(p.b.sent-1, 0)+1, now.Sub(p.start))
}

// announce applies b to bu, a budget of h. seq is bu's permit the answer
// is for, or -1 when unknown; others are requests in flight, paced by
// another budget, that may count against bu; rtt is the time the answer
// took (0: unknown). h.mu is held.
func (l *Limiter) announce(h *host, bu *budget, b Budget, now time.Time, seq int64, others int, rtt time.Duration) {
	// Requests that may be missing from Remaining: all those sent after
	// it, and those sent before it still in flight (the server counts in
	// its own order). Unknown which, all the others in flight.
	h.announced.Store(true)
	if b.MaxInFlight > 0 {
		h.askedCap = b.MaxInFlight
	}
	unseen := int64(max(bu.sent+others-1, 0))
	if seq >= 0 {
		unseen = int64(bu.seq) - seq
		for _, s := range bu.live {
			if int64(s) < seq {
				unseen++
			}
		}
	}
	bu.ann.apply(b, now, seq, unseen, bu.alignMargin(), rtt)
	close(h.annWake)
	h.annWake = make(chan struct{})
}

// Margins after a window's guessed reset: the first, and the most before
// the guess is given up for the rounded-up reset. Each refusal after the
// guess doubles the margin.
const (
	firstAlignMargin = 50 * time.Millisecond
	maxAlignMargin   = 800 * time.Millisecond
)

// alignMargin is the time b's requests wait after a window's guessed
// reset; 0 when the guess is given up. The host's mu is held.
func (b *budget) alignMargin() time.Duration {
	switch {
	case b.margin == 0:
		return firstAlignMargin
	case b.margin > maxAlignMargin:
		return 0
	}
	return b.margin
}

// pace is the rate the model lets requests go at from now, for Hosts: a
// bucket's refill, or what a window holds over the time to its reset.
func (a *announced) pace(now time.Time) float64 {
	if a.rate > 0 {
		return a.rate
	}
	return max(a.level, 0) / max(a.reset.Sub(now).Seconds(), 1e-3)
}

// spentFor is how long a window's model holds its requests back at now:
// until its reset when it has none to spare, else 0 (a bucket's next
// refill is the wait of one request, never long).
func (a *announced) spentFor(now time.Time) time.Duration {
	if !a.active(now) || a.rate > 0 || !now.Before(a.reset) || a.tokens(now) >= 1 {
		return 0
	}
	return a.reset.Sub(now)
}

// BudgetWait returns how long a request on route to host would wait for
// the announced budget that paces it (see AcquireRoute): a spent
// window's reset, 0 if it may go or none holds it. A caller that will not
// wait that long fails the request at once, as for PauseLeft.
func (l *Limiter) BudgetWait(host, route string) time.Duration {
	l.mu.Lock()
	h := l.hosts[host]
	l.mu.Unlock()
	if h == nil || !h.announced.Load() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	return h.routeBudget(route, now).ann.spentFor(now)
}
