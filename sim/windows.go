package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// windowsOptions configures [windows]. The zero value is the default trace.
type windowsOptions struct {
	Seed    uint64
	Sources int             // keys, each its own Poisson source; 0 means 200
	Limit   ratelimit.Limit // 0 means 100 a minute
	// Each source's mean rate is its load times the limit, the load drawn
	// log-uniformly from [MinLoad, MaxLoad]; 0 means 0.05 and 4.
	MinLoad, MaxLoad float64
	Duration         time.Duration // 0 means one hour
}

// windowsLoads are the upper edges of the load classes Windows reports.
var windowsLoads = []float64{0.5, 0.8, 1, 1.25, 2, math.Inf(1)}

// windowsRow is one load class (sources whose mean rate over the limit is
// in (Low, High]), or the whole trace.
type windowsRow struct {
	Class          string
	Sources        int
	Requests       int
	WronglyAllowed int     // the counter admitted what the exact log denied
	WronglyDenied  int     // the counter denied what the exact log admitted
	Gap            float64 // mean |estimate − exact| / exact, over requests that found exact > 0
	// Run as limiters on their own, each counting only what it admitted:
	LogAdmitted     int // requests the exact log admitted
	CounterAdmitted int // requests the counter admitted
	CounterPeak     int // the most the counter admitted in any one window of Period, for one source
}

// Wrong returns the fraction of requests decided differently.
func (r windowsRow) Wrong() float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.WronglyAllowed+r.WronglyDenied) / float64(r.Requests)
}

// windowsResult is the outcome of [windows].
type windowsResult struct {
	Options windowsOptions
	Rows    []windowsRow // by load class, then "all"
	// Sample follows the source whose load is closest to 1 for the first
	// ten minutes: at each of its requests, the exact count of the last
	// window and the counter's estimate.
	SampleLoad                       float64
	SampleAt, SampleExact, SampleEst []float64
}

func (o windowsOptions) withDefaults() (windowsOptions, error) {
	orDefault(&o.Sources, 200)
	if o.Limit == (ratelimit.Limit{}) {
		o.Limit = ratelimit.PerMinute(100)
	}
	orDefault(&o.MinLoad, 0.05)
	orDefault(&o.MaxLoad, 4)
	orDefault(&o.Duration, time.Hour)
	switch {
	case o.MaxLoad < o.MinLoad:
		return o, fmt.Errorf("sim: windows: max load %v below min load %v", o.MaxLoad, o.MinLoad)
	case o.Limit.Rate <= 0:
		return o, fmt.Errorf("sim: windows: limit %v admits nothing", o.Limit)
	}
	if err := o.Limit.Validate(); err != nil {
		return o, fmt.Errorf("sim: windows: %w", err)
	}
	return o, nil
}

// windows compares the sliding window counter (algorithm/window) with the
// exact sliding window log (algorithm/slidinglog) on a long trace of many
// Poisson sources, Cloudflare's accuracy study in miniature.
//
// As in Cloudflare's measurement, both count every request, admitted or
// not, so they see the same history; at every request the scenario records
// whether the counter decides differently from the exact log (wrongly
// allowed or wrongly denied) and how far its estimate of the last window's
// count is from the exact count (the gap).
//
// sluice's stores count only what they admit, so the scenario also runs
// each as a limiter on its own history and reports what each admitted, and
// the most the counter admitted in any real window of Period (the exact log
// never admits more than Rate).
//
// The trace comes from the PCG stream (Seed, 0).
func windows(o windowsOptions) (*windowsResult, error) {
	s := newEngine(o.Seed, 0)
	srcs, sample := windowsSources(s, o)
	w := newWindowsRun(s, o, srcs, sample)
	for i, src := range srcs {
		w.start(src, i == sample)
	}
	s.Run()
	return w.result(), nil
}

// windowsSource is one key of [windows]' trace.
type windowsSource struct {
	load  float64
	class int
	log   []slidinglog.Entry
	win   window.State
	mean  time.Duration // between arrivals
	// Each limiter on its own, counting what it admitted (as sluice's
	// stores count), and the exact record of what the counter admitted.
	ownLog  []slidinglog.Entry
	ownWin  window.State
	counted []slidinglog.Entry
}

// windowsSources draws the sources' loads, and picks the one whose load
// is closest to 1 to sample.
func windowsSources(s *engine, o windowsOptions) (srcs []*windowsSource, sample int) {
	srcs = make([]*windowsSource, o.Sources)
	for i := range srcs {
		load := o.MinLoad * math.Pow(o.MaxLoad/o.MinLoad, s.Rand.Float64())
		c := 0
		for load > windowsLoads[c] {
			c++
		}
		srcs[i] = &windowsSource{load: load, class: c,
			mean: time.Duration(float64(o.Limit.Period) / (load * float64(o.Limit.Rate)))}
		if math.Abs(math.Log(load)) < math.Abs(math.Log(srcs[sample].load)) {
			sample = i
		}
	}
	return srcs, sample
}

// windowsRun is one run of [windows]: the requests it makes of the
// algorithms, and the rows it fills.
type windowsRun struct {
	s      *engine
	o      windowsOptions
	res    *windowsResult
	rows   []windowsRow // by load class, then "all"
	gapSum []float64
	gapN   []int

	logReq, counterReq ratelimit.Request
	// The meters count every request, admitted or not (Cloudflare's
	// method): the same steps under a limit they cannot reach.
	huge                          ratelimit.Limit
	countLog, countWin, countPeek ratelimit.Request
}

func newWindowsRun(s *engine, o windowsOptions, srcs []*windowsSource, sample int) *windowsRun {
	w := &windowsRun{s: s, o: o, res: &windowsResult{Options: o, SampleLoad: srcs[sample].load}}
	w.rows = make([]windowsRow, len(windowsLoads)+1)
	w.gapSum = make([]float64, len(w.rows))
	w.gapN = make([]int, len(w.rows))
	for _, src := range srcs {
		w.rows[src.class].Sources++
	}
	w.rows[len(w.rows)-1].Sources = len(srcs)

	w.logReq = ratelimit.Request{Limit: o.Limit, Algorithm: ratelimit.SlidingWindowLog, N: 1}
	w.counterReq = ratelimit.Request{Limit: o.Limit, Algorithm: ratelimit.SlidingWindowCounter, N: 1}
	w.huge = ratelimit.Limit{Rate: min(int64(o.Limit.Period), 1<<40), Period: o.Limit.Period} // one a nanosecond: never reached
	w.countLog = ratelimit.Request{Limit: w.huge, Algorithm: ratelimit.SlidingWindowLog, N: 1}
	w.countWin = ratelimit.Request{Limit: w.huge, Algorithm: ratelimit.SlidingWindowCounter, N: 1}
	w.countPeek = ratelimit.Request{Limit: w.huge, Algorithm: ratelimit.SlidingWindowLog}
	return w
}

// start schedules src's Poisson arrivals until the trace's end.
func (w *windowsRun) start(src *windowsSource, sampled bool) {
	var arrive func()
	arrive = func() {
		w.arrive(src, sampled)
		if next := w.s.Now() + w.s.Exp(src.mean); next < w.o.Duration {
			w.s.At(next, arrive)
		}
	}
	if first := w.s.Exp(src.mean); first < w.o.Duration {
		w.s.At(first, arrive)
	}
}

// arrive is one request of src, now.
func (w *windowsRun) arrive(src *windowsSource, sampled bool) {
	now := w.s.Time().UnixNano()
	exact, est := w.compare(src, now)
	w.limit(src, now)
	if sampled && w.s.Now() < 10*time.Minute {
		w.res.SampleAt = append(w.res.SampleAt, w.s.Now().Seconds())
		w.res.SampleExact = append(w.res.SampleExact, exact)
		w.res.SampleEst = append(w.res.SampleEst, est)
	}
}

// compare decides the request with both algorithms on the same history
// (every request counted) and records where they differ; it returns the
// exact count of the last window and the counter's estimate, both before
// the request.
func (w *windowsRun) compare(src *windowsSource, now int64) (exact, est float64) {
	var p ratelimit.Decision
	src.log, p = slidinglog.Step(src.log, now, w.countPeek)
	exact = float64(w.huge.Rate - p.Remaining)
	// The decisions both limiters make on the same history.
	var d ratelimit.Decision
	src.log, d = slidinglog.Step(src.log, now, w.logReq)
	if !d.Allowed {
		src.log, _ = slidinglog.Step(src.log, now, w.countLog)
	}
	_, approx := window.Sliding(src.win, now, w.counterReq)
	est = slidingEstimate(src.win, now, w.o.Limit.Period)
	src.win, _ = window.Sliding(src.win, now, w.countWin)
	for _, r := range []int{src.class, len(w.rows) - 1} {
		w.rows[r].Requests++
		switch {
		case approx.Allowed && !d.Allowed:
			w.rows[r].WronglyAllowed++
		case !approx.Allowed && d.Allowed:
			w.rows[r].WronglyDenied++
		}
		if exact > 0 {
			w.gapSum[r] += math.Abs(est-exact) / exact
			w.gapN[r]++
		}
	}
	return exact, est
}

// limit runs the request through the two as limiters, each on its own
// history, and records what each admitted.
func (w *windowsRun) limit(src *windowsSource, now int64) {
	var own, p ratelimit.Decision
	src.ownLog, own = slidinglog.Step(src.ownLog, now, w.logReq)
	ownLogOK := own.Allowed
	src.ownWin, own = window.Sliding(src.ownWin, now, w.counterReq)
	peak := 0
	if own.Allowed {
		src.counted, p = slidinglog.Step(src.counted, now, w.countLog)
		peak = int(w.huge.Rate - p.Remaining)
	}
	for _, r := range []int{src.class, len(w.rows) - 1} {
		if ownLogOK {
			w.rows[r].LogAdmitted++
		}
		if own.Allowed {
			w.rows[r].CounterAdmitted++
		}
		w.rows[r].CounterPeak = max(w.rows[r].CounterPeak, peak)
	}
}

// result names the rows and averages their gaps.
func (w *windowsRun) result() *windowsResult {
	rows := w.rows
	lo := 0.0
	for i := range rows {
		switch {
		case i == len(rows)-1:
			rows[i].Class = "all"
		case math.IsInf(windowsLoads[i], 1):
			rows[i].Class = fmt.Sprintf(">%g", lo)
		default:
			rows[i].Class = fmt.Sprintf("%g-%g", lo, windowsLoads[i])
			lo = windowsLoads[i]
		}
		if w.gapN[i] > 0 {
			rows[i].Gap = w.gapSum[i] / float64(w.gapN[i])
		}
	}
	w.res.Rows = rows
	return w.res
}

// slidingEstimate is the sliding window counter's estimate of the events in
// the window ending at now, prev·(Period−elapsed)/Period + curr, read from
// its state as package window documents it (a test checks it against the
// decisions window.Sliding makes).
func slidingEstimate(s window.State, now int64, period time.Duration) float64 {
	w := int64(period)
	var prev, curr, elapsed int64
	switch {
	case s.Start == 0 && s.Prev == 0 && s.Curr == 0:
		return 0
	case now < s.Start+w:
		prev, curr, elapsed = s.Prev, s.Curr, max(now-s.Start, 0)
	case now < s.Start+2*w:
		prev, curr, elapsed = s.Curr, 0, now-s.Start-w
	default:
		return 0
	}
	return float64(prev)*float64(w-elapsed)/float64(w) + float64(curr)
}

// All returns the row for the whole trace.
func (r *windowsResult) All() windowsRow { return r.Rows[len(r.Rows)-1] }

// Table returns one row per load class and one for the whole trace, with
// the columns load, sources, requests, wrongly_allowed, wrongly_denied,
// wrong_pct, mean_gap_pct, log_admitted, counter_admitted and
// counter_peak.
func (r *windowsResult) Table() table {
	t := table{Columns: []column{{"load", 0}, {"sources", 0}, {"requests", 0}, {"wrongly_allowed", 0},
		{"wrongly_denied", 0}, {"wrong_pct", 4}, {"mean_gap_pct", 2},
		{"log_admitted", 0}, {"counter_admitted", 0}, {"counter_peak", 0}}}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []any{row.Class, row.Sources, row.Requests, row.WronglyAllowed,
			row.WronglyDenied, 100 * row.Wrong(), 100 * row.Gap,
			row.LogAdmitted, row.CounterAdmitted, row.CounterPeak})
	}
	return t
}

// figure plots the sampled source's exact count against the counter's
// estimate, and the wrong decisions and gap by load class.
func (r *windowsResult) Figure() figure {
	o := r.Options
	end := 0.0
	if n := len(r.SampleAt); n > 0 {
		end = r.SampleAt[n-1]
	}
	wrong := curve{Name: "wrong decisions (%)", Color: palette[1]}
	gap := curve{Name: "mean gap (%)", Color: palette[0]}
	over := curve{Name: "peak over limit (%)", Color: palette[3]}
	for i, row := range r.Rows[:len(r.Rows)-1] {
		x := float64(i + 1)
		wrong.X, wrong.Y = append(wrong.X, x), append(wrong.Y, 100*row.Wrong())
		gap.X, gap.Y = append(gap.X, x), append(gap.Y, 100*row.Gap)
		excess := max(0, float64(int64(row.CounterPeak)-o.Limit.Rate)) / float64(o.Limit.Rate)
		over.X, over.Y = append(over.X, x), append(over.Y, 100*excess)
	}
	var classes string
	for i, row := range r.Rows[:len(r.Rows)-1] {
		if i > 0 {
			classes += ", "
		}
		classes += fmt.Sprintf("%d: %s", i+1, row.Class)
	}
	all := r.All()
	return figure{
		Title: fmt.Sprintf("Sliding window counter vs exact log, %d sources, limit %v", o.Sources, o.Limit),
		Plots: []chart{
			{
				Title:  fmt.Sprintf("One source at %.2f× the limit: the last window's count, first 10 minutes", r.SampleLoad),
				XLabel: "time (s)", YLabel: "requests in the window",
				Series: []curve{
					{Name: "exact (log)", X: r.SampleAt, Y: r.SampleExact, Step: true, Color: palette[2]},
					{Name: "estimate (counter)", X: r.SampleAt, Y: r.SampleEst, Step: true, Color: palette[0]},
					{Name: fmt.Sprintf("limit %d", o.Limit.Rate), X: []float64{0, end},
						Y: []float64{float64(o.Limit.Rate), float64(o.Limit.Rate)}, Dashed: true, Color: "#555555"},
				},
			},
			{
				Title:  fmt.Sprintf("By load class (all: %.3f%% wrong, %.1f%% mean gap)", 100*all.Wrong(), 100*all.Gap),
				XLabel: "load class (" + classes + ")", YLabel: "percent",
				Series: []curve{wrong, gap, over},
			},
		},
	}
}
