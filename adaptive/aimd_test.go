package adaptive

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// drive feeds c successes at its own rate from *now for d, with latency lat.
func drive(c *AIMD, now *time.Time, d time.Duration, lat time.Duration) {
	end := now.Add(d)
	for now.Before(end) {
		step := time.Duration(float64(time.Second) / c.Rate())
		*now = now.Add(step)
		c.OnResponse(*now, Sample{Signal: Success, Latency: lat})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestAIMDSlowStartThenAIMD(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{SlowStartInterval: time.Second})
	now := t0
	if c.Rate() != 2 || !c.SlowStart() {
		t.Fatalf("initial rate %v (slow start %v), want 2 in slow start", c.Rate(), c.SlowStart())
	}
	// Slow start: about doubles each second of success.
	drive(c, &now, 4*time.Second, 10*time.Millisecond)
	before := c.Rate()
	if before < 16 || before > 34 {
		t.Fatalf("after 4 s of slow start: rate %v, want about 2·2^4", before)
	}
	// A 429 ends slow start: just under what was served (here, all that
	// was sent).
	now = now.Add(time.Millisecond)
	c.OnResponse(now, Sample{Signal: Throttled, Latency: 10 * time.Millisecond})
	after := c.Rate()
	if after > 0.9*before || after < before/4 || c.SlowStart() {
		t.Fatalf("after the first 429: rate %v -> %v (slow start %v), want in [1/4, 0.9] of it, out of slow start", before, after, c.SlowStart())
	}
	// The other in-flight requests' 429s, sent before the cut: no more cuts.
	for range 5 {
		c.OnResponse(now.Add(time.Millisecond), Sample{Signal: Throttled, Latency: 10 * time.Millisecond})
	}
	if got := c.Rate(); got != after {
		t.Fatalf("after concurrent 429s: rate %v, want still %v", got, after)
	}
	// Recovery: back to just under the rate that failed within 3 s, and
	// held there.
	prev := after
	for range 4 {
		drive(c, &now, time.Second+20*time.Millisecond, 10*time.Millisecond)
		if got := c.Rate(); got < prev {
			t.Fatalf("recovering: rate %v after %v, want no decrease", got, prev)
		}
		prev = c.Rate()
	}
	if prev < 0.8*before || prev > before {
		t.Fatalf("recovered to %v, want just under %v", prev, before)
	}
	// A timeout for a request sent after the cut: ×0.8.
	now = now.Add(time.Second)
	c.OnResponse(now, Sample{Signal: Timeout, Latency: 10 * time.Millisecond})
	if got := c.Rate(); !near(got, prev*0.8) {
		t.Fatalf("after a timeout: rate %v, want %v", got, prev*0.8)
	}
}

// TestAIMDRecovery: after a cut, the rate climbs halfway back to just under
// the rate that failed each interval (at least +Increase), holds there, then
// probes beyond it with doubling steps.
func TestAIMDRecovery(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 20, NoSlowStart: true, Hold: 2})
	now := t0
	c.OnResponse(now, Sample{Signal: Throttled})
	if got := c.Rate(); got != 16 {
		t.Fatalf("after a 429: rate %v, want 16", got)
	}
	// Aim: 2% under 20 = 19.6.
	for _, want := range []float64{17.8, 18.8, 19.6, 19.6, 20.6, 22.6} {
		drive(c, &now, time.Second+20*time.Millisecond, 0)
		if got := c.Rate(); !near(got, want) {
			t.Fatalf("recovering: rate %v, want %v", got, want)
		}
	}
}

func TestAIMDRetryAfterFloor(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 10, NoSlowStart: true})
	now := t0
	c.OnResponse(now, Sample{Signal: Throttled, RetryAfter: 5 * time.Second})
	if got := c.Rate(); got != 8 {
		t.Fatalf("after a 429: rate %v, want 8", got)
	}
	drive(c, &now, 4*time.Second, 0)
	if got := c.Rate(); got != 8 {
		t.Fatalf("inside Retry-After: rate %v, want no increase (8)", got)
	}
	drive(c, &now, 2*time.Second+100*time.Millisecond, 0)
	if got := c.Rate(); got <= 8 {
		t.Fatalf("after Retry-After: rate %v, want above 8", got)
	}
}

func TestAIMDBlockAndNeutral(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 10, NoSlowStart: true})
	for i := range 50 {
		c.OnResponse(t0.Add(time.Duration(i)*time.Second), Sample{Signal: Block})
		c.OnResponse(t0.Add(time.Duration(i)*time.Second), Sample{Signal: Neutral})
	}
	if got := c.Rate(); got != 10 {
		t.Errorf("after blocks: rate %v, want 10 (blocks neither slow nor speed up)", got)
	}
}

// TestAIMDIdle: a rate that is not used is not increased.
func TestAIMDIdle(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 10})
	for i := range 20 {
		c.OnResponse(t0.Add(time.Duration(i)*time.Second), Sample{Signal: Success})
	}
	if got := c.Rate(); got != 10 {
		t.Errorf("one request a second: rate %v, want 10", got)
	}
}

func TestAIMDLatency(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 20, NoSlowStart: true})
	now := t0
	drive(c, &now, 2*time.Second, 20*time.Millisecond)
	before := c.Rate()
	// Latency climbs to 10× its baseline: the rate eases off, at most once
	// per interval, without any error.
	drive(c, &now, 3*time.Second, 200*time.Millisecond)
	after := c.Rate()
	if after >= before {
		t.Fatalf("latency 10× baseline: rate %v -> %v, want lower", before, after)
	}
	if min := before * math.Pow(0.8, 3.1); after < min {
		t.Errorf("latency 10× baseline: rate %v -> %v, want at most one cut a second (>= %v)", before, after, min)
	}
	// Disabled.
	c = NewAIMD(Options{Initial: 20, NoSlowStart: true, Tolerance: -1})
	now = t0
	drive(c, &now, 2*time.Second, 20*time.Millisecond)
	drive(c, &now, 3*time.Second, 200*time.Millisecond)
	if c.Rate() < 20 {
		t.Errorf("latency signal disabled: rate fell to %v", c.Rate())
	}
}

func TestAIMDBounds(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 1, Min: 0.5, Max: 4})
	now := t0
	for range 20 {
		now = now.Add(time.Second)
		c.OnResponse(now, Sample{Signal: Throttled})
	}
	if got := c.Rate(); got != 0.5 {
		t.Errorf("after many 429s: rate %v, want Min 0.5", got)
	}
	c = NewAIMD(Options{Initial: 1, Max: 4})
	drive(c, &now, 20*time.Second, 0)
	if got := c.Rate(); got != 4 {
		t.Errorf("after long success: rate %v, want Max 4", got)
	}
	if got := NewAIMD(Options{Initial: math.NaN(), Decrease: 7}).Rate(); got != 2 {
		t.Errorf("bad options: rate %v, want the default 2", got)
	}
}

func BenchmarkOnResponse(b *testing.B) {
	b.ReportAllocs()
	c := NewAIMD(Options{})
	now := t0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		c.OnResponse(now, Sample{Signal: Success, Latency: time.Millisecond})
	}
}

// TestAIMDLatencyNoise: sub-millisecond latencies that quadruple on noise
// (a loopback server under the race detector) are not congestion.
func TestAIMDLatencyNoise(t *testing.T) {
	t.Parallel()
	c := NewAIMD(Options{Initial: 20, NoSlowStart: true})
	now := t0
	for i := range 2000 {
		now = now.Add(10 * time.Millisecond)
		lat := 100 * time.Microsecond
		if i%2 == 1 {
			lat = 900 * time.Microsecond
		}
		c.OnResponse(now, Sample{Signal: Success, Latency: lat})
	}
	if got := c.Rate(); got < 20 {
		t.Errorf("after noisy sub-ms latencies: rate %v, want no decrease from 20", got)
	}
}
