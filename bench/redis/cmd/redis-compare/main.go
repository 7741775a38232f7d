// Command redis-compare measures sluice's Redis store against
// go-redis/redis_rate and envoyproxy/ratelimit's fixed-window pattern, and
// the two client libraries sluice could use, on one local redis-server,
// interleaving the contenders in rounds. See docs/bench-redis.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/bench/internal/pin"
	"github.com/sluicehq/sluice/bench/redis"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

func main() {
	callers := flag.Int("callers", 64, "concurrent callers")
	dur := flag.Duration("duration", time.Second, "measurement time per contender per round")
	rounds := flag.Int("rounds", 10, "rounds; the contenders take turns, and each one's rounds are pooled")
	addr := flag.String("addr", "", "use this redis-server instead of starting one")
	verbose := flag.Bool("v", false, "print every round")
	only := flag.String("only", "", "comma-free substring: run only contenders whose name contains it")
	cpuprofile := flag.String("cpuprofile", "", "write this process's CPU profile to the file")
	pinCPUs := flag.Bool("pin", true, "give the redis-server this command starts a CPU of its own and keep the callers off it (needs 2 CPUs; ignored with -addr)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()

	layout := "GOMAXPROCS " + strconv.Itoa(runtime.GOMAXPROCS(0)) + ", redis-server and callers on the same CPUs"
	if *addr == "" {
		s, err := redistest.StartServer()
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		*addr = s.Addr
		if *pinCPUs {
			cpus, err := pin.Current(0)
			var l pin.Layout
			if err == nil {
				l, err = pin.Split(cpus, 1)
			}
			if err == nil {
				err = pin.Process(s.Pid(), l.Others[0])
			}
			if err == nil {
				err = pin.Self(l.Self)
			}
			if err != nil {
				log.Fatalf("%v (run with -pin=false to share the CPUs)", err)
			}
			layout = fmt.Sprintf("redis-server on CPU %s, callers on CPU %s (GOMAXPROCS %d)", pin.Format(l.Others[0]), pin.Format(l.Self), runtime.GOMAXPROCS(0))
		}
	}
	// A connection per caller: go-redis's default pool (10 per CPU of
	// GOMAXPROCS) makes callers queue for a connection, which costs
	// redis_rate 10–20% of its throughput with 64 callers; the peers are
	// measured at their best.
	rdb := goredis.NewClient(&goredis.Options{Addr: *addr, PoolSize: *callers})
	defer rdb.Close()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	src, err := redis.GCRAScript()
	if err != nil {
		log.Fatal(err)
	}

	contenders := []contender{
		{"redis_rate Allow (go-redis)", redis.RedisRate(rdb, "rr:")},
		{"gcra.lua via go-redis", redis.GoRedisScript(rdb, src, "gr:")},
		{"gcra.lua via rueidis", redis.RueidisScript(rc, src, "ru:")},
		{"envoy fixed window (pipe)", redis.EnvoyFixedWindow(rdb, "ev:")},
		{"INCRBY+PEXPIRE via rueidis", redis.FixedWindowPipe(rc, "fp:")},
		{"minimal window script via rueidis", redis.FixedWindowScript(rc, "fs:")},
	}
	contenders = append(contenders, sluiceContenders(ctx, *addr)...)

	results := map[string][]redis.Result{}
	fmt.Fprintf(os.Stderr, "%d callers, %v per contender per round, %d rounds, server %s; %s\n", *callers, *dur, *rounds, *addr, layout)
	for r := 0; r < *rounds; r++ {
		// A new order every round, so that no contender always follows
		// the same one (or always runs first after the server's start).
		order := slices.Clone(contenders)
		rand.New(rand.NewPCG(uint64(r), 7)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, c := range order {
			if *only != "" && !contains(c.name, *only) {
				continue
			}
			rdb.FlushAll(ctx)
			cpu0 := serverCPU(ctx, rdb)
			res := redis.Measure(ctx, c.name, *callers, *dur, c.op)
			res.ServerCPU = serverCPU(ctx, rdb) - cpu0
			if *verbose {
				fmt.Fprintln(os.Stderr, "round", r+1, res)
			}
			if res.FirstErr != nil {
				fmt.Fprintln(os.Stderr, "  first error:", res.FirstErr)
			}
			results[c.name] = append(results[c.name], res)
		}
	}
	fmt.Println()
	fmt.Println("| contender | decisions/s | p50 | p99 | CPU per decision: redis-server | client | throughput vs redis_rate: pooled | paired rounds, median (range) | p99 vs redis_rate |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var base redis.Result
	baseRounds := results[contenders[0].name]
	if len(baseRounds) > 0 {
		base = redis.Merge(baseRounds)
	}
	for _, c := range contenders {
		rs := results[c.name]
		if len(rs) == 0 {
			continue
		}
		m := redis.Merge(rs)
		fmt.Fprintln(os.Stderr, "pooled", m)
		if m.FirstErr != nil {
			fmt.Fprintln(os.Stderr, "  first error:", m.FirstErr)
		}
		ratio, paired, p99 := "-", "-", "-"
		if base.Decisions > 0 {
			ratio = fmt.Sprintf("%.2f×", m.PerSecond()/base.PerSecond())
			p99 = fmt.Sprintf("%.2f×", m.P99.Seconds()/base.P99.Seconds())
			if pr := redis.Paired(rs, baseRounds); len(pr) > 0 {
				paired = fmt.Sprintf("%.2f× (%.2f–%.2f)", redis.Median(pr), slices.Min(pr), slices.Max(pr))
			}
		}
		per := func(d time.Duration) string {
			return fmt.Sprintf("%.1f µs", d.Seconds()*1e6/float64(max(1, m.Decisions)))
		}
		fmt.Printf("| %s | %.0f | %v | %v | %s | %s | %s | %s | %s |\n", c.name, m.PerSecond(), m.P50.Round(time.Microsecond), m.P99.Round(time.Microsecond),
			per(m.ServerCPU), per(m.ClientCPU), ratio, paired, p99)
	}
}

type contender struct {
	name string
	op   redis.Op
}

// serverCPU returns the CPU time redis-server has used (user + system).
func serverCPU(ctx context.Context, rdb *goredis.Client) time.Duration {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
