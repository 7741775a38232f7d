package memstore

import (
	"testing"
	"time"
)

// TestRealClock checks that the per-call clock (wall time at New plus the
// monotonic time since) reads the wall clock, and moves forward with it.
func TestRealClock(t *testing.T) {
	s := New(Options{SweepInterval: -1})
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
