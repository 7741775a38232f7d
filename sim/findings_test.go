package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFindings pins what the scenarios show, small: each case prints a few
// figures of one run, which must be the bytes below.
func TestFindings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		print func(b *strings.Builder) error
		want  string
	}{
		// The overload scenario, small: a server of 20 requests in flight
		// at 20 ms each, 2 s phases, the 5x phase. Without a limit
		// requests miss the 1 s deadline; sluice's limiters keep the
		// oracle's goodput at a p99 near the no-load one.
		{"overload", func(b *strings.Builder) error {
			res, err := run(overload, overloadOptions{RealTimeOptions: RealTimeOptions{Seed: 1, Model: IOModel{Capacity: 20},
				Warmup: time.Second, Phase: 2 * time.Second}})
			if err != nil {
				return err
			}
			for _, r := range res.Rows {
				if r.Phase == "5x" {
					fmt.Fprintf(b, "%-16s goodput %.2f of the oracle's, p99 %.2fx no-load\n", r.Limiter, r.GoodputRatio, r.P99Ratio)
				}
			}
			return nil
		}, `sluice-gradient  goodput 1.01 of the oracle's, p99 1.09x no-load
sluice-vegas     goodput 1.01 of the oracle's, p99 1.05x no-load
oracle-fixed     goodput 1.00 of the oracle's, p99 0.99x no-load
none             goodput 0.02 of the oracle's, p99 38.67x no-load
`},
		// The shedders on requests of four classes, 30% of them critical,
		// at 2x of a server of 20 workers: the fleet shedder (a cap of 30
		// in flight, a third of it for critical requests) serves every
		// critical request and sheds the others; the utilization shedder
		// alone, with Stripe's 120 s ramp, has barely begun to shed after
		// 2 s and loses critical requests as it loses the others.
		{"shedders", func(b *strings.Builder) error {
			sc, err := run(shedContenders, shedOptions{Workers: 20})
			if err != nil {
				return err
			}
			res, err := run(overload, overloadOptions{RealTimeOptions: RealTimeOptions{Seed: 1, Model: IOModel{Capacity: 20},
				Warmup: time.Second, Phase: 2 * time.Second,
				Contenders: append(OverloadContenders()[2:3], sc...)}}) // the oracle, then the shedders
			if err != nil {
				return err
			}
			fmt.Fprintln(b, "classes:", res.Classes)
			for _, r := range res.Rows {
				if r.Phase == "2x" && r.Limiter != OracleName {
					fmt.Fprintf(b, "%-23s critical %.4f, success by class %.2f\n", r.Limiter, r.CriticalSuccess, r.ClassSuccess)
				}
			}
			return nil
		}, `classes: [test get post critical]
sluice-shed-utilization critical 0.4877, success by class [0.47 0.51 0.48 0.49]
sluice-shed-fleet       critical 1.0000, success by class [0.24 0.26 0.28 1.00]
sluice-shed-stack       critical 1.0000, success by class [0.24 0.26 0.28 1.00]
sluice-shed-gradient    critical 1.0000, success by class [0.25 0.26 0.28 1.00]
`},
		// A client at ten times its limit (1,000 a minute, burst 200), its
		// requests split evenly between two regions: with a Redis per
		// region it gets twice its limit; with a home region, its limit.
		{"regions", func(b *strings.Builder) error {
			r, err := run(regions, regionsOptions{Seed: 1, Keys: 2, Duration: time.Minute,
				Scenarios: []regionScenario{{Name: "50/50 10x", Split: 0.5, Load: 10}}})
			if err != nil {
				return err
			}
			for _, row := range r.Rows {
				fmt.Fprintf(b, "%-13s admitted %6.1f of %7.1f (%.2f× exact)\n", row.Design, row.Admitted, row.Offered, row.VsExact)
			}
			return nil
		}, `exact         admitted 1199.0 of  9867.5 (1.00× exact)
per-region    admitted 2398.0 of  9867.5 (2.00× exact)
home          admitted 1200.0 of  9867.5 (1.00× exact)
home-majority admitted 1200.0 of  9867.5 (1.00× exact)
`},
	} {
		var b strings.Builder
		if err := tt.print(&b); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := b.String(); got != tt.want {
			t.Errorf("%s printed\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}
