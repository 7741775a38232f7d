package memstore

// tatTable maps key hashes to GCRA state (a theoretical arrival time, Unix
// ns) for one shard: an open-addressing table with linear probing, kept
// between 3/8 and 3/4 full. It replaces a map[uint64]int64 on the hottest
// path of the store, for two reasons measured in bench/core:
//
//   - a lookup touches the one cache line holding the key's home slot and,
//     usually, its neighbours, where a Swiss-table map also reads its
//     directory and the group's control word (at 100k keys every one of
//     those is a cache miss);
//   - an update writes the slot the lookup found, where a map assignment
//     hashes and probes again.
//
// A slot is 16 bytes, so an idle key costs 21–43 bytes of table (33.5 at a
// million keys in 256 shards). Hash 0 marks an empty slot; keyHash.sum never
// returns it. Deletion shifts the following run of the probe sequence back
// (no tombstones), so lookups never slow down as keys come and go, and the
// sweeper shrinks a table that has emptied.
type tatTable struct {
	slots []tatSlot // len is 0 or a power of two
	n     int       // occupied slots
}

type tatSlot struct {
	h   uint64 // key hash; 0: empty
	tat int64
}

const minTableSlots = 8

// find returns the index of h's slot and true, or false when h is absent.
func (t *tatTable) find(h uint64) (int, bool) {
	if len(t.slots) == 0 {
		return 0, false
	}
	m := uint64(len(t.slots) - 1)
	for i := h & m; ; i = (i + 1) & m {
		switch t.slots[i].h {
		case h:
			return int(i), true
		case 0:
			return 0, false
		}
	}
}

// insert adds h, which must be absent, growing the table when it would be
// more than 3/4 full.
func (t *tatTable) insert(h uint64, tat int64) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(minTableSlots, 2*len(t.slots)))
	}
	t.place(h, tat)
	t.n++
}

// place puts h in the first empty slot of its probe sequence.
func (t *tatTable) place(h uint64, tat int64) {
	m := uint64(len(t.slots) - 1)
	i := h & m
	for t.slots[i].h != 0 {
		i = (i + 1) & m
	}
	t.slots[i] = tatSlot{h, tat}
}

func (t *tatTable) resize(size int) {
	old := t.slots
	t.slots = make([]tatSlot, size)
	for _, e := range old {
		if e.h != 0 {
			t.place(e.h, e.tat)
		}
	}
}

// deleteAt empties slot i and moves back the entries after it whose probe
// sequence passes through i, so that every entry stays reachable from its
// home slot without tombstones.
func (t *tatTable) deleteAt(i int) {
	m := len(t.slots) - 1
	for j := (i + 1) & m; t.slots[j].h != 0; j = (j + 1) & m {
		home := int(t.slots[j].h) & m
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j]: then the hole is before its home.
		var stays bool
		if i <= j {
			stays = i < home && home <= j
		} else {
			stays = i < home || home <= j
		}
		if !stays {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = tatSlot{}
	t.n--
}

// deleteWhere drops every entry for which drop(tat) holds, then shrinks the
// table if it is less than 1/8 full.
func (t *tatTable) deleteWhere(drop func(tat int64) bool) {
	for i := 0; i < len(t.slots); {
		if e := t.slots[i]; e.h != 0 && drop(e.tat) {
			// Backward shift may move an unvisited entry into i (or, past
			// the wrap, a visited one, which is checked again harmlessly).
			t.deleteAt(i)
			continue
		}
		i++
	}
	t.shrink()
}

// shrink halves the table while it stays at most half full, and frees it
// when empty.
func (t *tatTable) shrink() {
	if t.n == 0 {
		t.slots = nil
		return
	}
	if t.n*8 >= len(t.slots) || len(t.slots) <= minTableSlots {
		return
	}
	size := len(t.slots)
	for size > minTableSlots && t.n*2 <= size/2 {
		size /= 2
	}
	t.resize(size)
}

// all calls f for every entry, starting at the slot from (mod the table's
// size), until f returns false.
func (t *tatTable) all(from uint64, f func(h uint64, tat int64) bool) {
	if len(t.slots) == 0 {
		return
	}
	m := uint64(len(t.slots) - 1)
	for k := range uint64(len(t.slots)) {
		if e := t.slots[(from+k)&m]; e.h != 0 && !f(e.h, e.tat) {
			return
		}
	}
}
