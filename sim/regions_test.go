package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// smallRegions is the rate-limiting design article's exercise on fewer keys and a shorter run, so
// that the test is quick; the figures of docs/scale.md use the defaults.
func smallRegions() regionsOptions {
	return regionsOptions{Seed: 1, Keys: 6, Duration: time.Minute}
}

func regionRow(t *testing.T, r *regionsResult, scenario string, d regionDesign) regionsRow {
	t.Helper()
	for _, row := range r.Rows {
		if row.Scenario == scenario && row.Design == d {
			return row
		}
	}
	t.Fatalf("no row %s/%v", scenario, d)
	return regionsRow{}
}

func TestRegionsDeterministic(t *testing.T) {
	var outs [2]bytes.Buffer
	for i := range outs {
		r, err := run(regions, smallRegions())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Table().Write(&outs[i], "csv"); err != nil {
			t.Fatal(err)
		}
		if err := r.Figure().WriteSVG(&outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if outs[0].String() != outs[1].String() {
		t.Fatal("two runs with one seed differ")
	}
	o := smallRegions()
	o.Seed = 2
	r, err := run(regions, o)
	if err != nil {
		t.Fatal(err)
	}
	var other bytes.Buffer
	r.Table().Write(&other, "csv")
	if strings.HasPrefix(outs[0].String(), other.String()) {
		t.Error("seeds 1 and 2 print the same table")
	}
}

// TestRegionsBounds checks what each design must do, whatever the seed:
// the exact design and the home design never admit more than one bucket
// allows in a period (Burst + Rate); per-region never more than two; a
// client in one region only (split 1) gets exactly the exact admissions
// per region; an even split at 10x gets close to twice.
func TestRegionsBounds(t *testing.T) {
	o := smallRegions()
	o.Scenarios = append(defaultRegionScenarios(), regionScenario{Name: "all A 10x", Split: 1, Load: 10})
	r, err := run(regions, o)
	if err != nil {
		t.Fatal(err)
	}
	lim := r.Options.Limit
	one := int(lim.Burst + lim.Rate)
	for _, row := range r.Rows {
		limit := one
		if row.Design == designPerRegion {
			limit = 2 * one
		}
		if row.PeakWindow > limit {
			t.Errorf("%s/%v: %d admitted in one period, more than %d", row.Scenario, row.Design, row.PeakWindow, limit)
		}
		if row.Admitted > row.Offered {
			t.Errorf("%s/%v: admitted %v of %v offered", row.Scenario, row.Design, row.Admitted, row.Offered)
		}
		if (row.Design == designHome || row.Design == designHomeMajority) && row.MaxVsExact > 1.02 {
			t.Errorf("%s/home: %.3f× exact; a home region is exact up to the latency's reordering", row.Scenario, row.MaxVsExact)
		}
	}
	if got := regionRow(t, r, "all A 10x", designPerRegion).VsExact; got != 1 {
		t.Errorf("all in one region: per-region %.3f× exact, want 1", got)
	}
	if got := regionRow(t, r, "50/50 10x", designPerRegion).VsExact; got < 1.8 || got > 2 {
		t.Errorf("50/50 at 10x: per-region %.3f× exact, want close to 2", got)
	}
	if got := regionRow(t, r, "50/50 1x", designPerRegion).VsExact; got > 1.2 {
		t.Errorf("50/50 at 1x: per-region %.3f× exact: a client within its limit cannot gain much", got)
	}
	// The burst: exact admits the bucket (200) and what refills in the
	// second; per-region two buckets when split evenly.
	b := regionRow(t, r, "burst 50/50", designExact)
	if want := float64(lim.Burst) + float64(lim.Rate)/60; math.Abs(b.Admitted-want) > 2 {
		t.Errorf("burst: exact admitted %.1f, want about %.1f", b.Admitted, want)
	}
	if got := regionRow(t, r, "burst 50/50", designPerRegion).VsExact; got < 1.9 {
		t.Errorf("burst 50/50: per-region %.3f× exact, want about 2", got)
	}
	// Latency: per-region and the home region pay the local round trip,
	// the other region the cross-region one.
	h := regionRow(t, r, "90/10 2x", designHomeMajority)
	if h.LatencyP99 < 50*time.Millisecond || h.LatencyP50 > 2*time.Millisecond {
		t.Errorf("home-majority at 90/10: p50 %v, p99 %v; want the local round trip at p50 and the cross-region one at p99", h.LatencyP50, h.LatencyP99)
	}
	// Hashed homes: half the keys live where 90% of their requests are
	// not, so more than a tenth of all requests cross.
	if h := regionRow(t, r, "90/10 2x", designHome); h.LatencyP99 < 50*time.Millisecond {
		t.Errorf("home at 90/10: p99 %v, want the cross-region round trip", h.LatencyP99)
	}
	if p := regionRow(t, r, "90/10 2x", designPerRegion); p.LatencyP99 > 2*time.Millisecond {
		t.Errorf("per-region p99 %v, want about 1 ms", p.LatencyP99)
	}
}

func TestRegionsOptionsRefused(t *testing.T) {
	for _, o := range []regionsOptions{
		{Scenarios: []regionScenario{}},
		{Scenarios: []regionScenario{{Name: "x", Split: 1.5, Load: 1}}},
		{Scenarios: []regionScenario{{Name: "x", Split: 0.5}}},
		{Scenarios: []regionScenario{{Name: "x", Split: 0.5, Load: 1e6}}},
		{Limit: ratelimit.Limit{Rate: -1, Period: time.Second}},
	} {
		if _, err := run(regions, o); err == nil {
			t.Errorf("Regions(%+v) = nil error", o)
		}
	}
}

func BenchmarkRegions(b *testing.B) {
	b.ReportAllocs()
	o := regionsOptions{Keys: 2, Duration: 10 * time.Second}
	for b.Loop() {
		if _, err := run(regions, o); err != nil {
			b.Fatal(err)
		}
	}
}
