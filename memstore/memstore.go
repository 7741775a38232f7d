package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/internal/gcra"
	"github.com/sluicehq/sluice/internal/slidinglog"
	"github.com/sluicehq/sluice/internal/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// DefaultMaxKeys is the number of keys a Store holds when Options.MaxKeys is
// zero.
const DefaultMaxKeys = 1 << 20

// Options configures a Store. The zero value is a good default.
type Options struct {
	// Now returns the current time. Nil means the real clock, read on every
	// call (see Resolution). Set it for tests and simulations.
	Now func() time.Time
	// Resolution, when positive and Now is nil, replaces the per-call clock
	// read (about 45 ns on a cloud VM) with a clock cached by a background
	// goroutine every Resolution: about 1 ns a call. Decisions then see time
	// up to Resolution (plus scheduling delay) late: refills come that much
	// later and reported durations are that much longer. It never admits
	// more than the limit allows. Zero reads the clock on every call.
	Resolution time.Duration
	// MaxKeys bounds the number of keys held (rounded down to a multiple of
	// the number of shards, each of which holds its share). When a new key would exceed
	// it, keys that have decayed to a full quota are dropped first (which
	// changes nothing), then the most decayed of a sample. Zero means
	// DefaultMaxKeys; negative means unbounded.
	MaxKeys int
	// SweepInterval is how often a background goroutine drops decayed keys.
	// Zero means one minute; negative disables the sweeper.
	SweepInterval time.Duration
	// Shards is the number of independently locked shards, rounded up to a
	// power of two. Zero means 256.
	Shards int
}

// Store keeps limiter state in process memory. It is safe for concurrent
// use. Close stops its background goroutines.
type Store struct {
	shards   []shard
	mask     uint64
	hash     keyHash
	perShard int // most keys per shard; ≤ 0 unbounded

	now       func() time.Time
	useCached bool         // Resolution > 0 and Now is nil
	cached    atomic.Int64 // the cached clock, Unix ns

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// shard is one lock and the tables it guards, one per state shape, keyed by
// the key's hash (keyHash): a GCRA key costs one 16-byte slot of a flat
// table (see tatTable); the window shapes, less hot, live in maps.
//
// The layout is part of the hot path. Everything a request writes (the
// lock, the table's header) shares the first cache line, so a request
// whose shard was last used on another core moves one line, not three; the
// memo, read on every request but written only when the limit changes,
// sits on lines of its own and stays cached on every core.
type shard struct {
	mu   sync.Mutex
	tat  tatTable               // GCRA, TokenBucket, LeakyBucket
	win  map[uint64]winEntry    // FixedWindow, SlidingWindowCounter
	logs map[uint64]*logEntry   // SlidingWindowLog
	_    [64 - 8 - 32 - 16]byte // end of the first cache line
	memo limitMemo
	_    [shardSize - 64 - unsafe.Sizeof(limitMemo{})]byte
}

// shardSize is a shard's size: whole cache lines, so that shards in a
// slice never share one.
const shardSize = 192

// limitMemo remembers the last limit and algorithm a shard validated, and
// the GCRA parameters derived from it. Callers apply few distinct limits,
// so most calls skip validation and the divisions behind it.
type limitMemo struct {
	limit ratelimit.Limit
	alg   ratelimit.Algorithm
	ok    bool
	p     gcra.Params
}

type winEntry struct {
	window.State
	exp int64 // Unix ns from which the state holds nothing
}

type logEntry struct {
	log slidinglog.Log
	exp int64
}

func (sh *shard) len() int { return sh.tat.n + len(sh.win) + len(sh.logs) }

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store. It starts a sweeper goroutine (unless
// SweepInterval < 0) and a clock goroutine (when Resolution > 0); Close
// stops them.
func New(opts Options) *Store {
	n := 256
	if opts.Shards > 0 {
		n = 1
		for n < opts.Shards {
			n <<= 1
		}
	}
	if opts.MaxKeys > 0 {
		for n > opts.MaxKeys {
			n >>= 1 // at least one key a shard
		}
	}
	s := &Store{
		shards: make([]shard, n),
		mask:   uint64(n - 1),
		hash:   newKeyHash(),
		now:    opts.Now,
		stop:   make(chan struct{}),
	}
	switch {
	case opts.MaxKeys == 0:
		s.perShard = max(1, DefaultMaxKeys/n)
	case opts.MaxKeys > 0:
		s.perShard = opts.MaxKeys / n
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.win = make(map[uint64]winEntry)
		sh.logs = make(map[uint64]*logEntry)
	}
	if s.now == nil && opts.Resolution > 0 {
		s.useCached = true
		s.cached.Store(time.Now().UnixNano())
		s.wg.Add(1)
		go s.tick(opts.Resolution)
	}
	sweep := opts.SweepInterval
	if sweep == 0 {
		sweep = time.Minute
	}
	if sweep > 0 {
		s.wg.Add(1)
		go s.sweepLoop(sweep)
	}
	return s
}

// Close stops the store's goroutines. Apply returns ratelimit.ErrClosed
// afterwards. Close is idempotent.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		close(s.stop)
		s.wg.Wait()
	}
	return nil
}

func (s *Store) tick(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.cached.Store(now.UnixNano())
		}
	}
}

func (s *Store) clock() int64 {
	switch {
	case s.now != nil:
		return s.now().UnixNano()
	case s.useCached:
		return s.cached.Load()
	}
	return time.Now().UnixNano()
}

func (s *Store) shardOf(h uint64) *shard {
	// The low bits pick the slot within a map; use the high ones here.
	return &s.shards[(h>>40)&s.mask]
}

// Apply decides req and records what it consumed. It returns an error only
// for an invalid request or a closed store.
func (s *Store) Apply(_ context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if s.closed.Load() {
		return ratelimit.Decision{}, ratelimit.ErrClosed
	}
	if req.N < 0 || req.MaxDelay < 0 {
		return ratelimit.Decision{}, req.Validate()
	}
	now := s.clock()
	h := s.hash.sum(req.Key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	if m := &sh.memo; !m.ok || m.limit != req.Limit || m.alg != req.Algorithm {
		if err := req.Validate(); err != nil {
			sh.mu.Unlock()
			return ratelimit.Decision{}, err
		}
		*m = limitMemo{limit: req.Limit, alg: req.Algorithm, ok: true, p: gcra.NewParams(req.Limit)}
	}
	var d ratelimit.Decision
	s.apply(sh, h, now, &req, &sh.memo.p, &d)
	sh.mu.Unlock()
	return d, nil
}

var _ ratelimit.Binder = (*Store)(nil)

// Bind prepares a and limit for a ratelimit.Limiter: the limit is validated
// and the GCRA parameters derived once, not compared and looked up on
// every request.
func (s *Store) Bind(a ratelimit.Algorithm, limit ratelimit.Limit) (ratelimit.Bound, error) {
	if err := (ratelimit.Request{Limit: limit, Algorithm: a, N: 1}).Validate(); err != nil {
		return nil, err
	}
	return &bound{s: s, alg: a, limit: limit, p: gcra.NewParams(limit)}, nil
}

type bound struct {
	s     *Store
	alg   ratelimit.Algorithm
	limit ratelimit.Limit
	p     gcra.Params
}

func (b *bound) Take(_ context.Context, key string, n int64, maxDelay time.Duration) (ratelimit.Decision, error) {
	s := b.s
	if s.closed.Load() {
		return ratelimit.Decision{}, ratelimit.ErrClosed
	}
	req := ratelimit.Request{Key: key, Limit: b.limit, Algorithm: b.alg, N: n, MaxDelay: maxDelay}
	if n < 0 || maxDelay < 0 {
		return ratelimit.Decision{}, req.Validate()
	}
	now := s.clock()
	h := s.hash.sum(key)
	sh := s.shardOf(h)
	var d ratelimit.Decision
	sh.mu.Lock()
	s.apply(sh, h, now, &req, &b.p, &d)
	sh.mu.Unlock()
	return d, nil
}

// apply decides req for the key hashed to h in sh, which the caller has
// locked; p holds req.Limit's GCRA parameters.
func (s *Store) apply(sh *shard, h uint64, now int64, req *ratelimit.Request, p *gcra.Params, d *ratelimit.Decision) {
	switch req.Algorithm {
	case ratelimit.FixedWindow, ratelimit.SlidingWindowCounter:
		sliding := req.Algorithm == ratelimit.SlidingWindowCounter
		old, ok := sh.win[h]
		var st window.State
		if sliding {
			st, *d = window.Sliding(old.State, now, *req)
		} else {
			st, *d = window.Fixed(old.State, now, *req)
		}
		if st != old.State {
			if !ok {
				s.makeRoom(sh, h, now)
			}
			sh.win[h] = winEntry{State: st, exp: st.Expiry(sliding, req.Limit.Period)}
		}
		return
	case ratelimit.SlidingWindowLog:
		e, ok := sh.logs[h]
		if !ok {
			e = &logEntry{}
		}
		*d = e.log.Step(now, *req)
		if !ok && d.Allowed && req.N > 0 {
			s.makeRoom(sh, h, now)
			sh.logs[h] = e
		}
		e.exp = e.log.Expiry(req.Limit.Period)
		return
	}
	i, ok := sh.tat.find(h)
	var old int64
	if ok {
		old = sh.tat.slots[i].tat
	}
	if tat := gcra.StepInto(old, now, req, p, d); tat != old {
		if ok {
			sh.tat.slots[i].tat = tat
			return
		}
		s.makeRoom(sh, h, now)
		sh.tat.insert(h, tat)
	}
}

// evictSample is how many keys makeRoom looks at when no key it meets has
// decayed.
const evictSample = 16

// makeRoom ensures sh can take one more key, h. It drops decayed keys
// first: their state is the same as absence, so dropping them changes no
// decision. If a whole sample has not decayed, it drops the one closest to
// decay, which frees the least capacity early. The GCRA sample starts at a
// slot chosen by h, so successive evictions look at different keys. Called
// with sh.mu held.
func (s *Store) makeRoom(sh *shard, h uint64, now int64) {
	if s.perShard <= 0 || sh.len() < s.perShard {
		return
	}
	var (
		victim    uint64
		victimExp int64
		kind      int
		seen      int
	)
	consider := func(k uint64, exp int64, which int) bool {
		if exp <= now {
			victim, kind, victimExp = k, which, exp
			return true
		}
		if seen == 0 || exp < victimExp {
			victim, kind, victimExp = k, which, exp
		}
		seen++
		return seen >= evictSample
	}
	done := false
	sh.tat.all(h>>20, func(k uint64, tat int64) bool {
		done = consider(k, tat, 0)
		return !done
	})
	if !done {
		for k, e := range sh.win {
			if done = consider(k, e.exp, 1); done {
				break
			}
		}
	}
	if !done {
		for k, e := range sh.logs {
			if consider(k, e.exp, 2) {
				break
			}
		}
	}
	switch kind {
	case 0:
		if i, ok := sh.tat.find(victim); ok {
			sh.tat.deleteAt(i)
		}
	case 1:
		delete(sh.win, victim)
	case 2:
		delete(sh.logs, victim)
	}
}

func (s *Store) sweepLoop(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep drops every key whose state has decayed to a full quota. The
// background sweeper calls it; it is exported for callers that disable the
// sweeper and want to choose when the work happens.
func (s *Store) Sweep() {
	now := s.clock()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.tat.deleteWhere(func(tat int64) bool { return tat <= now })
		for k, e := range sh.win {
			if e.exp <= now {
				delete(sh.win, k)
			}
		}
		for k, e := range sh.logs {
			if e.exp <= now {
				delete(sh.logs, k)
			}
		}
		sh.mu.Unlock()
	}
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
