// Command rls-compare runs `sluice rls` and envoyproxy/ratelimit (built
// from its Go module) on one redis-server with one configuration, checks
// that they decide alike on one request stream, then measures both with
// one load generator, interleaved in rounds. See docs/bench-rls.md.
//
// Run it from the bench module:
//
//	cd bench && go run ./rls/cmd/rls-compare
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/bench/internal/pin"
	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

func main() {
	root := flag.String("root", "..", "the sluice module (built as the sluice binary)")
	configDir := flag.String("config", "rls/config", "configuration directory given to both servers")
	workDir := flag.String("work", "", "work directory (binaries, envoy runtime); default a temporary one")
	envoyBin := flag.String("envoy-bin", "", "envoyproxy/ratelimit binary; default: go install it at the pinned version")
	stream := flag.Int("stream", 3000, "requests in each agreement stream")
	seeds := flag.Int("seeds", 3, "agreement streams (seeds 1..n), each in its own minute window")
	callers := flag.Int("callers", 64, "concurrent callers of the load generator")
	conns := flag.Int("conns", 8, "gRPC connections of the load generator")
	keys := flag.Int("keys", 10000, "distinct descriptor values in the load")
	descs := flag.Int("descriptors", 1, "descriptors per request in the load")
	client := flag.String("client", rls.ClientRaw, "the load generator's client: raw (pre-built HTTP/2 frames, a few µs a call) or grpc (grpc-go's client)")
	dur := flag.Duration("duration", 10*time.Second, "measurement time per server per round")
	rounds := flag.Int("rounds", 3, "rounds; each server's median round is reported")
	only := flag.String("only", "", "run only servers whose name contains this")
	sluiceArgs := flag.String("sluice-args", "", "extra flags for sluice rls on redis, space-separated")
	envoyGOGC := flag.Int("envoy-gogc", 0, "also run an envoyproxy/ratelimit instance with this GOGC (sluice rls's --gc-percent is 400); 0: none")
	envoyPool := flag.Int("envoy-pool", 0, "also run an envoyproxy/ratelimit instance with this many Redis connections (REDIS_POOL_SIZE; its default is 10); 0: none")
	grpcGo := flag.Bool("grpc-go", false, "also run sluice rls with --grpc-server grpc-go (grpc-go's server instead of its own), on Redis and on memory")
	skipAgree := flag.Bool("skip-agree", false, "skip the agreement check")
	cpuProfile := flag.String("cpuprofile", "", "write the load generator's CPU profile of the throughput rounds to `FILE`")
	pinCPUs := flag.Bool("pin", true, "give the servers and redis-server the last CPU and keep the load generator on the others, each server with GOMAXPROCS 1: requests per second per server CPU, its Redis included (needs 2 CPUs; -pin=false shares the CPUs)")
	flag.Parse()
	ctx := context.Background()

	if *workDir == "" {
		d, err := os.MkdirTemp("", "rls-compare-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
		*workDir = d
	}
	cfg, err := filepath.Abs(*configDir)
	if err != nil {
		log.Fatal(err)
	}
	if *envoyBin == "" {
		log.Printf("building envoyproxy/ratelimit %s from its Go module…", rls.EnvoyVersion)
		if *envoyBin, err = rls.BuildEnvoy(ctx, *workDir); err != nil {
			log.Fatal(err)
		}
	}
	sluiceBin, err := rls.BuildSluice(ctx, *root, *workDir)
	if err != nil {
		log.Fatal(err)
	}

	// With -pin, the servers and redis-server share the last CPU and the
	// load generator keeps the others; the Go servers are told their CPU
	// count up front (envoyproxy/ratelimit's Go version would not notice
	// a new affinity).
	var layout pin.Layout
	serverProcs := 0
	if *pinCPUs {
		cpus, err := pin.Current(0)
		if err == nil {
			layout, err = pin.Split(cpus, 1)
		}
		if err != nil {
			log.Fatalf("%v (run with -pin=false to share the CPUs)", err)
		}
		serverProcs = len(layout.Others[0])
		os.Setenv("GOMAXPROCS", strconv.Itoa(serverProcs)) // sluice rls inherits it
	}
	redis, err := redistest.StartServer()
	if err != nil {
		log.Fatal(err)
	}
	defer redis.Close()
	redisPID, err := rls.RedisPID(redis.Addr)
	if err != nil {
		log.Fatal(err)
	}

	envoy, err := rls.StartEnvoy(ctx, *envoyBin, cfg, filepath.Join(*workDir, "envoy"), redis.Addr, rls.EnvoyOptions{GOMAXPROCS: serverProcs})
	if err != nil {
		log.Fatal(err)
	}
	defer envoy.Stop()
	envoyPiped, err := rls.StartEnvoy(ctx, *envoyBin, cfg, filepath.Join(*workDir, "envoy-piped"), redis.Addr,
		rls.EnvoyOptions{PipelineWindow: 150 * time.Microsecond, PipelineLimit: 8, GOMAXPROCS: serverProcs})
	if err != nil {
		log.Fatal(err)
	}
	defer envoyPiped.Stop()
	// The optional variants of envoyproxy/ratelimit, measured after the
	// default and the pipelined one.
	var variants []*rls.Proc
	for _, v := range []struct {
		on  bool
		dir string
		o   rls.EnvoyOptions
	}{
		{*envoyGOGC > 0, "envoy-gogc", rls.EnvoyOptions{GOGC: *envoyGOGC, GOMAXPROCS: serverProcs}},
		{*envoyPool > 0, "envoy-pool", rls.EnvoyOptions{PoolSize: *envoyPool, GOMAXPROCS: serverProcs}},
	} {
		if !v.on {
			continue
		}
		p, err := rls.StartEnvoy(ctx, *envoyBin, cfg, filepath.Join(*workDir, v.dir), redis.Addr, v.o)
		if err != nil {
			log.Fatal(err)
		}
		defer p.Stop()
		variants = append(variants, p)
	}
	sluiceRedis, err := rls.StartSluice(ctx, sluiceBin, cfg, "redis://"+redis.Addr,
		append([]string{"--store-timeout", "10s"}, strings.Fields(*sluiceArgs)...)...)
	if err != nil {
		log.Fatal(err)
	}
	defer sluiceRedis.Stop()
	sluiceMem, err := rls.StartSluice(ctx, sluiceBin, cfg, "memory")
	if err != nil {
		log.Fatal(err)
	}
	defer sluiceMem.Stop()

	sluices := []*rls.Proc{sluiceRedis, sluiceMem}
	if *grpcGo {
		// The same servers answering through grpc-go: what the lean
		// gRPC server saves, measured in the same rounds.
		for _, store := range []string{"redis://" + redis.Addr, "memory"} {
			args := []string{"--grpc-server", "grpc-go"}
			if store != "memory" {
				args = append(args, "--store-timeout", "10s")
			}
			p, err := rls.StartSluice(ctx, sluiceBin, cfg, store, args...)
			if err != nil {
				log.Fatal(err)
			}
			defer p.Stop()
			sluices = append(sluices, p)
		}
	}

	where := "the load generator, the servers and redis-server share the CPUs"
	servers := slices.Concat([]*rls.Proc{envoy, envoyPiped}, variants, sluices)
	if *pinCPUs {
		pids := []int{redisPID}
		for _, p := range servers {
			pids = append(pids, p.PID())
		}
		for _, pid := range pids {
			if err := pin.Process(pid, layout.Others[0]); err != nil {
				log.Fatal(err)
			}
		}
		if err := pin.Self(layout.Self); err != nil {
			log.Fatal(err)
		}
		where = fmt.Sprintf("servers and redis-server on CPU %s (GOMAXPROCS %d), the load generator on CPU %s", pin.Format(layout.Others[0]), serverProcs, pin.Format(layout.Self))
	}
	fmt.Printf("go %s, GOMAXPROCS %d, %d CPUs; redis-server at %s; envoyproxy/ratelimit %s; %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), redis.Addr, rls.EnvoyVersion, where)

	if !*skipAgree {
		for seed := range *seeds {
			if err := agree(ctx, envoy.Addr, sluiceRedis.Addr, uint64(seed+1), *stream); err != nil {
				log.Fatal(err)
			}
		}
	}

	procs := slices.DeleteFunc(slices.Clone(servers), func(p *rls.Proc) bool { return !strings.Contains(p.Name, *only) })
	load := rls.Load{Callers: *callers, Conns: *conns, Keys: *keys, Descriptors: *descs, Duration: *dur, Client: *client}
	fmt.Printf("\nthroughput: %s client, %d callers over %d connections, %d keys, %d descriptor(s)/request, %v per server per round, %d rounds (median round shown)\n",
		load.Client, load.Callers, load.Conns, load.Keys, load.Descriptors, load.Duration, *rounds)
	results := make(map[string][]rls.Result)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer f.Close()
	}
	for r := range *rounds {
		for _, p := range procs {
			pid := p.PID()
			cpu := func() (time.Duration, time.Duration) {
				s, _ := rls.CPUTime(pid)
				rd, _ := rls.CPUTime(redisPID)
				return s, rd
			}
			res, err := rls.Measure(ctx, p.Name, p.Addr, load, cpu)
			if err != nil {
				log.Fatal(err)
			}
			if res.FirstErr != nil {
				log.Printf("%s: %d errors, first: %v", p.Name, res.Errors, res.FirstErr)
			}
			fmt.Printf("  round %d  %s\n", r+1, res)
			results[p.Name] = append(results[p.Name], res)
		}
	}
	pprof.StopCPUProfile()
	fmt.Println()
	// Round by round, each server's requests per second over
	// envoyproxy/ratelimit's in the same round (before the rounds are
	// sorted below): steadier than a ratio of medians on a machine whose
	// speed drifts.
	paired := map[string][]float64{}
	for _, p := range procs {
		rs, es := results[p.Name], results[envoy.Name]
		for i := range min(len(rs), len(es)) {
			if e := es[i].PerSecond(); e > 0 {
				paired[p.Name] = append(paired[p.Name], rs[i].PerSecond()/e)
			}
		}
	}
	// Requests per second and latencies: each server's median round. CPU per
	// request: the median over the rounds of each figure on its own (a round
	// that shared the machine with another job inflates every one of them).
	type cpuPerReq struct{ server, redis, load float64 } // µs
	med := map[string]rls.Result{}
	cpu := map[string]cpuPerReq{}
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	for _, p := range procs {
		rs := results[p.Name]
		var sv, rd, ld []float64
		for _, r := range rs {
			n := float64(max(1, r.Requests))
			sv = append(sv, r.ServerCPU.Seconds()*1e6/n)
			rd = append(rd, r.RedisCPU.Seconds()*1e6/n)
			ld = append(ld, r.LoadCPU.Seconds()*1e6/n)
		}
		cpu[p.Name] = cpuPerReq{median(sv), median(rd), median(ld)}
		slices.SortFunc(rs, func(a, b rls.Result) int {
			switch {
			case a.PerSecond() < b.PerSecond():
				return -1
			case a.PerSecond() > b.PerSecond():
				return 1
			}
			return 0
		})
		med[p.Name] = rs[len(rs)/2]
		fmt.Printf("median  %s\n", med[p.Name])
	}
	fmt.Println()
	for _, p := range procs {
		c := cpu[p.Name]
		fmt.Printf("CPU per request, median of %d rounds: %-44s server %5.1f µs  redis %5.1f µs  load generator %5.1f µs\n",
			len(results[p.Name]), p.Name, c.server, c.redis, c.load)
	}
	fmt.Println()
	if e, ok := med[envoy.Name]; ok {
		ec := cpu[envoy.Name]
		for _, p := range procs {
			if p == envoy {
				continue
			}
			m, mc := med[p.Name], cpu[p.Name]
			pr := ""
			if r := paired[p.Name]; len(r) > 0 {
				sorted := slices.Sorted(slices.Values(r))
				pr = fmt.Sprintf(" (paired rounds: median %.2f×, %.2f–%.2f×)", median(slices.Clone(sorted)), sorted[0], sorted[len(sorted)-1])
			}
			fmt.Printf("%-44s %5.2f× envoyproxy/ratelimit's req/s%s, p99 %v vs %v; %4.2f× less server CPU per request (%4.2f× with Redis's)\n",
				p.Name, m.PerSecond()/e.PerSecond(), pr, m.P99.Round(time.Microsecond), e.P99.Round(time.Microsecond),
				ec.server/mc.server, (ec.server+ec.redis)/(mc.server+mc.redis))
		}
	}
}

// agree replays one stream against both servers inside one minute window
// (so that no fixed window rolls over mid-stream), retrying in the next
// minute when a run would straddle one.
func agree(ctx context.Context, envoyAddr, sluiceAddr string, seed uint64, n int) error {
	dial := func(addr string) (pb.RateLimitServiceClient, func()) {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			log.Fatal(err)
		}
		return pb.NewRateLimitServiceClient(c), func() { c.Close() }
	}
	e, ce := dial(envoyAddr)
	defer ce()
	s, cs := dial(sluiceAddr)
	defer cs()
	for attempt := range 5 {
		now := time.Now()
		if sec := now.Second(); sec < 1 || sec > 30 {
			time.Sleep(now.Truncate(time.Minute).Add(time.Minute + time.Second).Sub(now))
		}
		start := time.Now()
		run := strconv.FormatInt(start.UnixNano(), 36)
		reqs := rls.Stream(seed, n, run)
		ag, err := rls.Agree(ctx, e, s, reqs)
		if err != nil {
			return err
		}
		if !time.Now().Truncate(time.Minute).Equal(start.Truncate(time.Minute)) {
			log.Printf("agreement run %d straddled a minute boundary; again", attempt+1)
			continue
		}
		fmt.Printf("\nagreement (envoyproxy/ratelimit vs sluice rls on redis, one stream of %d requests, seed %d, within one minute window):\n", n, seed)
		fmt.Printf("  %d requests, %d descriptors, %d over the limit; %d requests disagree; duration_until_reset one second apart: %d descriptors\n",
			ag.Requests, ag.Descriptors, ag.OverLimit, ag.Disagree, ag.ResetOffByOne)
		if ag.First != "" {
			fmt.Printf("  first disagreement: %s\n", ag.First)
		}
		return nil
	}
	return fmt.Errorf("agreement: every run straddled a minute boundary")
}
