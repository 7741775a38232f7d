package shed_test

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Stripe's sketch computes the step with integers: at rest, a shedder at
// 28% moves by -28/120, which Ruby floors to -1 (and a rise of 28, 28/120,
// to 0). Here the step is the real quotient.
func TestStepIsNotIntegerDivision(t *testing.T) {
	down := shed.Step(28, 0, time.Second, 120*time.Second) - 28
	if !near(down, -28.0/120) {
		t.Errorf("resting step from 28: %v, want -28/120 = -0.2333", down)
	}
	if math.Round(down*1000)/1000 != -0.233 {
		t.Errorf("resting step from 28: %.3f, want -0.233 (not -1)", down)
	}
	if up := shed.Step(0, 28, time.Second, 120*time.Second); !near(up, 28.0/120) {
		t.Errorf("rising step toward 28: %v, want 0.2333 (not 0)", up)
	}
	for _, tc := range []struct {
		amount, target float64
		interval, ramp time.Duration
		want           float64
	}{
		{0.5, 0.5, time.Second, time.Minute, 0.5},
		{0, 1, time.Second, 0, 1},               // no ramp: at once
		{0, 1, 2 * time.Minute, time.Minute, 1}, // interval past the ramp: no overshoot
		{1, 0, 30 * time.Second, time.Minute, 0.5},
	} {
		if got := shed.Step(tc.amount, tc.target, tc.interval, tc.ramp); !near(got, tc.want) {
			t.Errorf("Step(%v, %v, %v, %v) = %v, want %v", tc.amount, tc.target, tc.interval, tc.ramp, got, tc.want)
		}
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct{ util, want float64 }{
		{0, 0}, {0.5, 0}, {0.8, 0}, {0.85, 0.25}, {0.9, 0.5}, {1, 1}, {3, 1}, {math.NaN(), 0},
	} {
		if got := shed.Target(tc.util, 0.8, 1); !near(got, tc.want) {
			t.Errorf("Target(%v, 0.8, 1) = %v, want %v", tc.util, got, tc.want)
		}
	}
}

// probe asks for one request of class c and ends it at once.
func probe(u *shed.Utilization, c shed.Class) bool {
	ok := u.Acquire(c)
	if ok {
		u.Release()
	}
	return ok
}

// A process at full utilization ramps its amount up at 1/120 of the gap a
// second: test traffic first, then GETs, then POSTs; critical untouched
// until the amount passes 3/4. When the load goes, the amount comes down
// the same way.
func TestUtilizationRampsByClass(t *testing.T) {
	clk := newClock()
	u, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: 10, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	const test, get, post, critical = 0, 1, 2, 3
	for range 10 { // ten workers busy
		if !u.Acquire(critical) {
			t.Fatal("shed at rest")
		}
	}
	clk.Add(time.Second)
	probe(u, critical) // first update: the arrivals so far saw 0..9 busy, a mean of 4.5
	if s := u.Stats(); s.Amount != 0 || !near(s.Utilization, 0.45) {
		t.Fatalf("after the first second: %+v, want amount 0 at utilization 0.45", s)
	}
	clk.Add(time.Second)
	probe(u, critical) // the arrivals of the last second saw 10 busy: utilization 1, target 1
	s := u.Stats()
	if !near(s.Utilization, 1) || s.Target != 1 || !near(s.Amount, 1.0/120) {
		t.Fatalf("after overload for a second: %+v, want utilization 1, target 1, amount 1/120", s)
	}
	if got := u.ShedFraction(test); !near(got, 4.0/120) {
		t.Errorf("test class shed fraction %v, want 4/120", got)
	}
	if u.ShedFraction(get) != 0 {
		t.Errorf("GETs shed before test traffic is")
	}
	clk.Add(118 * time.Second) // 118 seconds in one go: 118 steps
	probe(u, critical)
	want := 1 - math.Pow(119.0/120, 119)
	if s := u.Stats(); !near(s.Amount, want) {
		t.Fatalf("after two minutes of overload: amount %v, want %v", s.Amount, want)
	}
	fr := []float64{u.ShedFraction(test), u.ShedFraction(get), u.ShedFraction(post), u.ShedFraction(critical)}
	if fr[0] != 1 || fr[1] != 1 || !near(fr[2], 4*want-2) || fr[3] != 0 {
		t.Fatalf("shed fractions by class %v, want [1 1 %v 0]", fr, 4*want-2)
	}
	// Deterministic partial shedding: of 1000 POSTs, floor(1000·p) are shed.
	shedPosts := 0
	for range 1000 {
		if !probe(u, post) {
			shedPosts++
		}
	}
	if want := int(math.Floor(1000 * fr[2])); shedPosts < want-1 || shedPosts > want+1 {
		t.Errorf("shed %d of 1000 POSTs, want %d", shedPosts, want)
	}
	for range 100 {
		if probe(u, test) || probe(u, get) {
			t.Fatal("a test or GET request admitted while fully shed")
		}
		if !probe(u, critical) {
			t.Fatal("a critical request shed at amount < 3/4")
		}
	}
	if s := u.Stats(); s.Shed[test] != 100 || s.Shed[get] != 100 || s.Shed[critical] != 0 || s.InFlight != 10 {
		t.Errorf("stats %+v, want 100 test and 100 GETs shed, no critical, 10 in flight", s)
	}

	// The load goes: each second the amount closes 1/120 of its gap to 0.
	for range 10 {
		u.Release()
	}
	clk.Add(time.Second)
	probe(u, critical) // measures the last second's arrivals (10 busy): still overloaded
	clk.Add(time.Second)
	before := u.Stats().Amount
	probe(u, critical) // the last second's arrival saw 0 busy
	after := u.Stats().Amount
	if s := u.Stats(); s.Target != 0 || !near(after-before, -before/120) {
		t.Errorf("resting step: amount %v -> %v (target %v), want a change of %v", before, after, s.Target, -before/120)
	}
	clk.Add(time.Hour)
	probe(u, test)
	clk.Add(time.Second)
	if s := u.Stats(); s.Amount != 0 || !probe(u, test) {
		t.Errorf("an hour at rest: %+v, want amount 0 and test traffic admitted", s)
	}
}

// No class is shed, even in part, while an earlier class is admitted, at
// any utilization; at full utilization without a ramp, every class is.
func TestClassOrderNeverInverts(t *testing.T) {
	for busy := 0; busy <= 100; busy++ {
		clk := newClock()
		u, _ := shed.NewUtilization(shed.UtilizationOptions{Capacity: 100, Ramp: time.Second, Now: clk.Now})
		for range busy {
			u.Acquire(3)
		}
		clk.Add(time.Second)
		probe(u, 3) // the first update: a mean of (busy-1)/2, below the threshold
		clk.Add(time.Second)
		probe(u, 3) // measures the last second's arrival, which saw busy
		want := shed.Target(u.Stats().Utilization, 0.8, 1)
		if got := u.Stats().Amount; !near(got, want) {
			t.Fatalf("%d busy: amount %v, want its target %v (the ramp is one interval)", busy, got, want)
		}
		prev := 1.0
		for c := shed.Class(0); c < 4; c++ {
			f := u.ShedFraction(c)
			if f > prev || (f > 0 && prev < 1) {
				t.Fatalf("%d busy: class %d shed %v after class %d shed %v", busy, c, f, c-1, prev)
			}
			prev = f
		}
		if busy == 100 {
			for c := shed.Class(0); c < 4; c++ {
				if f := u.ShedFraction(c); !near(f, 1) {
					t.Errorf("class %d at utilization 1 without a ramp: shed %v, want 1 (critical last, but shed too)", c, f)
				}
			}
		}
	}
}

func TestUtilizationConcurrent(t *testing.T) {
	clk := newClock()
	u, _ := shed.NewUtilization(shed.UtilizationOptions{Capacity: 8, Ramp: 4 * time.Second, Now: clk.Now})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if u.Acquire(shed.Class((g + i) % 4)) {
					if i%100 == 0 {
						clk.Add(100 * time.Millisecond)
					}
					u.Release()
				}
			}
		}()
	}
	wg.Wait()
	if s := u.Stats(); s.InFlight != 0 || s.Amount < 0 || s.Amount > 1 {
		t.Errorf("after concurrent use: %+v, want nothing in flight and an amount in [0, 1]", s)
	}
}

func TestNewUtilizationRefuses(t *testing.T) {
	for _, o := range []shed.UtilizationOptions{
		{},
		{Capacity: -1},
		{Capacity: 10, Threshold: -0.1},
		{Capacity: 10, Threshold: 0.9, Full: 0.8},
		{Capacity: 10, Full: 11},
		{Capacity: 10, Ramp: -time.Second},
		{Capacity: 10, Interval: time.Microsecond},
		{Capacity: 10, Threshold: math.NaN()},
	} {
		if _, err := shed.NewUtilization(o); !errors.Is(err, shed.ErrOptions) {
			t.Errorf("NewUtilization(%+v) = %v, want ErrOptions", o, err)
		}
	}
}

func TestNewClasses(t *testing.T) {
	c, err := shed.NewClasses()
	if err != nil || c.Len() != 4 || c.Name(0) != "test" || c.Name(c.Last()) != "critical" || c.Name(9) != "class(9)" {
		t.Errorf("default classes: %v %v", c.Names(), err)
	}
	if cl, ok := c.Lookup("post"); !ok || cl != 2 {
		t.Errorf("Lookup(post) = %d %v, want 2 true", cl, ok)
	}
	for _, names := range [][]string{
		{"a", "a"}, {""}, {"Critical"}, {"a b"}, make([]string, 17),
	} {
		if _, err := shed.NewClasses(names...); !errors.Is(err, shed.ErrClasses) {
			t.Errorf("NewClasses(%q) = %v, want ErrClasses", names, err)
		}
	}
}
