package memstore

import (
	"math"
	"sync/atomic"
)

// tatTable maps key hashes to GCRA state (a theoretical arrival time, Unix
// ns) for one shard: an open-addressing table with linear probing whose
// existing keys are updated without the shard's lock, by compare-and-swap
// on the slot. It replaces a map[uint64]int64 behind a mutex on the hottest
// path of the store, for three reasons measured in bench/core:
//
//   - a lookup touches the one cache line holding the key's home slot and,
//     usually, its neighbours, where a Swiss-table map also reads its
//     directory and the group's control word (at 100k keys each of those is
//     a cache miss);
//   - an update writes the slot the lookup found, where a map assignment
//     hashes and probes again;
//   - no lock is taken, so a request does not pull the shard's lock line
//     from the core that used the shard last: the slot is the only line it
//     writes.
//
// The lock (the shard's mu) serialises the structural changes: inserting a
// key, deleting one, rebuilding the table. They keep the lock-free updates
// safe with two rules:
//
//   - A slot's key changes only from empty to a key (insert) and from a key
//     to a tombstone (delete), never back, so a slot found holding a key
//     held that key all along. Tombstones are reclaimed only by rebuilding
//     into a new array.
//   - Before a key's slot is deleted, or copied into a rebuilt array, its
//     state is frozen: swapped, by CAS, for the value frozen. An update in
//     flight then fails its CAS, or reads frozen, and retries under the
//     lock, where it finds the key's new home (or its absence). No update
//     is lost and none lands on another key.
//
// A slot is 16 bytes, four to a cache line: the key's word (its hash with
// the tag of the emission interval its state was made under in the top 8
// bits, see tatWord) and the state; plus 4 of packed limit in a parallel
// array that only the lock's holders touch, so an idle key costs 25–50
// bytes of table (about 40 in a store of a million keys). Words 0 (empty)
// and 1 (tombstone) are reserved; tatWord never returns them.
//
// The lock-free path looks a key up by its whole word, so it finds only a
// state made under its own interval; the lock's holders look it up by its
// hash alone (lookupKey), whatever its tag, to convert a state made under
// another interval.
type tatTable struct {
	cur  atomic.Pointer[tatArray]
	n    int // keys held; guarded by the shard's mu
	dead int // tombstones in cur; guarded by the shard's mu
}

type tatArray struct {
	mask  uint64
	slots []tatSlot // len a power of two
	// ovf holds the interval of each key tagged tagOverflow, by word.
	// Guarded by the lock; nil until needed.
	ovf map[uint64]int64
	// lims holds, for each slot, the packed limit (tatLimit) its key was
	// inserted with: what eviction needs to tell a denial from a bucket
	// nearly full. It is written and read only under the lock, so the
	// lock-free path never touches it.
	lims []tatLimit
}

type tatSlot struct {
	// h is the key's word (tatWord), or empty, or tomb. A word is never
	// changed but to tomb: a key whose state must be converted to another
	// interval moves to a new slot (see Store.moveTAT), so no update made
	// under one interval lands on a state tagged with another.
	h   atomic.Uint64
	tat atomic.Int64 // state, or frozen
}

const (
	empty uint64 = 0
	tomb  uint64 = 1

	// frozen marks a slot whose state has moved (deleted, or copied into a
	// rebuilt array). No state is ever this value: a TAT is at least the
	// clock's reading.
	frozen int64 = math.MinInt64

	minTableSlots = 8
)

// find returns h's slot in a, or nil. It is safe without the lock.
func (a *tatArray) find(h uint64) *tatSlot {
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		switch a.slots[i].h.Load() {
		case h:
			return &a.slots[i]
		case empty:
			return nil
		}
	}
}

// lookup returns the slot of the word w in the current array, or nil.
// Safe without the lock.
func (t *tatTable) lookup(w uint64) *tatSlot {
	if a := t.cur.Load(); a != nil {
		return a.find(w)
	}
	return nil
}

// lookupKey returns the slot of the key hashed to h, whatever its tag, and
// the interval its state was made under (ivs numbers the tags), or nil.
// Called with the lock held.
func (t *tatTable) lookupKey(h uint64, ivs *intervalTags) (*tatSlot, int64) {
	a := t.cur.Load()
	if a == nil {
		return nil, 0
	}
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		switch w := a.slots[i].h.Load(); {
		case w == empty:
			return nil, 0
		case w != tomb && w&lowMask == h&lowMask:
			if tag := wordTag(w); tag != tagOverflow {
				return &a.slots[i], ivs.interval(tag)
			}
			return &a.slots[i], a.ovf[w]
		}
	}
}

// insert adds the word w, whose key must be absent, with state tat made
// under the emission interval iv (the interval of w's tag) and limit lim.
// Called with the lock held.
func (t *tatTable) insert(w uint64, tat int64, lim tatLimit, iv int64) {
	h := w
	a := t.cur.Load()
	if a == nil || (t.n+t.dead+1)*4 > len(a.slots)*3 {
		a = t.rebuild(t.n + 1)
	}
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		if e := &a.slots[i]; e.h.Load() == empty {
			// State first: a reader that sees the key sees its state.
			e.tat.Store(tat)
			a.lims[i] = lim
			if wordTag(w) == tagOverflow {
				if a.ovf == nil {
					a.ovf = make(map[uint64]int64)
				}
				a.ovf[w] = iv
			}
			e.h.Store(w)
			break
		}
	}
	t.n++
}

// freeze swaps e's state for frozen and returns the state it held. Called
// with the lock held, on a slot that holds a key.
func freeze(e *tatSlot) int64 {
	for {
		if v := e.tat.Load(); e.tat.CompareAndSwap(v, frozen) {
			return v
		}
	}
}

// remove deletes the key in slot e, which must hold one. Called with the
// lock held.
func (t *tatTable) remove(e *tatSlot) {
	freeze(e)
	t.retire(e)
}

// retire marks the frozen slot e a tombstone. Called with the lock held.
func (t *tatTable) retire(e *tatSlot) {
	if w := e.h.Load(); wordTag(w) == tagOverflow {
		delete(t.cur.Load().ovf, w)
	}
	e.h.Store(tomb)
	t.n--
	t.dead++
}

// rebuild moves every key into a new array sized for want keys (at most
// half full) and returns it. Called with the lock held.
func (t *tatTable) rebuild(want int) *tatArray {
	size := minTableSlots
	for size < 2*want {
		size *= 2
	}
	next := &tatArray{mask: uint64(size - 1), slots: make([]tatSlot, size), lims: make([]tatLimit, size)}
	if old := t.cur.Load(); old != nil {
		for i := range old.slots {
			e := &old.slots[i]
			h := e.h.Load()
			if h == empty || h == tomb {
				continue
			}
			v := freeze(e)
			if wordTag(h) == tagOverflow {
				if next.ovf == nil {
					next.ovf = make(map[uint64]int64)
				}
				next.ovf[h] = old.ovf[h]
			}
			for j := h & next.mask; ; j = (j + 1) & next.mask {
				if f := &next.slots[j]; f.h.Load() == empty {
					f.tat.Store(v)
					next.lims[j] = old.lims[i]
					f.h.Store(h)
					break
				}
			}
		}
	}
	t.cur.Store(next)
	t.dead = 0
	return next
}

// removeWhere deletes every key whose state satisfies drop, then rebuilds
// the table if tombstones fill a quarter of it or keys fill less than an
// eighth (giving the memory back). Called with the lock held.
func (t *tatTable) removeWhere(drop func(tat int64) bool) {
	a := t.cur.Load()
	if a == nil {
		return
	}
	for i := range a.slots {
		e := &a.slots[i]
		if h := e.h.Load(); h == empty || h == tomb {
			continue
		}
		for {
			v := e.tat.Load()
			if !drop(v) {
				break
			}
			// Delete only the state drop saw: a concurrent update may
			// have just spent from this key.
			if e.tat.CompareAndSwap(v, frozen) {
				t.retire(e)
				break
			}
		}
	}
	switch {
	case t.n == 0:
		t.cur.Store(nil)
		t.dead = 0
	case t.dead*4 > len(a.slots) || (t.n*8 < len(a.slots) && len(a.slots) > minTableSlots):
		t.rebuild(t.n)
	}
}

// all calls f for every key, starting at slot from (mod the table's size),
// until f returns false. Called with the lock held, which keeps each key in
// its slot; lock-free updates may still change the slot's state, so f reads
// it with e.tat.Load().
func (t *tatTable) all(from uint64, f func(e *tatSlot, h uint64, lim tatLimit) bool) {
	a := t.cur.Load()
	if a == nil {
		return
	}
	for k := range uint64(len(a.slots)) {
		i := (from + k) & a.mask
		e := &a.slots[i]
		if h := e.h.Load(); h != empty && h != tomb && !f(e, h, a.lims[i]) {
			return
		}
	}
}

// intervalOf returns the interval the state of the slot holding word w was
// made under. Called with the lock held.
func (t *tatTable) intervalOf(w uint64, ivs *intervalTags) int64 {
	if tag := wordTag(w); tag != tagOverflow {
		return ivs.interval(tag)
	}
	return t.cur.Load().ovf[w]
}
