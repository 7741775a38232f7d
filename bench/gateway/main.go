// Command gateway measures sluice serve against what users would run
// instead, side by side in one run, in front of one real upstream process
// (an nginx answering 200 with a small body):
//
//   - nginx: nginx as a proxy with limit_req (a zone keyed by client IP, a
//     rate that admits everything, keep-alive connections to the upstream);
//   - goproxy: a bare Go httputil.ReverseProxy (cmd/goproxy) with a Transport
//     that keeps an idle upstream connection for every client and a pool of
//     body copy buffers (goproxy-plain, not in the default set: without the
//     pool, as most code using ReverseProxy is);
//   - sluice-off: sluice serve with limits off (the kill switch);
//   - sluice-on: sluice serve with a per-IP token bucket, memory store;
//   - sluice-redis: the same on a Redis store (a redis-server the harness
//     starts);
//   - sluice-quota and sluice-journal (not in the default set): a monthly
//     quota per IP that admits everything, memory store with a snapshot
//     file, without and with the journal of quota charges (every request
//     a record, written every second): what the journal costs.
//
// Each is a process of its own, and so is the load generator (cmd/gwload:
// keep-alive clients, each connecting from its own loopback address, so a
// per-IP limit sees one identity per client; its latency and the CPU time
// of the proxy, the upstream and redis-server over exactly the measured
// window). Rounds are paired: every round measures every contender, in an
// order rotated by one each round, so no contender always follows
// another. When wrk is on PATH the same rounds are measured with it too.
//
//	cd bench && go run ./gateway                                  # all five, 10 rounds of 2 s, 32 clients
//	cd bench && go run ./gateway -contenders goproxy,sluice-on    # the figure the gateway's work is judged by
//	cd bench && go run ./gateway -rates 10,25,50,100              # fixed offered rates for the Redis path
//	cd bench && go run ./gateway -base /tmp/sluice-main -contenders goproxy,sluice-on@base,sluice-on  # before/after in one run
//
// With -rates, the run is a sweep instead: open loops at fixed offered
// rates (percentages of the bare Go proxy's capacity, measured first in a
// closed loop unless -capacity says it) and saturation, reporting each
// contender's CPU per request, redis-server's CPU per decision and
// latency (from each request's scheduled time) at each load.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/gateway/loadgen"
	"github.com/sluicehq/sluice/bench/internal/host"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// Kinds of contender.
const (
	kindNginx       = "nginx"
	kindGoProxy     = "goproxy"
	kindGoPlain     = "goproxy-plain"
	kindSluiceOff   = "sluice-off"
	kindSluiceOn    = "sluice-on"
	kindSluiceRedis = "sluice-redis"
	// kindSluicePrefetch is sluice-redis with the store's prefetch mode on
	// (hot keys decided from slices of their limit taken from Redis).
	kindSluicePrefetch = "sluice-redis-prefetch"
	kindQuota          = "sluice-quota"
	kindJournal        = "sluice-journal"
	// A proxy users run, alone (with its own limiter, if it has one) or
	// asking sluice's decision endpoint (fronts.go).
	kindNginxSluice      = "nginx+sluice"
	kindNginxSluiceRedis = "nginx+sluice-redis"
	kindNginxSluiceIdle  = "nginx+sluice-idle"
	kindCaddy            = "caddy"
	kindCaddySluice      = "caddy+sluice"
	kindTraefik          = "traefik"
	kindTraefikRedis     = "traefik-redis"
	kindTraefikSluice    = "traefik+sluice"
)

var kinds = []string{kindNginx, kindGoProxy, kindSluiceOff, kindSluiceOn, kindSluiceRedis, kindGoPlain, kindQuota, kindJournal,
	kindNginxSluice, kindNginxSluiceIdle, kindNginxSluiceRedis, kindCaddy, kindCaddySluice, kindTraefik, kindTraefikRedis, kindTraefikSluice, kindSluicePrefetch}

// baseKinds are the kinds a -base build runs (KIND@base).
var baseKinds = []string{kindSluiceOff, kindSluiceOn, kindSluiceRedis, kindSluicePrefetch}

// defaultKinds are the contenders of a run without -contenders.
var defaultKinds = kinds[:5]

// proxyKinds are -contenders proxies: the proxies users run, alone and
// in front of sluice's decision endpoint, against sluice serve proxying.
var proxyKinds = []string{kindNginx, kindNginxSluice, kindNginxSluiceIdle, kindSluiceOn, kindCaddy, kindCaddySluice, kindTraefik, kindTraefikRedis, kindTraefikSluice}

// Tools.
const (
	toolGo  = "gwload"
	toolWrk = "wrk"
)

// options are a run's settings.
type options struct {
	contenders []string // kinds; a kind named twice is an A/A pair ("sluice-on", "sluice-on#2")
	clients    int      // closed loop clients (and wrk connections)
	openConns  int      // open loop clients
	dur        time.Duration
	warmup     time.Duration
	rounds     int
	tools      []string
	rates      []float64 // percentages; empty: the side-by-side run
	capacity   float64   // req/s that is 100%; 0: measure goproxy
	idle       int       // idle upstream connections of the proxies
	path       string
	sluice     string // a sluice binary to use instead of building the checkout's
	base       string // a second sluice binary, run by the KIND@base contenders
	caddy      string // a caddy binary; empty: gobuild.Caddy
	traefik    string // a traefik binary; empty: gobuild.Traefik
	profile    string // a directory for CPU profiles of the sluice contenders
	progress   io.Writer
}

func main() {
	o := options{progress: os.Stderr}
	contenders := flag.String("contenders", strings.Join(defaultKinds, ","), "what to measure, in order: "+strings.Join(kinds, ", ")+" (a kind named twice: an A/A pair), or proxies: "+strings.Join(proxyKinds, ","))
	flag.IntVar(&o.clients, "c", 32, "closed loop: concurrent keep-alive clients (wrk: connections)")
	flag.IntVar(&o.openConns, "oc", 64, "open loop (-rates): keep-alive clients the offered requests are spread over")
	flag.DurationVar(&o.dur, "d", 2*time.Second, "measured window of one round")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "load before each window, not counted")
	flag.IntVar(&o.rounds, "rounds", 10, "rounds (each measures every contender)")
	wrk := flag.String("wrk", "auto", "also measure with wrk: auto (when on PATH), yes, no")
	rates := flag.String("rates", "", "sweep: offered rates as percentages of the bare Go proxy's capacity, e.g. 10,25,50,100 (saturation is added)")
	flag.Float64Var(&o.capacity, "capacity", 0, "sweep: req/s taken as 100% (0: measure goproxy in a closed loop first)")
	flag.IntVar(&o.idle, "idle", 256, "idle connections each proxy keeps to the upstream")
	flag.StringVar(&o.path, "path", "/hello", "request path")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of each sluice (serving, or the decision endpoint a proxy asks) over its first gwload round to `DIR`/NAME.pprof; with -rates, each load's first round to DIR/NAME-PERCENT.pprof (0: saturation)")
	flag.StringVar(&o.sluice, "sluice", "", "a sluice binary to measure (default: build ./cmd/sluice of this checkout, uncommitted changes included)")
	flag.StringVar(&o.base, "base", "", "a second sluice binary (a build of the base commit, say), which the contenders named sluice-off@base, sluice-on@base and sluice-redis@base run: before and after in one run of paired rounds")
	flag.StringVar(&o.caddy, "caddy", "", "a caddy binary (default: built from the Go module proxy into the user cache, once)")
	flag.StringVar(&o.traefik, "traefik", "", "a traefik binary (default: built from the Go module proxy into the user cache, once)")
	flag.Parse()
	for _, k := range strings.Split(*contenders, ",") {
		if k == "proxies" {
			o.contenders = append(o.contenders, proxyKinds...)
		} else {
			o.contenders = append(o.contenders, k)
		}
	}
	o.tools = []string{toolGo}
	switch *wrk {
	case "yes":
		o.tools = append(o.tools, toolWrk)
	case "auto":
		if _, err := exec.LookPath("wrk"); err == nil && *rates == "" {
			o.tools = append(o.tools, toolWrk)
		}
	case "no":
	default:
		fail(fmt.Errorf("-wrk: want auto, yes or no, got %q", *wrk))
	}
	if *rates != "" {
		for _, s := range strings.Split(*rates, ",") {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || f <= 0 {
				fail(fmt.Errorf("-rates: bad percentage %q", s))
			}
			o.rates = append(o.rates, f)
		}
		if !flagSet("contenders") {
			o.contenders = []string{kindGoProxy, kindSluiceOn, kindSluiceRedis}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("load average at start: %s\n", host.LoadAvg())
	env, err := setup(ctx, o)
	if err != nil {
		fail(err)
	}
	defer env.close()
	if len(o.rates) == 0 {
		res, err := compare(ctx, env, o)
		if err != nil {
			env.close()
			fail(err)
		}
		fmt.Printf("\n%d clients, %d rounds of %v per contender (after %v of warm-up each), %d CPUs, %s\n",
			o.clients, o.rounds, o.dur, o.warmup, runtime.NumCPU(), runtime.Version())
		for _, tool := range o.tools {
			fmt.Printf("\n#### %s\n\n", toolTitle(tool, o))
			fmt.Print(res.table(tool))
			fmt.Print(res.ratios(tool))
		}
	} else {
		pts, err := sweep(ctx, env, o)
		if err != nil {
			env.close()
			fail(err)
		}
		fmt.Printf("\nopen loop over %d clients at fixed offered rates, saturation: closed loop of %d clients; %d rounds of %v, %d CPUs, %s\n\n",
			o.openConns, o.clients, o.rounds, o.dur, runtime.NumCPU(), runtime.Version())
		fmt.Print(sweepTable(pts, env.names()))
	}
	fmt.Printf("\nload average at end: %s\n", host.LoadAvg())
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench/gateway:", err)
	os.Exit(1)
}

func toolTitle(tool string, o options) string {
	if tool == toolWrk {
		return fmt.Sprintf("wrk -t 2 -c %d -d %v --latency (one source address; CPU read around the run)", o.clients, o.dur)
	}
	return fmt.Sprintf("gwload (cmd/gwload: %d clients, one loopback address each)", o.clients)
}

// contender is one proxy under test.
type contender struct {
	name, kind string
	bin        string // the sluice binary of a KIND@base contender; "" the run's
	p          *proc
	decider    *proc // sluice serve as the decision endpoint p asks, if any
	redis      bool  // whether it uses the run's redis-server
}

// env is everything a run started.
type env struct {
	dir        string
	bins       binaries
	upstream   *proc
	redis      *redistest.Server
	contenders []*contender
}

func (e *env) names() []string {
	var out []string
	for _, c := range e.contenders {
		out = append(out, c.name)
	}
	return out
}

func (e *env) close() {
	for _, c := range e.contenders {
		c.p.stop()
		c.decider.stop()
	}
	e.contenders = nil
	e.upstream.stop()
	e.upstream = nil
	if e.redis != nil {
		e.redis.Close()
		e.redis = nil
	}
	if e.dir != "" {
		os.RemoveAll(e.dir)
		e.dir = ""
	}
}

// setup builds the programs and starts the upstream, redis-server when a
// contender needs it, and every contender.
func setup(ctx context.Context, o options) (_ *env, err error) {
	e := &env{}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.contenders, err = parseContenders(o.contenders, o.base); err != nil {
		return nil, err
	}
	if e.dir, err = os.MkdirTemp("", "bench-gateway-"); err != nil {
		return nil, err
	}
	fmt.Fprintln(o.progress, "building sluice, goproxy, gwload …")
	if e.bins, err = build(ctx, e.dir, o.sluice == ""); err != nil {
		return nil, err
	}
	if o.sluice != "" {
		e.bins.sluice = o.sluice
	}
	if e.contenders, err = e.external(ctx, o); err != nil {
		return nil, err
	}
	if e.upstream, err = startUpstream(e.dir); err != nil {
		return nil, err
	}
	for _, c := range e.contenders {
		c.redis = slices.Contains(redisKinds, c.kind)
		if c.redis && e.redis == nil {
			if e.redis, err = redistest.StartServer(); err != nil {
				return nil, fmt.Errorf("redis-server: %w", err)
			}
		}
	}
	for _, c := range e.contenders {
		if err := e.start(c, o); err != nil {
			return nil, err
		}
		fmt.Fprintf(o.progress, "%-18s pid %-7d %s\n", c.name, c.p.pid(), c.p.url)
		if c.decider != nil {
			fmt.Fprintf(o.progress, "%-18s pid %-7d %s\n", "  its sluice", c.decider.pid(), c.decider.url)
		}
	}
	fmt.Fprintf(o.progress, "%-18s pid %-7d %s\n", "upstream", e.upstream.pid(), e.upstream.url)
	if e.redis != nil {
		fmt.Fprintf(o.progress, "%-18s pid %-7d %s\n", "redis-server", e.redis.Pid(), e.redis.URL())
	}
	return e, nil
}

// parseContenders returns the contenders of -contenders: a kind named
// twice is an A/A pair ("sluice-on", "sluice-on#2"); KIND@base (a sluice
// serve kind) runs base, the -base binary.
func parseContenders(list []string, base string) ([]*contender, error) {
	var out []*contender
	seen := map[string]int{}
	for _, name := range list {
		k, atBase := strings.CutSuffix(name, "@base")
		if !slices.Contains(kinds, k) {
			return nil, fmt.Errorf("-contenders: unknown %q (want %s)", name, strings.Join(kinds, ", "))
		}
		c := &contender{name: name, kind: k}
		if atBase {
			if base == "" || !slices.Contains(baseKinds, k) {
				return nil, fmt.Errorf("-contenders: %q: @base wants -base and one of %s", name, strings.Join(baseKinds, ", "))
			}
			c.bin = base
		}
		if seen[name]++; seen[name] > 1 {
			c.name = fmt.Sprintf("%s#%d", name, seen[name])
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no contenders")
	}
	return out, nil
}

// measure runs one measurement of c with tool; rate 0 is a closed loop.
func measure(ctx context.Context, e *env, o options, c *contender, tool string, rate float64) (loadgen.Result, error) {
	pids := map[string]int{"proxy": c.p.pid(), "upstream": e.upstream.pid()}
	if c.decider != nil {
		pids["decision"] = c.decider.pid()
	}
	if c.redis {
		pids["redis"] = e.redis.Pid()
	}
	url := c.p.url + o.path
	if tool == toolWrk {
		return runWrk(ctx, url, o, pids)
	}
	conns := o.clients
	if rate > 0 {
		conns = o.openConns
	}
	args := []string{"-url", url, "-c", fmt.Sprint(conns), "-d", o.dur.String(), "-warmup", o.warmup.String(),
		"-rate", strconv.FormatFloat(rate, 'f', -1, 64)}
	for n, pid := range pids {
		args = append(args, "-pid", fmt.Sprintf("%s=%d", n, pid))
	}
	cmd := exec.CommandContext(ctx, e.bins.gwload, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return loadgen.Result{}, fmt.Errorf("gwload against %s: %v: %s", c.name, err, stderr.String())
	}
	var r loadgen.Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("gwload against %s: %v: %q", c.name, err, stdout.String())
	}
	return r, nil
}

var (
	wrkRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkTotal   = regexp.MustCompile(`(?m)^\s*(\d+) requests in ([0-9.]+\w+),`)
	wrkPct     = regexp.MustCompile(`(?m)^\s+(50|90|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkErrors  = regexp.MustCompile(`(?m)^\s+Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx  = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: (\d+)`)
	wrkDurUnit = map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}
)

// runWrk measures url with wrk, reading the processes' CPU around the run
// (so the figure includes wrk's connection set-up: no warm-up).
func runWrk(ctx context.Context, url string, o options, pids map[string]int) (loadgen.Result, error) {
	secs := max(1, int(o.dur.Round(time.Second)/time.Second))
	cpu0 := map[string]time.Duration{}
	for n, pid := range pids {
		cpu0[n], _ = loadgen.ProcCPU(pid)
	}
	cmd := exec.CommandContext(ctx, "wrk", "-t", "2", "-c", fmt.Sprint(o.clients), "-d", fmt.Sprintf("%ds", secs), "--latency", url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return loadgen.Result{}, fmt.Errorf("wrk: %v: %s", err, out)
	}
	r := loadgen.Result{CPU: map[string]time.Duration{}}
	for n, pid := range pids {
		if t, err := loadgen.ProcCPU(pid); err == nil {
			r.CPU[n] = t - cpu0[n]
		}
	}
	if err := parseWrk(out, &r); err != nil {
		return r, err
	}
	return r, nil
}

// parseWrk reads wrk --latency's report into r: requests, elapsed time,
// p50/p90/p99, and socket errors and non-2xx answers as errors.
func parseWrk(out []byte, r *loadgen.Result) error {
	m := wrkTotal.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("wrk: no request count in %q", out)
	}
	r.Requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	if d, err := time.ParseDuration(string(m[2])); err == nil {
		r.Elapsed = d
	}
	if m := wrkRPS.FindSubmatch(out); m != nil && r.Elapsed == 0 {
		rps, _ := strconv.ParseFloat(string(m[1]), 64)
		r.Elapsed = time.Duration(float64(r.Requests) / rps * float64(time.Second))
	}
	for _, m := range wrkPct.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		d := time.Duration(v * float64(wrkDurUnit[string(m[3])]))
		switch string(m[1]) {
		case "50":
			r.P50 = d
		case "90":
			r.P90 = d
		case "99":
			r.P99 = d
		}
	}
	if m := wrkErrors.FindSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(string(s), 10, 64)
			r.Errors += n
		}
	}
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		r.Errors += n
	}
	return nil
}

// rotated returns cs rotated left by k: round k's order.
func rotated[T any](cs []T, k int) []T {
	if len(cs) == 0 {
		return nil
	}
	k %= len(cs)
	return append(slices.Clone(cs[k:]), cs[:k]...)
}

// results holds every round of every contender with every tool.
type results struct {
	names  []string
	rounds map[string]map[string][]loadgen.Result // tool → contender → rounds
}

// compare runs the side-by-side rounds.
func compare(ctx context.Context, e *env, o options) (*results, error) {
	res := &results{names: e.names(), rounds: map[string]map[string][]loadgen.Result{}}
	for _, tool := range o.tools {
		res.rounds[tool] = map[string][]loadgen.Result{}
	}
	for r := range o.rounds {
		for _, tool := range o.tools {
			for _, c := range rotated(e.contenders, r) {
				file := ""
				if r == 0 && tool == toolGo {
					file = c.name
				}
				m, err := measureProfiled(ctx, e, o, c, tool, 0, file)
				if err != nil {
					return nil, err
				}
				fmt.Fprintf(o.progress, "round %2d %-6s %-13s %s\n", r+1, tool, c.name, m)
				if m.FirstErr != "" {
					fmt.Fprintf(o.progress, "    first error: %s\n", m.FirstErr)
				}
				res.rounds[tool][c.name] = append(res.rounds[tool][c.name], m)
			}
		}
	}
	return res, nil
}

// measureProfiled is measure, and with -profile and a file name, a CPU
// profile of c's sluice (its own process, or the decision endpoint it
// asks) over the measurement in o.profile/FILE.pprof.
func measureProfiled(ctx context.Context, e *env, o options, c *contender, tool string, rate float64, file string) (loadgen.Result, error) {
	sl := c.p
	if c.decider != nil {
		sl = c.decider
	}
	if o.profile == "" || file == "" || sl.admin == "" {
		return measure(ctx, e, o, c, tool, rate)
	}
	prof := make(chan error, 1)
	go func() { prof <- profile(ctx, c.name, sl.admin, file, o) }()
	m, err := measure(ctx, e, o, c, tool, rate)
	if perr := <-prof; perr != nil && err == nil {
		err = perr
	}
	return m, err
}

// profile writes a CPU profile of the sluice of contender name, whose
// admin listener is admin, over a measurement (warm-up and window, in
// whole seconds) to o.profile/FILE.pprof.
func profile(ctx context.Context, name, admin, file string, o options) error {
	secs := max(1, int((o.warmup + o.dur).Seconds()))
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", name, res.Status)
	}
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(o.profile, file+".pprof"))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", name, err)
	}
	fmt.Fprintf(o.progress, "profile of %s: %s\n", name, f.Name())
	return f.Close()
}

// summary is a contender's figures over its rounds.
type summary struct {
	rps                  float64 // totals: requests over time
	medianRPS            float64
	p50, p99             time.Duration // medians of the rounds'
	proxy, upstream, rds float64       // CPU µs per request, totals
	decision             float64       // the decision endpoint's CPU µs per request
	total                float64       // proxy + decision + redis: the gateway's whole CPU per request
	errors, denied       int64
	unsent               int64
	headers              bool
}

func summarize(rs []loadgen.Result) summary {
	var s summary
	var n int64
	var el time.Duration
	cpu := map[string]time.Duration{}
	var rps, p50, p99 []float64
	for _, r := range rs {
		n += r.Requests
		el += r.Elapsed
		for k, v := range r.CPU {
			cpu[k] += v
		}
		rps = append(rps, r.PerSecond())
		p50 = append(p50, float64(r.P50))
		p99 = append(p99, float64(r.P99))
		s.errors += r.Errors
		s.denied += r.Denied
		s.unsent += r.Unsent
		s.headers = s.headers || r.Headers
	}
	if el > 0 {
		s.rps = float64(n) / el.Seconds()
	}
	s.medianRPS = median(rps)
	s.p50 = time.Duration(median(p50))
	s.p99 = time.Duration(median(p99))
	per := func(k string) float64 {
		if n == 0 {
			return 0
		}
		return cpu[k].Seconds() * 1e6 / float64(n)
	}
	s.proxy, s.upstream, s.rds, s.decision = per("proxy"), per("upstream"), per("redis"), per("decision")
	s.total = s.proxy + s.decision + s.rds
	return s
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", d.Seconds()*1e3) }

func us(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", v)
}

// table formats tool's results as Markdown.
func (r *results) table(tool string) string {
	var b strings.Builder
	b.WriteString("| contender | req/s (totals) | req/s (median round) | p50 | p99 | proxy CPU/req | decision CPU/req | redis CPU/decision | total CPU/req | upstream CPU/req | errors | 429s |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range r.names {
		s := summarize(r.rounds[tool][n])
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %s | %s | %s | %s | %s | **%s** | %s | %d | %d |\n",
			n, s.rps, s.medianRPS, ms(s.p50), ms(s.p99), us(s.proxy), us(s.decision), us(s.rds), us(s.total), us(s.upstream), s.errors, s.denied)
	}
	b.WriteString("\nproxy: the process the clients talk to; decision: the sluice serve it asks (decision endpoint); total: proxy + decision + redis-server, the upstream apart.\n")
	return b.String()
}

// paired returns, round by round, a's req/s over b's, sorted.
func (r *results) paired(tool, a, b string) []float64 {
	x, y := r.rounds[tool][a], r.rounds[tool][b]
	var out []float64
	for i := range min(len(x), len(y)) {
		if y[i].PerSecond() > 0 {
			out = append(out, x[i].PerSecond()/y[i].PerSecond())
		}
	}
	slices.Sort(out)
	return out
}

// ratios says each contender's throughput and CPU against the bare Go
// proxy, nginx and (for the proxies users run instead, alone or asking
// sluice) sluice serve proxying.
func (r *results) ratios(tool string) string {
	var b strings.Builder
	b.WriteString("\n| ratio | req/s (totals) | req/s (paired rounds: median, range) | CPU/req: reference's total / this one's |\n|---|---:|---:|---:|\n")
	has := func(n string) bool { return slices.Contains(r.names, n) }
	for _, ref := range []string{kindGoProxy, kindNginx, kindSluiceOn} {
		if !has(ref) {
			continue
		}
		for _, n := range r.names {
			kind, _, _ := strings.Cut(n, "#")
			switch {
			case n == ref:
			case ref == kindGoProxy,
				ref == kindNginx && kind != kindGoProxy && kind != kindGoPlain,
				ref == kindSluiceOn && (slices.Contains(proxyKinds, kind) && kind != kindSluiceOn || kind == kindNginxSluiceRedis):
				b.WriteString(r.ratio(tool, n, ref))
			}
		}
	}
	if has(kindSluiceOn) && has(kindSluiceOff) {
		b.WriteString(r.ratio(tool, kindSluiceOn, kindSluiceOff))
	}
	for _, n := range r.names { // after / before
		if k, ok := strings.CutSuffix(n, "@base"); ok && has(k) {
			b.WriteString(r.ratio(tool, k, n))
		}
	}
	return b.String()
}

// ratio is the row of n against ref.
func (r *results) ratio(tool, n, ref string) string {
	s, rs := summarize(r.rounds[tool][n]), summarize(r.rounds[tool][ref])
	p := r.paired(tool, n, ref)
	pr := "–"
	if len(p) > 0 {
		pr = fmt.Sprintf("%.1f%% (%.1f–%.1f%%)", 100*median(p), 100*p[0], 100*p[len(p)-1])
	}
	cpu := "–"
	if s.total > 0 {
		cpu = fmt.Sprintf("%.1f%%", 100*rs.total/s.total)
	}
	return fmt.Sprintf("| %s / %s | **%.1f%%** | %s | %s |\n", n, ref, 100*s.rps/max(rs.rps, 1e-9), pr, cpu)
}

// point is one load level of a sweep.
type point struct {
	percent float64 // 0: saturation
	rate    float64
	rounds  map[string][]loadgen.Result
}

// sweep measures every contender at saturation (closed loop), then at
// each offered rate.
func sweep(ctx context.Context, e *env, o options) ([]point, error) {
	run := func(pt *point) error {
		pt.rounds = map[string][]loadgen.Result{}
		for r := range o.rounds {
			for _, c := range rotated(e.contenders, r) {
				file := ""
				if r == 0 {
					file = fmt.Sprintf("%s-%.0f", c.name, pt.percent)
				}
				m, err := measureProfiled(ctx, e, o, c, toolGo, pt.rate, file)
				if err != nil {
					return err
				}
				fmt.Fprintf(o.progress, "%-18s round %2d %-13s %s\n", pt.level(), r+1, c.name, m)
				if m.FirstErr != "" {
					fmt.Fprintf(o.progress, "    first error: %s\n", m.FirstErr)
				}
				pt.rounds[c.name] = append(pt.rounds[c.name], m)
			}
		}
		return nil
	}
	sat := point{}
	if err := run(&sat); err != nil {
		return nil, err
	}
	capacity := o.capacity
	if capacity == 0 {
		ref := kindGoProxy
		if _, ok := sat.rounds[ref]; !ok {
			ref = e.contenders[0].name
		}
		capacity = summarize(sat.rounds[ref]).medianRPS
		fmt.Fprintf(o.progress, "capacity (100%%): %s at saturation, %.0f req/s\n", ref, capacity)
	}
	var pts []point
	for _, pc := range o.rates {
		pt := point{percent: pc, rate: capacity * pc / 100}
		if err := run(&pt); err != nil {
			return nil, err
		}
		pts = append(pts, pt)
	}
	return append(pts, sat), nil
}

func (p point) level() string {
	if p.rate == 0 {
		return "saturation"
	}
	return fmt.Sprintf("%.0f%% (%.0f/s)", p.percent, p.rate)
}

// sweepTable formats a sweep as Markdown.
func sweepTable(pts []point, names []string) string {
	var b strings.Builder
	b.WriteString("| load | contender | req/s | p50 | p99 | proxy CPU/req | decision CPU/req | redis CPU/decision | total CPU/req | upstream CPU/req | errors | unsent |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range pts {
		for i, n := range names {
			s := summarize(p.rounds[n])
			lvl := ""
			if i == 0 {
				lvl = p.level()
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %s | %s | %s | %s | %s | **%s** | %s | %d | %d |\n",
				lvl, n, s.rps, ms(s.p50), ms(s.p99), us(s.proxy), us(s.decision), us(s.rds), us(s.total), us(s.upstream), s.errors, s.unsent)
		}
	}
	b.WriteString("\nreq/s, CPU and errors: totals over the rounds; p50, p99: medians of the rounds' (open loop: from each request's scheduled time).\n")
	return b.String()
}
