package memstore

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

// TestTableMatchesMap runs random inserts, updates, deletes, sweeps and
// rebuilds on a tatTable and on a map, and requires the same contents
// after every step. Hashes are drawn from a small range so that probe
// sequences collide, run into each other and wrap around the end of the
// table, and deleted keys come back (into new slots: tombstones are never
// reused). Keys are tagged with two numbered intervals and the overflow
// tag, whose intervals the table keeps itself.
func TestTableMatchesMap(t *testing.T) {
	var tags intervalTags
	tag10, tag20 := tags.tag(10), tags.tag(20)
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tab tatTable
		ref := map[uint64]int64{}
		span := 4 + rng.Uint64N(200)
		for step := range 3000 {
			k := 2 + rng.Uint64N(span)
			if rng.IntN(2) == 0 {
				k += lowMask - span - 2 // high hashes: home slots near the end too
			}
			h := tatWord(k, [...]uint8{tag10, tag20, tagOverflow}[k%3])
			switch op := rng.IntN(10); {
			case op < 5: // insert or update
				v := rng.Int64N(1000)
				if e := tab.lookup(h); e != nil {
					e.tat.Store(v)
				} else {
					tab.insert(h, v, limOf(h), ivOf(h, &tags))
				}
				if e, iv := tab.lookupKey(k, &tags); e == nil || e.h.Load() != h || iv != ivOf(h, &tags) {
					t.Fatalf("seed %d step %d: lookupKey(%#x) = %v, %d", seed, step, k, e, iv)
				}
				ref[h] = v
			case op < 8: // delete one
				if e := tab.lookup(h); e != nil {
					tab.remove(e)
				}
				delete(ref, h)
			case op < 9: // sweep
				cut := rng.Int64N(1000)
				tab.removeWhere(func(v int64) bool { return v < cut })
				for k, v := range ref {
					if v < cut {
						delete(ref, k)
					}
				}
			default: // look up something absent
				if e := tab.lookup(tatWord(k, 3)); e != nil {
					t.Fatalf("seed %d step %d: lookup under another tag found %#x", seed, step, e.h.Load())
				}
			}
			checkTable(t, &tab, &tags, ref)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, step)
			}
		}
	}
}

// limOf is the limit TestTableMatchesMap inserts h with, so that checkTable
// sees whether each key's limit moved with it through rebuilds.
func limOf(h uint64) tatLimit { return tatLimit(h*0x9e3779b97f4a7c15>>32) | 1 }

// ivOf is the interval TestTableMatchesMap inserts the word w with: its
// tag's, or for the overflow tag one of its own, kept by the table.
func ivOf(w uint64, tags *intervalTags) int64 {
	if tag := wordTag(w); tag != tagOverflow {
		return tags.interval(tag)
	}
	return 100 + int64(w%7)
}

func checkTable(t *testing.T, tab *tatTable, tags *intervalTags, ref map[uint64]int64) {
	t.Helper()
	if tab.n != len(ref) {
		t.Errorf("table holds %d entries, map %d", tab.n, len(ref))
		return
	}
	if a := tab.cur.Load(); a != nil && (tab.n+tab.dead)*4 > len(a.slots)*3 {
		t.Errorf("table of %d slots holds %d keys and %d tombstones: over 3/4 full", len(a.slots), tab.n, tab.dead)
	}
	for k, v := range ref {
		if e := tab.lookup(k); e == nil || e.tat.Load() != v {
			t.Errorf("key %#x: table has %v, map %d", k, e, v)
		}
	}
	seen := 0
	tab.all(0, func(e *tatSlot, h uint64, lim tatLimit) bool {
		seen++
		if v := e.tat.Load(); ref[h] != v {
			t.Errorf("table holds %#x=%d, map %d", h, v, ref[h])
		}
		if lim != limOf(h) {
			t.Errorf("key %#x: limit %#x, inserted with %#x", h, lim, limOf(h))
		}
		if iv := tab.intervalOf(h, tags); iv != ivOf(h, tags) {
			t.Errorf("key %#x: interval %d, inserted with %d", h, iv, ivOf(h, tags))
		}
		return true
	})
	if a := tab.cur.Load(); a != nil {
		for w := range a.ovf {
			if _, ok := ref[w]; !ok {
				t.Errorf("overflow interval kept for %#x, which the table does not hold", w)
			}
		}
	}
	if seen != len(ref) {
		t.Errorf("all visited %d entries, want %d", seen, len(ref))
	}
}

// TestTableShrinks checks that a sweep that empties most of a table gives
// the memory back.
func TestTableShrinks(t *testing.T) {
	var tab tatTable
	for h := uint64(1); h <= 10000; h++ {
		tab.insert(tatWord(h*0x9e3779b97f4a7c15, 1), int64(h), 1, 1)
	}
	big := len(tab.cur.Load().slots)
	tab.removeWhere(func(v int64) bool { return v > 100 })
	if a := tab.cur.Load(); tab.n != 100 || len(a.slots) >= big/8 || tab.n*2 > len(a.slots) || tab.dead != 0 {
		t.Fatalf("after the sweep: %d entries, %d tombstones in %d slots (was %d)", tab.n, tab.dead, len(a.slots), big)
	}
	tab.removeWhere(func(int64) bool { return true })
	if tab.n != 0 || tab.cur.Load() != nil {
		t.Fatalf("emptied table keeps %d entries", tab.n)
	}
}

// TestTableNoLostUpdates races lock-free increments of every key against
// a goroutine that, under the lock, keeps deleting and re-inserting keys
// and rebuilding the table: the protocol tatTable documents. An increment
// that lands on a moved slot would be lost; the count of increments that
// succeeded must equal the sum of the states, less what deletions took out
// (which the deleting goroutine accounts for from the frozen values).
func TestTableNoLostUpdates(t *testing.T) {
	const keys = 64
	var (
		mu      sync.Mutex
		tab     tatTable
		removed atomic.Int64 // state taken out by deletions
		added   atomic.Int64 // increments that succeeded
		stop    atomic.Bool
	)
	hash := func(k int) uint64 { return tatWord(uint64(k)*0x9e3779b97f4a7c15, 1) }
	mu.Lock()
	for k := range keys {
		tab.insert(hash(k), 0, 1, 1)
	}
	mu.Unlock()
	var workers, mover sync.WaitGroup
	for w := range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 20000 {
				h := hash(rng.IntN(keys))
				for {
					e := tab.lookup(h)
					if e == nil {
						break // deleted this instant: skip
					}
					v := e.tat.Load()
					if v == frozen {
						// Moving: retry under the lock, as Store.apply does.
						mu.Lock()
						if e := tab.lookup(h); e != nil {
							e.tat.Add(1)
							added.Add(1)
						}
						mu.Unlock()
						break
					}
					if e.tat.CompareAndSwap(v, v+1) {
						added.Add(1)
						break
					}
				}
			}
		}()
	}
	mover.Add(1)
	go func() {
		defer mover.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		for !stop.Load() {
			mu.Lock()
			h := hash(rng.IntN(keys))
			if e := tab.lookup(h); e != nil {
				// Delete the key, keeping what it had counted, and put it
				// back (in a new slot: the old one is a tombstone).
				removed.Add(freeze(e))
				e.h.Store(tomb)
				tab.n--
				tab.dead++
				tab.insert(h, 0, 1, 1)
			}
			if rng.IntN(8) == 0 {
				tab.rebuild(tab.n)
			}
			mu.Unlock()
		}
	}()
	workers.Wait()
	stop.Store(true)
	mover.Wait()
	var sum int64
	tab.all(0, func(e *tatSlot, _ uint64, _ tatLimit) bool { sum += e.tat.Load(); return true })
	if got := sum + removed.Load(); got != added.Load() || got == 0 {
		t.Fatalf("the table counted %d increments (%d still held, %d taken out by deletions), %d succeeded", got, sum, removed.Load(), added.Load())
	}
}

// TestShardLayout pins the layout the shard's comment describes.
func TestShardLayout(t *testing.T) {
	if got := unsafe.Sizeof(shard{}); got != shardSize || got%64 != 0 {
		t.Errorf("shard is %d bytes, want %d (whole cache lines)", got, shardSize)
	}
}
