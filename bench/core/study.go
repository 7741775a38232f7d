package core

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

// flatStore is a design study, not part of sluice, kept as the record of
// what each of memstore's later changes bought (memstore has since taken
// the table and gone further: lock-free updates, a bound limit). It is
// memstore's GCRA path as it was, with each shard's map[uint64]int64 replaced by a flat open-addressing table
// ([]struct{hash, tat}, linear probing, grown at 3/4 full), so that a lookup
// touches one cache line of slots instead of the Swiss map's directory,
// table and group, and an update writes the slot it found instead of
// hashing again (map assign). Everything else is what memstore does:
// Request.Validate, the same 256 mutex-guarded shards, gcra.Step, the same
// clock modes. It has no eviction or sweeping (deleting from a linear-probing
// table needs backward-shift deletion, which the sweeper would do).
type flatStore struct {
	shards  []flatShard
	seed    maphash.Seed
	cached  atomic.Int64
	useTick bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

type flatSlot struct {
	h   uint64 // 0: empty
	tat int64
}

type flatShard struct {
	mu    sync.Mutex
	slots []flatSlot // length a power of two
	n     int
	_     [64 - 8 - 24 - 8]byte
}

const flatShards = 256

func newFlatStore(res time.Duration) *flatStore {
	s := &flatStore{shards: make([]flatShard, flatShards), seed: maphash.MakeSeed(), stop: make(chan struct{})}
	for i := range s.shards {
		s.shards[i].slots = make([]flatSlot, 8)
	}
	if res > 0 {
		s.useTick = true
		s.cached.Store(time.Now().UnixNano())
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(res)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case now := <-t.C:
					s.cached.Store(now.UnixNano())
				}
			}
		}()
	}
	return s
}

func (s *flatStore) Close() {
	close(s.stop)
	s.wg.Wait()
}

func (s *flatStore) Apply(_ context.Context, req ratelimit.Request) (ratelimit.Decision, error) {
	if err := req.Validate(); err != nil {
		return ratelimit.Decision{}, err
	}
	now := s.now()
	h := maphash.String(s.seed, req.Key) | 1
	sh := &s.shards[h>>56]
	sh.mu.Lock()
	i := sh.find(h)
	old := sh.slots[i].tat
	tat, d := gcra.Step(old, now, req)
	if tat != old {
		sh.set(i, h, tat)
	}
	sh.mu.Unlock()
	return d, nil
}

// now reads the study's clock: the cached one, or time.Now.
func (s *flatStore) now() int64 {
	if s.useTick {
		return s.cached.Load()
	}
	return time.Now().UnixNano()
}

// find returns h's slot, or the empty slot where it would go.
func (sh *flatShard) find(h uint64) uint64 {
	m := uint64(len(sh.slots) - 1)
	i := h & m
	for sh.slots[i].h != 0 && sh.slots[i].h != h {
		i = (i + 1) & m
	}
	return i
}

// set stores tat for h in slot i (found by find), growing the table at
// 3/4 full when h is new.
func (sh *flatShard) set(i, h uint64, tat int64) {
	if sh.slots[i].h == 0 {
		sh.n++
		if sh.n*4 > len(sh.slots)*3 {
			sh.grow()
			i = sh.find(h)
		}
	}
	sh.slots[i] = flatSlot{h, tat}
}

func (sh *flatShard) grow() {
	old := sh.slots
	sh.slots = make([]flatSlot, 2*len(old))
	m := uint64(len(sh.slots) - 1)
	for _, e := range old {
		if e.h == 0 {
			continue
		}
		i := e.h & m
		for sh.slots[i].h != 0 {
			i = (i + 1) & m
		}
		sh.slots[i] = e
	}
}

type flatLimiter struct {
	s   *flatStore
	ctx context.Context
}

func (l *flatLimiter) Allow(key string) bool {
	d, err := l.s.Apply(l.ctx, ratelimit.Request{Key: key, Limit: sluiceLimit, N: 1})
	return err == nil && d.Allowed
}

func (l *flatLimiter) Close() { l.s.Close() }

// Studies lists the design studies: run with the contenders, reported
// apart, never counted as peers.
func Studies() []Contender {
	return []Contender{
		{
			Name:      "study-flat-table-clock-per-call",
			Algorithm: "memstore's GCRA path on a flat open-addressing table (design study)",
			New:       func(int) Limiter { return &flatLimiter{newFlatStore(0), context.Background()} },
		},
		{
			Name:      "study-flat-table-clock-cached-1ms",
			Algorithm: "the same with the clock cached every 1 ms",
			New:       func(int) Limiter { return &flatLimiter{newFlatStore(time.Millisecond), context.Background()} },
		},
		{
			Name:      "study-lean-clock-cached-1ms",
			Algorithm: "the flat table bound to one limit: validated and divided once, decision by pointer",
			New:       func(int) Limiter { return leanLimiter{s: newLeanStore(time.Millisecond, sluiceLimit)} },
		},
	}
}

// Ablations weigh the lean study's cuts one at a time (corepair -ablations).
func Ablations() []Contender {
	return []Contender{
		{
			Name:      "study-lean+validate-clock-cached-1ms",
			Algorithm: "the lean study plus Request.Validate on every call",
			New: func(int) Limiter {
				return leanLimiter{s: newLeanStore(time.Millisecond, sluiceLimit), validate: true}
			},
		},
		{
			Name:      "study-lean+step-clock-cached-1ms",
			Algorithm: "the lean study with gcra.Step by value instead of the bound arithmetic",
			New: func(int) Limiter {
				return leanLimiter{s: newLeanStore(time.Millisecond, sluiceLimit), step: true}
			},
		},
	}
}

// leanStore is a second design study: flatStore plus the fixed-cost cuts
// docs/bench-core.md suggests, as a limiter bound to one limit (like
// ratelimit.Limiter): the limit is validated and T = Period/Rate and
// τ = Burst·T are computed once, not on every call, and the decision is
// filled in through a pointer instead of being copied across calls. It
// computes the same numbers as gcra.Step for GCRA (Allowed, Remaining,
// RetryAfter, ResetAfter).
type leanStore struct {
	*flatStore
	lim     ratelimit.Limit
	t, tau  int64
	testNow func() int64 // for tests; nil reads the clock
}

func newLeanStore(res time.Duration, lim ratelimit.Limit) *leanStore {
	if err := lim.Validate(); err != nil {
		panic(err)
	}
	lim = lim.Normalize()
	t := int64(lim.Interval())
	return &leanStore{flatStore: newFlatStore(res), lim: lim, t: t, tau: lim.Burst * t}
}

func (s *leanStore) take(key string, n int64, d *ratelimit.Decision) {
	var now int64
	if s.testNow != nil {
		now = s.testNow()
	} else {
		now = s.flatStore.now()
	}
	h := maphash.String(s.seed, key) | 1
	sh := &s.shards[h>>56]
	sh.mu.Lock()
	i := sh.find(h)
	tat := sh.slots[i].tat
	base := max(tat, now)
	newTAT := base + n*s.t
	*d = ratelimit.Decision{Limit: s.lim}
	if ttl := newTAT - now; ttl > s.tau {
		sh.mu.Unlock()
		backlog := base - now
		d.RetryAfter = time.Duration(ttl - s.tau)
		d.ResetAfter = time.Duration(backlog)
		if backlog < s.tau {
			d.Remaining = (s.tau - backlog) / s.t
		}
		return
	}
	sh.set(i, h, newTAT)
	sh.mu.Unlock()
	ttl := newTAT - now
	d.Allowed = true
	d.ResetAfter = time.Duration(ttl)
	d.Remaining = (s.tau - ttl) / s.t
}

type leanLimiter struct {
	s *leanStore
	// Put back one of the costs the lean study removes, to weigh it:
	validate bool // Request.Validate on every call
	step     bool // gcra.Step (by value, dividing on every call) instead of the bound arithmetic
}

func (l leanLimiter) Allow(key string) bool {
	if l.validate {
		req := ratelimit.Request{Key: key, Limit: sluiceLimit, N: 1}
		if req.Validate() != nil {
			return false
		}
	}
	if l.step {
		return l.s.takeStep(ratelimit.Request{Key: key, Limit: sluiceLimit, N: 1}).Allowed
	}
	var d ratelimit.Decision
	l.s.take(key, 1, &d)
	return d.Allowed
}

// takeStep is take with gcra.Step computing the decision.
func (s *leanStore) takeStep(req ratelimit.Request) ratelimit.Decision {
	now := s.cached.Load()
	h := maphash.String(s.seed, req.Key) | 1
	sh := &s.shards[h>>56]
	sh.mu.Lock()
	i := sh.find(h)
	old := sh.slots[i].tat
	tat, d := gcra.Step(old, now, req)
	if tat != old {
		sh.set(i, h, tat)
	}
	sh.mu.Unlock()
	return d
}

func (l leanLimiter) Close() { l.s.Close() }
