package sim

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

// aimdPhase is a stretch of the aimd scenario during which the server's hidden
// capacity is Limit requests a second.
type aimdPhase struct {
	Start time.Duration // from this time on
	Limit int64         // requests per second the server admits
}

// defaultAIMDPhases returns the hidden capacity of the aimd scenario: 40/s,
// then a jump to 100/s, a fall to 25/s and a recovery to 60/s, a minute
// each.
func defaultAIMDPhases() []aimdPhase {
	return []aimdPhase{
		{0, 40},
		{60 * time.Second, 100},
		{120 * time.Second, 25},
		{180 * time.Second, 60},
	}
}

// aimdOptions configures [aimd]. The zero value is the default scenario.
type aimdOptions struct {
	Seed       uint64
	Runs       int              // 0 means 1; the table averages over runs
	Phases     []aimdPhase      // nil means defaultAIMDPhases(); Start ascending, the first at 0
	Duration   time.Duration    // 0 means 60 s after the last phase starts
	Controller adaptive.Options // the client's AIMD; the zero value is adaptive's default
	Net        time.Duration    // mean of a network leg; 0 means 10 ms
	NetSD      time.Duration    // its standard deviation; 0 means 2 ms
}

// aimdRow summarizes one phase (averaged over runs).
type aimdRow struct {
	Phase      int
	Start, End time.Duration
	Limit      int64   // the hidden capacity, per second
	Sent       float64 // requests sent per second
	Goodput    float64 // requests admitted per second
	Throttled  float64 // fraction of requests answered 429
}

// aimdResult is the outcome of [aimd].
type aimdResult struct {
	Options aimdOptions
	Rows    []aimdRow // one per phase, then the whole run (Phase 0)
	// The first run, sampled: the controller's rate every 250 ms, and the
	// fraction of 429s among the requests that reached the server in each
	// second.
	RateAt, Rate     []float64 // seconds, requests per second
	BinAt, Throttled []float64 // seconds (bin start), fraction
}

func (o aimdOptions) withDefaults() (aimdOptions, error) {
	orDefault(&o.Runs, 1)
	if len(o.Phases) == 0 {
		o.Phases = defaultAIMDPhases()
	}
	if o.Phases[0].Start != 0 {
		return o, fmt.Errorf("sim: aimd: the first phase starts at %v, want 0", o.Phases[0].Start)
	}
	for i, p := range o.Phases {
		if p.Limit < 1 {
			return o, fmt.Errorf("sim: aimd: phase %d: limit %d/s, want at least 1", i+1, p.Limit)
		}
		if i > 0 && p.Start <= o.Phases[i-1].Start {
			return o, fmt.Errorf("sim: aimd: phase %d starts at %v, not after phase %d", i+1, p.Start, i)
		}
	}
	last := o.Phases[len(o.Phases)-1].Start
	orDefault(&o.Duration, last+time.Minute)
	if o.Duration <= last {
		return o, fmt.Errorf("sim: aimd: duration %v ends before the last phase starts (%v)", o.Duration, last)
	}
	orDefault(&o.Net, 10*time.Millisecond)
	orDefault(&o.NetSD, 2*time.Millisecond)
	return o, nil
}

// aimd runs one client whose rate is set by sluice's adaptive.AIMD against a
// server whose capacity is hidden and changes by phase. The server is a
// token bucket (algorithm/gcra, the step memstore runs) of Limit per second
// with a burst of a tenth of a second's worth; it answers 429 without
// Retry-After, so the client learns the limit only by crossing it. The
// client sends at its controller's current rate, open loop, and feeds every
// answer to the controller with its round-trip time.
//
// Run r uses the PCG stream (Seed, r).
func aimd(o aimdOptions) (*aimdResult, error) {
	res := &aimdResult{Options: o}
	n := len(o.Phases)
	sent := make([]float64, n+1)
	ok := make([]float64, n+1)
	for r := range o.Runs {
		s := newEngine(o.Seed, uint64(r))
		st := aimdRun(o, s, r == 0, res)
		for i := range n + 1 {
			sent[i] += float64(st.sent[i])
			ok[i] += float64(st.ok[i])
		}
	}
	for i := range n + 1 {
		row := aimdRow{Phase: i + 1, Start: 0, End: o.Duration}
		if i < n {
			row.Start, row.Limit = o.Phases[i].Start, o.Phases[i].Limit
			if i+1 < n {
				row.End = o.Phases[i+1].Start
			}
		} else {
			row.Phase = 0
		}
		secs := (row.End - row.Start).Seconds() * float64(o.Runs)
		row.Sent, row.Goodput = sent[i]/secs, ok[i]/secs
		if sent[i] > 0 {
			row.Throttled = (sent[i] - ok[i]) / sent[i]
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

type aimdStats struct{ sent, ok []int } // per phase, then in all

func aimdRun(o aimdOptions, s *engine, record bool, res *aimdResult) aimdStats {
	n := len(o.Phases)
	st := aimdStats{sent: make([]int, n+1), ok: make([]int, n+1)}
	c := adaptive.NewAIMD(o.Controller)
	phase := func(t time.Duration) int {
		i := 0
		for i+1 < n && o.Phases[i+1].Start <= t {
			i++
		}
		return i
	}
	leg := func() time.Duration { return s.Normal(o.Net, o.NetSD) }
	var tat int64
	bins := int((o.Duration + time.Second - 1) / time.Second)
	binSent, binOK := make([]int, bins), make([]int, bins)

	var send func()
	send = func() {
		if s.Now() >= o.Duration {
			return
		}
		start := s.Now()
		s.After(leg(), func() { // at the server
			p := phase(s.Now())
			lim := o.Phases[p].Limit
			req := ratelimit.Request{
				Limit:     ratelimit.Limit{Rate: lim, Period: time.Second, Burst: max(1, lim/10)},
				Algorithm: ratelimit.TokenBucket,
				N:         1,
			}
			var d ratelimit.Decision
			tat, d = gcra.Step(tat, s.Time().UnixNano(), req)
			st.sent[p]++
			st.sent[n]++
			if b := int(s.Now() / time.Second); b < bins {
				binSent[b]++
				if d.Allowed {
					binOK[b]++
				}
			}
			if d.Allowed {
				st.ok[p]++
				st.ok[n]++
			}
			s.After(leg(), func() { // back at the client
				sig := adaptive.Throttled
				if d.Allowed {
					sig = adaptive.Success
				}
				c.OnResponse(s.Time(), adaptive.Sample{Signal: sig, Latency: s.Now() - start})
			})
		})
		s.After(time.Duration(float64(time.Second)/c.Rate()), send)
	}
	send()
	if record {
		var sample func()
		sample = func() {
			res.RateAt = append(res.RateAt, s.Now().Seconds())
			res.Rate = append(res.Rate, c.Rate())
			if s.Now()+250*time.Millisecond <= o.Duration {
				s.After(250*time.Millisecond, sample)
			}
		}
		sample()
	}
	s.Run()
	if record {
		for b := range bins {
			res.BinAt = append(res.BinAt, float64(b))
			f := 0.0
			if binSent[b] > 0 {
				f = float64(binSent[b]-binOK[b]) / float64(binSent[b])
			}
			res.Throttled = append(res.Throttled, f)
		}
	}
	return st
}

// Table returns one row per phase and a last row for the whole run (phase
// "all", whose limit is the time-weighted mean), with the columns phase,
// start_s, end_s, limit_rps, sent_rps, goodput_rps and throttled_fraction.
func (r *aimdResult) Table() table {
	t := table{Columns: []column{{"phase", 0}, {"start_s", 0}, {"end_s", 0}, {"limit_rps", 1},
		{"sent_rps", 1}, {"goodput_rps", 1}, {"throttled_fraction", 3}}}
	var weighted float64
	for _, row := range r.Rows {
		phase, limit := fmt.Sprint(row.Phase), float64(row.Limit)
		if row.Phase == 0 {
			phase, limit = "all", weighted/(row.End-row.Start).Seconds()
		} else {
			weighted += float64(row.Limit) * (row.End - row.Start).Seconds()
		}
		t.Rows = append(t.Rows, []any{phase, int(row.Start.Seconds()), int(row.End.Seconds()), limit,
			row.Sent, row.Goodput, row.Throttled})
	}
	return t
}

// figure plots the controller's rate against the hidden limit, and the
// fraction of 429s per second, for the first run.
func (r *aimdResult) Figure() figure {
	o := r.Options
	limit := curve{Name: "hidden limit", Step: true, Dashed: true, Color: "#555555"}
	for _, p := range o.Phases {
		limit.X, limit.Y = append(limit.X, p.Start.Seconds()), append(limit.Y, float64(p.Limit))
	}
	limit.X = append(limit.X, o.Duration.Seconds())
	limit.Y = append(limit.Y, limit.Y[len(limit.Y)-1])
	all := r.Rows[len(r.Rows)-1]
	return figure{
		Title: "AIMD against a hidden, changing limit (adaptive defaults, first run)",
		Plots: []chart{
			{
				Title:  "The client's rate: slow start, then a sawtooth under the limit",
				XLabel: "time (s)", YLabel: "requests per second",
				Series: []curve{limit, {Name: "AIMD rate", X: r.RateAt, Y: r.Rate, Color: palette[0]}},
			},
			{
				Title:  fmt.Sprintf("429s per second (%.1f%% over the whole run)", 100*all.Throttled),
				XLabel: "time (s)", YLabel: "fraction answered 429",
				Series: []curve{{Name: "429 fraction", X: r.BinAt, Y: r.Throttled, Step: true, Color: palette[1]}},
			},
		},
	}
}
