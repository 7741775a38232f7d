package main

import (
	"errors"
	"flag"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/sim"
)

// simRegions is "sluice sim regions": the seed's two-region design
// (docs/scale.md), each region with its own Redis against a home region
// per key.
func simRegions(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	keys := fs.Int("keys", 40, "clients per scenario, each with its own key")
	rate := fs.Int64("rate", 1000, "the limit: requests per --period")
	period := fs.Duration("period", time.Minute, "the limit's period")
	burst := fs.Int64("burst", 200, "the limit's burst (a token bucket)")
	duration := fs.Duration("duration", 5*time.Minute, "length of the steady scenarios")
	local := fs.Duration("local-rtt", time.Millisecond, "round trip from a gateway to its region's Redis")
	cross := fs.Duration("cross-rtt", 70*time.Millisecond, "round trip between the two regions")
	return func(c simCommon) (simResult, error) {
		if c.runs > 1 {
			return nil, errors.New("regions averages over --keys: --runs does not apply")
		}
		if err := atLeastOne("--keys", *keys); err != nil {
			return nil, err
		}
		if err := positive("--period", *period, "--duration", *duration, "--local-rtt", *local, "--cross-rtt", *cross); err != nil {
			return nil, err
		}
		return sim.Regions(sim.RegionsOptions{Seed: c.seed, Keys: *keys, Duration: *duration,
			Limit:    ratelimit.Limit{Rate: *rate, Period: *period, Burst: *burst},
			LocalRTT: *local, CrossRTT: *cross})
	}
}
