package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

// brookerStrategies returns the strategies of the brooker scenario, in the
// order it reports them.
func brookerStrategies() []string {
	return []string{"no-backoff", "exponential", "full-jitter", "equal-jitter", "decorrelated-jitter"}
}

// brookerOptions configures [brooker]. The zero value reproduces Brooker's
// study.
type brookerOptions struct {
	Seed       uint64
	Runs       int           // runs per point; 0 means 20 (Brooker averaged 100)
	Clients    []int         // contending clients; nil means 10, 20, …, 190
	Strategies []string      // from brookerStrategies(); nil means all
	Base       time.Duration // backoff base; 0 means 5 ms
	Cap        time.Duration // backoff cap; 0 means 2000 ms
	Net        time.Duration // mean of a network leg; 0 means 10 ms
	NetSD      time.Duration // its standard deviation; 0 means 2 ms
	// Progress, when set, is called after each run with the runs done and
	// the total. Calls are serialized.
	Progress func(done, total int)
}

// brookerRow is one point of the brooker scenario: a strategy at a number of
// clients, averaged over Runs runs.
type brookerRow struct {
	Strategy  string
	Clients   int
	Runs      int
	MeanTime  time.Duration // until the last client's write succeeded
	MeanCalls float64       // write attempts, failed ones included
}

// brookerResult is the outcome of [brooker].
type brookerResult struct {
	Options brookerOptions // with defaults filled in
	Rows    []brookerRow   // by strategy (in Options.Strategies order), then clients
}

func (o brookerOptions) withDefaults() (brookerOptions, error) {
	orDefault(&o.Runs, 20)
	if len(o.Clients) == 0 {
		for n := 10; n <= 190; n += 10 {
			o.Clients = append(o.Clients, n)
		}
	}
	for _, n := range o.Clients {
		if n < 1 || n > 10000 {
			return o, fmt.Errorf("sim: brooker: %d clients: want 1 to 10000", n)
		}
	}
	if len(o.Strategies) == 0 {
		o.Strategies = brookerStrategies()
	}
	for _, s := range o.Strategies {
		if !slices.Contains(brookerStrategies(), s) {
			return o, fmt.Errorf("sim: brooker: unknown strategy %q (want %s)", s, strings.Join(brookerStrategies(), ", "))
		}
	}
	orDefault(&o.Base, 5*time.Millisecond)
	orDefault(&o.Cap, 2000*time.Millisecond)
	orDefault(&o.Net, 10*time.Millisecond)
	orDefault(&o.NetSD, 2*time.Millisecond)
	return o, nil
}

// brooker reproduces the model of Marc Brooker's "Exponential Backoff And
// Jitter" (AWS Architecture Blog, 2015): Clients clients each make one
// optimistic-concurrency write to one shared row. A client reads the row's
// version, then writes conditionally on it; the write fails if another
// client wrote in between, and the client backs off and starts over with a
// fresh read. Each network leg (read request, read response, write request,
// write response) takes |N(Net, NetSD)|; the backoff before retry n (n = 1
// for the first retry) is added to the leg that carries the next read.
//
// The strategies are sluice's own backoff package with Base and Cap:
// no-backoff is backoff.Constant(0), exponential is backoff.Exponential,
// full-jitter backoff.FullJitter, equal-jitter backoff.EqualJitter, and
// decorrelated-jitter backoff.Decorrelated, each client keeping its previous
// delay for Decorrelated.Next. Their random draws come from the run's seeded
// source.
//
// Run r at c clients uses the PCG stream (Seed, r<<20 | c) for every
// strategy, so strategies meet the same network (common random numbers)
// until their choices diverge.
func brooker(o brookerOptions) (*brookerResult, error) {
	type job struct{ strategy, clients, run int }
	var jobs []job
	for si := range o.Strategies {
		for ci := range o.Clients {
			for r := range o.Runs {
				jobs = append(jobs, job{si, ci, r})
			}
		}
	}
	type out struct {
		t     time.Duration
		calls int
	}
	results := make([]out, len(jobs))
	parallel(len(jobs), o.Progress, func(i int) {
		j := jobs[i]
		n := o.Clients[j.clients]
		t, c := brookerRun(o, o.Strategies[j.strategy], n, newEngine(o.Seed, uint64(j.run)<<20|uint64(n)))
		results[i] = out{t, c}
	})
	res := &brookerResult{Options: o}
	for i := 0; i < len(jobs); i += o.Runs {
		var sumT time.Duration
		var sumC int
		for _, r := range results[i : i+o.Runs] {
			sumT += r.t
			sumC += r.calls
		}
		j := jobs[i]
		res.Rows = append(res.Rows, brookerRow{
			Strategy:  o.Strategies[j.strategy],
			Clients:   o.Clients[j.clients],
			Runs:      o.Runs,
			MeanTime:  sumT / time.Duration(o.Runs),
			MeanCalls: float64(sumC) / float64(o.Runs),
		})
	}
	return res, nil
}

// brookerRun runs one contention episode and returns the time the last
// client learnt that its write succeeded, and the number of writes.
func brookerRun(o brookerOptions, strategy string, clients int, s *engine) (time.Duration, int) {
	leg := func() time.Duration { return s.Normal(o.Net, o.NetSD) }
	var delay func(attempt int, prev time.Duration) time.Duration
	switch strategy {
	case "no-backoff":
		delay = func(int, time.Duration) time.Duration { return backoff.Constant(0).Delay(0) }
	case "exponential":
		b := backoff.Exponential{Base: o.Base, Max: o.Cap}
		delay = func(n int, _ time.Duration) time.Duration { return b.Delay(n) }
	case "full-jitter":
		b := backoff.FullJitter{Base: o.Base, Max: o.Cap, Rand: s.Rand.Float64}
		delay = func(n int, _ time.Duration) time.Duration { return b.Delay(n) }
	case "equal-jitter":
		b := backoff.EqualJitter{Base: o.Base, Max: o.Cap, Rand: s.Rand.Float64}
		delay = func(n int, _ time.Duration) time.Duration { return b.Delay(n) }
	case "decorrelated-jitter":
		b := backoff.Decorrelated{Base: o.Base, Max: o.Cap, Rand: s.Rand.Float64}
		delay = func(_ int, prev time.Duration) time.Duration { return b.Next(prev) }
	}

	var version int64 // the row
	calls := 0
	var last time.Duration
	type client struct {
		attempt int
		prev    time.Duration
	}
	var read func(c *client, wait time.Duration)
	read = func(c *client, wait time.Duration) {
		s.After(wait+leg(), func() { // the read reaches the server
			v := version
			s.After(leg()+leg(), func() { // response, then the conditional write
				calls++
				ok := version == v
				if ok {
					version++
				}
				s.After(leg(), func() { // the write's response reaches the client
					if ok {
						last = s.Now()
						return
					}
					c.attempt++
					c.prev = delay(c.attempt, c.prev)
					read(c, c.prev)
				})
			})
		})
	}
	for range clients {
		read(&client{}, 0)
	}
	s.Run()
	return last, calls
}

// Table returns the rows as a table with the columns strategy, clients,
// runs, mean_time_ms and mean_calls.
func (r *brookerResult) Table() table {
	t := table{Columns: []column{{"strategy", 0}, {"clients", 0}, {"runs", 0}, {"mean_time_ms", 1}, {"mean_calls", 1}}}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, []any{row.Strategy, row.Clients, row.Runs, ms(row.MeanTime), row.MeanCalls})
	}
	return t
}

// figure plots mean calls and mean completion time against clients, one
// line per strategy.
func (r *brookerResult) Figure() figure {
	calls := chart{Title: "Work: write attempts until every client has written", XLabel: "clients", YLabel: "mean calls"}
	times := chart{Title: "Completion: time until the last client has written (log scale)", XLabel: "clients", YLabel: "mean time (ms)", LogY: true}
	for _, name := range r.Options.Strategies {
		c, t := curve{Name: name}, curve{Name: name}
		for _, row := range r.Rows {
			if row.Strategy != name {
				continue
			}
			c.X, c.Y = append(c.X, float64(row.Clients)), append(c.Y, row.MeanCalls)
			t.X, t.Y = append(t.X, float64(row.Clients)), append(t.Y, ms(row.MeanTime))
		}
		calls.Series = append(calls.Series, c)
		times.Series = append(times.Series, t)
	}
	return figure{
		Title: fmt.Sprintf("Brooker's OCC contention, %d runs per point (base %v, cap %v)", r.Options.Runs, r.Options.Base, r.Options.Cap),
		Plots: []chart{calls, times},
	}
}

// Row returns the row for strategy at clients.
func (r *brookerResult) Row(strategy string, clients int) (brookerRow, bool) {
	for _, row := range r.Rows {
		if row.Strategy == strategy && row.Clients == clients {
			return row, true
		}
	}
	return brookerRow{}, false
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
