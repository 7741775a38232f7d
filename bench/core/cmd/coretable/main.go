// Command coretable turns the output of the bench/core benchmarks into
// markdown tables: per case, every contender's median ns/op (over all the
// runs in the input, with the spread), allocations, and how many times
// faster sluice is than each peer and than the fastest peer.
//
//	cd bench && go test -run '^$' -bench . -count 5 ./core | tee core.txt
//	go run ./core/cmd/coretable < core.txt
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "coretable:", err)
		os.Exit(1)
	}
}

// samples holds every value of every metric of one benchmark.
type samples map[string][]float64

type table struct {
	cases []string                      // in order of appearance
	names map[string][]string           // case -> contenders in order
	data  map[string]map[string]samples // case -> contender -> metric -> values
	heap  map[string]samples            // contender -> metrics
	order []string                      // heap contenders in order
	other map[string]samples            // other benchmarks (TimeNow)
}

func run(r io.Reader, w io.Writer) error {
	t := table{names: map[string][]string{}, data: map[string]map[string]samples{}, heap: map[string]samples{}, other: map[string]samples{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		m := samples{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return fmt.Errorf("%q: %v", sc.Text(), err)
			}
			m[f[i+1]] = append(m[f[i+1]], v)
		}
		parts := strings.Split(name, "/")
		switch {
		case parts[0] == "BenchmarkCore" && len(parts) == 3:
			c, n := parts[1], parts[2]
			if t.data[c] == nil {
				t.data[c] = map[string]samples{}
				t.cases = append(t.cases, c)
			}
			if t.data[c][n] == nil {
				t.data[c][n] = samples{}
				t.names[c] = append(t.names[c], n)
			}
			merge(t.data[c][n], m)
		case parts[0] == "BenchmarkHeapPerKey" && len(parts) == 2:
			if t.heap[parts[1]] == nil {
				t.heap[parts[1]] = samples{}
				t.order = append(t.order, parts[1])
			}
			merge(t.heap[parts[1]], m)
		default:
			if t.other[name] == nil {
				t.other[name] = samples{}
			}
			merge(t.other[name], m)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(t.cases) == 0 && len(t.heap) == 0 {
		return fmt.Errorf("no BenchmarkCore or BenchmarkHeapPerKey lines in the input")
	}
	t.print(w)
	return nil
}

func merge(dst, src samples) {
	for k, v := range src {
		dst[k] = append(dst[k], v...)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread is the half-range of v around its median, in percent.
func spread(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := median(v)
	return (slices.Max(v) - slices.Min(v)) / 2 / m * 100
}

func isSluice(name string) bool { return strings.HasPrefix(name, "sluice") }

// isStudy reports a design study: reported, never a peer.
func isStudy(name string) bool { return strings.HasPrefix(name, "study-") }

func (t table) print(w io.Writer) {
	for _, c := range t.cases {
		fmt.Fprintf(w, "### %s\n\n", c)
		fmt.Fprintln(w, "| contender | ns/op (median) | ± | ns/op (min) | cpu-ns/op (median) | runs | allocs/op | B/op | admits/op | sluice per-call clock is × faster | sluice default (cached clock) is × faster |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
		ns := func(n string) float64 { return median(t.data[c][n]["ns/op"]) }
		var perCall, cached float64
		fastest, fastestNs := "", 0.0
		for _, n := range t.names[c] {
			switch {
			case isStudy(n):
			case strings.Contains(n, "per-call"):
				perCall = ns(n)
			case n == "sluice-gcra-default":
				cached = ns(n)
			case isSluice(n):
			case fastest == "" || ns(n) < fastestNs:
				fastest, fastestNs = n, ns(n)
			}
		}
		for _, n := range t.names[c] {
			s := t.data[c][n]
			ratio := func(sl float64) string {
				if isSluice(n) || isStudy(n) || sl == 0 {
					return ""
				}
				return fmt.Sprintf("%.2f×", ns(n)/sl)
			}
			fmt.Fprintf(w, "| %s | %.1f | %.0f%% | %.1f | %.1f | %d | %.0f | %.0f | %.3g | %s | %s |\n",
				n, ns(n), spread(s["ns/op"]), slices.Min(s["ns/op"]), median(s["cpu-ns/op"]), len(s["ns/op"]), median(s["allocs/op"]), median(s["B/op"]), median(s["admits/op"]), ratio(perCall), ratio(cached))
		}
		if fastest != "" {
			fmt.Fprintf(w, "\nFastest peer (median ns/op): %s, %.1f ns/op. sluice is %.2f× as fast with the per-call clock, %.2f× with the cached clock.\n",
				fastest, fastestNs, fastestNs/perCall, fastestNs/cached)
			// The same with the best run of each, less sensitive to a
			// machine shared with other work.
			best := func(n string) float64 { return slices.Min(t.data[c][n]["ns/op"]) }
			var bPer, bCached, bPeer float64
			bName := ""
			for _, n := range t.names[c] {
				switch {
				case isStudy(n):
				case strings.Contains(n, "per-call"):
					bPer = best(n)
				case n == "sluice-gcra-default":
					bCached = best(n)
				case isSluice(n):
				case bName == "" || best(n) < bPeer:
					bName, bPeer = n, best(n)
				}
			}
			fmt.Fprintf(w, "Fastest peer (best run): %s, %.1f ns/op. sluice is %.2f× as fast with the per-call clock, %.2f× with the cached clock.\n",
				bName, bPeer, bPeer/bPer, bPeer/bCached)
			for _, n := range t.names[c] {
				if isStudy(n) {
					fmt.Fprintf(w, "Design study %s: %.2f× as fast as the fastest peer (median), %.2f× (best run).\n", n, fastestNs/ns(n), bPeer/best(n))
				}
			}
			fmt.Fprintln(w)
		}
	}
	if len(t.order) > 0 {
		fmt.Fprintln(w, "### heap per key at 1M keys")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| contender | B/key (median) | runs | s to create 1M keys |")
		fmt.Fprintln(w, "|---|---:|---:|---:|")
		for _, n := range t.order {
			s := t.heap[n]
			fmt.Fprintf(w, "| %s | %.1f | %d | %.2f |\n", n, median(s["B/key"]), len(s["B/key"]), median(s["ns/op"])/1e9)
		}
		fmt.Fprintln(w)
	}
	if len(t.other) > 0 {
		var names []string
		for n := range t.other {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			fmt.Fprintf(w, "%s: %.1f ns/op (median of %d)\n", n, median(t.other[n]["ns/op"]), len(t.other[n]["ns/op"]))
		}
	}
}
