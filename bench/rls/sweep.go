package rls

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The sweep's load tools.
const (
	ToolClient = "client" // the project's load generator (Measure, ClientRaw)
	ToolGHZ    = "ghz"    // ghz at GHZVersion (GHZ)
)

// SweepConfig is what Sweep measures: every server of Servers at each
// offered rate (Fractions of Capacity) and at saturation, with each tool,
// in Rounds rounds. Within a round the servers run one after the other on
// the same load (paired rounds), the first server first in odd rounds and
// last in even ones.
type SweepConfig struct {
	Load      Load      // callers, connections, keys, descriptors, duration; Rate and Client are set by Sweep
	Capacity  float64   // the reference server's capacity in req/s (100%)
	Fractions []float64 // offered rates as fractions of Capacity; saturation is added after them
	Tools     []string  // ToolClient and/or ToolGHZ
	Rounds    int
	// GHZ and Protoset: ghz's binary and the protoset file, for ToolGHZ.
	GHZ, Protoset string
	// LoadCPUs, when not empty, is where ghz runs.
	LoadCPUs []int
	// CPU returns the CPU time so far of the process pid and of
	// redis-server.
	CPU func(pid int) (server, redis time.Duration)
	// Progress, when not nil, gets a line per measurement.
	Progress io.Writer
	// Around, when not nil, is called as each measurement starts (a CPU
	// profile, say); the function it returns, when not nil, is called
	// when the measurement ends.
	Around func(pt SweepPoint, round int, p *Proc) (end func())
}

// SweepPoint is one load level measured with one tool: every server's
// rounds.
type SweepPoint struct {
	Rate    float64 // offered req/s; 0: saturation
	Percent float64 // Rate as a percentage of Capacity; 0 at saturation
	Tool    string
	Results map[string][]Result // by server name, one per round
}

// Sweep measures cfg on servers; the first server is the reference the
// others are compared with.
func Sweep(ctx context.Context, cfg SweepConfig, servers []*Proc) ([]SweepPoint, error) {
	var points []SweepPoint
	levels := append(slices.Clone(cfg.Fractions), 0)
	for _, f := range levels {
		for _, tool := range cfg.Tools {
			pt := SweepPoint{Rate: f * cfg.Capacity, Percent: f * 100, Tool: tool, Results: map[string][]Result{}}
			l := cfg.Load
			l.Rate, l.Client = pt.Rate, ClientRaw
			for r := range max(1, cfg.Rounds) {
				order := slices.Clone(servers)
				if r%2 == 1 {
					slices.Reverse(order)
				}
				for _, p := range order {
					pid := p.PID()
					var cpu func() (time.Duration, time.Duration)
					if cfg.CPU != nil {
						cpu = func() (time.Duration, time.Duration) { return cfg.CPU(pid) }
					}
					var end func()
					if cfg.Around != nil {
						end = cfg.Around(pt, r, p)
					}
					var res Result
					var err error
					switch tool {
					case ToolClient:
						res, err = Measure(ctx, p.Name, p.Addr, l, cpu)
					case ToolGHZ:
						res, err = GHZ(ctx, cfg.GHZ, cfg.Protoset, p.Name, p.Addr, l, cpu, cfg.LoadCPUs)
					default:
						err = fmt.Errorf("rls: unknown sweep tool %q", tool)
					}
					if end != nil {
						end()
					}
					if err != nil {
						return points, fmt.Errorf("%s at %s, %s: %w", p.Name, pt.Level(), tool, err)
					}
					if cfg.Progress != nil {
						fmt.Fprintf(cfg.Progress, "  %-10s %-7s round %d  %s\n", pt.Level(), tool, r+1, res)
						if res.FirstErr != nil {
							fmt.Fprintf(cfg.Progress, "    %d errors, first: %v\n", res.Errors, res.FirstErr)
						}
					}
					pt.Results[p.Name] = append(pt.Results[p.Name], res)
				}
			}
			points = append(points, pt)
		}
	}
	return points, nil
}

// Level says the point's load: "10% (480/s)" or "saturation".
func (p SweepPoint) Level() string {
	if p.Rate == 0 {
		return "saturation"
	}
	return fmt.Sprintf("%.0f%% (%.0f/s)", p.Percent, p.Rate)
}

// Summary is a server's figures at one point: medians over the rounds,
// each figure on its own.
type Summary struct {
	PerSecond          float64
	P50, P99           time.Duration
	Server, Redis, Gen float64 // CPU µs a request: the server, redis-server, the load tool
	Errors             int64
}

// Total is server and Redis CPU a request, µs.
func (s Summary) Total() float64 { return s.Server + s.Redis }

func median[T any](v []T, f func(T) float64) float64 {
	x := make([]float64, 0, len(v))
	for _, e := range v {
		x = append(x, f(e))
	}
	if len(x) == 0 {
		return 0
	}
	slices.Sort(x)
	return x[len(x)/2]
}

func perReq(d time.Duration, n int64) float64 { return d.Seconds() * 1e6 / float64(max(1, n)) }

// Summarize returns name's summary at p.
func (p SweepPoint) Summarize(name string) Summary {
	rs := p.Results[name]
	var s Summary
	s.PerSecond = median(rs, Result.PerSecond)
	s.P50 = time.Duration(median(rs, func(r Result) float64 { return float64(r.P50) }))
	s.P99 = time.Duration(median(rs, func(r Result) float64 { return float64(r.P99) }))
	s.Server = median(rs, func(r Result) float64 { return perReq(r.ServerCPU, r.Requests) })
	s.Redis = median(rs, func(r Result) float64 { return perReq(r.RedisCPU, r.Requests) })
	s.Gen = median(rs, func(r Result) float64 { return perReq(r.LoadCPU, r.Requests) })
	for _, r := range rs {
		s.Errors += r.Errors
	}
	return s
}

// Paired returns, round by round, ref's server+Redis CPU a request over
// name's (how many times less name spends), sorted.
func (p SweepPoint) Paired(ref, name string) []float64 {
	a, b := p.Results[ref], p.Results[name]
	var out []float64
	for i := range min(len(a), len(b)) {
		x := perReq(a[i].ServerCPU+a[i].RedisCPU, a[i].Requests)
		y := perReq(b[i].ServerCPU+b[i].RedisCPU, b[i].Requests)
		if y > 0 {
			out = append(out, x/y)
		}
	}
	slices.Sort(out)
	return out
}

// SweepTable writes points as a Markdown table comparing each server with
// ref: one row per load level and tool.
func SweepTable(w io.Writer, points []SweepPoint, ref string, others []string) {
	fmt.Fprintln(w, "| load | tool | server | req/s | p50 | p99 | CPU a request: server + Redis = total | less than "+ref+" (paired rounds: median, range) | Redis a decision vs "+ref+" |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---|---|---|")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", d.Seconds()*1e3) }
	for _, p := range points {
		e := p.Summarize(ref)
		fmt.Fprintf(w, "| %s | %s | %s | %.0f | %s | %s | %.1f + %.1f = **%.1f µs** | | |\n",
			p.Level(), p.Tool, ref, e.PerSecond, ms(e.P50), ms(e.P99), e.Server, e.Redis, e.Total())
		for _, n := range others {
			s := p.Summarize(n)
			pr := p.Paired(ref, n)
			prs := ""
			if len(pr) > 0 {
				prs = fmt.Sprintf("%.2f×, %.2f–%.2f×", pr[len(pr)/2], pr[0], pr[len(pr)-1])
			}
			fmt.Fprintf(w, "| | | %s | %.0f | %s | %s | %.1f + %.1f = **%.1f µs** | **%.2f×** (%s) | %.2f× |\n",
				n, s.PerSecond, ms(s.P50), ms(s.P99), s.Server, s.Redis, s.Total(),
				e.Total()/max(s.Total(), 1e-9), prs, s.Redis/max(e.Redis, 1e-9))
		}
	}
}

// ParseFractions parses "10,25,50,100" (percentages) into fractions.
func ParseFractions(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0 && v <= 1000) {
			return nil, fmt.Errorf("rls: bad percentage %q in %q", f, s)
		}
		out = append(out, v/100)
	}
	return out, nil
}
