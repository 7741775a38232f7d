// Command rls-sweep measures `sluice rls` and envoyproxy/ratelimit (built
// from its Go module) on one redis-server at fixed offered rates (10%,
// 25%, 50% and 100% of envoyproxy/ratelimit's capacity on this machine)
// and at saturation, with two load tools: the project's client and ghz
// (installed at a pinned version). For each point it reports requests a
// second, p50 and p99, and CPU a request of each server and of
// redis-server, from paired rounds. See docs/bench-rls.md.
//
//	cd bench && go run ./rls/cmd/rls-sweep            # about 12 minutes
//	cd bench && go run ./rls/cmd/rls-sweep -short     # about 1 minute, after the builds
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/internal/pin"
	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

func main() {
	root := flag.String("root", "..", "the sluice module (built as the sluice binary)")
	configDir := flag.String("config", "rls/config", "configuration directory given to both servers")
	cacheDir := flag.String("cache", "", "where envoyproxy/ratelimit and ghz are built and kept; default $XDG_CACHE_HOME/sluice-bench (or ~/.cache/sluice-bench)")
	callers := flag.Int("callers", 64, "concurrent callers (ghz -c)")
	conns := flag.Int("conns", 8, "gRPC connections (ghz --connections)")
	keys := flag.Int("keys", 10000, "distinct descriptor values in the load")
	descs := flag.Int("descriptors", 1, "descriptors per request")
	dur := flag.Duration("duration", 8*time.Second, "measurement time per server per point per round")
	rounds := flag.Int("rounds", 3, "paired rounds per point")
	percents := flag.String("rates", "10,25,50,100", "offered rates, percent of envoyproxy/ratelimit's capacity; saturation is measured after them")
	capacity := flag.Float64("capacity", 0, "envoyproxy/ratelimit's capacity in req/s (100%); 0: measure it first (closed loop, the project's client, best of 2 runs of -duration)")
	tools := flag.String("tools", "client,ghz", "load tools: client (the project's), ghz")
	short := flag.Bool("short", false, "a quick run: 1 round of 1 s, rates 10 and 100%")
	pprofDir := flag.String("pprof", "", "write CPU profiles of sluice rls (from --debug-listen) at each load level to `DIR` (the project's client, first round)")
	pinCPUs := flag.Bool("pin", true, "servers and redis-server on the last CPU (each server GOMAXPROCS 1), the load tools on the others")
	storeQuery := flag.String("store-query", "compat_window=off", "query of sluice rls's Redis store URL (compat_window=off: a store as it runs after its first hour, a fixed window in its one key; empty: the store URL's defaults, the marker form for an hour)")
	flag.Parse()
	if *short {
		*rounds, *dur, *percents = 1, time.Second, "10,100"
	}
	ctx := context.Background()

	if *cacheDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			log.Fatal(err)
		}
		*cacheDir = filepath.Join(d, "sluice-bench")
	}
	envoyDir := filepath.Join(*cacheDir, "envoy-ratelimit-"+rls.EnvoyVersion)
	for _, d := range []string{envoyDir, *cacheDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	work, err := os.MkdirTemp("", "rls-sweep-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	cfgDir, err := filepath.Abs(*configDir)
	if err != nil {
		log.Fatal(err)
	}
	fractions, err := rls.ParseFractions(*percents)
	if err != nil {
		log.Fatal(err)
	}
	toolList := strings.Split(*tools, ",")

	log.Printf("building envoyproxy/ratelimit %s and sluice…", rls.EnvoyVersion)
	envoyBin, err := rls.BuildEnvoy(ctx, envoyDir)
	if err != nil {
		log.Fatal(err)
	}
	sluiceBin, err := rls.BuildSluice(ctx, *root, work)
	if err != nil {
		log.Fatal(err)
	}
	var ghzBin, protoset string
	for _, t := range toolList {
		if t == rls.ToolGHZ {
			log.Printf("installing ghz %s (minutes the first time)…", rls.GHZVersion)
			if ghzBin, err = rls.InstallGHZ(ctx, *cacheDir); err != nil {
				log.Fatal(err)
			}
			b, err := rls.Protoset()
			if err != nil {
				log.Fatal(err)
			}
			protoset = filepath.Join(work, "rls.protoset")
			if err := os.WriteFile(protoset, b, 0o644); err != nil {
				log.Fatal(err)
			}
		}
	}

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
		os.Setenv("GOMAXPROCS", strconv.Itoa(serverProcs))
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
	envoy, err := rls.StartEnvoy(ctx, envoyBin, cfgDir, filepath.Join(work, "envoy"), redis.Addr, rls.EnvoyOptions{GOMAXPROCS: serverProcs})
	if err != nil {
		log.Fatal(err)
	}
	defer envoy.Stop()
	sluiceArgs := []string{"--store-timeout", "10s"}
	var debugAddr string
	if *pprofDir != "" {
		port, err := rls.FreePort()
		if err != nil {
			log.Fatal(err)
		}
		debugAddr = "127.0.0.1:" + strconv.Itoa(port)
		sluiceArgs = append(sluiceArgs, "--debug-listen", debugAddr)
		if err := os.MkdirAll(*pprofDir, 0o755); err != nil {
			log.Fatal(err)
		}
	}
	store := "redis://" + redis.Addr
	if *storeQuery != "" {
		store += "?" + *storeQuery
	}
	sluice, err := rls.StartSluice(ctx, sluiceBin, cfgDir, store, sluiceArgs...)
	if err != nil {
		log.Fatal(err)
	}
	defer sluice.Stop()
	where := "the load tools, the servers and redis-server share the CPUs"
	var loadCPUs []int
	if *pinCPUs {
		for _, pid := range []int{redisPID, envoy.PID(), sluice.PID()} {
			if err := pin.Process(pid, layout.Others[0]); err != nil {
				log.Fatal(err)
			}
		}
		if err := pin.Self(layout.Self); err != nil {
			log.Fatal(err)
		}
		loadCPUs = layout.Self
		where = fmt.Sprintf("servers and redis-server on CPU %s (GOMAXPROCS %d), the load tools on CPU %s", pin.Format(layout.Others[0]), serverProcs, pin.Format(layout.Self))
	}
	fmt.Printf("go %s, %d CPUs; redis-server at %s; envoyproxy/ratelimit %s; ghz %s; sluice rls --store %s; %s\n",
		runtime.Version(), runtime.NumCPU(), redis.Addr, rls.EnvoyVersion, rls.GHZVersion, store, where)

	load := rls.Load{Callers: *callers, Conns: *conns, Keys: *keys, Descriptors: *descs, Duration: *dur}
	cpu := func(pid int) (time.Duration, time.Duration) {
		s, _ := rls.CPUTime(pid)
		r, _ := rls.CPUTime(redisPID)
		return s, r
	}
	if *capacity == 0 {
		for range 2 {
			res, err := rls.Measure(ctx, envoy.Name, envoy.Addr, load, nil)
			if err != nil {
				log.Fatal(err)
			}
			*capacity = max(*capacity, res.PerSecond())
		}
		fmt.Printf("envoyproxy/ratelimit's capacity (closed loop, the project's client, %d callers over %d connections, best of 2 × %v): %.0f req/s\n",
			load.Callers, load.Conns, load.Duration, *capacity)
	}
	fmt.Printf("%d callers over %d connections, %d keys, %d descriptor(s)/request, %v per server per point per round, %d paired rounds\n\n",
		load.Callers, load.Conns, load.Keys, load.Descriptors, load.Duration, *rounds)
	points, err := rls.Sweep(ctx, rls.SweepConfig{
		Load: load, Capacity: *capacity, Fractions: fractions, Tools: toolList, Rounds: *rounds,
		GHZ: ghzBin, Protoset: protoset, LoadCPUs: loadCPUs, CPU: cpu, Progress: os.Stdout,
		Around: func(pt rls.SweepPoint, round int, p *rls.Proc) func() {
			if debugAddr == "" || p != sluice || round != 0 || pt.Tool != rls.ToolClient {
				return nil
			}
			name := "saturation"
			if pt.Rate > 0 {
				name = fmt.Sprintf("%.0fpct", pt.Percent)
			}
			return profile(debugAddr, max(1, int(load.Duration.Seconds())-1), filepath.Join(*pprofDir, "sluice-"+name+".pprof"))
		},
	}, []*rls.Proc{envoy, sluice})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	rls.SweepTable(os.Stdout, points, envoy.Name, []string{sluice.Name})
	// What each command cost redis-server in the whole sweep, without its
	// network and wake-ups: envoyproxy/ratelimit sends INCRBY and EXPIRE
	// (its keys), sluice rls EVALSHA (its scripts; TIME, MGET and SET
	// inside them are counted too).
	if stats, err := redisInfo(redis.Addr, "commandstats"); err == nil {
		fmt.Println()
		fmt.Println("redis-server INFO commandstats after the sweep:")
		for _, l := range strings.Split(stats, "\n") {
			if strings.HasPrefix(l, "cmdstat_") {
				fmt.Println("  " + strings.TrimSpace(l))
			}
		}
	}
}

// redisInfo returns INFO section of the redis-server at addr.
func redisInfo(addr, section string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO " + section + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil || n < 0 || n > 1<<20 {
		return "", fmt.Errorf("INFO: unexpected reply %q", head)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// profile fetches a CPU profile of secs seconds from the debug listener at
// addr into file, in the background; the function it returns waits for it.
func profile(addr string, secs int, file string) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
		if err != nil {
			log.Printf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(file)
		if err != nil {
			log.Printf("profile: %v", err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			log.Printf("profile: %v", err)
		}
	}()
	return func() { <-done }
}
