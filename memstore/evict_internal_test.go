package memstore

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/algorithm/slidinglog"
	"github.com/sluicehq/sluice/internal/algorithm/window"
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

// TestWinEntryPacking checks that a window entry gives back the state and
// limit it was made of, for counts up to MaxRate and every limit.
func TestWinEntryPacking(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range 10000 {
		st := window.State{Start: int64(rng.Uint64()), Prev: rng.Int64N(1<<53 + 1), Curr: rng.Int64N(1<<53 + 1)}
		if i == 0 {
			st.Prev, st.Curr = 1<<53, 1<<53
		}
		l := packWinLimit(1+rng.Int64N(1<<53), rng.IntN(2) == 0)
		period := 1 + rng.Int64N(1<<60)
		e := newWinEntry(st, period, l)
		if e.state() != st || e.limit() != l || e.period != period || !l.valid() {
			t.Fatalf("newWinEntry(%+v, %d, %#x) gives back %+v, %d, %#x", st, period, l, e.state(), e.period, e.limit())
		}
	}
}

// TestCostClasses pins what each kind of key costs to forget.
func TestCostClasses(t *testing.T) {
	const now = int64(1) << 60
	min, hour := int64(time.Minute), int64(time.Hour)
	// A GCRA limit of 10 a minute (τ = 1 min, T = 6 s) and 10 an hour.
	perMin, perHour := packTATLimit(min, 10), packTATLimit(hour, 10)
	win := func(start, prev, curr, period, rate int64, sliding bool) cost {
		e := newWinEntry(window.State{Start: start, Prev: prev, Curr: curr}, period, packWinLimit(rate, sliding))
		return winCost(&e, now)
	}
	logOf := func(used int64, at ...int64) cost {
		var entries []slidinglog.Entry
		for _, a := range at {
			entries = append(entries, slidinglog.Entry{At: a, N: 1})
		}
		return logCost(&logEntry{log: slidinglog.NewLog(entries), exp: at[len(at)-1] + min, rate: 3, period: min, used: used}, now)
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
