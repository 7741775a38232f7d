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

	"github.com/sluicehq/sluice/internal/tick"
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
	// a power of two, and halved while a shard would hold fewer than 16 of
	// a positive MaxKeys. Zero means 64.
	Shards int
	// Resolution, when positive and Now is nil, replaces the clock read
	// of every Acquire, Renew and Peek (about 35 ns on a cloud VM, a
	// quarter of an Acquire and Release) with a clock cached by a
	// background goroutine every Resolution, which Close stops. Expiries
	// are then up to Resolution (plus scheduling delay) early or late: a
	// lease may be reclaimed that much later, and, since the cached time
	// runs behind, its Expiry is that much earlier than TTL after the
	// true now. Zero reads the clock on every call.
	Resolution time.Duration
}

// Memory is a Store in process memory. It is safe for concurrent use. It
// starts no goroutine (unless MemoryOptions.Resolution asks for a cached
// clock): expired leases are reclaimed when their key is next used.
//
// Memory: a key with one or two leases in flight takes about 230 bytes of
// heap (its map entry and its 192-byte record; TestMemoryBound), plus 36
// bytes for each further lease it holds at once; the room a key once
// needed is kept while it has leases, and freed with it.
type Memory struct {
	seed     maphash.Seed
	shards   []shard
	mask     uint64
	clock    func() int64 // Unix ns; nil: wall + time.Since(base)
	base     time.Time
	wall     int64
	perShard int // 0: unbounded
	onFull   ratelimit.FailurePolicy
	closed   atomic.Bool
	refused  atomic.Uint64 // new keys refused by a full store
	stop     chan struct{} // closed by Close: stops the cached clock
	done     chan struct{} // closed when the cached clock's goroutine ends
}

var _ Store = (*Memory)(nil)

const (
	slotBits = 24
	slotMask = 1<<slotBits - 1
	seqMask  = 1<<(63-slotBits) - 1 // IDs stay below 2^63 (redisinflight marks its local leases with bit 63)
	// spares is the most freed records a shard keeps for reuse, and
	// spareSlots the most lease slots a kept record keeps.
	spares     = 8
	spareSlots = 64
	// idleKeys is the most keys without leases a shard keeps (see
	// shard.idle).
	idleKeys = 4
	// sample is the number of keys a full shard looks at for expired
	// leases before refusing a new key.
	sample = 16
)

type shard struct {
	owner *Memory
	mu    sync.Mutex
	keys  map[string]*entry
	// last is the record of the key acquired last, in keys: the same key
	// again (one user's requests one after another, a fleet's one key)
	// skips the map lookup.
	last  *entry
	seq   uint64 // the last lease sequence number given
	spare []*entry
	// idle holds the last keys whose leases all ended, left in keys so
	// that a key used again at once (the common case: one user's
	// requests one after another) costs no map delete and insert; the
	// oldest is deleted when a newer one needs its place.
	idle     [idleKeys]idleKey
	idleNext int
	_        [64]byte // keep shards' locks off each other's cache lines
}

// entry is one key's leases. A lease's ID is its sequence number (shifted
// left by slotBits) and the index of its slot, so Release and Renew find
// it at once; a slot whose id differs holds someone else's lease, or none.
//
// A record is 192 bytes, a multiple of a 64-byte cache line, and holds
// room for its first two leases, so the records of keys used on different
// cores at once never share a cache line (the allocator's 192-byte class
// starts every object on a line), as separately allocated small slices
// would.
type entry struct {
	sh       *shard
	key      string  // the key it serves now
	inflight int64   // the sum of the live slots' weights
	live     int     // live slots
	heap     []int32 // the live slots, a min-heap by expiry
	free     int32   // the first free slot, -1 when none
	idle     bool    // the key is in its shard's idle ring
	slots    []slot
	inSlots  [inline]slot  // slots' first array
	inHeap   [inline]int32 // heap's first array
	_        [entryPad]byte
}

const (
	inline   = 2
	entryPad = 24 // to 192 bytes on 64-bit platforms (TestEntrySize)
)

type idleKey struct {
	key string
	ok  bool
}

type slot struct {
	id     uint64 // 0 when free
	weight int64
	exp    int64 // Unix ns
	next   int32 // the next free slot, when free
	hi     int32 // its index in the heap, when live
}

// NewMemory returns a Memory store.
func NewMemory(opts MemoryOptions) *Memory {
	n := opts.Shards
	if n <= 0 {
		n = 64
	}
	n = 1 << bits.Len(uint(n-1))
	for opts.MaxKeys > 0 && n > 1 && opts.MaxKeys/n < 16 {
		n /= 2
	}
	m := &Memory{seed: maphash.MakeSeed(), shards: make([]shard, n), mask: uint64(n - 1), onFull: opts.OnFull}
	switch {
	case opts.MaxKeys == 0:
		m.perShard = max(1, DefaultMaxKeys/n)
	case opts.MaxKeys > 0:
		m.perShard = max(1, opts.MaxKeys/n)
	}
	for i := range m.shards {
		m.shards[i].keys = make(map[string]*entry)
		m.shards[i].owner = m
	}
	base := time.Now()
	wall := base.UnixNano()
	m.base, m.wall = base, wall
	switch {
	case opts.Now != nil:
		now := opts.Now
		m.clock = func() int64 { return now().UnixNano() }
	case opts.Resolution > 0:
		var cached atomic.Int64
		cached.Store(wall)
		m.clock = cached.Load
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(m.done)
			tick.Loop(m.stop, opts.Resolution, func(time.Time) { cached.Store(wall + int64(time.Since(base))) })
		}()
	}
	return m
}

// now returns the store's time in Unix nanoseconds.
func (m *Memory) now() int64 {
	if m.clock != nil {
		return m.clock()
	}
	return m.wall + int64(time.Since(m.base))
}

func (m *Memory) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)&m.mask]
}

// Acquire implements Store.
func (m *Memory) Acquire(ctx context.Context, req Request) (l Lease, d Decision, err error) {
	if req.Cap < 0 || req.Weight < 0 || req.Cap > MaxCap || req.Weight > MaxCap || req.TTL < 0 || req.TTL > MaxTTL ||
		req.TTL != 0 && req.TTL < time.Millisecond {
		return l, d, req.Validate()
	}
	if m.closed.Load() {
		return l, d, ErrClosed
	}
	weight, ttl := req.Weight, req.TTL
	if weight == 0 {
		weight = 1
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	now := m.now()
	d.Cap = req.Cap
	sh := &m.shards[maphash.String(m.seed, req.Key)&m.mask]
	sh.mu.Lock()
	e := sh.lookup(req.Key)
	if e != nil {
		sh.last = e
		if e.live > 0 && now >= e.earliest() {
			e.reap(now)
			if e.live == 0 {
				sh.drop(req.Key, e)
			}
		}
		d.InFlight = e.inflight
		if weight > req.Cap {
			sh.mu.Unlock()
			d.Unsatisfiable = true
			return l, d, nil
		}
		if e.inflight > req.Cap-weight || e.live >= MaxLeasesPerKey {
			d.RetryAfter = time.Duration(e.earliest() - now) // live > 0: inflight > 0
			sh.mu.Unlock()
			return l, d, nil
		}
	} else {
		if weight > req.Cap {
			sh.mu.Unlock()
			d.Unsatisfiable = true
			return l, d, nil
		}
		if m.perShard > 0 && len(sh.keys) >= m.perShard && !sh.makeRoom(now) {
			sh.mu.Unlock()
			m.refused.Add(1)
			switch m.onFull {
			case ratelimit.FailAllow, ratelimit.FailLocal:
				d.Allowed = true
				return Lease{Key: req.Key, Weight: weight, Expiry: time.Unix(0, now+int64(ttl))}, d, nil
			case ratelimit.FailDeny:
				return l, d, nil
			}
			return l, Decision{}, ErrFull
		}
		e = sh.newEntry()
		e.key = req.Key
		sh.keys[req.Key] = e
		sh.last = e
	}
	sh.seq = (sh.seq + 1) & seqMask
	if sh.seq == 0 {
		sh.seq = 1
	}
	i := e.take()
	exp := now + int64(ttl)
	id := sh.seq<<slotBits | uint64(i)
	e.slots[i] = slot{id: id, weight: weight, exp: exp}
	e.push(i)
	e.live++
	e.inflight += weight
	d.InFlight = e.inflight
	sh.mu.Unlock()
	d.Allowed = true
	return Lease{Key: req.Key, ID: id, Weight: weight, Expiry: time.Unix(0, exp), ref: e}, d, nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, l Lease) error {
	if l.ID == 0 {
		return nil
	}
	if m.closed.Load() {
		return ErrClosed
	}
	sh, e := m.find(l)
	if e != nil {
		if i := int(l.ID & slotMask); i < len(e.slots) && e.slots[i].id == l.ID && e.slots[i].weight == l.Weight && e.key == l.Key {
			e.remove(int32(i))
			if e.live == 0 {
				sh.drop(e.key, e)
			}
		}
	}
	sh.mu.Unlock()
	return nil
}

// find locks the shard of l's key and returns it with l's key's record, or
// nil. The record is l.ref when l came from this store: a record moves
// only between the keys of one shard, and lease IDs are unique in a shard,
// so a slot holding l.ID is l's wherever the record now serves.
func (m *Memory) find(l Lease) (*shard, *entry) {
	if e := l.ref; e != nil && e.sh != nil && e.sh.owner == m {
		sh := e.sh
		sh.mu.Lock()
		return sh, e
	}
	sh := m.shard(l.Key)
	sh.mu.Lock()
	return sh, sh.keys[l.Key]
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
	sh, e := m.find(l)
	defer sh.mu.Unlock()
	if e == nil {
		return Lease{}, ErrExpired
	}
	i := int(l.ID & slotMask)
	if i >= len(e.slots) || e.slots[i].id != l.ID || e.slots[i].weight != l.Weight || e.key != l.Key {
		return Lease{}, ErrExpired
	}
	if e.slots[i].exp <= now {
		// Expired: reclaimed now, as Acquire would.
		e.remove(int32(i))
		if e.live == 0 {
			sh.drop(e.key, e)
		}
		return Lease{}, ErrExpired
	}
	e.slots[i].exp = exp
	e.fix(int(e.slots[i].hi))
	l.Expiry = time.Unix(0, exp)
	l.Weight = e.slots[i].weight
	l.ref = e
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
	if e.live > 0 && now >= e.earliest() {
		e.reap(now)
		if e.live == 0 {
			sh.drop(key, e)
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

// MemoryStats are a Memory store's figures, for metrics.
type MemoryStats struct {
	Keys     int    // keys held: with leases in flight, or idle for a moment (Len)
	MaxKeys  int    // the bound on Keys after rounding; 0 when unbounded
	Refusals uint64 // new keys refused because the store was full (OnFull applied)
}

// Stats returns the store's figures.
func (m *Memory) Stats() MemoryStats {
	return MemoryStats{Keys: m.Len(), MaxKeys: m.perShard * len(m.shards), Refusals: m.refused.Load()}
}

// Close marks the store closed: every method returns ErrClosed afterwards
// (Release of the zero Lease excepted). It stops the cached clock's
// goroutine (Resolution) and waits for it. It is idempotent.
func (m *Memory) Close() error {
	if m.closed.Swap(true) {
		return nil
	}
	if m.stop != nil {
		close(m.stop)
		<-m.done
	}
	return nil
}

// reap frees the slots expired at now.
func (e *entry) reap(now int64) {
	for e.live > 0 && e.slots[e.heap[0]].exp <= now {
		e.remove(e.heap[0])
	}
}

// earliest returns the earliest expiry of a live slot; the entry has one.
func (e *entry) earliest() int64 { return e.slots[e.heap[0]].exp }

// push adds live slot i to the heap.
func (e *entry) push(i int32) {
	e.slots[i].hi = int32(len(e.heap))
	e.heap = append(e.heap, i)
	e.up(len(e.heap) - 1)
}

// fix restores the heap after the expiry at heap index h changed.
func (e *entry) fix(h int) {
	if !e.down(h) {
		e.up(h)
	}
}

func (e *entry) less(a, b int) bool { return e.slots[e.heap[a]].exp < e.slots[e.heap[b]].exp }

func (e *entry) swap(a, b int) {
	e.heap[a], e.heap[b] = e.heap[b], e.heap[a]
	e.slots[e.heap[a]].hi = int32(a)
	e.slots[e.heap[b]].hi = int32(b)
}

func (e *entry) up(h int) {
	for h > 0 {
		p := (h - 1) / 2
		if !e.less(h, p) {
			return
		}
		e.swap(h, p)
		h = p
	}
}

// down sifts heap index h down and reports whether it moved.
func (e *entry) down(h int) bool {
	h0, n := h, len(e.heap)
	for {
		c := 2*h + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && e.less(r, c) {
			c = r
		}
		if !e.less(c, h) {
			break
		}
		e.swap(h, c)
		h = c
	}
	return h > h0
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
	h, last := int(e.slots[i].hi), len(e.heap)-1
	if h != last {
		e.swap(h, last)
	}
	e.heap = e.heap[:last]
	if h != last {
		e.fix(h)
	}
	e.inflight -= e.slots[i].weight
	e.live--
	e.slots[i] = slot{next: e.free}
	e.free = i
}

// lookup returns key's record, or nil: the last key acquired (sh.last)
// without the map lookup.
func (sh *shard) lookup(key string) *entry {
	if e := sh.last; e != nil && e.key == key {
		return e
	}
	return sh.keys[key]
}

// newEntry returns an empty record, a spare one when the shard has one.
func (sh *shard) newEntry() *entry {
	if n := len(sh.spare); n > 0 {
		e := sh.spare[n-1]
		sh.spare = sh.spare[:n-1]
		return e
	}
	e := &entry{sh: sh, free: -1}
	e.slots, e.heap = e.inSlots[:0], e.inHeap[:0]
	return e
}

// drop is called when key's record e has no live slot left: the key goes
// to the idle ring, and the ring's oldest key, if it still has no lease,
// is deleted.
func (sh *shard) drop(key string, e *entry) {
	if e.idle {
		return
	}
	old := sh.idle[sh.idleNext]
	sh.idle[sh.idleNext] = idleKey{key, true}
	sh.idleNext = (sh.idleNext + 1) % idleKeys
	e.idle = true
	if !old.ok {
		return
	}
	if oe := sh.keys[old.key]; oe != nil {
		oe.idle = false
		if oe.live == 0 {
			sh.free(old.key, oe)
		}
	}
}

// free deletes key, whose record e has no live slot and is not in the
// idle ring, and keeps e for reuse.
func (sh *shard) free(key string, e *entry) {
	delete(sh.keys, key)
	if sh.last == e {
		sh.last = nil
	}
	if len(sh.spare) >= spares {
		return
	}
	if cap(e.slots) > spareSlots {
		e.slots, e.heap = e.inSlots[:0], e.inHeap[:0]
	}
	e.slots, e.heap = e.slots[:0], e.heap[:0]
	e.free, e.inflight, e.live = -1, 0, 0
	sh.spare = append(sh.spare, e)
}

// flushIdle deletes the idle keys that still have no lease.
func (sh *shard) flushIdle() bool {
	freed := false
	for i, k := range sh.idle {
		if !k.ok {
			continue
		}
		sh.idle[i] = idleKey{}
		if e := sh.keys[k.key]; e != nil {
			e.idle = false
			if e.live == 0 {
				sh.free(k.key, e)
				freed = true
			}
		}
	}
	return freed
}

// makeRoom reclaims the expired leases of up to sample keys of a full
// shard and reports whether a key was freed.
func (sh *shard) makeRoom(now int64) bool {
	if sh.flushIdle() {
		return true
	}
	freed, seen := false, 0
	for k, e := range sh.keys {
		if seen++; seen > sample {
			break
		}
		if e.live > 0 && now >= e.earliest() {
			e.reap(now)
			if e.live == 0 && !e.idle {
				sh.free(k, e)
				freed = true
			}
		}
	}
	return freed
}
