package window_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestRescale(t *testing.T) {
	m, h := int64(time.Minute), int64(time.Hour)
	const base = int64(1_000_000) * int64(time.Hour) // an hour boundary
	for _, tc := range []struct {
		name     string
		s        window.State
		now      int64
		from, to int64
		sliding  bool
		want     window.State
	}{
		{"minute into hour: the count stays", window.State{Start: base + 5*m, Curr: 3}, base + 5*m + 10, m, h, false,
			window.State{Start: base, Curr: 3}},
		{"hour into minute: the count fills the current minute", window.State{Start: base, Curr: 80}, base + 30*m, h, m, false,
			window.State{Start: base + 30*m, Curr: 80}},
		{"expired in the old windows: nothing carries", window.State{Start: base, Curr: 3}, base + 2*m, m, h, false,
			window.State{}},
		{"fixed: the previous window does not carry", window.State{Start: base, Curr: 3}, base + m + 1, m, h, false,
			window.State{}},
		{"sliding: the previous minute is in this hour", window.State{Start: base + 5*m, Prev: 4, Curr: 3}, base + 5*m + 1, m, h, true,
			window.State{Start: base, Curr: 7}},
		{"sliding: the previous hour is the previous hour", window.State{Start: base, Prev: 4, Curr: 3}, base + 1, h, 2 * h, true,
			window.State{Start: base, Prev: 4, Curr: 3}},
		{"sliding: the previous minute before the new one is its previous", window.State{Start: base + 5*m, Prev: 4, Curr: 3}, base + 5*m + 1, m, m / 2, true,
			window.State{Start: base + 5*m, Prev: 4, Curr: 3}},
		{"same period: as it is", window.State{Start: base, Curr: 3}, base + 5*h, m, m, false,
			window.State{Start: base, Curr: 3}},
		{"sums stop at MaxRate", window.State{Start: base + 5*m, Prev: ratelimit.MaxRate, Curr: ratelimit.MaxRate}, base + 5*m, m, h, true,
			window.State{Start: base, Curr: ratelimit.MaxRate}},
	} {
		if got := window.Rescale(tc.s, tc.now, tc.from, tc.to, tc.sliding); got != tc.want {
			t.Errorf("%s: Rescale = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestRefund(t *testing.T) {
	m := int64(time.Minute)
	const base = int64(1_000_000) * int64(time.Hour)
	for _, tc := range []struct {
		name    string
		s       window.State
		n       int64
		sliding bool
		want    window.State
		took    bool
	}{
		{"from the current window", window.State{Start: base, Curr: 3}, 2, false, window.State{Start: base, Curr: 1}, true},
		{"never below zero", window.State{Start: base, Curr: 3}, 9, false, window.State{}, true},
		{"fixed: not from the previous window", window.State{Start: base, Prev: 5, Curr: 1}, 3, false, window.State{}, true},
		{"sliding: then from the previous window", window.State{Start: base, Prev: 5, Curr: 1}, 3, true, window.State{Start: base, Prev: 3}, true},
		{"nothing to give back", window.State{Start: base - 2*m, Curr: 4}, 1, true, window.State{}, false},
	} {
		got, took := window.Refund(tc.s, base+1, m, tc.n, tc.sliding)
		if got != tc.want || took != tc.took {
			t.Errorf("%s: Refund = %+v, %v; want %+v, %v", tc.name, got, took, tc.want, tc.took)
		}
	}
}
