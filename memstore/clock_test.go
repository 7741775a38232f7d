package memstore

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestRealClock checks that the per-call clock (wall time at New plus the
// monotonic time since) reads the wall clock, and moves forward with it.
func TestRealClock(t *testing.T) {
	s := New(Options{SweepInterval: -1, Resolution: -1})
	if s.clk != nil {
		t.Fatal("Resolution -1 uses the cached clock")
	}
	defer s.Close()
	for range 3 {
		before := time.Now().UnixNano()
		got := s.clock()
		after := time.Now().UnixNano()
		// A generous margin: the two clocks agree to the microsecond unless
		// the wall clock was stepped meanwhile.
		if got < before-int64(time.Second) || got > after+int64(time.Second) {
			t.Fatalf("clock() = %d, wall clock between %d and %d", got, before, after)
		}
		time.Sleep(2 * time.Millisecond)
	}
	a := s.clock()
	time.Sleep(5 * time.Millisecond)
	if b := s.clock(); b-a < int64(5*time.Millisecond) {
		t.Errorf("clock advanced %v across a 5ms sleep", time.Duration(b-a))
	}
}

// TestCachedClockByDefault checks that the zero Options read the cached
// clock, that it follows the wall clock, that stores of one resolution share
// one clock, and that the last store to close stops it.
func TestCachedClockByDefault(t *testing.T) {
	a := New(Options{SweepInterval: -1})
	b := New(Options{SweepInterval: -1, Resolution: DefaultResolution})
	if a.clk == nil || a.clk != b.clk {
		t.Fatalf("zero Options: clock %p, explicit DefaultResolution: %p; want one shared cached clock", a.clk, b.clk)
	}
	c := a.clk
	// The clock reaches a time read after it started (a tick later, or a
	// scheduling delay on a loaded machine), and never passes the wall
	// clock.
	before := time.Now().UnixNano()
	for deadline := time.Now().Add(10 * time.Second); a.clock() < before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("cached clock still at %d, 10s after %d", a.clock(), before)
		}
	}
	if got, now := a.clock(), time.Now().UnixNano(); got > now {
		t.Errorf("cached clock read %d, ahead of the wall clock's %d", got, now)
	}
	a.Close()
	select {
	case <-c.done:
		t.Fatal("the clock stopped while a store still used it")
	default:
	}
	b.Close()
	<-c.done // the last store closed: the goroutine has returned
	d := New(Options{SweepInterval: -1})
	defer d.Close()
	if d.clk == c {
		t.Error("a stopped clock was reused")
	}
}

// TestFakeClockReadsPerCall checks that a store made in a testing/synctest
// bubble, whose fake clock starts at 2000-01-01, reads that clock on every
// call: its decisions follow the bubble's time exactly, and it shares no
// cached clock (a goroutine of the real clock's stores, or of a bubble)
// with stores outside.
func TestFakeClockReadsPerCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{})
		defer s.Close()
		if s.clk != nil {
			t.Fatal("a store in a synctest bubble reads a cached clock")
		}
		a := s.clock()
		time.Sleep(1500 * time.Microsecond)
		if got := s.clock() - a; got != int64(1500*time.Microsecond) {
			t.Errorf("clock moved %v across the bubble's 1.5 ms sleep", time.Duration(got))
		}
	})
}

// TestExactReadsTheSystemClock checks that a reading no longer known to be
// fresh is not used for an admission: with the clock's goroutine stopped
// (starved for ever) and its reading left 50 ms behind, exact returns a
// reading no earlier than the system clock's before the call, and stores
// it for the other readers.
func TestExactReadsTheSystemClock(t *testing.T) {
	c := acquireClock(77 * time.Microsecond)
	c.release() // the goroutine has returned: nothing refreshes the reading
	stale := mono() - int64(50*time.Millisecond)
	c.now.Store(stale)
	c.fresh.Store(ticks()) // fresh until now, and never again
	before := mono()
	if got := c.exact(); got < before {
		t.Fatalf("exact() = %d, %v behind the system clock read before the call", got, time.Duration(before-got))
	}
	if c.now.Load() < before {
		t.Error("exact did not store the reading it took")
	}
}

// TestCalibration checks the counter's calibration on pairs of readings:
// a first estimate after calFirst, a check every calEvery after, and a
// rate that moves by more than rateMoved starts over with none (so that
// no reading is trusted on an admission until it is measured again).
func TestCalibration(t *testing.T) {
	var c calibration
	ms := int64(time.Millisecond)
	steps := []struct {
		t, m int64 // the pair: counter, monotonic ns
		want float64
		why  string
	}{
		{1000, 1 * ms, 0, "a first pair: none yet"},
		{1000 + 2*3*ms, 4 * ms, 0, "3 ms on: none before calFirst"},
		{1000 + 2*5*ms, 6 * ms, 2, "5 ms on: 2 ticks a ns"},
		{1000 + 2*49*ms, 50 * ms, 2, "44 ms on: the last measured, until calEvery"},
		{1000 + 2*105*ms + ms/10, 106 * ms, 2.001, "100 ms on, within rateMoved: refined"},
		{1000 + 2*105*ms + ms/10 + 3*100*ms, 206 * ms, 0, "the rate moved from 2 to 3 ticks a ns: none"},
		{1000 + 2*105*ms + ms/10 + 3*105*ms, 211 * ms, 3, "measured again"},
	}
	for _, s := range steps {
		if got := c.add(s.t, s.m); got != s.want {
			t.Fatalf("%s: rate %v, want %v", s.why, got, s.want)
		}
	}
}
