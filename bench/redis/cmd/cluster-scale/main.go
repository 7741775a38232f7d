// Command cluster-scale measures sluice's Redis store on Redis Clusters of
// 1, 2 and 3 primaries (real redis-server processes on loopback ports),
// and a standalone redis-server for reference, in alternating rounds, and
// reports decisions per second, redis-server CPU per decision and
// decisions per second of primary CPU, which shows the scaling on a
// machine too small to give each primary a core. It also reports how real
// key sets (the rules engine's keys) fall on hash slots and primaries.
//
//	cd bench && go run ./redis/cmd/cluster-scale -rounds 6 -duration 3s
//
// See docs/bench-redis.md, "Cluster scaling (issue 21 item 3)".
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/internal/pin"
	"github.com/sluicehq/sluice/bench/redis"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("cluster-scale: ")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: cluster-scale [flags]

Starts Redis Clusters of the given sizes (and a standalone redis-server),
drives sluice's redisstore against each with -callers goroutines over
-keys keys, alternating the order every round (1 2 3, 3 2 1, ...), and
prints a Markdown table on stdout: decisions/s, redis-server CPU per
decision (/proc/<pid>/stat), decisions per primary-CPU-second, client
CPU, and how the keys fell on the nodes; then the hash-slot spread of the
key sets. Progress goes to stderr. Needs redis-server and redis-cli.

Flags:
`)
		flag.PrintDefaults()
	}
	sizes := flag.String("primaries", "1,2,3", "cluster sizes, comma-separated; 0 is a standalone redis-server (reference)")
	standalone := flag.Bool("standalone", true, "also measure a standalone redis-server (as -primaries 0)")
	rounds := flag.Int("rounds", 6, "rounds; each measures every size and mode once, the order reversed every other round")
	dur := flag.Duration("duration", 3*time.Second, "measured time per size and mode per round")
	warmup := flag.Duration("warmup", time.Second, "unmeasured run before each measurement (after FLUSHALL)")
	callers := flag.Int("callers", 64, "goroutines calling Apply, each as fast as its decisions come back")
	nkeys := flag.Int("keys", 100000, "distinct keys; each call picks one uniformly")
	keyset := flag.String("keyset", "rules-user", "keys of the load: "+strings.Join(redis.KeySets, ", "))
	modes := flag.String("modes", "exact", "store modes, comma-separated: "+strings.Join(redis.ScaleModes, ", "))
	pipeline := flag.Int("pipeline", 0, "redisstore Options.Pipeline (0: the default)")
	pinCPUs := flag.Bool("pin", true, "bind every redis-server to the last CPU and this process to the others (needs 2 CPUs)")
	spreadKeys := flag.Int("spread-keys", 1000000, "keys of each key set in the slot-spread table (0: skip it)")
	cpuprofile := flag.String("cpuprofile", "", "write this process's CPU profile (the callers, the store, the client library) to the file")
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}

	var primaries []int
	if *standalone {
		primaries = append(primaries, 0)
	}
	for _, f := range strings.Split(*sizes, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 0 || p > 16 {
			log.Fatalf("-primaries: %q is not a cluster size from 0 to 16", f)
		}
		if !slices.Contains(primaries, p) {
			primaries = append(primaries, p)
		}
	}
	var modeList []string
	for _, m := range strings.Split(*modes, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(redis.ScaleModes, m) {
			log.Fatalf("-modes: unknown mode %q (want %s)", m, strings.Join(redis.ScaleModes, ", "))
		}
		modeList = append(modeList, m)
	}
	keys, err := redis.ClusterKeys(*keyset, *nkeys, 1)
	if err != nil {
		log.Fatal(err)
	}

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
	fmt.Fprintf(os.Stderr, "starting %v (0: standalone)\n", primaries)
	targets, err := redis.StartScaleTargets(primaries)
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()
	layout := fmt.Sprintf("redis-servers and callers share the CPUs (GOMAXPROCS %d)", runtime.GOMAXPROCS(0))
	if *pinCPUs {
		cpus, err := pin.Current(0)
		var l pin.Layout
		if err == nil {
			l, err = pin.Split(cpus, 1)
		}
		for _, t := range targets {
			for _, pid := range t.Pids() {
				if err == nil {
					err = pin.Process(pid, l.Others[0])
				}
			}
		}
		if err == nil {
			err = pin.Self(l.Self)
		}
		if err != nil {
			for _, t := range targets {
				t.Close()
			}
			log.Fatalf("%v (run with -pin=false to share the CPUs)", err)
		}
		layout = fmt.Sprintf("every redis-server on CPU %s, callers on CPU %s (GOMAXPROCS %d)", pin.Format(l.Others[0]), pin.Format(l.Self), runtime.GOMAXPROCS(0))
	}
	version, _ := exec.Command("redis-server", "--version").Output()
	fmt.Fprintf(os.Stderr, "%d callers, %d keys (%s, e.g. %q), modes %v, %v measured (+%v warm-up) per size and mode, %d rounds; %s; %s\n",
		*callers, len(keys), *keyset, keys[0].Key, modeList, *dur, *warmup, *rounds, layout, strings.TrimSpace(string(version)))

	results, err := redis.RunScale(ctx, targets, redis.ScaleConfig{
		Rounds: *rounds, Duration: *dur, Warmup: *warmup, Callers: *callers,
		Keys: keys, Modes: modeList, Pipeline: *pipeline, Progress: os.Stderr,
	})
	if err != nil {
		for _, t := range targets {
			t.Close()
		}
		log.Fatal(err)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	baseline := "cluster 1"
	if !slices.Contains(primaries, 1) {
		baseline = targets[0].Name
	}
	fmt.Printf("%d callers, %d keys (%s), %v × %d rounds, %s; load average after: %s\n\n",
		*callers, len(keys), *keyset, *dur, *rounds, layout, strings.TrimSpace(string(load)))
	redis.WriteScaleTable(os.Stdout, redis.Summarize(results, baseline), baseline)

	if *spreadKeys > 0 {
		// The spread of the keys as redisstore names them in Redis: the
		// key set's keys, hash-tagged by the store.
		naming := targets[len(targets)-1].Store()
		sets := map[string][]string{}
		for _, name := range redis.KeySets {
			ks, err := redis.ClusterKeys(name, *spreadKeys, 2)
			if err != nil {
				log.Fatal(err)
			}
			rk := make([]string, len(ks))
			for i, k := range ks {
				rk[i] = naming.Key(k.Algorithm, k.Key)
			}
			sets[name] = rk
		}
		fmt.Println()
		redis.WriteSpreadTable(os.Stdout, sets, primaries)
	}
}
