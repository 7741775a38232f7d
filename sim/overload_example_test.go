package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// The overload scenario, small: a server of 20 requests in flight at
// 20 ms each, 2 s phases, the 5x phase. Without a limit requests miss the
// 1 s deadline; sluice's limiters keep the oracle's goodput at a p99 near
// the no-load one.
func ExampleOverload() {
	res, err := sim.Overload(sim.OverloadOptions{Seed: 1, Model: sim.IOModel{Capacity: 20},
		Warmup: time.Second, Phase: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res.Rows {
		if r.Phase == "5x" {
			fmt.Printf("%-16s goodput %.2f of the oracle's, p99 %.2fx no-load\n", r.Limiter, r.GoodputRatio, r.P99Ratio)
		}
	}
	// Output:
	// sluice-gradient  goodput 1.01 of the oracle's, p99 1.35x no-load
	// sluice-vegas     goodput 1.01 of the oracle's, p99 1.33x no-load
	// oracle-fixed     goodput 1.00 of the oracle's, p99 0.99x no-load
	// none             goodput 0.02 of the oracle's, p99 38.67x no-load
}
