package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/tick"
	"github.com/sluicehq/sluice/ratelimit"
)

// Defaults of PrefetchOptions.
const (
	DefaultPrefetchTTL       = 100 * time.Millisecond
	DefaultPrefetchInstances = 10
	DefaultPrefetchMaxShare  = 0.01
	DefaultPrefetchMinSlice  = 8
	DefaultPrefetchMaxKeys   = 1 << 14
)

// PrefetchOptions configures prefetch mode (NewPrefetch). The zero value is a
// good default: slices live 100 ms, and the limit is over-admitted by at
// most 1% with up to 10 instances.
type PrefetchOptions struct {
	// TTL is how long an instance may spend a slice it took: what it has
	// not spent then goes back to Redis. It is also the horizon of the
	// slice's size: a slice holds what the key was seen to need in TTL.
	// Default 100 ms.
	TTL time.Duration
	// Instances and MaxShare size the largest slice: MaxShare of the
	// key's capacity (Limit.Capacity: Burst for the buckets, Rate for the
	// fixed window) divided among Instances, rounded down. Over-admission
	// is at most (instances actually running) × that slice, so with the
	// defaults (10 instances, 0.01) it is at most 1% of the capacity as
	// long as at most 10 instances share the key. Defaults 10 and 0.01.
	Instances int
	MaxShare  float64
	// MinSlice is the smallest slice worth prefetching. A key stays exact (one
	// Redis call a decision, as Store.Apply) when its largest slice is
	// below MinSlice (a small limit), or when this instance saw fewer than
	// MinSlice events of it in the last TTL (a cold key). Default 8.
	MinSlice int64
	// MaxKeys bounds the keys whose rate and slice an instance tracks
	// (about 500 bytes each, measured, besides the key; only keys whose
	// limit is large enough to slice are tracked); past it, new keys are
	// decided exactly until keys idle for 10 TTLs are dropped. Default
	// 16384.
	MaxKeys int
	// ExactOthers sends requests under the algorithms prefetch mode does
	// not decide (LeakyBucket, SlidingWindowCounter, SlidingWindowLog) to
	// the Store, decided exactly, instead of refusing them: for servers
	// whose rules mix algorithms on one store.
	ExactOthers bool
	// Now replaces the local clock (the store's Options.Now when nil, else
	// time.Now). Slices expire on it.
	Now func() time.Time
}

// PrefetchStats are a Prefetch store's counters since it was made.
type PrefetchStats struct {
	// Local is the number of decisions made from a slice in hand (or from
	// a remembered denial), Exact the number sent to Redis one by one.
	Local, Exact uint64
	// Takes is the number of slices taken, Returns the number given back
	// (partly unused), and Returned the events they gave back.
	Takes, Returns, Returned uint64
	// Keys is the number of keys tracked now.
	Keys int64
}

// Prefetch is prefetch mode over a Store: for a hot key, an instance takes a
// slice of the key's budget from Redis in one script call (the exact
// script, charged with the slice's cost), decides locally from it, and
// gives back what it did not spend (a refund) when the slice expires,
// when the key's limit changes, and on Close. Slices are sized from the
// key's observed rate in this instance (what it needed in the last
// PrefetchOptions.TTL), capped by PrefetchOptions.Instances and MaxShare; cold
// keys and small limits are decided exactly, one Redis call each, as
// Store.Apply decides them.
//
// It decides the algorithms ratelimit.Algorithm.Prefetchable allows (the
// one rule, which the rules parser and Set.Bind apply too): GCRA,
// TokenBucket and FixedWindow. LeakyBucket (its Delay is a place in a
// queue that only the shared state knows), SlidingWindowCounter and
// SlidingWindowLog (the estimate and the log depend on when each event
// happened, which a slice taken ahead of time does not record) are
// refused with Prefetchable's error (wrapping ratelimit.ErrInvalidRequest),
// or, with PrefetchOptions.ExactOthers, decided exactly by the Store.
// Peeks (N 0) and refunds go to Redis.
//
// # Bound on over-admission
//
// Let s be the largest slice, ⌊MaxShare·capacity/Instances⌋, and n the
// number of instances sharing a key. Each instance holds at most one slice
// of a key at a time (a take holds the key's lock in the instance), and
// every event it admits locally was charged to Redis when the slice was
// taken. So over any interval [a, b], the events admitted are at most the
// events Redis charged in [a, b] (which the exact algorithm bounds) plus
// the unspent slices held at a: the over-admission is at most n·s, with
// the defaults 1% of the capacity for n ≤ 10. Events given back were never
// admitted, so over a whole run the total admitted never exceeds what
// exact mode would admit. For the fixed window the over-admission is 0: a
// slice is charged to one window and expires, on the instance's clock,
// no later than that window ends (the instance dates the window's end from
// before the call, so a slow reply only shortens it); a slice is given
// back only while its window has more than the store's Timeout left, so
// that the refund does not land in the next window. (A refund Redis runs
// more than Timeout after it was sent could; the batcher never sends a
// call past its deadline.)
//
// What a slice changes besides: Remaining in a local decision is the
// slice's rest plus the key's Remaining in Redis when the slice was taken;
// other instances may hold part of the budget, so an instance can be
// denied (with an honest RetryAfter from Redis, remembered locally for
// that long) while another still spends its slice. Under-admission is
// bounded the same way, by n·s.
//
// A Prefetch is safe for concurrent use. Close gives back the slices; it
// does not close the Store.
type Prefetch struct {
	s      *Store
	opts   PrefetchOptions
	now    func() int64
	keys   sync.Map // prefetchKey -> *prefetchEntry
	nkeys  atomic.Int64
	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
	// The sweeper runs only while the table holds keys: the first key
	// starts it, and it returns once a sweep leaves the table empty (so an
	// instance with nothing prefetched wakes no one).
	swMu     sync.Mutex
	sweeping bool

	local, exact, takes, returns, returned atomic.Uint64
}

type prefetchKey struct {
	key    string
	window bool // FixedWindow; else the bucket (GCRA, TokenBucket share a TAT)
}

// prefetchEntry is an instance's view of one key: its slice and its rate.
type prefetchEntry struct {
	mu   sync.Mutex
	name string // the key
	lim  ratelimit.Limit
	alg  ratelimit.Algorithm

	left      int64 // events of the slice not yet spent
	expires   int64 // local ns: the slice may be spent before this
	windowEnd int64 // FixedWindow: local ns at which the slice's window ends at the latest
	remaining int64 // the key's Remaining in Redis at the last reply
	seenAt    int64 // local ns: when that reply came (0: none yet)
	resetAt   int64 // local ns: the key's ResetAfter in Redis when the slice was taken

	obsStart, obsN int64 // events this instance saw since obsStart
	perTTL         int64 // events seen in the last full TTL

	promised  bool  // a bucket denied until a slice refills: the next take takes what there is
	denyUntil int64 // local ns: requests costing at least denyN are denied until then
	denyN     int64
	denied    ratelimit.Decision

	lastUse int64
	dead    bool // dropped from the table: look it up again
}

// NewPrefetch returns prefetch mode over s. s must outlive it; close the
// Prefetch first.
func NewPrefetch(s *Store, o PrefetchOptions) (*Prefetch, error) {
	if o.TTL < 0 || o.Instances < 0 || o.MaxShare < 0 || o.MaxShare > 1 || o.MinSlice < 0 || o.MaxKeys < 0 {
		return nil, fmt.Errorf("redisstore: prefetch options: negative value or MaxShare above 1: %+v", o)
	}
	o.TTL = cmp.Or(o.TTL, DefaultPrefetchTTL)
	o.Instances = cmp.Or(o.Instances, DefaultPrefetchInstances)
	o.MaxShare = cmp.Or(o.MaxShare, DefaultPrefetchMaxShare)
	o.MinSlice = cmp.Or(o.MinSlice, DefaultPrefetchMinSlice)
	o.MaxKeys = cmp.Or(o.MaxKeys, DefaultPrefetchMaxKeys)
	if o.Now == nil {
		o.Now = s.opts.Now
	}
	l := &Prefetch{s: s, opts: o, stop: make(chan struct{})}
	if o.Now != nil {
		l.now = func() int64 { return o.Now().UnixNano() }
	} else {
		epoch := time.Now()
		l.now = func() int64 { return epoch.UnixNano() + int64(time.Since(epoch)) } // monotonic
	}
	return l, nil
}

// MaxSlice returns the largest slice of a key with limit lim under
// algorithm a: ⌊MaxShare·capacity/Instances⌋. The bound on
// over-admission is the number of instances times it. A key whose
// largest slice is below MinSlice is always decided exactly.
func (l *Prefetch) MaxSlice(a ratelimit.Algorithm, lim ratelimit.Limit) int64 {
	c := float64(lim.Capacity(a))
	return int64(c * l.opts.MaxShare / float64(l.opts.Instances))
}

// Stats returns the counters.
func (l *Prefetch) Stats() PrefetchStats {
	return PrefetchStats{Local: l.local.Load(), Exact: l.exact.Load(), Takes: l.takes.Load(),
		Returns: l.returns.Load(), Returned: l.returned.Load(), Keys: l.nkeys.Load()}
}

// Store returns the store l takes its slices from.
func (l *Prefetch) Store() *Store { return l.s }

// Apply decides req: from the key's slice when there is one, else by
// taking one (a hot key), else exactly in Redis (a cold key, a small
// limit, a peek, a refund). Errors and the failure policy are Store.Apply's.
func (l *Prefetch) Apply(ctx context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	if err := req.Algorithm.Prefetchable(); err != nil {
		if l.opts.ExactOthers {
			l.exact.Add(1)
			return l.s.Apply(ctx, req)
		}
		return ratelimit.Decision{}, err
	}
	if l.closed.Load() {
		return ratelimit.Decision{}, ratelimit.ErrClosed
	}
	lim := req.Limit.Normalize()
	smax := l.MaxSlice(req.Algorithm, lim)
	if req.N == 0 || req.Refund || lim.Rate == 0 || smax < l.opts.MinSlice || req.N > smax {
		l.exact.Add(1)
		return l.s.Apply(ctx, req)
	}
	e := l.entry(prefetchKey{req.Key, req.Algorithm == ratelimit.FixedWindow})
	if e == nil { // the table is full
		l.exact.Add(1)
		return l.s.Apply(ctx, req)
	}
	e.mu.Lock()
	if e.dead {
		e.mu.Unlock()
		l.exact.Add(1)
		return l.s.Apply(ctx, req)
	}
	// The clock is read with the key held: a slice's expiry is dated from
	// no earlier than its take, and a spend from no later than itself.
	now := l.now()
	if e.lim != lim || e.alg != req.Algorithm {
		l.giveBack(e, now)
		e.lim, e.alg = lim, req.Algorithm
		e.denyUntil, e.obsStart, e.obsN, e.perTTL, e.seenAt, e.promised = 0, now, 0, 0, 0, false
	}
	e.lastUse = now
	// The observed rate: events seen in the last full TTL, or more if this
	// TTL has seen more already.
	if now-e.obsStart >= int64(l.opts.TTL) {
		e.perTTL = int64(float64(e.obsN) * float64(l.opts.TTL) / float64(max(1, now-e.obsStart)))
		e.obsStart, e.obsN = now, 0
	}
	e.obsN = min(e.obsN+req.N, ratelimit.MaxRate) // N ≤ MaxRate: no overflow

	if d, ok := e.inHand(req, lim, now); ok {
		e.mu.Unlock()
		l.local.Add(1)
		return d, nil
	}
	want := min(max(e.perTTL, e.obsN), smax)
	if want < l.opts.MinSlice {
		// Cold: exact, without holding the key.
		if e.left > 0 && now >= e.expires {
			l.giveBack(e, now)
		}
		e.mu.Unlock()
		l.exact.Add(1)
		return l.s.Apply(ctx, req)
	}
	defer e.mu.Unlock()
	// Hot: give back what is left (too little, or expired), take a slice.
	l.giveBack(e, now)
	if req.Algorithm != ratelimit.FixedWindow && e.seenAt != 0 {
		var d ratelimit.Decision
		var wait bool
		if want, d, wait = l.bucketWant(e, req, lim, want, now); wait {
			l.local.Add(1)
			return d, nil
		}
	}
	return l.take(ctx, e, req, lim, max(want, req.N), now)
}

// inHand decides req from e's slice, or from e's remembered denial; ok
// false when neither decides it. e is locked.
func (e *prefetchEntry) inHand(req ratelimit.Request, lim ratelimit.Limit, now int64) (ratelimit.Decision, bool) {
	if e.left >= req.N && now < e.expires {
		e.left -= req.N
		return ratelimit.Decision{Allowed: true, Limit: lim, Remaining: e.left + e.remaining, ResetAfter: time.Duration(max(0, e.resetAt-now))}, true
	}
	if now < e.denyUntil && req.N >= e.denyN {
		d := e.denied
		d.RetryAfter = time.Duration(e.denyUntil - now)
		d.ResetAfter = max(d.RetryAfter, time.Duration(e.resetAt-now))
		return d, true
	}
	return ratelimit.Decision{}, false
}

// bucketWant sizes the slice of a bucket at its limit: what Redis has
// now, as far as this instance knows (what it had at the last reply, plus
// the refill since; others may have taken some, or given some back).
// Less than a whole slice: wait for it without asking (wait true, with
// the denial) when it refills within a TTL (nothing is lost: the bucket
// keeps refilling), or when there is less than MinSlice (or req.N); else
// take what there is rather than ask for more and be denied. e is locked.
func (l *Prefetch) bucketWant(e *prefetchEntry, req ratelimit.Request, lim ratelimit.Limit, want, now int64) (int64, ratelimit.Decision, bool) {
	t := int64(lim.Interval())
	want = max(want, req.N)
	if have := min(e.remaining+(now-e.seenAt)/t, lim.Burst); have < want {
		wait := (want-e.remaining)*t - (now - e.seenAt)
		if !e.promised && (have < max(l.opts.MinSlice, req.N) || wait <= int64(l.opts.TTL)) {
			// Once: the retry after RetryAfter takes what there is,
			// whatever the slice has grown to meanwhile.
			e.promised = true
			e.denyUntil, e.denyN = now+wait, 1
			e.denied = ratelimit.Decision{Limit: lim, ResetAfter: time.Duration(max(0, e.resetAt-now))}
			d := e.denied
			d.RetryAfter = time.Duration(wait)
			d.ResetAfter = max(d.ResetAfter, d.RetryAfter)
			return want, d, true
		}
		want = max(have, req.N)
	}
	e.promised = false
	return want, ratelimit.Decision{}, false
}

// take takes a slice of k events (k ≥ req.N) for e and spends req.N of
// it; when Redis has fewer, the most it has, down to req.N. When Redis
// has fewer than req.N, req is denied with the RetryAfter of the slice
// last asked for: honest (req.N fits in it), and up to a slice's refill
// later than exact mode would say, which spares Redis a call per denial
// while the key is at its limit. e is locked.
func (l *Prefetch) take(ctx context.Context, e *prefetchEntry, req ratelimit.Request, lim ratelimit.Limit, k, now int64) (ratelimit.Decision, error) {
	for {
		r := req
		r.N = k
		d, err := l.s.apply(ctx, r, false)
		if err != nil {
			return l.s.fallback(ctx, req, err)
		}
		if d.Allowed {
			if k == req.N {
				l.exact.Add(1)
			} else {
				l.takes.Add(1)
			}
			e.left = k - req.N
			e.remaining, e.seenAt = d.Remaining, l.now()
			e.resetAt = now + int64(d.ResetAfter)
			e.expires = now + int64(l.opts.TTL)
			if req.Algorithm == ratelimit.FixedWindow {
				// The window's counts decay when it ends: ResetAfter,
				// dated from before the call.
				e.windowEnd = now + int64(d.ResetAfter)
				e.expires = min(e.expires, e.windowEnd)
			}
			d.Limit = lim
			d.Remaining += e.left
			return d, nil
		}
		if k > req.N && d.Remaining >= req.N && (req.Algorithm == ratelimit.FixedWindow || d.Remaining >= l.opts.MinSlice) {
			// Fewer than k left, enough for req.N: take what is left (a
			// fixed window's rest is lost when the window ends; a bucket's
			// only when at least MinSlice, else it waits for more).
			k = max(req.N, min(k-1, d.Remaining))
			continue
		}
		// Too little left: denied, until the slice would be admitted (a
		// slice's worth of refill, at most MaxShare/Instances of the
		// bucket's refill time; a fixed window's end). What is left stays
		// in Redis (for a bucket, it keeps refilling). Requests costing
		// more than what is left are denied locally until then; while a
		// bucket waits for a slice, all are.
		e.left = 0
		e.remaining, e.seenAt = d.Remaining, l.now()
		if d.RetryAfter > 0 {
			// Dated from after the reply: a retry before Redis's own
			// clock says so would be denied again, a Redis call for
			// nothing.
			e.denyUntil, e.denyN, e.denied = e.seenAt+int64(d.RetryAfter), d.Remaining+1, d
			if req.Algorithm != ratelimit.FixedWindow {
				e.denyN = 1
				// The RetryAfter is a promise, as the wait's in Apply:
				// the retry after it takes what there is, not a larger
				// slice than req.N that would deny it again.
				e.promised = true
			}
			e.resetAt = now + int64(d.ResetAfter)
		}
		d.Limit = lim
		return d, nil
	}
}

// giveBack returns e's unspent slice to Redis, when it may: a fixed
// window's only while its window has more than the store's Timeout left.
// e is locked, and stays locked for the refund's round trip: the key has
// one slice at a time in an instance. A failed refund loses events
// (under-admission), never adds any.
func (l *Prefetch) giveBack(e *prefetchEntry, now int64) {
	left := e.left
	e.left, e.expires = 0, 0
	if left <= 0 {
		return
	}
	if e.alg == ratelimit.FixedWindow && now+int64(l.s.opts.Timeout) >= e.windowEnd {
		return
	}
	l.returns.Add(1)
	l.returned.Add(uint64(left))
	l.refund(ratelimit.Request{Key: e.name, Limit: e.lim, Algorithm: e.alg, N: left, Refund: true})
}

func (l *Prefetch) refund(req ratelimit.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), l.s.opts.Timeout*2)
	defer cancel()
	l.s.apply(ctx, req, false) //nolint:errcheck // a lost refund is under-admission
}

// entry returns key's entry, made if need be, or nil when the table is
// full.
func (l *Prefetch) entry(k prefetchKey) *prefetchEntry {
	if v, ok := l.keys.Load(k); ok {
		return v.(*prefetchEntry)
	}
	if l.nkeys.Load() >= int64(l.opts.MaxKeys) {
		return nil
	}
	now := l.now()
	e := &prefetchEntry{name: k.key, obsStart: now, lastUse: now}
	v, loaded := l.keys.LoadOrStore(k, e)
	if !loaded {
		l.nkeys.Add(1)
		l.startSweep()
	}
	return v.(*prefetchEntry)
}

// startSweep starts the sweeper unless it runs or l is closed. Called
// after a key was counted in: a sweeper that saw the table empty before
// that has stopped (or is stopping), and this starts another.
func (l *Prefetch) startSweep() {
	l.swMu.Lock()
	defer l.swMu.Unlock()
	if l.sweeping || l.closed.Load() {
		return
	}
	l.sweeping = true
	l.wg.Add(1)
	go l.sweep()
}

// sweep gives back expired slices every TTL/2 and drops keys idle for
// 10 TTLs, until Close or until a sweep leaves no key.
func (l *Prefetch) sweep() {
	defer l.wg.Done()
	tick.While(l.stop, l.opts.TTL/2, func(time.Time) bool {
		l.sweepOnce(l.now())
		l.swMu.Lock()
		defer l.swMu.Unlock()
		if l.nkeys.Load() > 0 {
			return true
		}
		l.sweeping = false
		return false
	})
}

// sweepOnce gives back the slices expired at now and drops the keys idle
// for 10 TTLs.
func (l *Prefetch) sweepOnce(now int64) {
	idle := 10 * int64(l.opts.TTL)
	l.keys.Range(func(k, v any) bool {
		e := v.(*prefetchEntry)
		e.mu.Lock()
		if e.left > 0 && now >= e.expires {
			l.giveBack(e, now)
		}
		if e.left == 0 && now-e.lastUse > idle {
			e.dead = true
			l.keys.Delete(k)
			l.nkeys.Add(-1)
		}
		e.mu.Unlock()
		return true
	})
}

// Close gives back every unspent slice and stops the sweeper. Apply
// returns ratelimit.ErrClosed afterwards. It does not close the Store.
func (l *Prefetch) Close() error {
	l.swMu.Lock() // no sweeper starts past this
	if !l.closed.CompareAndSwap(false, true) {
		l.swMu.Unlock()
		return nil
	}
	close(l.stop)
	l.swMu.Unlock()
	l.wg.Wait()
	now := l.now()
	l.keys.Range(func(_, v any) bool {
		e := v.(*prefetchEntry)
		e.mu.Lock()
		l.giveBack(e, now)
		e.mu.Unlock()
		return true
	})
	return nil
}
