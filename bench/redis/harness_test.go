package redis

import (
	"slices"
	"testing"
	"time"
)

func TestPairedAndMedian(t *testing.T) {
	r := func(n int64) Result { return Result{Decisions: n, Elapsed: time.Second} }
	base := []Result{r(100), r(50), {}, r(200)}
	a := []Result{r(500), r(400), r(300), r(600), r(700)}
	// Round 3's base measured nothing and round 5 has no base: both skipped.
	got := Paired(a, base)
	if want := []float64{5, 8, 3}; !slices.Equal(got, want) {
		t.Fatalf("Paired = %v; want %v", got, want)
	}
	if m := Median(got); m != 5 {
		t.Fatalf("Median(%v) = %v; want 5", got, m)
	}
	if !slices.Equal(got, []float64{5, 8, 3}) {
		t.Fatal("Median sorted its argument")
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("Median of 1..4 = %v; want 2.5", m)
	}
	if m := Median(nil); m != 0 {
		t.Fatalf("Median(nil) = %v", m)
	}
}
