//go:build unix

// Command corepair measures the bench/core contenders in paired rounds, for
// machines shared with other work, where the Go benchmarks' one long run per
// contender meets a different load each time. Every round runs a short,
// fixed batch of each contender, in a fresh random order, back to back; a
// ratio is taken within each round (so both sides met the same load) and
// the median over the rounds is reported, with the median ns/op.
//
//	cd bench && go run ./core/cmd/corepair -rounds 40
package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/bench/core"
)

func main() {
	rounds := flag.Int("rounds", 40, "paired rounds per case")
	batch := flag.Int("batch", 200_000, "operations per contender per round")
	procs := flag.Int("procs", 2, "goroutines in the parallel case")
	ablations := flag.Bool("ablations", false, "add the lean study's ablations")
	algorithms := flag.Bool("algorithms", false, "add sluice's other algorithms (Store.Apply, default Options)")
	only := flag.String("only", "", "run only the contenders whose names match this regexp (sluice's own always run)")
	flag.Parse()
	cs := append(core.Contenders(), core.Studies()...)
	if *ablations {
		cs = append(cs, core.Ablations()...)
	}
	if *algorithms {
		cs = append(cs, core.Algorithms()...)
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "corepair:", err)
			os.Exit(2)
		}
		cs = slices.DeleteFunc(cs, func(c core.Contender) bool { return !c.Sluice && !re.MatchString(c.Name) })
	}
	if err := run(os.Stdout, cs, *rounds, *batch, *procs); err != nil {
		fmt.Fprintln(os.Stderr, "corepair:", err)
		os.Exit(1)
	}
}

type kase struct {
	name     string
	keys     int
	parallel bool
}

func run(w io.Writer, cs []core.Contender, rounds, batch, procs int) error {
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	for _, k := range []kase{{"one-key", 1, false}, {"100k-serial", len(keys), false}, {"100k-parallel", len(keys), true}} {
		var (
			names []string
			lims  []core.Limiter
		)
		for _, c := range cs {
			if c.OneKey && k.keys > 1 {
				continue
			}
			l := c.New(k.keys)
			for _, key := range keys[:k.keys] {
				l.Allow(key)
			}
			names = append(names, c.Name)
			lims = append(lims, l)
		}
		wall := make([][]float64, len(lims)) // ns/op per round
		cpu := make([][]float64, len(lims))
		order := make([]int, len(lims))
		for i := range order {
			order[i] = i
		}
		for range rounds {
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, i := range order {
				c0, t0 := cpuTime(), time.Now()
				drive(lims[i], keys[:k.keys], batch, k.parallel, procs)
				wall[i] = append(wall[i], float64(time.Since(t0).Nanoseconds())/float64(batch))
				cpu[i] = append(cpu[i], float64(cpuTime()-c0)/float64(batch))
			}
		}
		for _, l := range lims {
			l.Close()
		}
		report(w, k.name, names, wall, cpu, rounds, batch)
	}
	return nil
}

// drive runs n operations on l, walking keys; in parallel, procs goroutines
// share them, each from its own place.
func drive(l core.Limiter, keys []string, n int, parallel bool, procs int) {
	if !parallel {
		j := 0
		for range n {
			l.Allow(keys[j])
			if j++; j == len(keys) {
				j = 0
			}
		}
		return
	}
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			j := rand.IntN(len(keys))
			for range n / procs {
				l.Allow(keys[j])
				if j++; j == len(keys) {
					j = 0
				}
			}
		})
	}
	wg.Wait()
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratios returns, round by round, a[r]/b[r].
func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for r := range a {
		out[r] = a[r] / b[r]
	}
	return out
}

func report(w io.Writer, kname string, names []string, wall, cpu [][]float64, rounds, batch int) {
	fmt.Fprintf(w, "### %s (%d paired rounds of %d operations)\n\n", kname, rounds, batch)
	idx := func(prefix string) int {
		for i, n := range names {
			if strings.HasPrefix(n, prefix) {
				return i
			}
		}
		return -1
	}
	per, cached := idx("sluice-gcra-clock-per-call"), idx("sluice-gcra-default")
	fmt.Fprintln(w, "| contender | ns/op (median) | cpu-ns/op (median) | sluice per-call clock is × faster (median of paired ratios) | sluice default (cached clock) is × faster |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	fastest, fastestNs := -1, 0.0
	for i, n := range names {
		peer := !strings.HasPrefix(n, "sluice") && !strings.HasPrefix(n, "study-")
		r1, r2 := "", ""
		if peer {
			r1 = fmt.Sprintf("%.2f×", median(ratios(wall[i], wall[per])))
			r2 = fmt.Sprintf("%.2f×", median(ratios(wall[i], wall[cached])))
			// The fastest peer is the one sluice (cached clock) gains
			// least against, round by round.
			if r := median(ratios(wall[i], wall[cached])); fastest < 0 || r < fastestNs {
				fastest, fastestNs = i, r
			}
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %s |\n", n, median(wall[i]), median(cpu[i]), r1, r2)
	}
	if fastest >= 0 {
		fmt.Fprintf(w, "\nFastest peer (the smallest paired ratio): %s. Paired: sluice per-call clock %.2f×, default (cached clock) %.2f× as fast",
			names[fastest], median(ratios(wall[fastest], wall[per])), median(ratios(wall[fastest], wall[cached])))
		for i, n := range names {
			if strings.HasPrefix(n, "study-") || (strings.HasPrefix(n, "sluice-") && i != per && i != cached) {
				fmt.Fprintf(w, "; %s %.2f×", n, median(ratios(wall[fastest], wall[i])))
			}
		}
		fmt.Fprintln(w, ".")
	}
	fmt.Fprintln(w)
}

func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
