package memstore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
)

// TestF16RoundsDown checks the 16-bit floats of tatLimit: never above the
// value, and within one part in 1024 below it, from 1 to 2^53.
func TestF16RoundsDown(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	xs := []uint64{1, 2, 3, 1023, 1024, 1025, 2047, 2048, uint64(time.Hour), 1<<53 - 1, 1 << 53}
	for range 10000 {
		xs = append(xs, 1+rng.Uint64N(1<<(1+rng.IntN(53))))
	}
	for _, x := range xs {
		v := f16(x)
		if got := unf16(v); v == 0 || got > float64(x) || got < float64(x)*(1-1.0/1024) {
			t.Fatalf("f16(%d) = %#x, which decodes to %v", x, v, got)
		}
	}
}

// TestWinSlotPacking checks that a window slot gives back the state and
// limit it was given, for counts up to MaxRate and every limit: in the
// slot when the counts fit, spilled when they do not, and back in the slot
// when they fit again.
func TestWinSlotPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	var tb winTable
	const h = 0x1234_5678_9abc_def0
	i := tb.insert(h, 1, int64(time.Minute))
	spills := 0
	for n := range 20000 {
		// Counts of every size, most of them small.
		count := func() int64 { return rng.Int64N(1 << (1 + rng.IntN(53))) }
		st := window.State{Start: int64(rng.Uint64()), Prev: count(), Curr: count()}
		sliding := rng.IntN(2) == 0
		if !sliding && rng.IntN(4) > 0 {
			st.Prev = 0 // what a fixed window holds
		}
		// The edges: the largest counts that fit, and one more.
		switch n {
		case 0:
			st.Prev, st.Curr = 1<<53, 1<<53
		case 1:
			st.Prev, st.Curr, sliding = 1<<prevBits-1, 1<<curBits-1, true // all ones: spilled
		case 2:
			st.Prev, st.Curr, sliding = 1<<prevBits-2, 1<<curBits-1, true // the largest that fit
		case 3:
			st.Prev, st.Curr, sliding = 1<<prevBits, 1, true
		case 4:
			st.Prev, st.Curr, sliding = 1, 1<<curBits, true
		case 5:
			st.Prev, st.Curr, sliding = 0, spilled-1, false // the largest that fits
		case 6:
			st.Prev, st.Curr, sliding = 0, spilled, false
		}
		l := packWinLimit(1+rng.Int64N(1<<53), sliding)
		tb.setWindow(i, st, l)
		if got := tb.window(i); got != st || tb.limit(i) != l || !l.valid() {
			t.Fatalf("setWindow(%+v, %#x) gives back %+v, %#x", st, l, got, tb.limit(i))
		}
		big := tb.a.slots[i].b&cntMask == spilled
		if big {
			spills++
		}
		if len(tb.a.big) != map[bool]int{false: 0, true: 1}[big] {
			t.Fatalf("%d spilled states for %+v, spilled %v", len(tb.a.big), st, big)
		}
		if (n == 2 || n == 5) && big {
			t.Fatalf("%+v (sliding %v) spilled; it fits", st, sliding)
		}
	}
	if spills == 0 || spills == 20000 {
		t.Errorf("%d of 20000 states spilled: the test does not cover both", spills)
	}
	tb.remove(i)
	if tb.len() != 0 || len(tb.a.big) != 0 || tb.find(h) >= 0 {
		t.Errorf("after remove: %d keys, %d spilled", tb.len(), len(tb.a.big))
	}
}

// TestWinTableMatchesMap drives a window table and a map with the same
// random inserts, removals (which move the keys after them back) and
// sweeps, with hashes that share low bits so that probe runs collide and
// wrap around the array's end, and checks they hold the same keys and
// states.
func TestWinTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var tb winTable
	ref := map[uint64]window.State{}
	// A few hundred hashes whose low bits take a dozen values, and the
	// array's last slots among them.
	hashes := make([]uint64, 300)
	for i := range hashes {
		hashes[i] = rng.Uint64()&lowMask&^0xf | uint64(rng.IntN(12)) | 0xf
		if i%3 == 0 {
			hashes[i] = hashes[i]&^0xf | uint64(rng.IntN(16))
		}
	}
	check := func(step int) {
		t.Helper()
		if tb.len() != len(ref) {
			t.Fatalf("step %d: %d keys, want %d", step, tb.len(), len(ref))
		}
		for h, st := range ref {
			i := tb.find(h)
			if i < 0 || tb.window(i) != st {
				t.Fatalf("step %d: key %#x at %d, want %+v", step, h, i, st)
			}
		}
		n := 0
		tb.all(0, func(int) bool { n++; return true })
		if n != len(ref) {
			t.Fatalf("step %d: all visits %d keys, want %d", step, n, len(ref))
		}
	}
	for step := range 20000 {
		h := hashes[rng.IntN(len(hashes))]
		i := tb.find(h)
		switch op := rng.IntN(10); {
		case op < 6:
			st := window.State{Start: int64(step), Curr: 1 + rng.Int64N(1<<(1+rng.IntN(40)))}
			if i < 0 {
				i = tb.insert(h, 1, int64(time.Minute))
			}
			tb.setWindow(i, st, packWinLimit(10, false))
			ref[h] = st
		case op < 9:
			if i >= 0 {
				tb.remove(i)
				delete(ref, h)
			}
		default:
			// A sweep of the keys whose Curr is odd.
			tb.removeWhere(func(i int) bool { return tb.window(i).Curr%2 == 1 })
			for k, st := range ref {
				if st.Curr%2 == 1 {
					delete(ref, k)
				}
			}
		}
		if step%97 == 0 || step < 200 {
			check(step)
		}
	}
	check(-1)
}

// TestCostClasses pins what each kind of key costs to forget.
func TestCostClasses(t *testing.T) {
	const now = int64(1) << 60
	min, hour := int64(time.Minute), int64(time.Hour)
	// A GCRA limit of 10 a minute (τ = 1 min, T = 6 s) and 10 an hour.
	perMin, perHour := packTATLimit(min, 10), packTATLimit(hour, 10)
	win := func(start, prev, curr, period, rate int64, sliding bool) cost {
		return winCost(window.State{Start: start, Prev: prev, Curr: curr}, packWinLimit(rate, sliding), period, now)
	}
	logOf := func(used int64, at ...int64) cost {
		var entries []slidinglog.Entry
		for _, a := range at {
			entries = append(entries, slidinglog.Entry{At: a, N: 1})
		}
		return logCost(entries, used, packWinLimit(3, false), min, now)
	}
	for _, tc := range []struct {
		name  string
		got   cost
		class int8
		frac  float64
	}{
		{"gcra decayed", tatCost(now, now, perMin), costFree, 0},
		{"gcra one used of 10", tatCost(now+6e9, now, perMin), costCheap, 0.1},
		{"gcra eight used", tatCost(now+48e9, now, perMin), costCheap, 0.8},
		// One left: the packed τ rounds down, so the share is over 0.9 and
		// the key counts as a denial (rounding errs towards keeping).
		{"gcra nine used", tatCost(now+54e9, now, perMin), costValuable, 0.9},
		{"gcra exhausted", tatCost(now+55e9, now, perMin), costValuable, 55.0 / 60},
		{"gcra hourly, one used", tatCost(now+hour/10, now, perHour), costCheap, 0.1},
		{"gcra hourly, a quarter used", tatCost(now+hour/4, now, perHour), costValuable, 0.25},
		{"gcra unknown limit", tatCost(now+1, now, 0), costValuable, 1},
		{"fixed past its window", win(now-min, 0, 5, min, 10, false), costFree, 0},
		{"fixed half used", win(now, 0, 5, min, 10, false), costCheap, 0.5},
		{"fixed full", win(now, 0, 10, min, 10, false), costValuable, 1},
		{"fixed monthly, a tenth used", win(now, 0, 100, 30*24*hour, 1000, false), costCheap, 0.1},
		{"fixed monthly, a quarter used", win(now, 0, 250, 30*24*hour, 1000, false), costValuable, 0.25},
		// Sliding: previous window 10 (full), a quarter into the next: it
		// weighs 7.5, plus 1 or 2 in the current window; 9.5 denies a
		// request (9.5 + 1 > 10).
		{"sliding", win(now-min/4, 10, 1, min, 10, true), costCheap, 0.85},
		{"sliding denies", win(now-min/4, 10, 2, min, 10, true), costValuable, 0.95},
		// The current window ended a quarter ago: its count is the
		// previous one now, weighing 3/4.
		{"sliding rolled", win(now-min-min/4, 0, 8, min, 10, true), costCheap, 0.6},
		{"sliding gone", win(now-2*min, 10, 10, min, 10, true), costFree, 0},
		{"log, one of three", logOf(1, now-1), costCheap, 1.0 / 3},
		// Three logged, two of them out of the window now.
		{"log, two left the window", logOf(3, now-2*min, now-min, now-1), costCheap, 1.0 / 3},
		{"log full", logOf(3, now-3, now-2, now-1), costValuable, 1},
		{"log decayed", logOf(1, now-min), costFree, 0},
	} {
		if tc.got.class != tc.class || tc.got.frac < tc.frac*(1-1e-3) || tc.got.frac > tc.frac*(1+1e-3)+1e-9 {
			t.Errorf("%s: %+v, want class %d, share %.3f", tc.name, tc.got, tc.class, tc.frac)
		}
	}
}

// TestSpilledLogsReused checks that the spilled logs' slice does not grow
// with keys that come and go: a removed log's index is reused, and a
// rebuild renumbers what is left.
func TestSpilledLogsReused(t *testing.T) {
	var tb winTable
	two := []slidinglog.Entry{{At: 1, N: 1}, {At: 2, N: 1}}
	for h := uint64(2); h < 1002; h++ {
		i := tb.insert(h, 1, int64(time.Minute))
		tb.setLog(i, two, 2, packWinLimit(10, false), nil)
		if h%2 == 1 {
			tb.remove(tb.find(h - 1))
			tb.remove(tb.find(h))
		}
	}
	if n := len(tb.a.logs); n > 2 {
		t.Errorf("%d spilled logs held for at most 2 keys", n)
	}
	for h := uint64(2000); h < 2100; h++ {
		tb.setLog(tb.insert(h, 1, int64(time.Minute)), two, 2, packWinLimit(10, false), nil)
	}
	tb.removeWhere(func(i int) bool { return tb.a.slots[i].w&lowMask >= 2050 })
	tb.rebuild(tb.len())
	if n := len(tb.a.logs); n != 50 || len(tb.a.free) != 0 {
		t.Errorf("after a rebuild: %d spilled logs (%d free) for 50 keys", n, len(tb.a.free))
	}
	for h := uint64(2000); h < 2050; h++ {
		if le := tb.spilledLog(tb.find(h)); le == nil || len(le.log.Entries()) != 2 {
			t.Fatalf("key %d lost its log after the rebuild", h)
		}
	}
}
