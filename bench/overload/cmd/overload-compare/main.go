// Command overload-compare runs sluice's adaptive concurrency limiters and
// their peers side by side in the I/O-bound overload model, in real time,
// and prints the rows of "sluice sim overload" for each, then each
// limiter's verdict on the overload targets.
//
//	cd bench && go run ./overload/cmd/overload-compare [-phase 5s] [-format table|json|csv] [-svg FILE] [-csv FILE]
//
// With -rounds N (paired rounds: every contender in each) or -model http
// or both, it prints instead the median over the rounds of each
// contender's goodput, p50, p99 and refusals per phase, of the I/O model,
// of the CPU-bound HTTP model (see overload.RunHTTP), or of both, and
// which of sluice's limiters no peer beats on both goodput and p99:
//
//	cd bench && go run ./overload/cmd/overload-compare -model both -rounds 3 -phase 3s -http-phase 2s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/overload"
	"github.com/sluicehq/sluice/sim"
)

func main() {
	capacity := flag.Int("capacity", 20, "requests in flight the model serves at -base each")
	base := flag.Duration("base", 20*time.Millisecond, "no-load latency of the model")
	phase := flag.Duration("phase", 5*time.Second, "length of each phase (real time)")
	warmup := flag.Duration("warmup", 3*time.Second, "time at 0.5x before the phases")
	seed := flag.Uint64("seed", 1, "seed of the arrivals and the latency noise")
	format := flag.String("format", "table", "table, json or csv")
	svg := flag.String("svg", "", "write the figure to this file")
	csvFile := flag.String("csv", "", "write the time series to this file")
	model := flag.String("model", "io", "io (the I/O-bound model), http (a CPU-bound HTTP server, real contention) or both")
	rounds := flag.Int("rounds", 1, "paired rounds (every contender in each); past 1, or with -model http or both, the medians")
	httpPhase := flag.Duration("http-phase", 2*time.Second, "length of each phase of the HTTP model")
	httpWork := flag.Duration("http-work", time.Millisecond, "CPU time of an ordinary request of the HTTP model (a slow one: 10x)")
	flag.Parse()
	if *capacity < 1 || *capacity > 1000 || *phase <= 0 || *phase > 5*time.Minute || *base <= 0 || *warmup < 0 ||
		*rounds < 1 || *rounds > 50 || *httpPhase <= 0 || *httpPhase > 5*time.Minute || *httpWork <= 0 || *httpWork > time.Second ||
		(*model != "io" && *model != "http" && *model != "both") {
		fmt.Fprintln(os.Stderr, "overload-compare: -capacity 1..1000, -base > 0, -phase and -http-phase in (0, 5m], -warmup >= 0, -rounds 1..50, -http-work in (0, 1s], -model io, http or both")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *rounds > 1 || *model != "io" {
		io := overload.Options{Model: sim.IOModel{Capacity: *capacity, Base: *base}, Phase: *phase, Warmup: *warmup, Seed: *seed}
		h := overload.HTTPOptions{Work: *httpWork, Phase: *httpPhase, Rounds: *rounds, Seed: *seed}
		if err := paired(ctx, *model, *rounds, io, h); err != nil {
			fmt.Fprintln(os.Stderr, "overload-compare:", err)
			os.Exit(1)
		}
		return
	}
	res, err := overload.Run(ctx, overload.Options{
		Model: sim.IOModel{Capacity: *capacity, Base: *base}, Phase: *phase, Warmup: *warmup, Seed: *seed,
		Progress: func(elapsed, total time.Duration) {
			fmt.Fprintf(os.Stderr, "\roverload-compare: %v of %v", elapsed.Round(time.Second), total)
		},
	})
	fmt.Fprintln(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "overload-compare:", err)
		os.Exit(1)
	}
	if err := res.WriteTable(os.Stdout, *format); err != nil {
		fmt.Fprintln(os.Stderr, "overload-compare:", err)
		os.Exit(2)
	}
	if *format == "table" {
		fmt.Printf("\nno-load p99 %v; targets (issue 17):\n", res.NoLoadP99.Round(10*time.Microsecond))
		v := overload.Verdicts(res)
		names := make([]string, 0, len(v))
		for n := range v {
			names = append(names, n)
		}
		slices.Sort(names)
		for i, t := range overload.Targets {
			fmt.Printf("  %s\n", t)
			for _, n := range names {
				fmt.Printf("    %-26s %s\n", n, v[n][i])
			}
		}
		var lim []string
		for _, r := range res.Rows {
			if r.Phase == "5x" && r.MeanLimit == r.MeanLimit {
				lim = append(lim, fmt.Sprintf("%s %.0f", r.Limiter, r.MeanLimit))
			}
		}
		fmt.Printf("mean limit at 5x (capacity %d): %s\n", *capacity, strings.Join(lim, ", "))
		var rej []string
		for _, r := range res.Rows {
			if d := res.RejectionP99(r.Limiter, "5x"); r.Phase == "5x" && d > 0 {
				rej = append(rej, fmt.Sprintf("%s %v", r.Limiter, d))
			}
		}
		fmt.Printf("p99 of a refusal at 5x (the limiter's call, in process): %s\n", strings.Join(rej, ", "))
	}
	write := func(name string, f func(*os.File) error) {
		if name == "" {
			return
		}
		out, err := os.Create(name)
		if err == nil {
			err = f(out)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "overload-compare:", err)
			os.Exit(1)
		}
	}
	write(*svg, func(f *os.File) error { return res.WriteSVG(f) })
	write(*csvFile, func(f *os.File) error { return res.WriteSeries(f) })
}

// paired runs rounds of the models and prints the medians.
func paired(ctx context.Context, model string, rounds int, io overload.Options, h overload.HTTPOptions) error {
	var all [][]overload.Row
	if model != "http" {
		for r := range rounds {
			io.Seed += uint64(r)
			res, err := overload.Run(ctx, io)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "overload-compare: io round %d of %d done\n", r+1, rounds)
			all = append(all, overload.IORows(res))
		}
	}
	if model != "io" {
		h.Progress = func(round int, c string) {
			fmt.Fprintf(os.Stderr, "\roverload-compare: http round %d of %d: %-26s", round+1, rounds, c)
		}
		res, err := overload.RunHTTP(ctx, h)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return err
		}
		fmt.Printf("http model: capacity (unlimited, 2 clients per core), least and most before a contender, per round: %.0f requests/s; %d hash rounds a request\n",
			res.Capacity, res.Iters)
		all = append(all, res.Rounds...)
	}
	// Rounds of the two models are folded separately (a row's key has
	// its model).
	return overload.WriteRows(os.Stdout, overload.Medians(all))
}
