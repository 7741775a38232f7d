package backoff

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

const ms = time.Millisecond

// fixed returns a Rand that always draws u.
func fixed(u float64) func() float64 { return func() float64 { return u } }

// lowest and highest are the extreme draws of a [0, 1) source.
var (
	lowest  = fixed(0)
	highest = fixed(math.Nextafter(1, 0))
)

// TestRecommendedTable checks the 429 guide's schedule: retry n waits between
// 500·2^(n-1) ms and 500·2^n ms, capped at 60 s.
func TestRecommendedTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 500 * ms, 1000 * ms},
		{2, 1 * time.Second, 2 * time.Second},
		{3, 2 * time.Second, 4 * time.Second},
		{4, 4 * time.Second, 8 * time.Second},
		{5, 8 * time.Second, 16 * time.Second},
		{6, 16 * time.Second, 32 * time.Second},
		{7, 30 * time.Second, 60 * time.Second},
		{8, 30 * time.Second, 60 * time.Second},
		{1000, 30 * time.Second, 60 * time.Second},
		{0, 500 * ms, 1000 * ms},  // read as 1
		{-3, 500 * ms, 1000 * ms}, // read as 1
	}
	for _, tt := range tests {
		lo := EqualJitter{Rand: lowest}.Delay(tt.attempt)
		hi := EqualJitter{Rand: highest}.Delay(tt.attempt)
		if lo != tt.min {
			t.Errorf("EqualJitter{} lowest draw: Delay(%d) = %v, want %v", tt.attempt, lo, tt.min)
		}
		if hi < tt.max-ms || hi > tt.max {
			t.Errorf("EqualJitter{} highest draw: Delay(%d) = %v, want just under %v", tt.attempt, hi, tt.max)
		}
		if r := Recommended(); r.Base != DefaultBase || r.Max != DefaultMax {
			t.Errorf("Recommended() = %+v, want the zero EqualJitter spelled out", r)
		}
		for range 200 {
			d := EqualJitter{}.Delay(tt.attempt)
			if d < tt.min || d > tt.max {
				t.Fatalf("EqualJitter{}.Delay(%d) = %v, want in [%v, %v]", tt.attempt, d, tt.min, tt.max)
			}
		}
	}
}

// TestMultiplicativePseudocode checks the guide's pseudocode schedule:
// 500·2^(n-1) ms · U(0.5, 1.5), capped at 60 s.
func TestMultiplicativePseudocode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 250 * ms, 750 * ms},
		{2, 500 * ms, 1500 * ms},
		{3, 1 * time.Second, 3 * time.Second},
		{5, 4 * time.Second, 12 * time.Second},
		{7, 16 * time.Second, 48 * time.Second},
		{8, 32 * time.Second, 60 * time.Second},
		{9, 60 * time.Second, 60 * time.Second},
		{5000, 60 * time.Second, 60 * time.Second},
	}
	for _, tt := range tests {
		lo := Multiplicative{Rand: lowest}.Delay(tt.attempt)
		hi := Multiplicative{Rand: highest}.Delay(tt.attempt)
		if lo != tt.min {
			t.Errorf("Multiplicative lowest draw: Delay(%d) = %v, want %v", tt.attempt, lo, tt.min)
		}
		if hi < tt.max-ms || hi > tt.max {
			t.Errorf("Multiplicative highest draw: Delay(%d) = %v, want just under %v", tt.attempt, hi, tt.max)
		}
	}
	if got := (Multiplicative{Spread: 0.1, Rand: lowest}).Delay(1); got != 450*ms {
		t.Errorf("Multiplicative{Spread: 0.1} lowest draw: Delay(1) = %v, want 450ms", got)
	}
}

// TestBounds checks every strategy stays inside its documented bounds for
// any attempt and any draw.
func TestBounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	base, maxd := 100*ms, 10*time.Second
	ceil := func(n int) time.Duration {
		return time.Duration(min(float64(maxd), float64(base)*math.Exp2(float64(max(n, 1)))))
	}
	tests := []struct {
		name   string
		s      Strategy
		lo, hi func(n int) time.Duration
	}{
		{"Exponential", Exponential{Base: base, Max: maxd}, ceil, ceil},
		{"FullJitter", FullJitter{Base: base, Max: maxd, Rand: r.Float64},
			func(int) time.Duration { return 0 }, ceil},
		{"EqualJitter", EqualJitter{Base: base, Max: maxd, Rand: r.Float64},
			func(n int) time.Duration { return ceil(n) / 2 }, ceil},
		{"Decorrelated", Decorrelated{Base: base, Max: maxd, Rand: r.Float64},
			func(int) time.Duration { return base },
			func(n int) time.Duration {
				return time.Duration(min(float64(maxd), float64(base)*math.Pow(3, float64(max(n, 1)))))
			}},
		{"Multiplicative", Multiplicative{Base: base, Max: maxd, Rand: r.Float64},
			func(n int) time.Duration {
				return time.Duration(min(float64(maxd), float64(base)*math.Exp2(float64(max(n, 1)-1))*0.5))
			},
			func(n int) time.Duration {
				return time.Duration(min(float64(maxd), float64(base)*math.Exp2(float64(max(n, 1)-1))*1.5))
			}},
		{"Constant", Constant(time.Second), func(int) time.Duration { return time.Second }, func(int) time.Duration { return time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{-1, 0, 1, 2, 3, 5, 7, 10, 20, 40, 62, 63, 64, 100, math.MaxInt} {
				for range 50 {
					d := tt.s.Delay(n)
					if lo, hi := tt.lo(n), tt.hi(n); d < lo-1 || d > hi+1 {
						t.Fatalf("Delay(%d) = %v, want in [%v, %v]", n, d, lo, hi)
					}
				}
			}
		})
	}
}

func TestDecorrelatedNext(t *testing.T) {
	t.Parallel()
	d := Decorrelated{Base: 100 * ms, Max: time.Second, Rand: highest}
	prev := time.Duration(0)
	want := []time.Duration{300 * ms, 900 * ms, time.Second, time.Second}
	for i, w := range want {
		prev = d.Next(prev)
		if prev < w-ms || prev > w {
			t.Errorf("step %d: Next = %v, want just under %v", i+1, prev, w)
		}
	}
	if got := (Decorrelated{Base: 100 * ms, Max: time.Second, Rand: lowest}).Next(5 * time.Second); got != 100*ms {
		t.Errorf("lowest draw: Next(5s) = %v, want 100ms", got)
	}
	// A Max below Base caps everything at Max.
	if got := (Decorrelated{Base: time.Second, Max: 10 * ms}).Delay(3); got != 10*ms {
		t.Errorf("Max < Base: Delay(3) = %v, want 10ms", got)
	}
}

func TestBrokenRand(t *testing.T) {
	t.Parallel()
	for _, u := range []float64{math.NaN(), -1, 2, math.Inf(1)} {
		for _, s := range []Strategy{
			FullJitter{Rand: fixed(u)}, EqualJitter{Rand: fixed(u)},
			Decorrelated{Rand: fixed(u)}, Multiplicative{Rand: fixed(u)},
		} {
			if d := s.Delay(3); d < 0 || d > DefaultMax {
				t.Errorf("%T with Rand = %v: Delay(3) = %v, want in [0, %v]", s, u, d, DefaultMax)
			}
		}
	}
}

func BenchmarkDelay(b *testing.B) {
	for _, bb := range []struct {
		name string
		s    Strategy
	}{
		{"Exponential", Exponential{}},
		{"FullJitter", FullJitter{}},
		{"EqualJitter", EqualJitter{}},
		{"Decorrelated", Decorrelated{}},
		{"Multiplicative", Multiplicative{}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				n := 0
				for pb.Next() {
					n++
					_ = bb.s.Delay(n%7 + 1)
				}
			})
		})
	}
}
