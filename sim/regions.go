package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

// regionScenario is one client's traffic in the regions scenario: which
// share of its requests reach region A (the rest reach B), and either a
// steady Poisson stream at Load times the limit's rate, or, with Burst > 0,
// Burst requests spread uniformly over BurstSpread after a long idle
// period, and nothing else.
type regionScenario struct {
	Name        string
	Split       float64 // share of requests arriving in region A, in [0, 1]
	Load        float64 // steady traffic: offered rate / the limit's rate
	Burst       int     // > 0: a burst of this many requests instead
	BurstSpread time.Duration
}

// defaultRegionScenarios returns the regions scenario's traffic: a steady
// client at, twice and ten times its limit, split evenly between the
// regions or mostly to one (90/10), and a burst of 1,000 requests in one
// second, split both ways.
func defaultRegionScenarios() []regionScenario {
	return []regionScenario{
		{Name: "50/50 1x", Split: 0.5, Load: 1},
		{Name: "50/50 2x", Split: 0.5, Load: 2},
		{Name: "50/50 10x", Split: 0.5, Load: 10},
		{Name: "90/10 1x", Split: 0.9, Load: 1},
		{Name: "90/10 2x", Split: 0.9, Load: 2},
		{Name: "90/10 10x", Split: 0.9, Load: 10},
		{Name: "burst 50/50", Split: 0.5, Burst: 1000, BurstSpread: time.Second},
		{Name: "burst 90/10", Split: 0.9, Burst: 1000, BurstSpread: time.Second},
	}
}

// regionDesign is how two regions share a limit.
type regionDesign uint8

const (
	// designExact is the reference: one limiter state that sees every
	// request the instant it arrives (one global store with no latency,
	// which two regions cannot have).
	designExact regionDesign = iota
	// designPerRegion gives each region its own Redis: a client is limited
	// separately in each region it reaches, so it may get up to twice its
	// limit (the rate-limiting design article's "accept 2x").
	designPerRegion
	// designHome keeps each key's state in one home region chosen by
	// hashing the key (half the keys in each, whatever their traffic):
	// the limit is exact, and requests that arrive in the other region
	// wait a cross-region round trip for their decision.
	designHome
	// designHomeMajority is designHome with each key's home in the region
	// most of its requests reach (a placement that knows the traffic).
	designHomeMajority
	numDesigns
)

var designNames = [numDesigns]string{"exact", "per-region", "home", "home-majority"}

func (d regionDesign) String() string {
	if d < numDesigns {
		return designNames[d]
	}
	return fmt.Sprintf("regionDesign(%d)", uint8(d))
}

// regionsOptions configures [regions]. The zero value is the rate-limiting
// design article's exercise: 1,000 requests a minute per key with a burst of 200, two
// regions 70 ms apart.
type regionsOptions struct {
	Seed      uint64
	Limit     ratelimit.Limit  // zero: 1000 a minute, burst 200 (a token bucket)
	Keys      int              // clients per scenario, each with its own key; 0 means 40
	Duration  time.Duration    // of steady traffic; 0 means 5 minutes
	LocalRTT  time.Duration    // gateway to its region's Redis and back; 0 means 1 ms
	CrossRTT  time.Duration    // between the regions and back; 0 means 70 ms
	Jitter    float64          // standard deviation of each round trip, as a fraction of it; 0 means 0.1
	Scenarios []regionScenario // nil means defaultRegionScenarios()
}

// regionsRow is one design under one scenario, over all its keys.
type regionsRow struct {
	Scenario string
	Design   regionDesign
	Offered  float64 // requests per key
	Admitted float64 // admitted per key, mean
	// VsExact is the mean of admitted / exact's admitted over the keys,
	// MaxVsExact its largest.
	VsExact, MaxVsExact float64
	// PeakWindow is the most one key had admitted in any window of the
	// limit's period (a token bucket admits at most Burst + Rate).
	PeakWindow int
	// LatencyP50 and LatencyP99 are the decision's round trip, over every
	// request of every key.
	LatencyP50, LatencyP99 time.Duration
}

// regionsResult is the outcome of [regions].
type regionsResult struct {
	Options regionsOptions
	Rows    []regionsRow // scenario by scenario, the designs in order
	// Curves: for the steady scenario split most evenly at the highest
	// load, and the first burst, key 0's admission times by design, in
	// seconds, sorted.
	SteadyName, BurstName string
	SteadyAt, BurstAt     [numDesigns][]float64
}

func (o regionsOptions) withDefaults() (regionsOptions, error) {
	if o.Limit == (ratelimit.Limit{}) {
		o.Limit = ratelimit.Limit{Rate: 1000, Period: time.Minute, Burst: 200}
	}
	orDefault(&o.Keys, 40)
	orDefault(&o.Duration, 5*time.Minute)
	orDefault(&o.LocalRTT, time.Millisecond)
	orDefault(&o.CrossRTT, 70*time.Millisecond)
	orDefault(&o.Jitter, 0.1)
	if o.Scenarios == nil {
		o.Scenarios = defaultRegionScenarios()
	}
	if err := o.Limit.Validate(); err != nil {
		return o, fmt.Errorf("sim: regions: %w", err)
	}
	if len(o.Scenarios) == 0 {
		return o, errors.New("sim: regions: no scenario")
	}
	for _, sc := range o.Scenarios {
		switch {
		case sc.Split < 0 || sc.Split > 1:
			return o, fmt.Errorf("sim: regions: %s: split %v not in [0, 1]", sc.Name, sc.Split)
		case sc.Burst < 0 || (sc.Burst == 0 && sc.Load <= 0):
			return o, fmt.Errorf("sim: regions: %s: want a positive load or burst", sc.Name)
		case sc.Burst > 0 && sc.BurstSpread < 0:
			return o, fmt.Errorf("sim: regions: %s: negative burst spread", sc.Name)
		case sc.Burst == 0 && sc.Load*float64(o.Limit.Rate)*o.Duration.Seconds()/o.Limit.Period.Seconds() > 5e6:
			return o, fmt.Errorf("sim: regions: %s: more than 5 million requests per key", sc.Name)
		}
	}
	return o, nil
}

// arrival is one request of a key: when it arrives, in which region, and
// for each design when it is decided.
type arrival struct {
	at     time.Duration
	inA    bool
	decide [numDesigns]time.Duration
}

// regions runs each scenario's traffic for Keys clients, each with a key of
// its own, through the three designs (exact, per-region, home), every
// decision made by algorithm/gcra's token bucket step at the
// virtual instant the request reaches the state's region. Key k's arrivals,
// regions and round trips are drawn from the PCG stream (Seed, scenario
// index × Keys + k), so a key sees the same requests under every design.
// Under designHome, keys with an even index have their home in region A,
// odd ones in B; under designHomeMajority, the home is A when Split ≥ 0.5.
func regions(o regionsOptions) (*regionsResult, error) {
	res := &regionsResult{Options: o}
	type keyResult struct {
		offered  int
		admitted [numDesigns]int
		peak     [numDesigns]int
		lat      [numDesigns][]time.Duration
		curveAt  [numDesigns][]float64
	}
	steady, burst := -1, -1
	for i, sc := range o.Scenarios {
		if sc.Burst == 0 && (steady < 0 || (sc.Split == 0.5 && (o.Scenarios[steady].Split != 0.5 || sc.Load > o.Scenarios[steady].Load))) {
			steady = i
		}
		if sc.Burst > 0 && burst < 0 {
			burst = i
		}
	}
	for si, sc := range o.Scenarios {
		krs := make([]keyResult, o.Keys)
		parallel(o.Keys, nil, func(k int) {
			kr := &krs[k]
			arr := regionArrivals(o, sc, newEngine(o.Seed, uint64(si*o.Keys+k)), k%2 == 0, sc.Split >= 0.5)
			kr.offered = len(arr)
			for d := range numDesigns {
				adm, lat := decide(o, arr, d)
				kr.admitted[d] = len(adm)
				kr.peak[d] = peak(adm, o.Limit.Period)
				kr.lat[d] = lat
				if k == 0 {
					kr.curveAt[d] = make([]float64, len(adm))
					for i, t := range adm {
						kr.curveAt[d][i] = t.Seconds()
					}
				}
			}
		})
		for d := range numDesigns {
			row := regionsRow{Scenario: sc.Name, Design: d, MaxVsExact: 0}
			var lat []time.Duration
			for _, kr := range krs {
				row.Offered += float64(kr.offered)
				row.Admitted += float64(kr.admitted[d])
				r := float64(kr.admitted[d]) / float64(max(kr.admitted[designExact], 1))
				row.VsExact += r
				row.MaxVsExact = max(row.MaxVsExact, r)
				row.PeakWindow = max(row.PeakWindow, kr.peak[d])
				lat = append(lat, kr.lat[d]...)
			}
			n := float64(o.Keys)
			row.Offered, row.Admitted, row.VsExact = row.Offered/n, row.Admitted/n, row.VsExact/n
			if d != designExact {
				slices.Sort(lat)
				row.LatencyP50, row.LatencyP99 = quantile(lat, 0.5), quantile(lat, 0.99)
			}
			res.Rows = append(res.Rows, row)
		}
		if si == steady {
			res.SteadyName = sc.Name
			for d := range numDesigns {
				res.SteadyAt[d] = krs[0].curveAt[d]
			}
		}
		if si == burst {
			res.BurstName = sc.Name
			for d := range numDesigns {
				res.BurstAt[d] = krs[0].curveAt[d]
			}
		}
	}
	return res, nil
}

// regionArrivals draws one key's requests and, for each design, when each
// is decided: exact at arrival, per-region after half a local round trip,
// home after half a local round trip in the home region and half a
// cross-region one elsewhere.
func regionArrivals(o regionsOptions, sc regionScenario, s *engine, homeA, majorityA bool) []arrival {
	var arr []arrival
	add := func(t time.Duration) {
		a := arrival{at: t, inA: s.Rand.Float64() < sc.Split}
		local := s.Normal(o.LocalRTT, time.Duration(o.Jitter*float64(o.LocalRTT)))
		a.decide[designExact] = t
		a.decide[designPerRegion] = t + local/2
		cross := s.Normal(o.CrossRTT, time.Duration(o.Jitter*float64(o.CrossRTT)))
		a.decide[designHome], a.decide[designHomeMajority] = t+local/2, t+local/2
		if a.inA != homeA {
			a.decide[designHome] = t + cross/2
		}
		if a.inA != majorityA {
			a.decide[designHomeMajority] = t + cross/2
		}
		arr = append(arr, a)
	}
	if sc.Burst > 0 {
		ts := make([]time.Duration, sc.Burst)
		for i := range ts {
			ts[i] = time.Duration(s.Rand.Float64() * float64(sc.BurstSpread))
		}
		slices.Sort(ts)
		for _, t := range ts {
			add(t)
		}
		return arr
	}
	mean := time.Duration(float64(o.Limit.Period) / (sc.Load * float64(o.Limit.Rate)))
	for t := s.Exp(mean); t < o.Duration; t += s.Exp(mean) {
		add(t)
	}
	return arr
}

// decide runs one key's arrivals through design d and returns the
// admission times (sorted) and each request's decision latency.
func decide(o regionsOptions, arr []arrival, d regionDesign) ([]time.Duration, []time.Duration) {
	idx := make([]int, len(arr))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpDuration(arr[a].decide[d], arr[b].decide[d]) })
	req := ratelimit.Request{Limit: o.Limit, Algorithm: ratelimit.TokenBucket, N: 1}
	p := gcra.NewParams(o.Limit)
	var tatA, tatB int64 // per-region: each region's state; the others: tatA only
	var adm, lat []time.Duration
	for _, i := range idx {
		a := arr[i]
		now := epoch.Add(a.decide[d]).UnixNano()
		tat := &tatA
		if d == designPerRegion && !a.inA {
			tat = &tatB
		}
		var dec ratelimit.Decision
		*tat, dec = gcra.StepParams(*tat, now, req, p)
		if dec.Allowed {
			adm = append(adm, a.decide[d])
		}
		if d != designExact {
			lat = append(lat, 2*(a.decide[d]-a.at))
		}
	}
	slices.Sort(adm)
	return adm, lat
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// Table returns one row per scenario and design, with the columns
// scenario, design, offered, admitted, vs_exact, max_vs_exact,
// over_admission_pct (mean), peak_window, p50_ms and p99_ms (the
// decision's round trip; none for exact, which has no network).
func (r *regionsResult) Table() table {
	t := table{Columns: []column{{"scenario", 0}, {"design", 0}, {"offered", 1}, {"admitted", 1},
		{"vs_exact", 3}, {"max_vs_exact", 3}, {"over_admission_pct", 1}, {"peak_window", 0},
		{"p50_ms", 1}, {"p99_ms", 1}}}
	for _, row := range r.Rows {
		var p50, p99 any
		if row.Design != designExact {
			p50, p99 = row.LatencyP50.Seconds()*1000, row.LatencyP99.Seconds()*1000
		}
		t.Rows = append(t.Rows, []any{row.Scenario, row.Design.String(), row.Offered, row.Admitted,
			row.VsExact, row.MaxVsExact, 100 * (row.VsExact - 1), row.PeakWindow, p50, p99})
	}
	return t
}

// figure plots key 0's admissions over time under each design for the
// steady scenario split evenly at the highest load and for the first
// burst, with the most one bucket of the limit admits.
func (r *regionsResult) Figure() figure {
	o := r.Options
	lim := o.Limit.Normalize()
	ceiling := func(end float64) curve {
		// Burst + Rate per Period: what one bucket admits by time t.
		var xs, ys []float64
		for i := 0; i <= 100; i++ {
			x := end * float64(i) / 100
			xs = append(xs, x)
			ys = append(ys, float64(lim.Burst)+float64(lim.Rate)*x/lim.Period.Seconds())
		}
		return curve{Name: "one bucket's most", X: xs, Y: ys, Dashed: true, Color: "#555555"}
	}
	plot := func(title string, at [numDesigns][]float64, end float64) chart {
		p := chart{Title: title, XLabel: "time (s)", YLabel: "admitted (cumulative)"}
		// The cumulative count at 300 instants, not at every admission
		// (tens of thousands of points would make a heavy SVG).
		const points = 300
		for d := range numDesigns {
			var xs, ys []float64
			for i := 0; i <= points; i++ {
				x := end * float64(i) / points
				k, _ := slices.BinarySearch(at[d], math.Nextafter(x, math.Inf(1)))
				xs, ys = append(xs, x), append(ys, float64(k))
			}
			p.Series = append(p.Series, curve{Name: d.String(), X: xs, Y: ys, Step: true, Color: palette[int(d)]})
		}
		p.Series = append(p.Series, ceiling(end))
		return p
	}
	f := figure{Title: fmt.Sprintf("Two regions, limit %d per %v with a burst of %d: one key", lim.Rate, lim.Period, lim.Burst)}
	if r.SteadyName != "" {
		f.Plots = append(f.Plots, plot(fmt.Sprintf("%s: admissions of one key", r.SteadyName), r.SteadyAt, min(o.Duration.Seconds(), 180)))
	}
	if r.BurstName != "" {
		var end float64
		for _, sc := range o.Scenarios {
			if sc.Name == r.BurstName {
				end = 2 * sc.BurstSpread.Seconds()
			}
		}
		f.Plots = append(f.Plots, plot(fmt.Sprintf("%s: admissions of one key", r.BurstName), r.BurstAt, max(end, 1)))
	}
	return f
}
