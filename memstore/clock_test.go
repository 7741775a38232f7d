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
