package memstore

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestTableMatchesMap runs random inserts, updates, deletes, sweeps and
// shrinks on a tatTable and on a map, and requires the same contents after
// every step. Hashes are drawn from a small range so that probe sequences
// collide, run into each other and wrap around the end of the table, which
// is where backward-shift deletion goes wrong if it does.
func TestTableMatchesMap(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tab tatTable
		ref := map[uint64]int64{}
		span := 4 + rng.Uint64N(200)
		for step := range 3000 {
			h := 1 + rng.Uint64N(span)
			if rng.IntN(2) == 0 {
				h += ^uint64(0) - span - 1 // high hashes: home slots near the end too
			}
			switch op := rng.IntN(10); {
			case op < 5: // insert or update
				v := rng.Int64N(1000)
				if i, ok := tab.find(h); ok {
					tab.slots[i].tat = v
				} else {
					tab.insert(h, v)
				}
				ref[h] = v
			case op < 8: // delete one
				if i, ok := tab.find(h); ok {
					tab.deleteAt(i)
				}
				delete(ref, h)
			case op < 9: // sweep
				cut := rng.Int64N(1000)
				tab.deleteWhere(func(v int64) bool { return v < cut })
				for k, v := range ref {
					if v < cut {
						delete(ref, k)
					}
				}
			default: // look up something absent
				_, want := ref[h^1<<62]
				if _, ok := tab.find(h ^ 1<<62); ok != want {
					t.Fatalf("seed %d step %d: find of absent key", seed, step)
				}
			}
			checkTable(t, &tab, ref)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, step)
			}
		}
	}
}

func checkTable(t *testing.T, tab *tatTable, ref map[uint64]int64) {
	t.Helper()
	if tab.n != len(ref) {
		t.Errorf("table holds %d entries, map %d", tab.n, len(ref))
		return
	}
	if len(tab.slots) > 0 && tab.n*4 > len(tab.slots)*3 {
		t.Errorf("table of %d slots holds %d: over 3/4 full", len(tab.slots), tab.n)
	}
	for k, v := range ref {
		i, ok := tab.find(k)
		if !ok || tab.slots[i].tat != v {
			t.Errorf("key %#x: table has (%v, found %v), map %d", k, tab.slots[i].tat, ok, v)
		}
	}
	seen := 0
	tab.all(0, func(h uint64, v int64) bool {
		seen++
		if ref[h] != v {
			t.Errorf("table holds %#x=%d, map %d", h, v, ref[h])
		}
		return true
	})
	if seen != len(ref) {
		t.Errorf("all visited %d entries, want %d", seen, len(ref))
	}
}

// TestTableShrinks checks that a sweep that empties most of a table gives
// the memory back.
func TestTableShrinks(t *testing.T) {
	var tab tatTable
	for h := uint64(1); h <= 10000; h++ {
		tab.insert(h*0x9e3779b97f4a7c15, int64(h))
	}
	big := len(tab.slots)
	tab.deleteWhere(func(v int64) bool { return v > 100 })
	if tab.n != 100 || len(tab.slots) >= big/8 || tab.n*2 > len(tab.slots) {
		t.Fatalf("after the sweep: %d entries in %d slots (was %d)", tab.n, len(tab.slots), big)
	}
	tab.deleteWhere(func(int64) bool { return true })
	if tab.n != 0 || tab.slots != nil {
		t.Fatalf("emptied table keeps %d slots", len(tab.slots))
	}
}

// TestShardLayout pins the cache-line layout the shard's comment describes.
func TestShardLayout(t *testing.T) {
	var sh shard
	if got := unsafe.Sizeof(sh); got != shardSize || got%64 != 0 {
		t.Errorf("shard is %d bytes, want %d (whole cache lines)", got, shardSize)
	}
	if off := unsafe.Offsetof(sh.logs) + unsafe.Sizeof(sh.logs); off > 64 {
		t.Errorf("the written fields end at byte %d, past the first cache line", off)
	}
	if off := unsafe.Offsetof(sh.memo); off != 64 {
		t.Errorf("memo starts at byte %d, want 64", off)
	}
}
