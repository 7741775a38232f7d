package inflight

import (
	"context"
	"errors"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// DefaultMaxKeys is the number of keys a Memory store holds when
// MemoryOptions.MaxKeys is zero.
const DefaultMaxKeys = 1 << 20

// MaxLeasesPerKey is the most leases one key of a Memory store holds at
// once, whatever its cap: an Acquire beyond it is denied.
const MaxLeasesPerKey = 1<<slotBits - 1

// ErrFull is returned by a Memory store's Acquire (under the FailError
// policy) for a new key when the store holds MaxKeys keys that all have
// leases in flight. Keys without leases take no room: they are freed.
var ErrFull = errors.New("inflight: memory store full of keys with leases in flight")

// MemoryOptions configures a Memory store. The zero value is a good
// default.
type MemoryOptions struct {
	// Now returns the current time. Nil means the real clock: the wall
	// time when NewMemory ran plus the monotonic time since (one clock
	// read a call, and no jump when the system's wall clock is stepped).
	// Set it for tests and simulations.
	Now func() time.Time
	// MaxKeys bounds the number of keys with leases in flight (rounded
	// down to a multiple of the number of shards, each of which holds its
	// share). Zero means DefaultMaxKeys; negative means unbounded. A key
	// whose last lease is released or reclaimed is freed at once, so only
	// keys with work in flight count. When a new key would exceed the
	// bound, the store first reclaims the expired leases of a sample of
	// the shard's keys; if no key is freed, OnFull decides.
	MaxKeys int
	// OnFull is what Acquire does for a new key when the store is full:
	// FailError (the zero value) returns ErrFull; FailAllow admits with a
	// lease that holds nothing; FailDeny denies; FailLocal means FailAllow
	// (the store is already local).
	OnFull ratelimit.FailurePolicy
	// Shards is the number of independently locked shards, rounded up to
	// a power of two. Zero means 64.
	Shards int
}

// Memory is a Store in process memory. It is safe for concurrent use. It
// starts no goroutine: expired leases are reclaimed when their key is
// next used, so Close only marks it closed.
//
// Memory: a key with leases in flight takes about 150 bytes (its map
// entry and record) plus 32 bytes a lease slot; slots are kept while the
// key has leases (up to the most it has held at once), and freed with it.
type Memory struct {
	seed     maphash.Seed
	shards   []shard
	mask     uint64
	now      func() int64 // Unix ns
	perShard int          // 0: unbounded
	onFull   ratelimit.FailurePolicy
	closed   atomic.Bool
}

var _ Store = (*Memory)(nil)

const (
	slotBits = 24
	slotMask = 1<<slotBits - 1
	seqMask  = 1<<(64-slotBits) - 1
	// spares is the most freed records a shard keeps for reuse, and
	// spareSlots the most lease slots a kept record keeps.
	spares     = 8
	spareSlots = 64
	// sample is the number of keys a full shard looks at for expired
	// leases before refusing a new key.
	sample = 16
)

type shard struct {
	mu    sync.Mutex
	keys  map[string]*entry
	seq   uint64 // the last lease sequence number given
	spare []*entry
	_     [64]byte // keep shards' locks off each other's cache lines
}

// entry is one key's leases. A lease's ID is its sequence number (shifted
// left by slotBits) and the index of its slot, so Release and Renew find
// it at once; a slot whose id differs holds someone else's lease, or none.
type entry struct {
	inflight int64 // the sum of the live slots' weights
	live     int   // live slots
	minExp   int64 // no live slot expires before (Unix ns)
	free     int32 // the first free slot, -1 when none
	slots    []slot
}

type slot struct {
	id     uint64 // 0 when free
	weight int64
	exp    int64 // Unix ns
	next   int32 // the next free slot, when free
}

// NewMemory returns a Memory store.
func NewMemory(opts MemoryOptions) *Memory {
	n := opts.Shards
	if n <= 0 {
		n = 64
	}
	n = 1 << bits.Len(uint(n-1))
	m := &Memory{seed: maphash.MakeSeed(), shards: make([]shard, n), mask: uint64(n - 1), onFull: opts.OnFull}
	switch {
	case opts.MaxKeys == 0:
		m.perShard = max(1, DefaultMaxKeys/n)
	case opts.MaxKeys > 0:
		m.perShard = max(1, opts.MaxKeys/n)
	}
	for i := range m.shards {
		m.shards[i].keys = make(map[string]*entry)
	}
	if opts.Now != nil {
		now := opts.Now
		m.now = func() int64 { return now().UnixNano() }
	} else {
		base := time.Now()
		wall := base.UnixNano()
		m.now = func() int64 { return wall + int64(time.Since(base)) }
	}
	return m
}

func (m *Memory) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)&m.mask]
}

// Acquire implements Store.
func (m *Memory) Acquire(ctx context.Context, req Request) (Lease, Decision, error) {
	if err := req.Validate(); err != nil {
		return Lease{}, Decision{}, err
	}
	if m.closed.Load() {
		return Lease{}, Decision{}, ErrClosed
	}
	req = req.Normalize()
	return m.acquire(req, m.now())
}

func (m *Memory) acquire(req Request, now int64) (Lease, Decision, error) {
	d := Decision{Cap: req.Cap}
	sh := m.shard(req.Key)
	sh.mu.Lock()
	e := sh.keys[req.Key]
	if e != nil && now >= e.minExp {
		e.reap(now)
		if e.live == 0 {
			sh.drop(req.Key, e)
			e = nil
		}
	}
	if e != nil {
		d.InFlight = e.inflight
	}
	if req.Weight > req.Cap {
		d.Unsatisfiable = true
		sh.mu.Unlock()
		return Lease{}, d, nil
	}
	if e != nil && (e.inflight+req.Weight > req.Cap || e.live >= MaxLeasesPerKey) {
		d.RetryAfter = time.Duration(e.minExp - now)
		sh.mu.Unlock()
		return Lease{}, d, nil
	}
	if e == nil {
		if m.perShard > 0 && len(sh.keys) >= m.perShard && !sh.makeRoom(now) {
			sh.mu.Unlock()
			switch m.onFull {
			case ratelimit.FailAllow, ratelimit.FailLocal:
				d.Allowed = true
				return Lease{Key: req.Key, Weight: req.Weight, Expiry: time.Unix(0, now+int64(req.TTL))}, d, nil
			case ratelimit.FailDeny:
				return Lease{}, d, nil
			}
			return Lease{}, Decision{}, ErrFull
		}
		e = sh.newEntry()
		sh.keys[req.Key] = e
	}
	sh.seq = (sh.seq + 1) & seqMask
	if sh.seq == 0 {
		sh.seq = 1
	}
	i := e.take()
	exp := now + int64(req.TTL)
	id := sh.seq<<slotBits | uint64(i)
	e.slots[i] = slot{id: id, weight: req.Weight, exp: exp}
	if e.live == 0 || exp < e.minExp {
		e.minExp = exp
	}
	e.live++
	e.inflight += req.Weight
	d.InFlight = e.inflight
	sh.mu.Unlock()
	d.Allowed = true
	return Lease{Key: req.Key, ID: id, Weight: req.Weight, Expiry: time.Unix(0, exp)}, d, nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, l Lease) error {
	if l.ID == 0 {
		return nil
	}
	if m.closed.Load() {
		return ErrClosed
	}
	sh := m.shard(l.Key)
	sh.mu.Lock()
	if e := sh.keys[l.Key]; e != nil {
		if i := int(l.ID & slotMask); i < len(e.slots) && e.slots[i].id == l.ID {
			e.remove(int32(i))
			if e.live == 0 {
				sh.drop(l.Key, e)
			}
		}
	}
	sh.mu.Unlock()
	return nil
}

// Renew implements Store.
func (m *Memory) Renew(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	ttl, err := ValidTTL(ttl)
	if err != nil {
		return Lease{}, err
	}
	if m.closed.Load() {
		return Lease{}, ErrClosed
	}
	now := m.now()
	exp := now + int64(ttl)
	if l.ID == 0 {
		l.Expiry = time.Unix(0, exp)
		return l, nil
	}
	sh := m.shard(l.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.keys[l.Key]
	if e == nil {
		return Lease{}, ErrExpired
	}
	i := int(l.ID & slotMask)
	if i >= len(e.slots) || e.slots[i].id != l.ID {
		return Lease{}, ErrExpired
	}
	if e.slots[i].exp <= now {
		// Expired: reclaimed now, as Acquire would.
		e.remove(int32(i))
		if e.live == 0 {
			sh.drop(l.Key, e)
		}
		return Lease{}, ErrExpired
	}
	e.slots[i].exp = exp
	e.minExp = min(e.minExp, exp)
	l.Expiry = time.Unix(0, exp)
	l.Weight = e.slots[i].weight
	return l, nil
}

// Peek implements Store.
func (m *Memory) Peek(ctx context.Context, key string) (int64, error) {
	if m.closed.Load() {
		return 0, ErrClosed
	}
	now := m.now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.keys[key]
	if e == nil {
		return 0, nil
	}
	if now >= e.minExp {
		e.reap(now)
		if e.live == 0 {
			sh.drop(key, e)
			return 0, nil
		}
	}
	return e.inflight, nil
}

// Len returns the number of keys with leases in flight (some of which may
// have expired and not been reclaimed yet).
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

// Close marks the store closed: every method returns ErrClosed afterwards
// (Release of the zero Lease excepted). It is idempotent.
func (m *Memory) Close() error {
	m.closed.Store(true)
	return nil
}

// reap frees the slots expired at now and recomputes minExp.
func (e *entry) reap(now int64) {
	minExp := int64(1<<63 - 1)
	for i := range e.slots {
		s := &e.slots[i]
		if s.id == 0 {
			continue
		}
		if s.exp <= now {
			e.remove(int32(i))
			continue
		}
		minExp = min(minExp, s.exp)
	}
	e.minExp = minExp
}

// take returns a free slot's index, growing the slots when none is free.
func (e *entry) take() int32 {
	if i := e.free; i >= 0 {
		e.free = e.slots[i].next
		return i
	}
	e.slots = append(e.slots, slot{})
	return int32(len(e.slots) - 1)
}

// remove frees slot i, which is live.
func (e *entry) remove(i int32) {
	e.inflight -= e.slots[i].weight
	e.live--
	e.slots[i] = slot{next: e.free}
	e.free = i
}

// newEntry returns an empty record, a spare one when the shard has one.
func (sh *shard) newEntry() *entry {
	if n := len(sh.spare); n > 0 {
		e := sh.spare[n-1]
		sh.spare = sh.spare[:n-1]
		return e
	}
	return &entry{free: -1}
}

// drop deletes key, whose record e has no live slot, and keeps e for
// reuse.
func (sh *shard) drop(key string, e *entry) {
	delete(sh.keys, key)
	if len(sh.spare) >= spares {
		return
	}
	if cap(e.slots) > spareSlots {
		e.slots = nil
	}
	e.slots = e.slots[:0]
	e.free, e.inflight, e.live = -1, 0, 0
	sh.spare = append(sh.spare, e)
}

// makeRoom reclaims the expired leases of up to sample keys of a full
// shard and reports whether a key was freed.
func (sh *shard) makeRoom(now int64) bool {
	freed, seen := false, 0
	for k, e := range sh.keys {
		if seen++; seen > sample {
			break
		}
		if now >= e.minExp {
			e.reap(now)
			if e.live == 0 {
				sh.drop(k, e)
				freed = true
			}
		}
	}
	return freed
}
