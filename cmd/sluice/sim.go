package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/sim"
)

// simResult is what every scenario of package sim returns.
type simResult interface {
	Table() sim.Table
	Figure() sim.Figure
}

// simCommon are the flags every scenario has.
type simCommon struct {
	seed     uint64
	runs     int
	progress func(done, total int)
	log      io.Writer // progress lines of long scenarios; nil with --quiet
}

// simScenario is one "sluice sim NAME": its flags, registered on fs, and
// a function that runs it once the flags are parsed.
type simScenario struct {
	name, summary string
	flags         func(fs *flag.FlagSet) func(c simCommon) (simResult, error)
}

var simScenarios = []simScenario{
	{"brooker", "Brooker's backoff and jitter study: N clients, one row, optimistic concurrency", simBrooker},
	{"objectstore", "seed 002: 9 writes into a budget of 5 per tick, with backoff and retrying at once", simObjectStore},
	{"aimd", "an AIMD client against a server whose capacity is hidden and changes", simAIMD},
	{"buckets", "one bursty trace through token bucket, leaky queue, fixed and sliding windows", simBuckets},
	{"windows", "sliding window counter vs the exact log: wrong decisions and the gap", simWindows},
	{"overload", "adaptive concurrency at 0.5x, 2x, 5x of capacity, halved, restored (--cpu: a real server)", simOverload},
	{"regions", "two regions: a Redis per region (up to 2x) vs a home region per key (exact, cross-region latency)", simRegions},
}

func simUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: sluice sim NAME [flags]

Runs a deterministic discrete-event simulation that drives sluice's real
components (backoff strategies, limiter steps, memstore, adaptive) on a
virtual clock. The same --seed prints the same bytes.

Scenarios:
`)
	for _, s := range simScenarios {
		fmt.Fprintf(w, "  %-12s %s\n", s.name, s.summary)
	}
	fmt.Fprint(w, `
Flags of every scenario:
  --seed N        random seed (default 1)
  --runs N        independent runs to average (default: the scenario's)
  --format F      table, json or csv (default table)
  --svg FILE      also draw the scenario's figure as SVG to FILE

sluice sim NAME --help lists a scenario's own flags.
`)
}

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		simUsage(stdout)
		if len(args) == 0 {
			return shown(errUsage)
		}
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		return errVersion
	}
	sc := findSimScenario(args[0])
	if sc == nil {
		fmt.Fprintf(stderr, "sluice sim: unknown scenario %q\n\n", args[0])
		simUsage(stderr)
		return shown(errUsage)
	}
	fs := newFlagSet("sim "+sc.name, "[flags]", stderr)
	cf := defineSimFlags(fs)
	start := sc.flags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	// Say what is wrong, then the scenario's flags (run would print
	// sim's general usage instead).
	bad := func(format string, a ...any) error {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(stderr, "sluice sim %s: %s\n\n", sc.name, msg)
		fs.Usage()
		return shown(fmt.Errorf("%w: %s", errUsage, msg))
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %q", fs.Args())
	}
	if err := cf.check(); err != nil {
		return bad("%v", err)
	}
	c := simCommon{seed: cf.seed, runs: cf.runs}
	if !cf.quiet {
		c.progress = progressPrinter(stderr, "sluice sim "+sc.name)
		c.log = stderr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	res, err := start(c)
	if err != nil {
		return bad("%v", err) // the scenario refused its options
	}
	if res == nil {
		return nil // the scenario printed its own output
	}
	if err := res.Table().Write(stdout, cf.format); err != nil {
		return err
	}
	if cf.svg != "" {
		return writeFile(cf.svg, res.Figure().WriteSVG)
	}
	return nil
}

// findSimScenario is the scenario called name, nil if none is.
func findSimScenario(name string) *simScenario {
	var sc *simScenario
	for i := range simScenarios {
		if simScenarios[i].name == name {
			sc = &simScenarios[i]
		}
	}
	return sc
}

// simFlags are the flags of every scenario.
type simFlags struct {
	seed        uint64
	runs        int
	format, svg string
	quiet       bool
}

func defineSimFlags(fs *flag.FlagSet) *simFlags {
	f := &simFlags{}
	fs.Uint64Var(&f.seed, "seed", 1, "random seed: the same seed prints the same bytes")
	fs.IntVar(&f.runs, "runs", 0, "independent runs (0: the scenario's default)")
	fs.StringVar(&f.format, "format", "table", "output: table, json or csv")
	fs.StringVar(&f.svg, "svg", "", "write the figure as SVG to this `file`")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress on stderr")
	return f
}

func (f *simFlags) check() error {
	switch f.format {
	case "table", "json", "csv":
	default:
		return fmt.Errorf("--format %q: want table, json or csv", f.format)
	}
	if f.runs < 0 {
		return fmt.Errorf("--runs %d: want 0 or more", f.runs)
	}
	return nil
}

// writeFile creates the file name and writes it with write.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progressPrinter returns a progress callback for runs long enough to need
// one: on a terminal it redraws one line at each whole percent, elsewhere it
// prints a line at each quarter.
func progressPrinter(w io.Writer, label string) func(done, total int) {
	step, format := 25, "%s: %d%% of %d runs\n"
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			step, format = 1, "\r%s: %3d%% of %d runs"
		}
	}
	last := -1
	return func(done, total int) {
		if total < 200 {
			return
		}
		pct := done * 100 / total / step * step
		if pct == last {
			return
		}
		last = pct
		fmt.Fprintf(w, format, label, pct, total)
		if done == total && step == 1 {
			fmt.Fprintln(w)
		}
	}
}

func simBrooker(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	clients := intList{}
	fs.Var(&clients, "clients", "comma-separated numbers of clients (default 10,20,…,190)")
	strategies := stringList{}
	fs.Var(&strategies, "strategies", "comma-separated strategies (default all: "+strings.Join(sim.BrookerStrategies(), ",")+")")
	base := fs.Duration("base", 5*time.Millisecond, "backoff base")
	maxd := fs.Duration("cap", 2*time.Second, "backoff cap")
	return func(c simCommon) (simResult, error) {
		if err := positive("--base", *base, "--cap", *maxd); err != nil {
			return nil, err
		}
		if *maxd < *base {
			return nil, fmt.Errorf("--cap %v is below --base %v", *maxd, *base)
		}
		return sim.Brooker(sim.BrookerOptions{Seed: c.seed, Runs: c.runs, Clients: clients,
			Strategies: strategies, Base: *base, Cap: *maxd, Progress: c.progress})
	}
}

func simObjectStore(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	requests := fs.Int("requests", 9, "writes fired at once")
	budget := fs.Int("budget", 5, "writes the prefix accepts per tick")
	tick := fs.Duration("tick", 100*time.Millisecond, "the store's tick")
	base := fs.Duration("base", 100*time.Millisecond, "first backoff (then doubling, plus up to as much jitter)")
	attempts := fs.Int("max-attempts", 6, "tries per write, the first included")
	return func(c simCommon) (simResult, error) {
		if err := atLeastOne("--requests", *requests, "--budget", *budget, "--max-attempts", *attempts); err != nil {
			return nil, err
		}
		if err := positive("--tick", *tick, "--base", *base); err != nil {
			return nil, err
		}
		return sim.ObjectStore(sim.ObjectStoreOptions{Seed: c.seed, Runs: c.runs, Requests: *requests,
			Budget: *budget, Tick: *tick, Base: *base, MaxAttempts: *attempts})
	}
}

func simAIMD(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	var phases phaseList
	fs.Var(&phases, "phases", "hidden capacity as START:LIMIT,… e.g. 0s:40,60s:100 (default 0s:40,60s:100,120s:25,180s:60)")
	duration := fs.Duration("duration", 0, "length of the run (default 60s after the last phase starts)")
	return func(c simCommon) (simResult, error) {
		if *duration < 0 {
			return nil, fmt.Errorf("--duration %v is negative", *duration)
		}
		for i, p := range phases {
			switch {
			case p.Start < 0:
				return nil, fmt.Errorf("--phases: phase %d starts at %v, before 0s", i+1, p.Start)
			case p.Limit < 1:
				return nil, fmt.Errorf("--phases: phase %d has limit %d: want at least 1", i+1, p.Limit)
			case i > 0 && p.Start <= phases[i-1].Start:
				return nil, fmt.Errorf("--phases: phase %d starts at %v, not after phase %d (%v)", i+1, p.Start, i, phases[i-1].Start)
			}
		}
		return sim.AIMD(sim.AIMDOptions{Seed: c.seed, Runs: c.runs, Phases: phases, Duration: *duration})
	}
}

func simBuckets(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	rate := fs.Int64("rate", 10, "the limit, per second")
	burst := fs.Int64("burst", 0, "token bucket capacity and leaky queue length (default the rate)")
	background := fs.Float64("background", 4, "Poisson arrivals per second besides the bursts")
	return func(c simCommon) (simResult, error) {
		if c.runs > 1 {
			return nil, errors.New("buckets runs one trace: --runs does not apply")
		}
		switch {
		case *rate < 1:
			return nil, fmt.Errorf("--rate %d: want at least 1", *rate)
		case *burst < 0:
			return nil, fmt.Errorf("--burst %d is negative (0: the rate)", *burst)
		case *background < 0 || *background != *background:
			return nil, fmt.Errorf("--background %v: want 0 or more", *background)
		}
		return sim.Buckets(sim.BucketsOptions{Seed: c.seed, Rate: *rate, Burst: *burst, Background: *background})
	}
}

func simWindows(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	sources := fs.Int("sources", 200, "sources, each a Poisson stream with its own key")
	rate := fs.Int64("rate", 100, "the limit: requests per --period")
	period := fs.Duration("period", time.Minute, "the limit's window")
	duration := fs.Duration("duration", time.Hour, "length of the trace")
	return func(c simCommon) (simResult, error) {
		if c.runs > 1 {
			return nil, errors.New("windows runs one trace: --runs does not apply")
		}
		if err := atLeastOne("--sources", *sources, "--rate", int(min(*rate, 1<<30))); err != nil {
			return nil, err
		}
		if err := positive("--period", *period, "--duration", *duration); err != nil {
			return nil, err
		}
		return sim.Windows(sim.WindowsOptions{Seed: c.seed, Sources: *sources,
			Limit: ratelimit.Limit{Rate: *rate, Period: *period}, Duration: *duration})
	}
}

// intList is a comma-separated list of positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// stringList is a comma-separated list of words.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

// phaseList is a comma-separated list of START:LIMIT phases.
type phaseList []sim.Phase

func (l *phaseList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = fmt.Sprintf("%v:%d", p.Start, p.Limit)
	}
	return strings.Join(s, ",")
}

func (l *phaseList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		start, limit, ok := strings.Cut(strings.TrimSpace(f), ":")
		if !ok {
			return fmt.Errorf("%q: want START:LIMIT, e.g. 60s:100", f)
		}
		d, err := time.ParseDuration(start)
		if err != nil {
			return fmt.Errorf("%q: %v", f, err)
		}
		n, err := strconv.ParseInt(limit, 10, 64)
		if err != nil {
			return fmt.Errorf("%q: limit %q is not an integer", f, limit)
		}
		*l = append(*l, sim.Phase{Start: d, Limit: n})
	}
	return nil
}

// atLeastOne checks flag values given as name, value pairs.
func atLeastOne(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1].(int); v < 1 {
			return fmt.Errorf("%s %d: want at least 1", pairs[i], v)
		}
	}
	return nil
}

// positive checks duration flags given as name, value pairs.
func positive(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1].(time.Duration); v <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", pairs[i], v)
		}
	}
	return nil
}

// simOverloadFlags are the flags of "sluice sim overload".
type simOverloadFlags struct {
	capacity, fleetCap                      int
	base, timeout, warmup, phase, bin       time.Duration
	noise, critical, reserved, gradReserved float64
	csvFile, cpuLimiter, only               string
	cpu, shedders                           bool
	cpuWork, cpuPhase, shedRamp             time.Duration
}

func simOverload(fs *flag.FlagSet) func(simCommon) (simResult, error) {
	f := &simOverloadFlags{}
	fs.IntVar(&f.capacity, "capacity", 100, "requests in flight the modelled server serves at --base each")
	fs.DurationVar(&f.base, "base", 20*time.Millisecond, "no-load latency of the model")
	fs.Float64Var(&f.noise, "noise", 0.1, "σ of the model's log-normal latency noise (0: none)")
	fs.DurationVar(&f.timeout, "timeout", time.Second, "the client's deadline: slower responses are not goodput")
	fs.DurationVar(&f.warmup, "warmup", 5*time.Second, "time at 0.5x before the phases, not reported (0: none)")
	fs.DurationVar(&f.phase, "phase", 10*time.Second, "length of each phase")
	fs.DurationVar(&f.bin, "bin", 250*time.Millisecond, "step of the time series")
	fs.StringVar(&f.csvFile, "csv", "", "write the time series (limit, in flight, p99, goodput per bin) as CSV to this `file`")
	fs.BoolVar(&f.cpu, "cpu", false, "drive a CPU-bound HTTP server in its own process over loopback, in real time, instead of the model")
	fs.DurationVar(&f.cpuWork, "cpu-work", 5*time.Millisecond, "with --cpu: CPU time per request")
	fs.DurationVar(&f.cpuPhase, "cpu-phase", 2*time.Second, "with --cpu: length of each phase (real time)")
	fs.StringVar(&f.cpuLimiter, "cpu-limiter", "", "internal: be the --cpu server, behind this limiter (sluice-gradient, sluice-vegas, fixed:N, none)")
	fs.BoolVar(&f.shedders, "shed", true, "also run the load shedders (sluice-shed-utilization, -fleet, -stack, -gradient) on requests with priority classes")
	fs.Float64Var(&f.critical, "critical", sim.DefaultCritical, "share of critical requests; test, get and post split the rest evenly")
	fs.DurationVar(&f.shedRamp, "shed-ramp", shed.DefaultRamp, "the utilization shedder's ramp (Stripe's: 120s)")
	fs.IntVar(&f.fleetCap, "fleet-cap", 0, "the fleet shedder's in-flight cap (0: 1.5x --capacity)")
	fs.Float64Var(&f.reserved, "reserved", 1.0/3, "share of the fleet cap reserved for critical requests (other classes are refused once the fleet's in-flight count reaches the rest)")
	fs.Float64Var(&f.gradReserved, "gradient-reserved", 0.5, "share of sluice-shed-gradient's limit reserved for critical requests")
	fs.StringVar(&f.only, "only", "", "run only these contenders (comma-separated names; "+sim.OracleName+", the reference, always runs)")
	return f.run
}

func (f *simOverloadFlags) run(c simCommon) (simResult, error) {
	if c.runs > 1 {
		return nil, errors.New("overload runs each contender once on the same arrivals: --runs does not apply")
	}
	if f.cpuLimiter != "" {
		return nil, sim.ServeCPU(context.Background(), sim.CPUServerOptions{Limiter: f.cpuLimiter, Work: f.cpuWork}, os.Stdin, os.Stdout)
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	var res *sim.OverloadResult
	var err error
	if f.cpu {
		res, err = f.runCPU(c)
	} else {
		res, err = f.runModel(c)
	}
	if err != nil {
		return nil, err
	}
	if f.csvFile != "" {
		if err := writeFile(f.csvFile, func(w io.Writer) error { return res.Series().Write(w, "csv") }); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (f *simOverloadFlags) check() error {
	if err := positive("--base", f.base, "--timeout", f.timeout, "--phase", f.phase, "--bin", f.bin,
		"--cpu-work", f.cpuWork, "--cpu-phase", f.cpuPhase); err != nil {
		return err
	}
	switch {
	case f.capacity < 1 || f.capacity > 100_000:
		return fmt.Errorf("--capacity %d: want 1 to 100000", f.capacity)
	case f.noise < 0 || f.noise > 2 || f.noise != f.noise:
		return fmt.Errorf("--noise %v: want 0 to 2", f.noise)
	case f.warmup < 0:
		return fmt.Errorf("--warmup %v is negative", f.warmup)
	case f.phase > time.Hour || f.cpuPhase > time.Minute:
		return fmt.Errorf("--phase %v / --cpu-phase %v: at most an hour / a minute", f.phase, f.cpuPhase)
	case f.cpuWork > time.Second:
		return fmt.Errorf("--cpu-work %v: at most 1s", f.cpuWork)
	}
	return nil
}

// runCPU drives a real CPU-bound server, this binary as a child process.
func (f *simOverloadFlags) runCPU(c simCommon) (*sim.OverloadResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	res, err := sim.OverloadCPU(context.Background(), sim.CPUOptions{Command: []string{exe, "sim", "overload"},
		Work: f.cpuWork, Warmup: min(f.warmup, time.Second), Phase: f.cpuPhase, Bin: f.bin, Timeout: f.timeout,
		Seed: c.seed, Log: c.log})
	if err == nil && c.log != nil {
		for _, run := range res.Runs {
			fmt.Fprintf(c.log, "sluice sim overload --cpu: %s: p99 of a refusal at 5x: %v\n", run.Name, run.RejectionP99("5x"))
		}
	}
	return res, err
}

// runModel runs the contenders against the modelled server.
func (f *simOverloadFlags) runModel(c simCommon) (*sim.OverloadResult, error) {
	o := sim.OverloadOptions{Seed: c.seed, Warmup: f.warmup, Phase: f.phase, Bin: f.bin,
		Model: sim.IOModel{Capacity: f.capacity, Base: f.base, Noise: f.noise, Timeout: f.timeout}}
	var err error
	if o.Mix, err = sim.NewClassMix(f.critical, shed.Classes{}); err != nil {
		return nil, fmt.Errorf("--critical: %w", err)
	}
	if f.shedders {
		sc, err := f.shedContenders(o.Mix)
		if err != nil {
			return nil, err
		}
		o.Contenders = append(sim.OverloadContenders(), sc...)
	}
	if f.only != "" {
		if o.Contenders, err = onlyContenders(o.Contenders, f.only); err != nil {
			return nil, err
		}
	}
	if f.noise == 0 {
		o.Model.Noise = -1
	}
	if f.warmup == 0 {
		o.Warmup = -1
	}
	if c.log != nil {
		o.Progress = func(done, total int) {
			fmt.Fprintf(c.log, "sluice sim overload: %d of %d contenders done\n", done, total)
		}
	}
	return sim.Overload(o)
}

// shedContenders are the load shedders of --shed, on requests of mix.
func (f *simOverloadFlags) shedContenders(mix sim.ClassMix) ([]sim.OverloadContender, error) {
	if f.shedRamp <= 0 || f.fleetCap < 0 || f.fleetCap > 1_000_000 || !(f.reserved > 0) || !(f.gradReserved > 0) {
		return nil, fmt.Errorf("--shed-ramp %v / --fleet-cap %d / --reserved %v / --gradient-reserved %v: want a positive ramp, a cap of 0 to 1000000, shares above 0",
			f.shedRamp, f.fleetCap, f.reserved, f.gradReserved)
	}
	sc, err := sim.ShedContenders(sim.ShedOptions{Workers: f.capacity, Mix: mix, Ramp: f.shedRamp,
		FleetCap: f.fleetCap, Reserved: f.reserved, GradientReserved: f.gradReserved})
	if err != nil {
		return nil, fmt.Errorf("--reserved / --gradient-reserved: %w", err)
	}
	return sc, nil
}

// onlyContenders keeps the contenders named in the comma-separated list,
// and the oracle.
func onlyContenders(all []sim.OverloadContender, list string) ([]sim.OverloadContender, error) {
	if all == nil {
		all = sim.OverloadContenders()
	}
	want := map[string]bool{sim.OracleName: true}
	for _, n := range strings.Split(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []sim.OverloadContender
	for _, c := range all {
		if want[c.Name] {
			out = append(out, c)
			delete(want, c.Name)
		}
	}
	delete(want, sim.OracleName)
	for n := range want {
		names := make([]string, len(all))
		for i, c := range all {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("--only: no contender %q (have %s)", n, strings.Join(names, ", "))
	}
	return out, nil
}
