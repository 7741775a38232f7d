// Command gateway measures the cost of sluice's gateway limits: the same
// gateway (builtin:echo upstream, memory store) with limits on and with
// limits off (the kill switch, disabled: true), side by side in one run.
//
// Each variant is a `sluice serve` process (built from this checkout), so
// that the CPU time each gateway spends per request can be read from
// /proc, apart from the load generator's. Rounds alternate (off, on, on,
// off, …) so that both variants see the same machine state; each round is
// a closed loop of -c keep-alive clients, each connecting from its own
// loopback address (127.0.0.2 and up), so limits on means one token
// bucket per client IP, as anonymous traffic. The limits admit every
// request: the figure is the overhead of identifying the caller, deciding
// and setting the headers, not of answering 429s (which are cheaper).
//
// Two figures are reported. Throughput (requests per second of the closed
// loop) is what the target is stated in, but on a machine shared with
// other work it is noisy, so each pair of rounds gives a ratio and the
// median is reported. CPU per request of the gateway process is steadier:
// when the gateway is CPU-bound, its throughput is the inverse, so
// cpu(off)/cpu(on) is the share of throughput limits keep.
//
//	cd bench && go run ./gateway -c 32 -d 1s -rounds 30
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// config is the gateway under test; %s is "true" for limits off.
const config = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
disabled: %s
routes:
  - path: /
    rate_limits:
      - actions: [{identity: {}}]
rules:
  domain: bench
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
`

func main() {
	conc := flag.Int("c", 32, "concurrent clients")
	dur := flag.Duration("d", time.Second, "duration of one round")
	rounds := flag.Int("rounds", 30, "rounds per variant (they alternate)")
	inProcess := flag.Bool("inprocess", false, "serve both gateways in this process (no CPU figures)")
	aa := flag.Bool("aa", false, "A/A run: limits off against limits off, to see the noise floor")
	flag.Parse()
	variants := [2]bool{true, false}
	if *aa {
		variants[1] = true
	}
	var servers [2]server
	var err error
	if *inProcess {
		servers, err = startInProcess(context.Background(), variants)
	} else {
		servers, err = startProcesses(context.Background(), variants)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/gateway:", err)
		os.Exit(1)
	}
	res := run(servers, *conc, *dur, *rounds)
	if *aa {
		res.On.Name = "limits off (again)"
	}
	for _, s := range servers {
		s.stop()
	}
	fmt.Printf("sluice gateway, builtin:echo upstream, memory store; %d clients, %d rounds of %v per variant, %d CPUs, %s\n\n",
		*conc, *rounds, *dur, runtime.NumCPU(), runtime.Version())
	fmt.Print(res.Table())
}

// server is one gateway under test.
type server struct {
	url  string
	cpu  func() (time.Duration, bool) // the process's CPU time so far
	stop func()
}

func startInProcess(ctx context.Context, disabled [2]bool) ([2]server, error) {
	var out [2]server
	for i, disabled := range disabled {
		cfg, err := gateway.Parse("bench.yaml", fmt.Appendf(nil, config, fmt.Sprint(disabled)))
		if err != nil {
			return out, err
		}
		g, err := gateway.New(ctx, cfg, gateway.Options{})
		if err != nil {
			return out, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			g.Close()
			return out, err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- g.Serve(sctx, ln, nil) }()
		out[i] = server{
			url:  "http://" + ln.Addr().String() + "/hello",
			cpu:  func() (time.Duration, bool) { return 0, false },
			stop: func() { cancel(); <-done; g.Close() },
		}
	}
	return out, nil
}

// startProcesses builds sluice from the checkout above bench/ and starts
// one `sluice serve` per variant.
func startProcesses(ctx context.Context, disabled [2]bool) ([2]server, error) {
	var out [2]server
	dir, err := os.MkdirTemp("", "bench-gateway-")
	if err != nil {
		return out, err
	}
	bin := filepath.Join(dir, "sluice")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	build.Dir = ".."
	if b, err := build.CombinedOutput(); err != nil {
		return out, fmt.Errorf("build sluice (run from bench/): %v\n%s", err, b)
	}
	re := regexp.MustCompile(`msg="sluice serve: listening" addr=(\S+)`)
	for i, disabled := range disabled {
		file := filepath.Join(dir, fmt.Sprintf("gw%d.yaml", i))
		if err := os.WriteFile(file, fmt.Appendf(nil, config, fmt.Sprint(disabled)), 0o644); err != nil {
			return out, err
		}
		cmd := exec.Command(bin, "serve", "--config", file)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return out, err
		}
		if err := cmd.Start(); err != nil {
			return out, err
		}
		sc := bufio.NewScanner(stderr)
		addr := ""
		for addr == "" && sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr = m[1]
			}
		}
		if addr == "" {
			cmd.Process.Kill()
			cmd.Wait()
			return out, errors.New("sluice serve did not start")
		}
		go io.Copy(io.Discard, stderr)
		pid := cmd.Process.Pid
		out[i] = server{
			url: "http://" + addr + "/hello",
			cpu: func() (time.Duration, bool) { return procCPU(pid) },
			stop: func() {
				cmd.Process.Signal(os.Interrupt)
				cmd.Wait()
				os.RemoveAll(dir)
			},
		}
	}
	return out, nil
}

// procCPU reads utime+stime of pid from /proc (Linux), in clock ticks of
// 10 ms.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * 10 * time.Millisecond, true
}

// Variant is the outcome of one variant over all its rounds.
type Variant struct {
	Name     string
	Requests int64
	Errors   int64
	Denied   int64
	Elapsed  time.Duration
	CPU      time.Duration // the gateway process's CPU time; 0 when unknown
	Lat      []time.Duration
	Headers  bool // responses carried RateLimit headers
}

func (v *Variant) add(w Variant) {
	v.Requests += w.Requests
	v.Errors += w.Errors
	v.Denied += w.Denied
	v.Elapsed += w.Elapsed
	v.CPU += w.CPU
	v.Lat = append(v.Lat, w.Lat...)
	v.Headers = v.Headers || w.Headers
}

// RPS is requests per second.
func (v Variant) RPS() float64 { return float64(v.Requests) / v.Elapsed.Seconds() }

// CPUPerRequest is the gateway's CPU time per request.
func (v Variant) CPUPerRequest() time.Duration {
	if v.Requests == 0 {
		return 0
	}
	return v.CPU / time.Duration(v.Requests)
}

func (v Variant) pct(p float64) time.Duration {
	if len(v.Lat) == 0 {
		return 0
	}
	s := slices.Clone(v.Lat)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// Result is limits off and limits on.
type Result struct {
	Off, On Variant
	Ratios  []float64 // on/off throughput of each pair of rounds
}

// MedianRatio is the median of the per-pair throughput ratios.
func (r Result) MedianRatio() float64 {
	if len(r.Ratios) == 0 {
		return 0
	}
	s := slices.Clone(r.Ratios)
	slices.Sort(s)
	return s[len(s)/2]
}

// Table formats r as Markdown.
func (r Result) Table() string {
	var b strings.Builder
	b.WriteString("| variant | requests/s | p50 | p99 | gateway CPU per request | errors | 429s |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, v := range []Variant{r.Off, r.On} {
		cpu := "n/a"
		if v.CPU > 0 {
			cpu = fmt.Sprintf("%.1f µs", float64(v.CPUPerRequest())/1e3)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %v | %v | %s | %d | %d |\n", v.Name, v.RPS(),
			v.pct(0.5).Round(time.Microsecond), v.pct(0.99).Round(time.Microsecond), cpu, v.Errors, v.Denied)
	}
	fmt.Fprintf(&b, "\nThroughput, limits on / limits off: %.1f%% of the totals; median of %d paired rounds %.1f%%.\n",
		100*r.On.RPS()/r.Off.RPS(), len(r.Ratios), 100*r.MedianRatio())
	if r.On.CPU > 0 && r.Off.CPU > 0 {
		fmt.Fprintf(&b, "Gateway CPU per request, limits off / limits on: **%.1f%%** (the throughput a CPU-bound gateway keeps with limits on).\n",
			100*float64(r.Off.CPUPerRequest())/float64(r.On.CPUPerRequest()))
	}
	return b.String()
}

func run(servers [2]server, conc int, dur time.Duration, rounds int) Result {
	off, on := servers[0], servers[1]
	r := Result{Off: Variant{Name: "limits off"}, On: Variant{Name: "limits on (per-IP token bucket)"}}
	clients := clientsFor(conc)
	defer func() {
		for _, c := range clients {
			c.Transport.(*http.Transport).CloseIdleConnections()
		}
	}()
	// A short warm-up round each, not counted.
	load(clients, off, dur/5)
	load(clients, on, dur/5)
	for i := range rounds {
		var a, b Variant
		// Alternate which variant goes first, so neither always follows
		// the other.
		if i%2 == 0 {
			a = load(clients, off, dur)
			b = load(clients, on, dur)
		} else {
			b = load(clients, on, dur)
			a = load(clients, off, dur)
		}
		r.Ratios = append(r.Ratios, b.RPS()/a.RPS())
		r.Off.add(a)
		r.On.add(b)
	}
	return r
}

// clientsFor returns n clients, each connecting from its own loopback
// address.
func clientsFor(n int) []*http.Client {
	clients := make([]*http.Client, n)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(i/200), byte(2+i%200))}}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	}
	return clients
}

// load runs a closed loop of one request at a time per client for d.
func load(clients []*http.Client, s server, d time.Duration) Variant {
	var n, errs, denied atomic.Int64
	var headers atomic.Bool
	var mu sync.Mutex
	var lat []time.Duration
	cpu0, cpuOK := s.cpu()
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				st := time.Now()
				res, err := c.Get(s.url)
				if err != nil {
					errs.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case 200:
				case 429:
					denied.Add(1)
				default:
					errs.Add(1)
				}
				if res.Header.Get("RateLimit") != "" {
					headers.Store(true)
				}
				n.Add(1)
				if i%16 == 0 {
					mine = append(mine, time.Since(st))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	v := Variant{Elapsed: time.Since(t0), Requests: n.Load(), Errors: errs.Load(), Denied: denied.Load(), Lat: lat, Headers: headers.Load()}
	if cpu1, ok := s.cpu(); ok && cpuOK {
		v.CPU = cpu1 - cpu0
	}
	return v
}
