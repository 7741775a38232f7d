// Command dist-compare measures gubernator (3 peers, built from its Go
// module) against `sluice rls` and `sluice serve`'s decision endpoint (3
// instances each, on one redis-server): paired
// rounds in rotated order at saturation (closed loop) and at half the
// slower contender's capacity, then an exactness run per contender (every
// caller on one key limited to -limit a second, spread over the
// instances). See docs/benchmarks.md.
//
//	cd bench && go run ./dist/cmd/dist-compare            # about 5 minutes after the build
//	cd bench && go run ./dist/cmd/dist-compare -short     # about 1 minute
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sluicehq/sluice/bench/dist"
	"github.com/sluicehq/sluice/bench/internal/gobuild"
	"github.com/sluicehq/sluice/bench/internal/host"
	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

func main() {
	root := flag.String("root", "..", "the sluice module (built as the sluice binary)")
	callers := flag.Int("callers", 32, "concurrent callers")
	conns := flag.Int("conns", 6, "gRPC connections, spread over the instances")
	keys := flag.Int("keys", 10000, "distinct counters in the throughput load")
	dur := flag.Duration("duration", 5*time.Second, "measurement time per contender per load per round")
	rounds := flag.Int("rounds", 3, "paired rounds per load")
	limit := flag.Int64("limit", 200, "the exactness run's limit, a second, on one key")
	short := flag.Bool("short", false, "1 round of 2 s")
	flag.Parse()
	if *short {
		*rounds, *dur = 1, 2*time.Second
	}
	ctx := context.Background()
	sets, cleanup, err := setup(ctx, *root, *limit)
	if err != nil {
		log.Fatal(err)
	}
	defer cleanup()
	fmt.Printf("%s, load average %s, %d callers over %d connections, %d keys, %v a run, %d rounds\n",
		time.Now().UTC().Format(time.RFC3339), host.LoadAvg(), *callers, *conns, *keys, *dur, *rounds)
	l := dist.Load{Callers: *callers, Conns: *conns, Duration: *dur, Key: "load", Keys: *keys, Limit: 1_000_000_000}
	sat, err := points(ctx, sets, l, *rounds, "saturation")
	if err != nil {
		log.Fatal(err)
	}
	slowest := sat[0].PerSecond()
	for _, r := range sat {
		slowest = min(slowest, r.PerSecond())
	}
	l.Rate = slowest / 2
	half, err := points(ctx, sets, l, *rounds, fmt.Sprintf("%.0f/s (half the slower's capacity)", l.Rate))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\n| load | contender | decisions/s | decisions per CPU-second (÷ sluice rls) | CPU µs a decision, all processes (÷ sluice rls) | p99 (÷ sluice rls) |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	dist.Table(os.Stdout, "saturation", sat)
	dist.Table(os.Stdout, fmt.Sprintf("%.0f/s", l.Rate), half)
	fmt.Printf("\nexactness: %d callers on one key, limit %d/s, %v, load average %s\n", *callers, *limit, *dur, host.LoadAvg())
	fmt.Println("\n| contender | decisions | admitted | allowed (limit × windows) | admitted ÷ allowed |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, s := range sets {
		x := l
		x.Rate, x.Key, x.Keys, x.Limit, x.Prefix = 0, "exact", 1, *limit, fmt.Sprintf("x%d-", time.Now().UnixNano())
		r, err := dist.Measure(ctx, s, x)
		if err != nil {
			log.Fatal(err)
		}
		a := r.Allowed(*limit)
		fmt.Printf("| %s | %d | %d | %d | %.3f |\n", r.Name, r.Decisions, r.Admitted, a, float64(r.Admitted)/float64(a))
	}
}

// points runs rounds paired rounds of l and returns each set's medians.
func points(ctx context.Context, sets []*dist.Set, l dist.Load, rounds int, label string) ([]dist.Result, error) {
	all := make([][]dist.Result, len(sets))
	for r := range rounds {
		fmt.Printf("%s, round %d, load average %s\n", label, r+1, host.LoadAvg())
		rs, err := dist.Round(ctx, sets, l, r, os.Stdout)
		if err != nil {
			return nil, err
		}
		for i := range rs {
			all[i] = append(all[i], rs[i])
		}
	}
	med := make([]dist.Result, len(sets))
	for i := range all {
		med[i] = dist.Median(all[i])
	}
	return med, nil
}

// setup builds both programs and starts the contenders: gubernator's
// peers (asked with its default behavior and with GLOBAL), then sluice
// serve's and sluice rls's instances on one redis-server (rls last: the
// tables' ratios are to it).
func setup(ctx context.Context, root string, limit int64) ([]*dist.Set, func(), error) {
	cache, err := gobuild.Cache()
	if err != nil {
		return nil, nil, err
	}
	gbin, err := gobuild.Gubernator.Build(ctx, cache, os.Stderr)
	if err != nil {
		return nil, nil, err
	}
	work, err := os.MkdirTemp("", "dist-compare-")
	if err != nil {
		return nil, nil, err
	}
	var stops []func()
	cleanup := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stops = append(stops, func() { os.RemoveAll(work) })
	fail := func(err error) ([]*dist.Set, func(), error) { cleanup(); return nil, nil, err }
	sbin, err := rls.BuildSluice(ctx, root, work)
	if err != nil {
		return fail(err)
	}
	if err := dist.SluiceConfig(work, int(limit)); err != nil {
		return fail(err)
	}
	redis, err := redistest.StartServer()
	if err != nil {
		return fail(err)
	}
	stops = append(stops, redis.Close)
	g, err := dist.StartGubernators(ctx, gbin, dist.GubernatorPeers, 0)
	if err != nil {
		return fail(err)
	}
	stops = append(stops, g.Stop)
	sv, err := dist.StartServes(ctx, sbin, work, redis.Addr, redis.Pid(), dist.SluiceInstances, int(limit))
	if err != nil {
		return fail(err)
	}
	stops = append(stops, sv.Stop)
	s, err := dist.StartSluices(ctx, sbin, work, redis.Addr, redis.Pid(), dist.SluiceInstances)
	if err != nil {
		return fail(err)
	}
	stops = append(stops, s.Stop)
	return []*dist.Set{g, g.WithBehavior(dist.BehaviorGlobal), sv, s}, cleanup, nil
}
