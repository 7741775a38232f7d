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

// The shedders on requests of four classes, 30% of them critical, at 2x
// of a server of 20 workers: the fleet shedder (a cap of 30 in flight, a
// third of it for critical requests) serves every critical request and
// sheds the others; the utilization shedder alone, with Stripe's 120 s
// ramp, has barely begun to shed after 2 s and loses critical requests as
// it loses the others.
func ExampleShedContenders() {
	sc, err := sim.ShedContenders(sim.ShedOptions{Workers: 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := sim.Overload(sim.OverloadOptions{Seed: 1, Model: sim.IOModel{Capacity: 20},
		Warmup: time.Second, Phase: 2 * time.Second,
		Contenders: append(sim.OverloadContenders()[2:3], sc...)}) // the oracle, then the shedders
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("classes:", res.Classes)
	for _, r := range res.Rows {
		if r.Phase == "2x" && r.Limiter != sim.OracleName {
			fmt.Printf("%-23s critical %.4f, success by class %.2f\n", r.Limiter, r.CriticalSuccess, r.ClassSuccess)
		}
	}
	// Output:
	// classes: [test get post critical]
	// sluice-shed-utilization critical 0.4877, success by class [0.47 0.51 0.48 0.49]
	// sluice-shed-fleet       critical 1.0000, success by class [0.24 0.26 0.28 1.00]
	// sluice-shed-stack       critical 1.0000, success by class [0.24 0.26 0.28 1.00]
	// sluice-shed-gradient    critical 1.0000, success by class [0.27 0.27 0.27 1.00]
}
