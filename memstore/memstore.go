package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"

	"github.com/sluicehq/sluice/internal/tick"
)

// DefaultMaxKeys is the number of keys a Store holds when Options.MaxKeys is
// zero.
const DefaultMaxKeys = 1 << 20

// MaxBytesPerKey bounds the heap a Store holds, in bytes per key of
// Options.MaxKeys, whatever its keys' algorithms, except the entries of
// sliding window logs (see Options.MaxKeys).
const MaxBytesPerKey = 200

// Options configures a Store. The zero value is a good default.
type Options struct {
	// Now returns the current time. Nil means the real clock (see
	// Resolution): a wall time read once plus the monotonic time since,
	// which does not jump when the system's wall clock is stepped. Set Now
	// for tests and simulations.
	Now func() time.Time
	// Resolution is how the real clock is read when Now is nil. Zero means
	// DefaultResolution (1 ms): a clock cached in memory, stored every
	// Resolution by one background goroutine that all the process's stores of
	// that resolution share. Denials and peeks are decided on it, up to
	// Resolution late, more when that goroutine is starved (a busy process, a
	// loaded machine): a denial may come when a fresh reading would admit,
	// never the reverse. An admission is decided on a reading less than
	// Resolution behind the system clock at the call, whatever the scheduler
	// does: the cached one when the processor's counter (RDTSC on amd64,
	// calibrated against the system clock) shows it is that recent, else the
	// system clock's, which it stores for the others. A lagging reading would
	// credit the lag exactly where a step bases state on now (a new key or a
	// bucket at rest: max(TAT, now); a new or rolled window; a log's entry),
	// and admissions (and refunds, and a window rescaled to another period)
	// are the only steps that store such state. So over any real interval of
	// length L a store admits at most what its algorithm admits over L +
	// Resolution: a bucket (GCRA, token, leaky) Burst + Rate·(L +
	// Resolution)/Period (at 1000 a second, one event more than the system
	// clock read on every call), a fixed window Rate in each aligned window
	// that an interval of L + Resolution touches, a sliding counter Rate +
	// Rate·(L + Resolution)/Period, a sliding log Rate·(⌊(L +
	// Resolution)/Period⌋ + 1). The cost is one counter read an admission; a
	// system clock read where the counter is not trusted (a processor other
	// than amd64, a system other than Linux with the tsc clocksource) and
	// until it is calibrated, in the process's first 5 ms. Positive sets
	// another period; negative reads the clock on every call, for callers that
	// need refills to the nanosecond or no background ticking. A store made
	// where the clock reads the year 2000 (a testing/synctest bubble's fake
	// clock) reads it on every call.
	Resolution time.Duration
	// MaxKeys bounds the number of keys held (rounded down to a multiple of
	// the number of shards, each of which holds its share). Zero means
	// DefaultMaxKeys; negative means unbounded.
	//
	// When a new key would exceed it, the store forgets what costs least
	// to forget: a key whose state has decayed to a full quota (the same
	// as an absent key: nothing changes), else, of a sample of each kind
	// of key, the one that has used the smallest share of its limit (among
	// equals, the one soonest back to full). It never forgets a key that
	// denies a request (an exhausted bucket, a full window) or a
	// long-period quota used past a quarter (state that lasts an hour or
	// more: an hourly, daily or monthly window, a bucket whose
	// Burst·Period/Rate is that long) while it can find a cheaper one: when
	// every key it looks at is such a key, it refuses the new one with
	// ErrFull and the caller's failure policy decides. So a flood of fresh
	// identities, one request each, evicts its own keys and no one's
	// denial or used quota; to make the store refuse new keys an attacker
	// must fill all of it with denials or quarter-used long quotas. Stats
	// counts evictions and refusals.
	//
	// Memory is at most MaxBytesPerKey (200) bytes of heap per key of
	// MaxKeys, whatever the mix of algorithms over time, plus 16 to 32
	// bytes per request a sliding window log holds: 200 MiB at the
	// default. A bucket key (GCRA, token, leaky) takes 25–50 bytes, about
	// 42 at a million keys (a 16-byte slot of a flat table from 3/8 to 3/4
	// full, and 4 bytes of packed limit); a window key or a sliding log of
	// one entry 32–64 bytes, about 50 at a million keys (a 24-byte slot of
	// another such table). A sliding log of more than one entry, or a
	// sliding counter past 2^23 events a window, spills its state beside
	// the table (a log about 90 bytes more, and its entries past two; a
	// window about 80).
	// A shard's tables keep the room they once needed, so a
	// store whose keys changed kind over time may hold each kind's peak at
	// once; MaxBytesPerKey covers that.
	MaxKeys int
	// SweepInterval is how often a background goroutine drops decayed keys.
	// Zero means one minute; negative disables the sweeper.
	SweepInterval time.Duration
	// Shards is the number of independently locked shards, rounded up to a
	// power of two, and halved while a shard would hold fewer than 16 of
	// MaxKeys. Zero means 256.
	Shards int
}

// Store keeps limiter state in process memory. It is safe for concurrent
// use. Close stops its background goroutines.
type Store struct {
	shards   []shard
	mask     uint64
	hash     keyHash
	perShard int // most keys per shard; ≤ 0 unbounded

	shift uint // shardOf: the shard is the hash's top bits, h>>shift

	now       func() time.Time
	monoStart time.Time    // when New ran, with its monotonic reading
	wallStart int64        // monoStart, Unix ns
	clk       *cachedClock // the cached clock, or nil (Resolution < 0, or Now set)

	memos   [memoSlots]atomic.Pointer[limitMemo]
	tags    intervalTags // the bucket keys' emission intervals
	periods intervalTags // the window and log keys' periods

	jr      atomic.Pointer[journal] // OpenJournal's, or nil
	snapGen uint64                  // the journal generation of the snapshot restored
	snapMu  sync.Mutex              // serialises SaveSnapshot

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// shard is one lock and the tables it guards, one per state shape, keyed by
// the key's hash (keyHash): a bucket key costs one 16-byte slot of a flat
// table (see tatTable), whose existing keys are updated without the lock;
// a window or sliding-log key one 24-byte slot of a flat table used under
// the lock (see winTable).
//
// A shard fills whole cache lines, so that shards never share one: the
// lock-free path only reads the shard (the table's pointer), and a line
// that is only read stays cached on every core.
type shard struct {
	mu   sync.Mutex
	tat  tatTable // GCRA, TokenBucket, LeakyBucket
	win  winTable // FixedWindow, SlidingWindowCounter
	logs winTable // SlidingWindowLog

	evictions, refusals uint64 // Stats; guarded by mu
}

// shardSize is a shard's size: one cache line.
const shardSize = 64

// limitMemo is a validated limit and algorithm with the GCRA parameters
// derived from it. Callers apply few distinct limits, so Apply finds most
// in the store's memo cache and skips validation and the divisions behind
// it. A limitMemo is never changed once published.
type limitMemo struct {
	limit ratelimit.Limit
	alg   ratelimit.Algorithm
	p     gcra.Params
	tag   uint8 // p.T's interval tag (intervalTags), or the Period's for the windowed algorithms
}

// memoSlots is the size of the store's memo cache of the limits seen
// last: groups of memoWays slots, a limit's group chosen by its hash, so
// that the few dozen limits of a gateway's rules all stay cached (it takes
// memoWays+1 limits in one group to push one out). A limit that misses
// costs a validation and one small allocation.
const (
	memoSlots = 256
	memoWays  = 4
)

func (sh *shard) len() int { return sh.tat.n + sh.win.len() + sh.logs.len() }

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store. It starts a sweeper goroutine (unless
// SweepInterval < 0) and uses the process's cached clock of its
// Resolution (unless Resolution < 0 or Now is set), starting its goroutine
// if no other store does; Close stops them.
func New(opts Options) *Store {
	n := 256
	if opts.Shards > 0 {
		n = 1
		for n < opts.Shards {
			n <<= 1
		}
	}
	if opts.MaxKeys > 0 {
		// At least evictSample keys a shard (or one shard), so that a full
		// shard compares a whole sample before it evicts or refuses.
		for n > 1 && n*evictSample > opts.MaxKeys {
			n >>= 1
		}
	}
	shift := uint(64)
	for m := n; m > 1; m >>= 1 {
		shift--
	}
	s := &Store{
		shards:    make([]shard, n),
		mask:      uint64(n - 1),
		shift:     shift,
		hash:      newKeyHash(),
		now:       opts.Now,
		monoStart: time.Now(),
		stop:      make(chan struct{}),
	}
	s.wallStart = s.monoStart.UnixNano()
	switch {
	case opts.MaxKeys == 0:
		s.perShard = max(1, DefaultMaxKeys/n)
	case opts.MaxKeys > 0:
		s.perShard = opts.MaxKeys / n
	}
	// testing/synctest's bubbles start their fake clock at 2000-01-01: a
	// store made in one reads that clock on every call, as its tests
	// expect, and shares no goroutine with the real clock's stores.
	if res := opts.Resolution; s.now == nil && res >= 0 && s.monoStart.Year() > 2000 {
		if res == 0 {
			res = DefaultResolution
		}
		s.clk = acquireClock(res)
	}
	sweep := opts.SweepInterval
	if sweep == 0 {
		sweep = time.Minute
	}
	if sweep > 0 {
		s.every(sweep, func(time.Time) { s.Sweep() })
	}
	return s
}

// Close stops the store's goroutines, and writes out and closes its
// journal. Apply returns ratelimit.ErrClosed afterwards. Close is
// idempotent.
func (s *Store) Close() error {
	var err error
	if s.closed.CompareAndSwap(false, true) {
		close(s.stop)
		s.wg.Wait()
		if s.clk != nil {
			s.clk.release()
		}
		if j := s.jr.Load(); j != nil {
			err = j.close(s)
		}
	}
	return err
}

// every runs f on a ticker of period d until Close: the sweeper.
func (s *Store) every(d time.Duration, f func(now time.Time)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick.Loop(s.stop, d, f)
	}()
}

// clock returns the store's time, Unix ns. The cached clock's read is
// inlined into the hot path.
func (s *Store) clock() int64 {
	if c := s.clk; c != nil {
		return c.now.Load()
	}
	return s.readClock()
}

// exactClock returns the store's time as an admission needs it: less than
// the resolution behind the system clock at the call (cachedClock.exact),
// whatever the scheduler has done to the cached clock's goroutine.
func (s *Store) exactClock() int64 {
	if c := s.clk; c != nil {
		return c.exact()
	}
	return s.readClock()
}

func (s *Store) readClock() int64 {
	if s.now != nil {
		return s.now().UnixNano()
	}
	return s.wallStart + int64(time.Since(s.monoStart))
}

func (s *Store) shardOf(h uint64) *shard {
	// The low bits pick the slot within a table; the top ones the shard,
	// so that a shard's bucket keys share their top bits, which their
	// slots replace with an interval tag (tatWord).
	return &s.shards[h>>s.shift]
}

// Apply decides req and records what it consumed. It returns an error only
// for an invalid request, a closed store, or a new key refused by a full
// store (ErrFull).
func (s *Store) Apply(_ context.Context, req ratelimit.Request) (d ratelimit.Decision, err error) {
	// d is the result itself, filled through a pointer: a local Decision
	// copied out at the return stalls on store forwarding (the copy's wide
	// loads read the narrow stores that just filled it), a fifth of the
	// call's cost.
	if s.closed.Load() {
		return d, ratelimit.ErrClosed
	}
	if req.N < 0 || req.MaxDelay < 0 {
		return d, req.Validate()
	}
	m, err := s.memo(&req)
	if err != nil {
		return d, err
	}
	if req.Refund {
		s.refund(s.exactClock(), &req, m, &d)
		return d, nil
	}
	if !s.apply(s.clock(), &req, m, &d) {
		return ratelimit.Decision{}, ErrFull
	}
	return d, nil
}

// refund gives back req.N events of req.Key (ratelimit.Request.Refund) at
// now and sets d to a peek's decision after it; m holds req's limit. A key
// the store does not hold is full already: nothing is added.
func (s *Store) refund(now int64, req *ratelimit.Request, m *limitMemo, d *ratelimit.Decision) {
	h := s.hash.sum(req.Key)
	if !req.Algorithm.Windowed() {
		s.refundTAT(h, now, req.N, &m.p, m.tag, d)
		return
	}
	peek := *req
	peek.N, peek.Refund = 0, false
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := int64(req.Limit.Period)
	if req.Algorithm == ratelimit.SlidingWindowLog {
		t := &sh.logs
		i := t.find(h)
		if i < 0 {
			var l slidinglog.Log
			*d = l.Step(now, peek)
			return
		}
		le, l := t.spilledLog(i), (*slidinglog.Log)(nil)
		if le != nil {
			l = &le.log
		} else {
			inline := t.inlineLog(i)
			l = &inline
		}
		l.Refund(now, req.Limit.Period, req.N)
		*d = l.Step(now, peek)
		if len(l.Entries()) == 0 {
			t.remove(i)
			return
		}
		s.retag(t, i, m.tag, w)
		t.setLog(i, l.Entries(), req.Limit.Rate-d.Remaining, packWinLimit(req.Limit.Rate, false), le)
		return
	}
	sliding := req.Algorithm == ratelimit.SlidingWindowCounter
	t := &sh.win
	i := t.find(h)
	var st window.State
	rescaled := false
	if i >= 0 {
		st = t.window(i)
		if from := t.period(i, &s.periods); from != w {
			st, rescaled = window.Rescale(st, now, from, w, sliding), true
		}
	}
	st, took := window.Refund(st, now, w, req.N, sliding)
	if sliding {
		_, *d = window.Sliding(st, now, peek)
	} else {
		_, *d = window.Fixed(st, now, peek)
	}
	switch {
	case i < 0 || (!took && !rescaled):
		return // nothing given back: the state stays as it is
	case st == (window.State{}):
		t.remove(i)
	default:
		s.retag(t, i, m.tag, w)
		t.setWindow(i, st, packWinLimit(req.Limit.Rate, sliding))
	}
	if j := s.journaled(w); j != nil {
		j.window(int(h>>s.shift), h, w, packWinLimit(req.Limit.Rate, sliding), st)
	}
}

// retag gives the key in slot i of t the period w, tagged tag, if it has
// another.
func (s *Store) retag(t *winTable, i int, tag uint8, w int64) {
	if wt := wordTag(t.a.slots[i].w); wt != tag || (tag == tagOverflow && t.a.ovf[t.a.slots[i].w&lowMask] != w) {
		t.retag(i, tag, w)
	}
}

// memo returns req's limit and algorithm validated, from the cache when it
// holds them.
func (s *Store) memo(req *ratelimit.Request) (*limitMemo, error) {
	l := req.Limit
	h := uint64(l.Rate)*0x9e3779b97f4a7c15 ^ uint64(l.Period)*0xc2b2ae3d27d4eb4f ^
		uint64(l.Burst)*0x165667b19e3779f9 ^ uint64(req.Algorithm)
	g := int(h>>56) &^ (memoWays - 1) // the first slot of the limit's group
	free := -1
	for i := g; i < g+memoWays; i++ {
		m := s.memos[i].Load()
		if m == nil {
			if free < 0 {
				free = i
			}
			continue
		}
		if m.limit == l && m.alg == req.Algorithm {
			return m, nil
		}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	m := &limitMemo{limit: l, alg: req.Algorithm, p: gcra.NewParams(l)}
	if !req.Algorithm.Windowed() {
		m.tag = s.tags.tag(m.p.T)
	} else {
		m.tag = s.periods.tag(int64(l.Period))
	}
	if free < 0 {
		free = g + int(h>>32)%memoWays // a full group: replace one
	}
	s.memos[free].Store(m)
	return m, nil
}

var _ ratelimit.Binder = (*Store)(nil)

// Bind prepares a and limit for a ratelimit.Limiter: the limit is validated
// and the GCRA parameters derived once, not looked up on every request.
func (s *Store) Bind(a ratelimit.Algorithm, limit ratelimit.Limit) (ratelimit.Bound, error) {
	if err := (ratelimit.Request{Limit: limit, Algorithm: a, N: 1}).Validate(); err != nil {
		return nil, err
	}
	b := &bound{s: s, alg: a}
	b.cur.Store(s.boundLimit(a, limit))
	return b, nil
}

// boundLimit derives what a bound's Take needs from limit, which is valid.
func (s *Store) boundLimit(a ratelimit.Algorithm, limit ratelimit.Limit) *boundLimit {
	c := &boundLimit{limit: limit, p: gcra.NewParams(limit)}
	if !a.Windowed() {
		c.tag = s.tags.tag(c.p.T)
	} else {
		c.tag = s.periods.tag(int64(limit.Period))
	}
	return c
}

type bound struct {
	s   *Store
	alg ratelimit.Algorithm
	cur atomic.Pointer[boundLimit] // Rebind swaps it
}

// boundLimit is a bound's limit and what Take derives from it.
type boundLimit struct {
	limit ratelimit.Limit
	p     gcra.Params
	tag   uint8 // as limitMemo's
}

// Rebind implements ratelimit.Rebinder: the next Take decides under limit.
func (b *bound) Rebind(limit ratelimit.Limit) error {
	if err := (ratelimit.Request{Limit: limit, Algorithm: b.alg, N: 1}).Validate(); err != nil {
		return err
	}
	b.cur.Store(b.s.boundLimit(b.alg, limit))
	return nil
}

func (b *bound) Take(_ context.Context, key string, n int64, maxDelay time.Duration) (d ratelimit.Decision, err error) {
	s := b.s
	if s.closed.Load() {
		return d, ratelimit.ErrClosed
	}
	c := b.cur.Load()
	if n < 0 || maxDelay < 0 {
		return d, ratelimit.Request{Key: key, Limit: c.limit, Algorithm: b.alg, N: n, MaxDelay: maxDelay}.Validate()
	}
	now := s.clock()
	var ok bool
	if b.alg.Windowed() {
		req := ratelimit.Request{Key: key, Limit: c.limit, Algorithm: b.alg, N: n, MaxDelay: maxDelay}
		ok = s.applyWindow(s.hash.sum(key), now, &req, c.tag, &d)
	} else {
		ok = s.applyTAT(s.hash.sum(key), now, n, b.alg == ratelimit.LeakyBucket, maxDelay, &c.p, c.tag, &d)
	}
	if !ok {
		return ratelimit.Decision{}, ErrFull
	}
	return d, nil
}

// apply decides req, which is valid, at now; m holds req.Limit's GCRA
// parameters. It reports false, deciding nothing, when req would add a key
// that the full store refuses (see makeRoom).
func (s *Store) apply(now int64, req *ratelimit.Request, m *limitMemo, d *ratelimit.Decision) bool {
	h := s.hash.sum(req.Key)
	if req.Algorithm.Windowed() {
		return s.applyWindow(h, now, req, m.tag, d)
	}
	return s.applyTAT(h, now, req.N, req.Algorithm == ratelimit.LeakyBucket, req.MaxDelay, &m.p, m.tag, d)
}

// applyTAT decides a request of cost n for GCRA, TokenBucket or
// LeakyBucket (leaky) on the key hashed to h; p holds the limit's
// parameters and tag the tag of its interval p.T. An existing key whose
// state was made under p.T is updated without the lock (see tatTable):
// its slot's word is tatWord(h, tag). One made under another interval is
// converted under the lock (convertTAT). It reports false when the key is
// new and the store refuses it.
func (s *Store) applyTAT(h uint64, now, n int64, leaky bool, maxDelay time.Duration, p *gcra.Params, tag uint8, d *ratelimit.Decision) bool {
	sh := s.shardOf(h)
	w := tatWord(h, tag)
	for tag != tagOverflow {
		e := sh.tat.lookup(w)
		if e == nil {
			break
		}
		old := e.tat.Load()
		if old == frozen {
			break // moving; ask under the lock
		}
		tat := gcra.StepCost(old, now, n, leaky, maxDelay, p, d)
		if tat != old && s.clk != nil {
			// Admitted on the cached reading, which may lag: the new
			// state is max(TAT, now) + cost, so a lagging now would credit
			// a bucket at rest the lag. Decided again on an exact reading
			// if the cached one is not (it admits too: a later now only
			// shortens the backlog).
			if f := s.clk.exact(); f != now {
				now = f
				tat = gcra.StepCost(old, now, n, leaky, maxDelay, p, d)
			}
		}
		if tat == old || e.tat.CompareAndSwap(old, tat) {
			return true
		}
		// Another request spent from the key meanwhile: decide again.
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.clk != nil {
		now = s.clk.exact() // a new key, a conversion: read after the lock's wait
	}
	for {
		e, iv := sh.tat.lookupKey(h, &s.tags)
		if e == nil {
			if tat := gcra.StepCost(0, now, n, leaky, maxDelay, p, d); tat != 0 {
				if !s.makeRoom(sh, h, now) {
					return false
				}
				sh.tat.insert(w, tat, packTATLimit(p.Tau, p.Limit.Burst), p.T)
			}
			return true
		}
		if iv != p.T && p.T != 0 {
			s.convertTAT(sh, e, now, n, leaky, maxDelay, p, w, d)
			return true
		}
		// Under the lock a key's slot is not frozen, but lock-free
		// updates still race with this one.
		old := e.tat.Load()
		if tat := gcra.StepCost(old, now, n, leaky, maxDelay, p, d); tat == old || e.tat.CompareAndSwap(old, tat) {
			return true
		}
	}
}

// convertTAT decides a request on a key whose state e was made under
// another emission interval than p's: on the state converted to p
// (gcra.Convert: used events stay used). Whatever the decision (a denial
// and a peek too, so that what they report holds), it stores the converted
// state, stepped, in a new slot under the word w (tagged with p's
// interval), and retires e: an update in flight on e, made under the old
// interval, then fails its CAS and decides again. Called with sh.mu held.
func (s *Store) convertTAT(sh *shard, e *tatSlot, now, n int64, leaky bool, maxDelay time.Duration, p *gcra.Params, w uint64, d *ratelimit.Decision) {
	s.moveTAT(sh, e, now, p, w, func(c int64) int64 { return gcra.StepCost(c, now, n, leaky, maxDelay, p, d) })
}

// moveTAT converts the state of e, made under another interval than p's,
// applies f to it, stores the result in a new slot under the word w and
// retires e. Called with sh.mu held.
func (s *Store) moveTAT(sh *shard, e *tatSlot, now int64, p *gcra.Params, w uint64, f func(int64) int64) {
	from := sh.tat.intervalOf(e.h.Load(), &s.tags)
	for {
		v := e.tat.Load()
		c := gcra.Convert(v, now, from, p)
		tat := f(c)
		// Freeze e at the state converted: a lock-free update under the old
		// interval that got in first makes this fail, and f runs again.
		if !e.tat.CompareAndSwap(v, frozen) {
			continue
		}
		sh.tat.retire(e)
		sh.tat.insert(w, tat, packTATLimit(p.Tau, p.Limit.Burst), p.T)
		return
	}
}

// refundTAT gives back n events of the bucket key hashed to h
// (gcra.Refund), converting its state first if it was made under another
// limit, and sets d to a peek's decision after it.
func (s *Store) refundTAT(h uint64, now, n int64, p *gcra.Params, tag uint8, d *ratelimit.Decision) {
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, iv := sh.tat.lookupKey(h, &s.tags)
	refund := func(c int64) int64 {
		tat := gcra.Refund(c, now, n, p)
		gcra.StepCost(tat, now, 0, false, 0, p, d)
		return tat
	}
	switch {
	case e == nil:
		refund(0) // absent: full already
	case iv != p.T && p.T != 0:
		s.moveTAT(sh, e, now, p, tatWord(h, tag), refund)
	default:
		for {
			old := e.tat.Load() // lock-free updates race with this one
			if tat := refund(old); tat == old || e.tat.CompareAndSwap(old, tat) {
				return
			}
		}
	}
}

// applyWindow decides a window algorithm's req on the key hashed to h;
// tag is the tag of req's Period (Store.periods). It reports false when
// the key is new and the store refuses it.
func (s *Store) applyWindow(h uint64, now int64, req *ratelimit.Request, tag uint8, d *ratelimit.Decision) bool {
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if req.Algorithm == ratelimit.SlidingWindowLog {
		if s.clk != nil && req.N > 0 {
			// A log's entry is stamped now: an exact reading, taken after
			// the lock's wait (the step changes a spilled log in place, so
			// it is not decided twice).
			now = s.clk.exact()
		}
		return s.applyLog(sh, h, now, req, tag, d)
	}
	sliding := req.Algorithm == ratelimit.SlidingWindowCounter
	t := &sh.win
	i := t.find(h)
	w := int64(req.Limit.Period)
	old, st, rescaled := s.stepWindow(t, i, now, req, tag, d)
	if s.clk != nil && (rescaled || (req.N > 0 && d.Allowed)) {
		// Admitted (or rescaled) on the cached reading, which may lag: the
		// events would count in the window of a time already past. Decided
		// again on an exact reading, taken after the lock's wait.
		if f := s.clk.exact(); f != now {
			now = f
			old, st, rescaled = s.stepWindow(t, i, now, req, tag, d)
		}
	}
	switch {
	case rescaled && st == (window.State{}):
		t.remove(i)
	case i < 0 && st != old:
		if !s.makeRoom(sh, h, now) {
			*d = ratelimit.Decision{}
			return false
		}
		i = t.insert(h, tag, w)
		t.setWindow(i, st, packWinLimit(req.Limit.Rate, sliding))
	case st != old || rescaled:
		if rescaled {
			t.retag(i, tag, w)
		}
		t.setWindow(i, st, packWinLimit(req.Limit.Rate, sliding))
	default:
		return true
	}
	if j := s.journaled(w); j != nil {
		j.window(int(h>>s.shift), h, w, packWinLimit(req.Limit.Rate, sliding), st)
	}
	return true
}

// stepWindow decides a fixed window's or sliding counter's req at now on
// the key in slot i of t (−1: absent), whose shard's lock is held; tag is
// the tag of req's Period. It returns the key's state before (rescaled,
// when it was counted under another period) and after.
func (s *Store) stepWindow(t *winTable, i int, now int64, req *ratelimit.Request, tag uint8, d *ratelimit.Decision) (old, st window.State, rescaled bool) {
	sliding := req.Algorithm == ratelimit.SlidingWindowCounter
	if i >= 0 {
		old = t.window(i)
		if req.Limit.Rate > 0 && (wordTag(t.a.slots[i].w) != tag || tag == tagOverflow) {
			if from := t.period(i, &s.periods); from != int64(req.Limit.Period) {
				// Counted under another period: the used events carry
				// over (window.Rescale), stored whatever the decision, so
				// that what it reports holds.
				old, rescaled = window.Rescale(old, now, from, int64(req.Limit.Period), sliding), true
			}
		}
	}
	if sliding {
		st, *d = window.Sliding(old, now, *req)
	} else {
		st, *d = window.Fixed(old, now, *req)
	}
	return old, st, rescaled
}

// applyLog decides a sliding window log's req on the key hashed to h, in
// sh, whose lock is held; tag is the tag of req's Period. A log of one
// entry lives in its slot, decided on a copy on the stack; a longer one is
// spilled (see winTable). It reports false when the key is new and the
// store refuses it.
func (s *Store) applyLog(sh *shard, h uint64, now int64, req *ratelimit.Request, tag uint8, d *ratelimit.Decision) bool {
	t := &sh.logs
	i := t.find(h)
	var (
		l  slidinglog.Log
		le *logEntry
	)
	switch {
	case i < 0:
		// Decide on an empty log, and keep it only if there is room.
		l = t.inlineLog(-1)
		if *d = l.Step(now, *req); !d.Allowed || req.N == 0 {
			return true
		}
		if !s.makeRoom(sh, h, now) {
			*d = ratelimit.Decision{}
			return false
		}
		i = t.insert(h, tag, int64(req.Limit.Period))
	default:
		a := t.a
		e := &a.slots[i]
		if e.b&cntMask == spilled {
			le = a.logs[e.a]
			*d = le.log.Step(now, *req)
			break
		}
		// One entry, in the slot: decide on a copy in the table's
		// scratch array (inlineLog).
		a.scratch[0] = slidinglog.Entry{At: e.a, N: int64(e.b & cntMask)}
		l = slidinglog.NewLog(a.scratch[:1])
		*d = l.Step(now, *req)
	}
	var entries []slidinglog.Entry
	if le != nil {
		entries = le.log.Entries()
	} else {
		entries = l.Entries()
	}
	if len(entries) == 0 {
		// Everything left the window: the same as an absent key.
		t.remove(i)
		return true
	}
	lim := packWinLimit(req.Limit.Rate, false)
	if e := &t.a.slots[i]; le == nil && len(entries) == 1 && wordTag(e.w) == tag && tag != tagOverflow && uint64(entries[0].N) < spilled {
		// Still one entry, under the same period: setLog's first case.
		e.a, e.b = entries[0].At, uint64(lim)<<cntBits|uint64(entries[0].N)
		return true
	}
	s.retag(t, i, tag, int64(req.Limit.Period))
	t.setLog(i, entries, req.Limit.Rate-d.Remaining, lim, le)
	return true
}

// Sweep drops every key whose state has decayed to a full quota. The
// background sweeper calls it; it is exported for callers that disable the
// sweeper and want to choose when the work happens.
func (s *Store) Sweep() {
	now := s.clock()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.tat.removeWhere(func(tat int64) bool { return tat <= now })
		sh.win.removeWhere(func(i int) bool { return s.winExpiry(&sh.win, i) <= now })
		sh.logs.removeWhere(func(i int) bool { return s.logExpiry(&sh.logs, i) <= now })
		sh.mu.Unlock()
	}
}

// winExpiry returns the time (Unix ns) from which the window in slot i of
// t holds nothing.
func (s *Store) winExpiry(t *winTable, i int) int64 {
	return t.window(i).Expiry(t.limit(i).sliding(), time.Duration(t.period(i, &s.periods)))
}

// logExpiry returns the time (Unix ns) from which the log in slot i of t
// holds nothing.
func (s *Store) logExpiry(t *winTable, i int) int64 {
	var buf [1]slidinglog.Entry
	entries, _ := t.logEntries(i, &buf)
	return slidinglog.Expiry(entries, time.Duration(t.period(i, &s.periods)))
}

// Len returns the number of keys held.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.len()
		sh.mu.Unlock()
	}
	return n
}
