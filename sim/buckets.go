package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// bucketsBurst is a clump of arrivals in the buckets scenario: N requests at
// uniform random times in [At, At+Spread).
type bucketsBurst struct {
	At     time.Duration
	N      int
	Spread time.Duration
}

// defaultBursts returns the buckets scenario's trace on top of its
// background traffic: a burst, one that straddles a window boundary, two
// quick ones a second and a half apart, and two seconds of sustained
// overload.
func defaultBursts() []bucketsBurst {
	return []bucketsBurst{
		{3 * time.Second, 30, 300 * time.Millisecond},
		{9800 * time.Millisecond, 30, 400 * time.Millisecond},
		{17 * time.Second, 15, 100 * time.Millisecond},
		{18500 * time.Millisecond, 15, 100 * time.Millisecond},
		{24 * time.Second, 40, 2 * time.Second},
	}
}

// bucketsOptions configures [buckets]. The zero value is the default trace.
type bucketsOptions struct {
	Seed       uint64
	Rate       int64          // the limit, per second, for every algorithm; 0 means 10
	Burst      int64          // token bucket capacity and leaky bucket queue; 0 means Rate
	Background float64        // Poisson arrivals per second besides the bursts; 0 means 4
	Bursts     []bucketsBurst // nil means defaultBursts()
	Duration   time.Duration  // 0 means 30 s
}

// bucketsAlgorithms are the algorithms of the buckets scenario, in the
// order it reports them.
var bucketsAlgorithms = []ratelimit.Algorithm{
	ratelimit.TokenBucket, ratelimit.LeakyBucket, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter,
}

// bucketsRow is one algorithm's handling of the trace.
type bucketsRow struct {
	Algorithm ratelimit.Algorithm
	Arrivals  int
	Admitted  int           // allowed (for the leaky bucket: queued, then served)
	Delayed   int           // admitted but held back (leaky bucket only)
	Rejected  int           // denied
	MeanDelay time.Duration // over the admitted
	MaxDelay  time.Duration
	Peak1s    int // the most admitted requests served in any one second
}

// bucketsResult is the outcome of [buckets].
type bucketsResult struct {
	Options  bucketsOptions
	Rows     []bucketsRow
	Arrivals []time.Duration             // the trace
	Served   [][]time.Duration           // per algorithm: when each admitted request went through
	Delays   [][2]time.Duration          // leaky bucket: (arrival, delay) of each admitted request
	decided  map[ratelimit.Algorithm]int // index of each algorithm
}

func (o bucketsOptions) withDefaults() (bucketsOptions, error) {
	orDefault(&o.Rate, 10)
	orDefault(&o.Burst, o.Rate)
	orDefault(&o.Background, 4)
	if o.Bursts == nil {
		o.Bursts = defaultBursts()
	}
	orDefault(&o.Duration, 30*time.Second)
	if err := (ratelimit.Limit{Rate: o.Rate, Period: time.Second, Burst: o.Burst}).Validate(); err != nil {
		return o, fmt.Errorf("sim: buckets: %w", err)
	}
	return o, nil
}

// buckets sends one bursty arrival trace (Poisson background traffic plus
// Bursts, drawn from the PCG stream (Seed, 0)) through four limiters of
// Rate per second: the token bucket and the leaky bucket queue
// (algorithm/gcra, Burst tokens or slots), the fixed window and the sliding
// window counter (algorithm/window, one-second windows). It reports what
// each admits, delays and rejects, and the most it lets through in any one
// second: the shape each gives the same traffic.
func buckets(o bucketsOptions) (*bucketsResult, error) {
	s := newEngine(o.Seed, 0)
	var arr []time.Duration
	for t := s.Exp(time.Duration(float64(time.Second) / o.Background)); t < o.Duration; t += s.Exp(time.Duration(float64(time.Second) / o.Background)) {
		arr = append(arr, t)
	}
	for _, b := range o.Bursts {
		for range b.N {
			if t := b.At + time.Duration(s.Rand.Float64()*float64(b.Spread)); t < o.Duration {
				arr = append(arr, t)
			}
		}
	}
	slices.Sort(arr)

	res := &bucketsResult{Options: o, Arrivals: arr, decided: map[ratelimit.Algorithm]int{}}
	lim := ratelimit.Limit{Rate: o.Rate, Period: time.Second, Burst: o.Burst}
	for ai, alg := range bucketsAlgorithms {
		res.decided[alg] = ai
		req := ratelimit.Request{Limit: lim, Algorithm: alg, N: 1}
		var tat int64
		var win window.State
		row := bucketsRow{Algorithm: alg, Arrivals: len(arr)}
		var served []time.Duration
		var sumDelay time.Duration
		// Every arrival is an event on the simulation's clock; the limiter
		// decides at that instant.
		sim := newEngine(o.Seed, 0)
		for _, t := range arr {
			sim.At(t, func() {
				now := sim.Time().UnixNano()
				var d ratelimit.Decision
				switch alg {
				case ratelimit.TokenBucket, ratelimit.LeakyBucket:
					tat, d = gcra.Step(tat, now, req)
				case ratelimit.FixedWindow:
					win, d = window.Fixed(win, now, req)
				case ratelimit.SlidingWindowCounter:
					win, d = window.Sliding(win, now, req)
				}
				if !d.Allowed {
					row.Rejected++
					return
				}
				row.Admitted++
				if d.Delay > 0 {
					row.Delayed++
				}
				sumDelay += d.Delay
				row.MaxDelay = max(row.MaxDelay, d.Delay)
				served = append(served, sim.Now()+d.Delay)
				if alg == ratelimit.LeakyBucket {
					res.Delays = append(res.Delays, [2]time.Duration{sim.Now(), d.Delay})
				}
			})
		}
		sim.Run()
		if row.Admitted > 0 {
			row.MeanDelay = sumDelay / time.Duration(row.Admitted)
		}
		slices.Sort(served)
		row.Peak1s = peak(served, time.Second)
		res.Rows = append(res.Rows, row)
		res.Served = append(res.Served, served)
	}
	return res, nil
}

// peak returns the most times of sorted ts inside any half-open interval
// of length w.
func peak(ts []time.Duration, w time.Duration) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi]-ts[lo] >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// Row returns the row of algorithm a.
func (r *bucketsResult) Row(a ratelimit.Algorithm) bucketsRow { return r.Rows[r.decided[a]] }

// Table returns one row per algorithm with the columns algorithm, arrivals,
// admitted, delayed, rejected, mean_delay_ms, max_delay_ms and peak_1s.
func (r *bucketsResult) Table() table {
	t := table{Columns: []column{{"algorithm", 0}, {"arrivals", 0}, {"admitted", 0}, {"delayed", 0},
		{"rejected", 0}, {"mean_delay_ms", 1}, {"max_delay_ms", 1}, {"peak_1s", 0}}}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []any{row.Algorithm.String(), row.Arrivals, row.Admitted, row.Delayed,
			row.Rejected, ms(row.MeanDelay), ms(row.MaxDelay), row.Peak1s})
	}
	return t
}

// figure plots the arrivals, what each algorithm lets through in the
// trailing second, and the leaky bucket's queueing delay.
func (r *bucketsResult) Figure() figure {
	o := r.Options
	end := o.Duration.Seconds()
	const bin = 100 * time.Millisecond
	arrivals := curve{Name: "arrivals", Step: true, Color: "#555555"}
	nb := int(o.Duration / bin)
	counts := make([]int, nb+1)
	for _, t := range r.Arrivals {
		counts[int(t/bin)]++
	}
	for i, c := range counts {
		arrivals.X = append(arrivals.X, (time.Duration(i) * bin).Seconds())
		arrivals.Y = append(arrivals.Y, float64(c))
	}
	trailing := func(name string, ts []time.Duration, color string) curve {
		s := curve{Name: name, Color: color}
		lo, hi := 0, 0
		for t := time.Duration(0); t <= o.Duration; t += 50 * time.Millisecond {
			for hi < len(ts) && ts[hi] <= t {
				hi++
			}
			for lo < hi && ts[lo] <= t-time.Second {
				lo++
			}
			s.X, s.Y = append(s.X, t.Seconds()), append(s.Y, float64(hi-lo))
		}
		return s
	}
	ps := []curve{trailing("arrivals", r.Arrivals, "#bbbbbb")}
	for i, alg := range bucketsAlgorithms {
		ps = append(ps, trailing(alg.String(), r.Served[i], palette[i]))
	}
	ps = append(ps, curve{Name: fmt.Sprintf("limit %d/s", o.Rate), X: []float64{0, end},
		Y: []float64{float64(o.Rate), float64(o.Rate)}, Dashed: true, Color: "#555555"})
	delay := curve{Name: "leaky_bucket delay", Color: palette[1], Dots: true}
	for _, d := range r.Delays {
		delay.X, delay.Y = append(delay.X, d[0].Seconds()), append(delay.Y, ms(d[1]))
	}
	return figure{
		Title: fmt.Sprintf("One bursty trace through four limiters of %d/s (burst %d)", o.Rate, o.Burst),
		Plots: []chart{
			{Title: "Arrivals per 100 ms", XLabel: "time (s)", YLabel: "requests", Series: []curve{arrivals}},
			{Title: "Let through in the trailing second", XLabel: "time (s)", YLabel: "requests in the last 1 s", Series: ps},
			{Title: "Leaky bucket queue: how long each admitted request waited", XLabel: "arrival time (s)", YLabel: "delay (ms)", Series: []curve{delay}},
		},
	}
}
