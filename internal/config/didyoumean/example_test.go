package didyoumean_test

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/config/didyoumean"
)

func ExampleClosest() {
	fmt.Println(didyoumean.Closest("upstrem", []string{"listen", "routes", "upstream"}))
	// Output: upstream
}
