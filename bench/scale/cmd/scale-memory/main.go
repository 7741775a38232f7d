// Command scale-memory measures what sluice's state costs redis-server per
// key, for every algorithm, and projects it to the seed's 100 million
// keys. It starts its own redis-server (loopback, free port, persistence
// off) unless given -addr. See docs/scale.md.
//
//	cd bench && go run ./scale/cmd/scale-memory -keys 1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/bench/scale"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func main() {
	keys := flag.Int("keys", 1_000_000, "distinct keys written per algorithm")
	algs := flag.String("algorithms", "", "comma-separated algorithms (default: all six)")
	logHits := flag.Int("log-hits", 100, "also measure the sliding log with this many requests per key, at -log-keys keys (0: skip)")
	logKeys := flag.Int("log-keys", 10_000, "keys of the -log-hits run")
	callers := flag.Int("callers", 256, "goroutines applying requests at once")
	layout := flag.String("layout", "string", "the store's layout: string, or packed (the buckets' states as fields of shared hashes)")
	addr := flag.String("addr", "", "use this redis-server (it is flushed!) instead of starting one")
	serverClock := flag.Bool("server-clock", false, "run the store on Redis's clock (the rule's period a day, so keys outlive the run) instead of Options.Now")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	lay, err := redisstore.ParseLayout(*layout)
	if err != nil {
		log.Fatal(err)
	}
	list := scale.Algorithms
	if *algs != "" {
		list = nil
		for _, s := range strings.Split(*algs, ",") {
			a, err := ratelimit.ParseAlgorithm(strings.TrimSpace(s))
			if err != nil {
				log.Fatal(err)
			}
			list = append(list, a)
		}
	}
	if *addr == "" {
		s, err := redistest.StartServer()
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		*addr = s.Addr
	}
	ver, _ := scale.ServerVersion(ctx, *addr)
	fmt.Printf("redis-server %s at %s; the seed's rule: 1000/min, burst 200, per user; %d keys per algorithm; %v layout\n\n", ver, *addr, *keys, lay)

	type run struct {
		o scale.MemoryOptions
	}
	var runs []run
	for _, a := range list {
		runs = append(runs, run{scale.MemoryOptions{Addr: *addr, Algorithm: a, Keys: *keys, Callers: *callers, Layout: lay, ServerClock: *serverClock}})
	}
	if *logHits > 1 {
		runs = append(runs, run{scale.MemoryOptions{Addr: *addr, Algorithm: ratelimit.SlidingWindowLog, Keys: *logKeys, Hits: *logHits, Callers: *callers, Layout: lay}})
	}
	var results []scale.MemoryResult
	failed := false
	for _, r := range runs {
		res, err := scale.Memory(ctx, r.o)
		if err != nil {
			log.Printf("%v ×%d: %v", r.o.Algorithm, max(r.o.Hits, 1), err)
			failed = true
			continue
		}
		results = append(results, res)
		fmt.Fprintf(os.Stderr, "%v ×%d: %d keys in %v (%.0f decisions/s, %d script calls): used_memory %d -> %d, %.1f B/key, MEMORY USAGE %.1f\n",
			res.Algorithm, res.Hits, res.Keys, res.Elapsed.Round(1e6), res.DecisionsPerSec, res.ScriptCalls, res.Before, res.After, res.PerKey(), res.UsageMean)
	}
	if err := scale.WriteMemoryTable(os.Stdout, results); err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "algorithm\tRedis key of the first user\tencoding\tvalue bytes\tMEMORY USAGE")
	for _, r := range results {
		for _, k := range r.Example {
			fmt.Fprintf(tw, "%v ×%d\t%s\t%s\t%d\t%d\n", r.Algorithm, r.Hits, k.Name, k.Encoding, k.ValueBytes, k.Usage)
		}
	}
	tw.Flush()
	if failed {
		os.Exit(1)
	}
}
