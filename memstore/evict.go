package memstore

import (
	"errors"
	"math"
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
)

// ErrFull is returned by Apply (and a bound limiter's Take) for a request
// that would add a key to a store that holds MaxKeys keys none of which it
// can forget cheaply: every key it looked at holds a denial or a used
// long-period quota (see Options.MaxKeys). The request is not decided; the
// caller's failure policy applies (fail open, fail closed, or a fallback
// limiter), as for any store failure. Keys the store holds are still
// decided as usual. Stats counts these refusals.
var ErrFull = errors.New("memstore: full of state it cannot forget")

// Stats are a store's counters, for metrics. Evictions and Refusals only
// grow.
type Stats struct {
	Keys      int    // keys held now
	MaxKeys   int    // the bound on Keys (Options.MaxKeys after rounding); 0 when unbounded
	Evictions uint64 // keys dropped to make room before their state had decayed
	Refusals  uint64 // new keys refused with ErrFull

	// The journal's (OpenJournal), zero without one.
	JournalRecords uint64 // records buffered to be written
	JournalDropped uint64 // records dropped: the buffer was full (JournalOptions.MaxBuffer)
	JournalErrors  uint64 // writes or syncs that failed (their records lost)
}

// Stats returns the store's counters. It takes each shard's lock in turn,
// so it costs about as much as Len.
func (s *Store) Stats() Stats {
	st := Stats{}
	if s.perShard > 0 {
		st.MaxKeys = s.perShard * len(s.shards)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += sh.len()
		st.Evictions += sh.evictions
		st.Refusals += sh.refusals
		sh.mu.Unlock()
	}
	if j := s.jr.Load(); j != nil {
		st.JournalRecords, st.JournalDropped, st.JournalErrors = j.records.Load(), j.dropped.Load(), j.errs.Load()
	}
	return st
}

// What forgetting a key costs. A key whose state has decayed costs nothing:
// it is the same as an absent key. Otherwise forgetting it hands back what
// it has used, as a share of its limit (frac), so a flood of fresh
// identities, each of which has used one request's worth, is the cheapest
// state there is. Two kinds of state are too valuable to forget while the
// store has room to refuse instead:
//
//   - a denial: a key that would deny a request of cost 1 now (an exhausted
//     bucket, a full window), since forgetting it lifts a limit someone is
//     over;
//   - a used long-period quota: a key whose state lasts longPeriod or more
//     (a bucket whose Burst·Period/Rate does, a window of that Period) and
//     has used at least longUsed of its limit, since its caller would get
//     that much again for the rest of the period (a day, a month).
//
// Below longUsed, a long-period key is ranked by its share like any other:
// an attacker who mints identities with one request each must not fill
// the store with state it may never forget for a month, which would leave
// every new caller of that month to the failure policy.
const (
	longPeriod = time.Hour
	longUsed   = 0.25
)

const (
	costFree     = 0 // decayed: the same as absent
	costCheap    = 1
	costValuable = 2 // a denial, or a used long-period quota
)

type cost struct {
	class int8
	frac  float64 // share of the limit used
	left  int64   // ns until the state is back to full
}

// less orders costs: class, then share used, then the sooner back to full.
func (c cost) less(d cost) bool {
	if c.class != d.class {
		return c.class < d.class
	}
	if c.frac != d.frac {
		return c.frac < d.frac
	}
	return c.left < d.left
}

// classify sets c's class from its share, whether the key denies a request
// of cost 1 now, and the length of its period.
func classify(frac float64, left int64, denies bool, period float64) cost {
	c := cost{class: costCheap, frac: frac, left: left}
	if denies || (period >= float64(longPeriod) && frac >= longUsed) {
		c.class = costValuable
	}
	return c
}

// tatLimit is a GCRA key's limit packed into 32 bits for eviction: the
// tolerance τ = Burst·Period/Rate (ns) and Burst, each as a 16-bit
// floating-point number (6-bit exponent, 10-bit mantissa) rounded down, so
// that the share used, left/τ, and the test for a denial, left > τ − τ/Burst,
// err towards keeping a key. The zero tatLimit is unknown.
type tatLimit uint32

func packTATLimit(tau, burst int64) tatLimit {
	return tatLimit(f16(uint64(max(tau, 1))))<<16 | tatLimit(f16(uint64(max(burst, 1))))
}

func (l tatLimit) unpack() (tau, burst float64) {
	return unf16(uint16(l >> 16)), unf16(uint16(l))
}

// valid reports whether l could have been packed (from a snapshot).
func (l tatLimit) valid() bool { return f16ok(uint16(l>>16)) && f16ok(uint16(l)) }

// winLimit is a window key's Rate as an f16 rounded down (so the share
// used comes out higher, erring towards keeping the key), shifted left by
// one, with bit 0 set for the sliding window counter: 17 bits.
type winLimit uint32

func packWinLimit(rate int64, sliding bool) winLimit {
	l := winLimit(f16(uint64(max(rate, 1)))) << 1
	if sliding {
		l |= 1
	}
	return l
}

func (l winLimit) rate() float64 { return unf16(uint16(l >> 1)) }
func (l winLimit) sliding() bool { return l&1 != 0 }
func (l winLimit) valid() bool   { return l>>17 == 0 && f16ok(uint16(l>>1)) }

// f16 encodes x ≥ 1 in 16 bits, rounded down: the exponent of its highest
// bit and the 10 bits after it. It is never 0.
func f16(x uint64) uint16 {
	e := bits.Len64(x) - 1
	var m uint64
	if e >= 10 {
		m = x >> (e - 10)
	} else {
		m = x << (10 - e)
	}
	return uint16(e+1)<<10 | uint16(m&1023)
}

// unf16 decodes f16: 1.m·2^e, built as a float64's bits.
func unf16(v uint16) float64 {
	e, m := uint64(v>>10)-1, uint64(v&1023)
	return math.Float64frombits((e+1023)<<52 | m<<42)
}

// f16ok reports whether v is an f16 of a value from 1 to 2^53.
func f16ok(v uint16) bool { return v>>10 >= 1 && v>>10 <= 54 }

// tatCost is what forgetting a GCRA key with state tat costs at now.
func tatCost(tat, now int64, lim tatLimit) cost {
	if tat <= now {
		return cost{}
	}
	left := span(tat, now)
	if lim == 0 {
		// The limit is unknown: keep the key until it decays.
		return cost{class: costValuable, frac: 1, left: left}
	}
	tau, burst := lim.unpack()
	frac := float64(left) / tau
	// A request of cost 1 is denied when left + τ/Burst > τ. The period
	// compared with longPeriod is τ rounded up.
	return classify(frac, left, frac > 1-1/burst, tau*(1+1.0/1024))
}

// winCost is what forgetting a window key costs at now: its state st,
// limit lim and period w (ns).
func winCost(st window.State, lim winLimit, w, now int64) cost {
	exp := st.Expiry(lim.sliding(), time.Duration(w))
	if exp <= now {
		return cost{}
	}
	left := span(exp, now)
	rate, used := lim.rate(), float64(st.Curr)
	if lim.sliding() {
		prev, curr, elapsed := st.Prev, st.Curr, int64(0)
		if now > st.Start {
			// now < exp ≤ Start+2w: in the current window or the next,
			// where curr becomes prev.
			if elapsed = span(now, st.Start); elapsed >= w {
				prev, curr, elapsed = curr, 0, elapsed-w
			}
		}
		used = float64(prev)*float64(w-elapsed)/float64(w) + float64(curr)
	}
	return classify(used/rate, left, used+1 > rate, float64(w))
}

// logCost is what forgetting a sliding-log key costs at now: its entries,
// oldest first, its count used at its last request, its limit lim and
// period (ns). Its count is used less the entries that have left the
// window since (up to a few dozen looked at): an upper bound.
func logCost(entries []slidinglog.Entry, used int64, lim winLimit, period, now int64) cost {
	exp := slidinglog.Expiry(entries, time.Duration(period))
	if exp <= now {
		return cost{}
	}
	for i, x := range entries {
		if i == 64 || x.At >= now || span(now, x.At) < period {
			break
		}
		used -= x.N
	}
	rate := lim.rate()
	return classify(float64(used)/rate, span(exp, now), float64(used)+1 > rate, float64(period))
}

// span returns a − b for a ≥ b, or math.MaxInt64 when that does not fit.
func span(a, b int64) int64 {
	if d := a - b; d >= 0 {
		return d
	}
	return math.MaxInt64
}

// evictSample is how many keys makeRoom compares when none it meets has
// decayed, each kind (bucket, window, log) by its share of the shard, and
// evictScan how many of each kind it looks at before it refuses a new key
// because every one held valuable state.
const (
	evictSample = 16
	evictScan   = 64
)

// makeRoom ensures sh can take one more key, h, and reports whether it
// can. When sh is full it drops the key that costs least to forget (see
// cost): a decayed one if it meets one (which changes no decision), else
// the cheapest of a sample across the kinds of key, which under a flood of
// fresh identities is one of theirs. If every key it looked at is
// valuable (a denial or a used long-period quota) it looks further, and if
// still nothing is cheap it drops nothing and reports false: the new key
// is refused. Called with sh.mu held.
func (s *Store) makeRoom(sh *shard, h uint64, now int64) bool {
	if s.perShard <= 0 || sh.len() < s.perShard {
		return true
	}
	const (
		kindTAT = iota
		kindWin
		kindLog
	)
	var (
		best     cost
		found    bool
		kind     int
		slot     *tatSlot
		idx      int  // the window or log key's slot
		finished bool // a decayed key was found
	)
	// Each kind's share of the sample is its share of the keys (at least
	// one key of a kind held), so the sample costs the same whatever the
	// mix; a kind's scan goes on to evictScan keys while the best so far
	// is valuable. Each kind's scan starts at a slot chosen by h, so
	// successive evictions look at different keys.
	total := sh.len()
	seen, quota := 0, 0
	scan := func(n int) { seen, quota = 0, (evictSample*n+total-1)/total }
	// next weighs one key of the scan and reports whether to go on.
	next := func(c cost, k int, e *tatSlot, i int) bool {
		if !found || c.less(best) {
			best, found, kind, slot, idx = c, true, k, e, i
			finished = c.class == costFree
		}
		seen++
		return !finished && seen < evictScan && (seen < quota || best.class >= costValuable)
	}
	scan(sh.tat.n)
	sh.tat.all(h>>20, func(e *tatSlot, k uint64, lim tatLimit) bool {
		return next(tatCost(e.tat.Load(), now, lim), kindTAT, e, 0)
	})
	if !finished {
		scan(sh.win.len())
		t := &sh.win
		t.all(h>>24, func(i int) bool {
			return next(winCost(t.window(i), t.limit(i), t.period(i, &s.periods), now), kindWin, nil, i)
		})
	}
	if !finished {
		scan(sh.logs.len())
		t := &sh.logs
		t.all(h>>28, func(i int) bool {
			var buf [1]slidinglog.Entry
			entries, used := t.logEntries(i, &buf)
			return next(logCost(entries, used, t.limit(i), t.period(i, &s.periods), now), kindLog, nil, i)
		})
	}
	if !found || best.class == costValuable {
		sh.refusals++
		return false
	}
	if best.class != costFree {
		sh.evictions++
	}
	switch kind {
	case kindTAT:
		sh.tat.remove(slot)
	case kindWin:
		sh.win.remove(idx)
	case kindLog:
		sh.logs.remove(idx)
	}
	return true
}
