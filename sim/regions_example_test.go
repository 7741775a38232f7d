package sim_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// The seed's client at ten times its limit (1,000 a minute, burst 200),
// its requests split evenly between two regions: with a Redis per region
// it gets twice its limit; with a home region, its limit.
func ExampleRegions() {
	r, err := sim.Regions(sim.RegionsOptions{Seed: 1, Keys: 2, Duration: time.Minute,
		Scenarios: []sim.RegionScenario{{Name: "50/50 10x", Split: 0.5, Load: 10}}})
	if err != nil {
		panic(err)
	}
	for _, row := range r.Rows {
		fmt.Printf("%-13s admitted %6.1f of %7.1f (%.2f× exact)\n", row.Design, row.Admitted, row.Offered, row.VsExact)
	}
	// Output:
	// exact         admitted 1199.0 of  9867.5 (1.00× exact)
	// per-region    admitted 2398.0 of  9867.5 (2.00× exact)
	// home          admitted 1200.0 of  9867.5 (1.00× exact)
	// home-majority admitted 1200.0 of  9867.5 (1.00× exact)
}
