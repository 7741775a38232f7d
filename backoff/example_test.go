package backoff_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// The recommended schedule: retry n waits between 500·2^(n-1) ms and
// 500·2^n ms. A seeded source makes the draws reproducible.
func ExampleRecommended() {
	s := backoff.Recommended()
	s.Rand = rand.New(rand.NewPCG(1, 2)).Float64
	for n := 1; n <= 5; n++ {
		d := s.Delay(n)
		fmt.Printf("retry %d: %v <= %v <= %v\n", n,
			500*time.Millisecond<<(n-1), d.Round(time.Millisecond), 500*time.Millisecond<<n)
	}
	// Output:
	// retry 1: 500ms <= 838ms <= 1s
	// retry 2: 1s <= 1.461s <= 2s
	// retry 3: 2s <= 3.017s <= 4s
	// retry 4: 4s <= 5.719s <= 8s
	// retry 5: 8s <= 14.382s <= 16s
}

func ExampleExponential() {
	s := backoff.Exponential{Base: 100 * time.Millisecond, Max: 2 * time.Second}
	for n := 1; n <= 6; n++ {
		fmt.Print(s.Delay(n), " ")
	}
	fmt.Println()
	// Output:
	// 200ms 400ms 800ms 1.6s 2s 2s
}

func ExampleMultiplicative() {
	// The pseudocode's delay·U(0.5, 1.5), with the middle draw.
	s := backoff.Multiplicative{Rand: func() float64 { return 0.5 }}
	for n := 1; n <= 9; n++ {
		fmt.Print(s.Delay(n), " ")
	}
	fmt.Println()
	// Output:
	// 500ms 1s 2s 4s 8s 16s 32s 1m0s 1m0s
}

func ExampleFunc() {
	linear := backoff.Func(func(attempt int) time.Duration {
		return time.Duration(attempt) * time.Second
	})
	fmt.Println(linear.Delay(3))
	// Output: 3s
}
