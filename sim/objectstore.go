package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/retry"
)

// errThrottled is the error of a throttled write, for retry.Next.
var errThrottled = errors.New("throttled")

// objectStoreOptions configures [objectStore]. The zero value is the
// object-store throttling example's numbers.
type objectStoreOptions struct {
	Seed        uint64
	Runs        int           // independent runs; 0 means 1
	Requests    int           // writes fired at once; 0 means 9
	Budget      int           // writes the prefix accepts per tick; 0 means 5
	Tick        time.Duration // 0 means 100 ms
	Base        time.Duration // first backoff; 0 means 100 ms (then 200, 400 ms, …)
	MaxAttempts int           // tries per write, the first included; 0 means 6
	Net         time.Duration // mean of a network leg; 0 means 10 ms
	NetSD       time.Duration // its standard deviation; 0 means 2 ms
}

// objectStoreRow is one strategy's outcome, summed over the runs.
type objectStoreRow struct {
	Strategy  string
	Requests  int           // writes attempted (Requests·Runs)
	Succeeded int           // writes that landed
	Dropped   int           // writes given up after MaxAttempts 429s
	Elapsed   time.Duration // the slowest run: until its last write landed or was dropped
	Calls     int           // requests sent, retries included
	Throttled int           // 429 answers
}

// objectStoreResult is the outcome of [objectStore].
type objectStoreResult struct {
	Options objectStoreOptions
	Rows    []objectStoreRow // backoff, then retry-immediately
	// Timeline is the first run of each strategy: when each write landed
	// and when each 429 came back, in virtual time.
	Timeline map[string]objectStoreTimeline
}

// objectStoreTimeline records one run.
type objectStoreTimeline struct {
	Landed    []time.Duration // at the store, in order
	Throttled []time.Duration // at the store, in order
}

// objectStoreStrategies are the strategies of the objectstore scenario, in
// the order it reports them.
var objectStoreStrategies = []string{"backoff", "retry-immediately"}

func (o objectStoreOptions) withDefaults() (objectStoreOptions, error) {
	orDefault(&o.Runs, 1)
	orDefault(&o.Requests, 9)
	orDefault(&o.Budget, 5)
	orDefault(&o.MaxAttempts, 6)
	orDefault(&o.Tick, 100*time.Millisecond)
	orDefault(&o.Base, 100*time.Millisecond)
	orDefault(&o.Net, 10*time.Millisecond)
	orDefault(&o.NetSD, 2*time.Millisecond)
	if err := (ratelimit.Limit{Rate: int64(o.Budget), Period: o.Tick}).Validate(); err != nil {
		return o, fmt.Errorf("sim: objectstore: %w", err)
	}
	return o, nil
}

// objectStore reproduces the object-store throttling example: Requests writes to one
// prefix leave a client at once; the prefix accepts Budget writes per Tick
// (a fixed window in a memstore whose clock is the simulation's) and
// answers 429 to the rest. Each leg to and from the store takes
// |N(Net, NetSD)|. A throttled write is retried, up to MaxAttempts tries in
// all, after
//
//   - backoff: backoff.EqualJitter with Base, which is the example's
//     pseudocode exactly: before retry n it waits Base·2^(n-1) plus a uniform
//     jitter of up to as much again (100–200 ms, 200–400 ms, 400–800 ms);
//   - retry-immediately: backoff.Constant(0), the example's contrast.
//
// The retry decisions are retry.Next's, the step retry.Do takes, so the
// simulation runs the client's real retry logic. Counts are summed over Runs; Elapsed is the slowest run. Run r uses the
// PCG stream (Seed, r) for both strategies.
func objectStore(o objectStoreOptions) (*objectStoreResult, error) {
	res := &objectStoreResult{Options: o, Timeline: map[string]objectStoreTimeline{}}
	for _, name := range objectStoreStrategies {
		row := objectStoreRow{Strategy: name}
		for r := range o.Runs {
			s := newEngine(o.Seed, uint64(r))
			var strat backoff.Strategy = backoff.Constant(0)
			if name == "backoff" {
				// Max 20 s: the pseudocode's cap of 10 s on the backoff
				// before its jitter.
				strat = backoff.EqualJitter{Base: o.Base, Max: 20 * time.Second, Rand: s.Rand.Float64}
			}
			tl, run, err := objectStoreRun(o, strat, s)
			if err != nil {
				return nil, err
			}
			if r == 0 {
				res.Timeline[name] = tl
			}
			row.Requests += run.Requests
			row.Succeeded += run.Succeeded
			row.Dropped += run.Dropped
			row.Calls += run.Calls
			row.Throttled += run.Throttled
			row.Elapsed = max(row.Elapsed, run.Elapsed)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func objectStoreRun(o objectStoreOptions, strat backoff.Strategy, s *engine) (objectStoreTimeline, objectStoreRow, error) {
	store := memstore.New(memstore.Options{Now: s.Time, SweepInterval: -1, Shards: 1})
	defer store.Close()
	req := ratelimit.Request{
		Key:       "bucket/prefix",
		Limit:     ratelimit.Limit{Rate: int64(o.Budget), Period: o.Tick},
		Algorithm: ratelimit.FixedWindow,
		N:         1,
	}
	leg := func() time.Duration { return s.Normal(o.Net, o.NetSD) }
	var (
		tl   objectStoreTimeline
		row  = objectStoreRow{Requests: o.Requests}
		last time.Duration
		fail error
	)
	retryOpts := retry.Options{MaxAttempts: o.MaxAttempts, Backoff: strat, MaxDelay: retry.MaxRetryAfter}
	var put func(attempt int, wait time.Duration)
	put = func(attempt int, wait time.Duration) {
		s.After(wait+leg(), func() { // the PUT reaches the store
			row.Calls++
			d, err := store.Apply(context.Background(), req)
			if err != nil {
				fail = err
				return
			}
			if d.Allowed {
				tl.Landed = append(tl.Landed, s.Now())
			} else {
				tl.Throttled = append(tl.Throttled, s.Now())
			}
			s.After(leg(), func() { // the answer reaches the client
				if d.Allowed {
					row.Succeeded++
				} else {
					// The real retry loop's decision (retry.Do's), in
					// virtual time.
					step := retry.Next(retryOpts, attempt, errThrottled, time.Time{}.Add(s.Now()), time.Time{})
					if step.Err == nil {
						put(attempt+1, step.Delay)
						return
					}
					row.Dropped++
				}
				last = s.Now()
			})
		})
	}
	for range o.Requests {
		put(1, 0)
	}
	s.Run()
	row.Throttled = len(tl.Throttled)
	row.Elapsed = last
	return tl, row, fail
}

// Table returns the rows with the columns strategy, requests, succeeded,
// dropped, elapsed_ms, calls and throttled.
func (r *objectStoreResult) Table() table {
	t := table{Columns: []column{{"strategy", 0}, {"requests", 0}, {"succeeded", 0}, {"dropped", 0},
		{"elapsed_ms", 1}, {"calls", 0}, {"throttled", 0}}}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []any{row.Strategy, row.Requests, row.Succeeded, row.Dropped,
			ms(row.Elapsed), row.Calls, row.Throttled})
	}
	return t
}

// figure plots, for the first run, the writes landed and the 429s returned
// over time, for both strategies.
func (r *objectStoreResult) Figure() figure {
	o := r.Options
	cum := func(name string, at []time.Duration, color string, dashed bool) curve {
		s := curve{Name: name, Step: true, Color: color, Dashed: dashed, X: []float64{0}, Y: []float64{0}}
		for i, t := range at {
			s.X, s.Y = append(s.X, ms(t)), append(s.Y, float64(i+1))
		}
		return s
	}
	end := 0.0
	for _, tl := range r.Timeline {
		for _, t := range append(append([]time.Duration{}, tl.Landed...), tl.Throttled...) {
			end = max(end, ms(t))
		}
	}
	var plots []chart
	for i, name := range objectStoreStrategies {
		tl := r.Timeline[name]
		landed := cum("writes landed", tl.Landed, palette[2], false)
		throttled := cum("429s", tl.Throttled, palette[1], true)
		budget := curve{Name: "budget (cumulative)", Step: true, Color: "#888888", Dashed: true}
		for k := 0.0; k*ms(o.Tick) <= end+ms(o.Tick); k++ {
			budget.X = append(budget.X, k*ms(o.Tick))
			budget.Y = append(budget.Y, min(float64(o.Requests), (k+1)*float64(o.Budget)))
		}
		for _, s := range []*curve{&landed, &throttled} { // extend to the common end
			s.X, s.Y = append(s.X, budget.X[len(budget.X)-1]), append(s.Y, s.Y[len(s.Y)-1])
		}
		row := r.Rows[i]
		plots = append(plots, chart{
			Title:  fmt.Sprintf("%s: %d of %d landed, %d dropped, %d calls", name, row.Succeeded, row.Requests, row.Dropped, row.Calls),
			XLabel: "time (ms)", YLabel: "cumulative count",
			Series: []curve{landed, throttled, budget},
		})
	}
	return figure{
		Title: fmt.Sprintf("%d writes into a budget of %d per %v tick, first run", o.Requests, o.Budget, o.Tick),
		Plots: plots,
	}
}
