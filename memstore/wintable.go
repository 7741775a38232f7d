package memstore

import (
	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
)

// winTable maps the keys of one shard to the state of a counting window
// (FixedWindow, SlidingWindowCounter) or of a sliding window log: an
// open-addressing table with linear probing, whose slots are 24 bytes,
// where a Go map of the same state cost an 8-byte key, a 32-byte entry
// and a control byte at a load of 40–80% (about 100 bytes a key at a
// million keys; the table takes about 50).
//
// Unlike the bucket table (tatTable), every access holds the shard's lock,
// which the window algorithms take anyway (a step reads and writes three
// fields): so a slot's word may change (a key's period changes its tag in
// place) and a deletion shifts the following keys of its probe run back
// instead of leaving a tombstone (Knuth's Algorithm R), so the table never
// needs rebuilding to reclaim deleted slots.
//
// A slot holds:
//
//   - w, the key's word: its hash with the tag of its limit's Period in the
//     top 8 bits (tatWord; the store's period registry, Store.periods), or
//     empty. Keys are looked up by the hash's low 56 bits, whatever the tag;
//     the top 8 bits are the shard's (see tatWord).
//   - a: a window's Start, or the time of a log's one entry.
//   - b: the limit (winLimit, 17 bits, what eviction needs) over 47 bits of
//     count: a fixed window's Curr; a sliding counter's Prev (23 bits) over
//     its Curr (24 bits); the cost of a log's one entry. A count that does
//     not fit (a sliding counter past 2^23 events a window, a log of more
//     than one entry) is spilled: the 47 bits are all ones and the state is
//     in the array's big map (windows), by the hash's low bits, or its
//     logs (logs), at the index in a. Spilled state costs what the maps did before: a window
//     about 80 bytes more, a log its entries (16 bytes each) and about
//     120 bytes more.
type winTable struct{ a *winArray }

type winArray struct {
	mask  uint64
	n     int // keys held
	slots []winSlot
	// ovf holds the period of each key tagged tagOverflow, by the hash's
	// low bits (w&lowMask); nil until needed.
	ovf map[uint64]int64
	// big holds the windows whose counts do not fit a slot, by the hash's
	// low bits; nil until needed. logs holds the logs of more than one
	// entry (or of one too costly to fit), each at the index its slot's a
	// holds; free lists the indexes of logs that are nil.
	big  map[uint64]window.State
	logs []*logEntry
	free []int64
	// scratch holds a log of the logs table while a step decides on it
	// (inlineLog): on the heap already, so the step's append does not move
	// a buffer of the caller's stack there.
	scratch [2]slidinglog.Entry
}

type winSlot struct {
	w uint64
	a int64
	b uint64
}

// logEntry is a spilled sliding window log. A log spills when a step adds
// its second entry, so its first array is part of the entry: one
// allocation.
type logEntry struct {
	log   slidinglog.Log
	used  int64 // the log's count at its last request
	first [2]slidinglog.Entry
}

const (
	cntBits = 47
	cntMask = 1<<cntBits - 1
	spilled = cntMask // the count bits of a slot whose state is in a map

	// A sliding counter's Curr takes the low curBits of the count, its
	// Prev the prevBits above them.
	curBits  = 24
	prevBits = cntBits - curBits
)

func (t *winTable) len() int {
	if t.a == nil {
		return 0
	}
	return t.a.n
}

// find returns the index of the slot of the key hashed to h, or -1.
func (t *winTable) find(h uint64) int {
	a := t.a
	if a == nil {
		return -1
	}
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		switch w := a.slots[i].w; {
		case w == empty:
			return -1
		case w&lowMask == h&lowMask:
			return int(i)
		}
	}
}

// insert adds the key hashed to h, which must be absent, under the tag of
// its period iv, and returns its slot's index. The caller sets the state
// (setWindow, setLog) before anything else touches the table.
func (t *winTable) insert(h uint64, tag uint8, iv int64) int {
	a := t.a
	if a == nil || (a.n+1)*4 > len(a.slots)*3 {
		a = t.rebuild(t.len() + 1)
	}
	w := tatWord(h, tag)
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		if e := &a.slots[i]; e.w == empty {
			e.w = w
			if tag == tagOverflow {
				if a.ovf == nil {
					a.ovf = make(map[uint64]int64)
				}
				a.ovf[w&lowMask] = iv
			}
			a.n++
			return int(i)
		}
	}
}

// retag changes the period of the key in slot i to iv, tagged tag.
func (t *winTable) retag(i int, tag uint8, iv int64) {
	a := t.a
	e := &a.slots[i]
	k := e.w & lowMask
	if wordTag(e.w) == tagOverflow {
		delete(a.ovf, k)
	}
	e.w = tatWord(k, tag)
	if tag == tagOverflow {
		if a.ovf == nil {
			a.ovf = make(map[uint64]int64)
		}
		a.ovf[k] = iv
	}
}

// period returns the period (ns) of the key in slot i; ivs numbers the
// tags.
func (t *winTable) period(i int, ivs *intervalTags) int64 {
	w := t.a.slots[i].w
	if tag := wordTag(w); tag != tagOverflow {
		return ivs.interval(tag)
	}
	return t.a.ovf[w&lowMask]
}

// remove deletes the key in slot i and what it spilled. The keys after it
// in its probe run move back to fill the gap, so indexes of other slots
// are not kept.
func (t *winTable) remove(i int) {
	a := t.a
	k := a.slots[i].w & lowMask
	if a.slots[i].b&cntMask == spilled {
		if a.big != nil {
			delete(a.big, k)
		} else if x := a.slots[i].a; x >= 0 && x < int64(len(a.logs)) {
			a.logs[x] = nil
			a.free = append(a.free, x)
		}
	}
	if wordTag(a.slots[i].w) == tagOverflow {
		delete(a.ovf, k)
	}
	a.n--
	// Algorithm R: move back each following key of the run whose home is
	// not between the gap and itself (cyclically).
	gap := uint64(i)
	for j := (gap + 1) & a.mask; ; j = (j + 1) & a.mask {
		w := a.slots[j].w
		if w == empty {
			break
		}
		home := w & a.mask
		if (j > gap && (home <= gap || home > j)) || (j < gap && home <= gap && home > j) {
			a.slots[gap] = a.slots[j]
			gap = j
		}
	}
	a.slots[gap] = winSlot{}
}

// rebuild moves every key into a new array sized for want keys (at most
// half full) and returns it.
func (t *winTable) rebuild(want int) *winArray {
	size := minTableSlots
	for size < 2*want {
		size *= 2
	}
	next := &winArray{mask: uint64(size - 1), slots: make([]winSlot, size)}
	if old := t.a; old != nil {
		next.n, next.ovf, next.big = old.n, old.ovf, old.big
		for _, e := range old.slots {
			if e.w == empty {
				continue
			}
			if old.logs != nil && e.b&cntMask == spilled {
				// The spilled logs, renumbered without the free ones.
				next.logs = append(next.logs, old.logs[e.a])
				e.a = int64(len(next.logs) - 1)
			}
			for j := e.w & next.mask; ; j = (j + 1) & next.mask {
				if next.slots[j].w == empty {
					next.slots[j] = e
					break
				}
			}
		}
	}
	t.a = next
	return next
}

// removeWhere deletes every key for whose slot drop reports true, then
// drops the array if it is empty and rebuilds it smaller if keys fill less
// than an eighth of it (giving the memory back).
func (t *winTable) removeWhere(drop func(i int) bool) {
	a := t.a
	if a == nil {
		return
	}
	for i := 0; i < len(a.slots); {
		// A deletion moves a later key into slot i: look at it again. A
		// key of a run that wraps around the array's end may move from
		// its start to its end and be looked at twice, which drop allows.
		if a.slots[i].w != empty && drop(i) {
			t.remove(i)
			continue
		}
		i++
	}
	switch {
	case a.n == 0:
		t.a = nil
	case a.n*8 < len(a.slots) && len(a.slots) > minTableSlots:
		t.rebuild(a.n)
	}
}

// all calls f for every key, starting at slot from (mod the table's size),
// until f returns false.
func (t *winTable) all(from uint64, f func(i int) bool) {
	a := t.a
	if a == nil {
		return
	}
	for k := range uint64(len(a.slots)) {
		i := (from + k) & a.mask
		if a.slots[i].w != empty && !f(int(i)) {
			return
		}
	}
}

// limit returns the packed limit of the key in slot i.
func (t *winTable) limit(i int) winLimit { return winLimit(t.a.slots[i].b >> cntBits) }

// window returns the window state of the key in slot i.
func (t *winTable) window(i int) window.State {
	e := &t.a.slots[i]
	c := e.b & cntMask
	switch {
	case c == spilled:
		return t.a.big[e.w&lowMask]
	case winLimit(e.b >> cntBits).sliding():
		return window.State{Start: e.a, Prev: int64(c >> curBits), Curr: int64(c & (1<<curBits - 1))}
	}
	return window.State{Start: e.a, Curr: int64(c)}
}

// setWindow stores st and lim in slot i, spilling st if its counts do not
// fit.
func (t *winTable) setWindow(i int, st window.State, lim winLimit) {
	a := t.a
	e := &a.slots[i]
	var c uint64
	switch {
	case !lim.sliding() && st.Prev == 0 && uint64(st.Curr) < spilled:
		c = uint64(st.Curr)
	case lim.sliding() && uint64(st.Prev) < 1<<prevBits-1 && uint64(st.Curr) < 1<<curBits:
		c = uint64(st.Prev)<<curBits | uint64(st.Curr)
	default:
		c = spilled
		if a.big == nil {
			a.big = make(map[uint64]window.State)
		}
		a.big[e.w&lowMask] = st
	}
	if c != spilled && e.b&cntMask == spilled {
		delete(a.big, e.w&lowMask)
	}
	e.a, e.b = st.Start, uint64(lim)<<cntBits|c
}

// spilledLog returns the log of slot i if it is spilled, else nil.
func (t *winTable) spilledLog(i int) *logEntry {
	if e := &t.a.slots[i]; e.b&cntMask == spilled {
		return t.a.logs[e.a]
	}
	return nil
}

// logEntries returns the entries of the log in slot i, using buf for a log
// held in the slot; used is its count at its last request.
func (t *winTable) logEntries(i int, buf *[1]slidinglog.Entry) (entries []slidinglog.Entry, used int64) {
	if le := t.spilledLog(i); le != nil {
		return le.log.Entries(), le.used
	}
	buf[0] = t.inlineEntry(i)
	return buf[:], buf[0].N
}

// inlineLog returns a Log holding the log in slot i, which is not
// spilled, or an empty one for i < 0, on the array's scratch entries, with
// room for the one entry a step may add. It is valid until the next call
// (under the same hold of the lock).
func (t *winTable) inlineLog(i int) slidinglog.Log {
	if t.a == nil {
		t.rebuild(0)
	}
	a := t.a
	if i < 0 {
		return slidinglog.NewLog(a.scratch[:0])
	}
	a.scratch[0] = t.inlineEntry(i)
	return slidinglog.NewLog(a.scratch[:1])
}

// inlineEntry returns the one entry of the log held in slot i, which is
// not spilled.
func (t *winTable) inlineEntry(i int) slidinglog.Entry {
	e := &t.a.slots[i]
	return slidinglog.Entry{At: e.a, N: int64(e.b & cntMask)}
}

// setLog stores in slot i, which holds a log or is new, the log of entries
// (at least one, oldest first) and the limit lim: in the slot when it is
// one entry that fits, else spilled (l, if not nil, is already the slot's
// spilled log and is kept; used is the log's count now).
func (t *winTable) setLog(i int, entries []slidinglog.Entry, used int64, lim winLimit, le *logEntry) {
	a := t.a
	e := &a.slots[i]
	if le == nil && len(entries) == 1 && uint64(entries[0].N) < spilled {
		e.a, e.b = entries[0].At, uint64(lim)<<cntBits|uint64(entries[0].N)
		return
	}
	if le == nil {
		// A copy: entries may be the array's scratch.
		le = new(logEntry)
		if len(entries) <= len(le.first) {
			le.log = slidinglog.NewLog(le.first[:copy(le.first[:], entries)])
		} else {
			le.log = slidinglog.NewLog(append([]slidinglog.Entry(nil), entries...))
		}
		if n := len(a.free); n > 0 {
			e.a, a.free = a.free[n-1], a.free[:n-1]
			a.logs[e.a] = le
		} else {
			e.a, a.logs = int64(len(a.logs)), append(a.logs, le)
		}
	}
	le.used = used
	e.b = uint64(lim)<<cntBits | spilled
}
