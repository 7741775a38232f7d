// Command rls-wakeups measures what one request costs `sluice rls` (on
// Redis) in CPU and in system calls at fixed offered rates and at
// saturation, for one or more builds of sluice side by side: the builds
// run one after the other on the same load in paired rounds (the order
// reversed every other round), on one redis-server, pinned as rls-sweep
// pins them (the servers and redis-server on the last CPU, each server
// GOMAXPROCS 1, the load generator on the others).
//
// System calls are counted by `perf stat` on the server process (the
// raw_syscalls and syscalls tracepoints), attached for the length of each
// measurement; the load is the project's client (rls.Measure).
//
//	cd bench && go run ./rls/cmd/rls-wakeups -roots before=/tmp/before,after=.. -capacity 7574
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/bench/internal/pin"
	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// events are the tracepoints counted: every system call, and the ones a
// request's wake-ups are made of.
var events = []string{
	"raw_syscalls:sys_enter",
	"syscalls:sys_enter_read",
	"syscalls:sys_enter_write",
	"syscalls:sys_enter_epoll_pwait",
	"syscalls:sys_enter_futex",
	"syscalls:sys_enter_nanosleep",
}

// short names of events, for the table.
func short(ev string) string {
	if ev == "raw_syscalls:sys_enter" {
		return "all"
	}
	return strings.TrimPrefix(ev, "syscalls:sys_enter_")
}

type build struct {
	name, root, bin string
	metrics         string // the server's --metrics-listen address
	proc            *rls.Proc
}

type sample struct {
	res    rls.Result
	counts map[string]float64
	allocs float64 // the server's heap allocations (go_memstats_mallocs_total) during the measurement
}

func main() {
	roots := flag.String("roots", "..", "the sluice builds to compare: name=dir,... (each dir a sluice module, built as the sluice binary); a bare dir is named after itself")
	configDir := flag.String("config", "rls/config", "configuration directory given to the servers")
	callers := flag.Int("callers", 64, "concurrent callers")
	conns := flag.Int("conns", 8, "gRPC connections")
	keys := flag.Int("keys", 10000, "distinct descriptor values in the load")
	dur := flag.Duration("duration", 4*time.Second, "measurement time per build per point per round")
	rounds := flag.Int("rounds", 2, "paired rounds per point")
	capacity := flag.Float64("capacity", 7574, "the req/s the percentages of -rates are of (envoyproxy/ratelimit's capacity in docs/bench-rls.md)")
	percents := flag.String("rates", "10,25,50,100", "offered rates, percent of -capacity; saturation is measured after them")
	store := flag.String("store", "redis", "the servers' store: redis (one redis-server for all) or memory")
	record := flag.String("record", "", "instead of counting, record the system calls' call stacks (perf record -g) into `DIR`/<build>-<load>.data, for perf report")
	cpuRecord := flag.Bool("cpu", false, "with -record, record where the server's CPU time goes (perf record -g on cpu-clock, user and kernel) instead of its system calls")
	pinCPUs := flag.Bool("pin", true, "servers and redis-server on the last CPU (GOMAXPROCS 1), the load generator on the others")
	flag.Parse()
	ctx := context.Background()

	var builds []*build
	for _, r := range strings.Split(*roots, ",") {
		name, dir, ok := strings.Cut(r, "=")
		if !ok {
			name, dir = r, r
		}
		builds = append(builds, &build{name: name, root: dir})
	}
	fractions, err := rls.ParseFractions(*percents)
	if err != nil {
		log.Fatal(err)
	}
	cfgDir, err := filepath.Abs(*configDir)
	if err != nil {
		log.Fatal(err)
	}
	work, err := os.MkdirTemp("", "rls-wakeups-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	for i, b := range builds {
		dir := filepath.Join(work, strconv.Itoa(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			log.Fatal(err)
		}
		if b.bin, err = rls.BuildSluice(ctx, b.root, dir); err != nil {
			log.Fatal(err)
		}
	}

	var layout pin.Layout
	if *pinCPUs {
		cpus, err := pin.Current(0)
		if err == nil {
			layout, err = pin.Split(cpus, 1)
		}
		if err != nil {
			log.Fatalf("%v (run with -pin=false to share the CPUs)", err)
		}
		os.Setenv("GOMAXPROCS", strconv.Itoa(len(layout.Others[0])))
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
	pids := []int{redisPID}
	for _, b := range builds {
		st := "redis://" + redis.Addr
		if *store == "memory" {
			st = "memory"
		}
		port, err := redistest.FreePort()
		if err != nil {
			log.Fatal(err)
		}
		b.metrics = "127.0.0.1:" + strconv.Itoa(port)
		if b.proc, err = rls.StartSluice(ctx, b.bin, cfgDir, st, "--store-timeout", "10s", "--metrics-listen", b.metrics); err != nil {
			log.Fatal(err)
		}
		b.proc.Name = "sluice rls (" + b.name + ")"
		defer b.proc.Stop()
		pids = append(pids, b.proc.PID())
	}
	if *pinCPUs {
		for _, pid := range pids {
			if err := pin.Process(pid, layout.Others[0]); err != nil {
				log.Fatal(err)
			}
		}
		if err := pin.Self(layout.Self); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("go %s, %d CPUs, store %s, %d callers over %d connections, %v per build per point per round, %d paired rounds\n",
		runtime.Version(), runtime.NumCPU(), *store, *callers, *conns, *dur, *rounds)

	levels := append(fractions, 0)
	results := make([]map[string][]sample, len(levels))
	for li, f := range levels {
		results[li] = map[string][]sample{}
		for round := range *rounds {
			order := builds
			if round%2 == 1 {
				order = reverse(builds)
			}
			for _, b := range order {
				l := rls.Load{Callers: *callers, Conns: *conns, Keys: *keys, Descriptors: 1, Duration: *dur, Rate: f * *capacity}
				rec := ""
				if *record != "" {
					rec = filepath.Join(*record, fmt.Sprintf("%s-%s.data", b.name, strings.Fields(level(f, *capacity))[0]))
				}
				s, err := measure(ctx, b, l, redisPID, rec, *cpuRecord)
				if err != nil {
					log.Fatal(err)
				}
				fmt.Printf("%-6s round %d  %s  allocs/req %.1f  syscalls/req %s\n", level(f, *capacity), round+1, s.res, s.allocs/float64(max(1, s.res.Requests)), perReq(s))
				results[li][b.name] = append(results[li][b.name], s)
			}
		}
	}

	fmt.Printf("\nmedians over the rounds; per request: server CPU µs, Redis CPU µs, the server's heap allocations and system calls\n\n")
	fmt.Printf("| load | build | req/s | p50 | server CPU | Redis CPU | allocs |")
	for _, ev := range events {
		fmt.Printf(" %s |", short(ev))
	}
	fmt.Printf("\n|---|---|---:|---:|---:|---:|---:|%s\n", strings.Repeat("---:|", len(events)))
	for li, f := range levels {
		for _, b := range builds {
			ss := results[li][b.name]
			fmt.Printf("| %s | %s | %.0f | %.2f ms | %.1f µs | %.1f µs |", level(f, *capacity), b.name,
				median(ss, func(s sample) float64 { return s.res.PerSecond() }),
				median(ss, func(s sample) float64 { return s.res.P50.Seconds() * 1e3 }),
				median(ss, func(s sample) float64 { return us(s.res.ServerCPU, s.res.Requests) }),
				median(ss, func(s sample) float64 { return us(s.res.RedisCPU, s.res.Requests) }))
			fmt.Printf(" %.1f |", median(ss, func(s sample) float64 { return s.allocs / float64(max(1, s.res.Requests)) }))
			for _, ev := range events {
				fmt.Printf(" %.2f |", median(ss, func(s sample) float64 { return s.counts[ev] / float64(max(1, s.res.Requests)) }))
			}
			fmt.Println()
		}
	}
}

func reverse(b []*build) []*build {
	r := make([]*build, len(b))
	for i := range b {
		r[len(b)-1-i] = b[i]
	}
	return r
}

func level(f, capacity float64) string {
	if f == 0 {
		return "sat."
	}
	return fmt.Sprintf("%.0f%% (%.0f/s)", f*100, f*capacity)
}

func us(d time.Duration, n int64) float64 { return d.Seconds() * 1e6 / float64(max(1, n)) }

func median[T any](v []T, f func(T) float64) float64 {
	if len(v) == 0 {
		return 0
	}
	x := make([]float64, len(v))
	for i, e := range v {
		x[i] = f(e)
	}
	sort.Float64s(x)
	if len(x)%2 == 1 {
		return x[len(x)/2]
	}
	return (x[len(x)/2-1] + x[len(x)/2]) / 2
}

func perReq(s sample) string {
	var parts []string
	for _, ev := range events {
		parts = append(parts, fmt.Sprintf("%s %.2f", short(ev), s.counts[ev]/float64(max(1, s.res.Requests))))
	}
	return strings.Join(parts, ", ")
}

// measure runs l against b with perf stat attached to its process.
// With record set, the system calls' call stacks are recorded into that
// file instead: with cpu, samples of where its CPU time goes.
func measure(ctx context.Context, b *build, l rls.Load, redisPID int, record string, cpu bool) (sample, error) {
	var stderr bytes.Buffer
	args := []string{"stat", "-x", ",", "-e", strings.Join(events, ","), "-p", strconv.Itoa(b.proc.PID())}
	if record != "" {
		args = []string{"record", "-q", "-g", "-o", record, "-e", strings.Join(events[1:], ","), "-p", strconv.Itoa(b.proc.PID())}
		if cpu {
			args = []string{"record", "-q", "-g", "-F", "4999", "-o", record, "-e", "cpu-clock", "-p", strconv.Itoa(b.proc.PID())}
		}
	}
	perf := exec.Command("perf", args...)
	perf.Stderr = &stderr
	if err := perf.Start(); err != nil {
		return sample{}, fmt.Errorf("perf: %w", err)
	}
	time.Sleep(300 * time.Millisecond) // attached
	m0, err := mallocs(b.metrics)
	if err != nil {
		return sample{}, err
	}
	res, err := rls.Measure(ctx, b.proc.Name, b.proc.Addr, l, func() (time.Duration, time.Duration) {
		s, _ := rls.CPUTime(b.proc.PID())
		r, _ := rls.CPUTime(redisPID)
		return s, r
	})
	perf.Process.Signal(syscall.SIGINT)
	perf.Wait()
	if err != nil {
		return sample{}, err
	}
	m1, err := mallocs(b.metrics)
	if err != nil {
		return sample{}, err
	}
	if record != "" {
		return sample{res: res, counts: map[string]float64{}, allocs: m1 - m0}, nil
	}
	counts := map[string]float64{}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 3 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			counts[f[2]] = v
		}
	}
	if len(counts) == 0 {
		return sample{}, fmt.Errorf("perf stat counted nothing: %s", stderr.String())
	}
	return sample{res: res, counts: counts, allocs: m1 - m0}, nil
}

// mallocs reads the heap allocations the server at metrics has made
// (go_memstats_mallocs_total): read around rls.Measure, its warm-up and
// connections and the scrape itself count too, a few thousand at most.
func mallocs(metrics string) (float64, error) {
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_mallocs_total "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s/metrics: no go_memstats_mallocs_total", metrics)
}
