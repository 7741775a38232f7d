package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// overloadFlags are the flags of "sluice sim overload".
type overloadFlags struct {
	capacity, fleetCap                      int
	base, timeout, warmup, phase, bin       time.Duration
	noise, critical, reserved, gradReserved float64
	csvFile, cpuLimiter, only               string
	cpu, shedders                           bool
	cpuWork, cpuPhase, shedRamp             time.Duration
}

func overloadFlagsOf(fs *flag.FlagSet) func(Options) (*Result, error) {
	f := &overloadFlags{}
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
	fs.Float64Var(&f.critical, "critical", defaultCritical, "share of critical requests; test, get and post split the rest evenly")
	fs.DurationVar(&f.shedRamp, "shed-ramp", shed.DefaultRamp, "the utilization shedder's ramp (Stripe's: 120s)")
	fs.IntVar(&f.fleetCap, "fleet-cap", 0, "the fleet shedder's in-flight cap (0: 1.5x --capacity)")
	fs.Float64Var(&f.reserved, "reserved", 1.0/3, "share of the fleet cap reserved for critical requests (other classes are refused once the fleet's in-flight count reaches the rest)")
	fs.Float64Var(&f.gradReserved, "gradient-reserved", 0.5, "share of sluice-shed-gradient's limit reserved for critical requests")
	fs.StringVar(&f.only, "only", "", "run only these contenders (comma-separated names; "+OracleName+", the reference, always runs)")
	return f.run
}

func (f *overloadFlags) run(c Options) (*Result, error) {
	if c.Runs > 1 {
		return nil, errors.New("overload runs each contender once on the same arrivals: --runs does not apply")
	}
	if f.cpuLimiter != "" {
		return nil, serveCPU(context.Background(), cpuServerOptions{Limiter: f.cpuLimiter, Work: f.cpuWork}, os.Stdin, os.Stdout)
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	var res *overloadResult
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
		var b bytes.Buffer
		if err := res.Series().Write(&b, "csv"); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f.csvFile, b.Bytes(), 0o666); err != nil {
			return nil, err
		}
	}
	return &Result{res}, nil
}

func (f *overloadFlags) check() error {
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

// runCPU drives a real CPU-bound server: this program, run again as
// "sim overload --cpu-limiter NAME", in a process of its own.
func (f *overloadFlags) runCPU(c Options) (*overloadResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	res, err := overloadCPU(context.Background(), cpuOptions{Command: []string{exe, "sim", "overload"},
		Work: f.cpuWork, Warmup: min(f.warmup, time.Second), Phase: f.cpuPhase, Bin: f.bin, Timeout: f.timeout,
		Seed: c.Seed, Log: c.Log})
	if err == nil && c.Log != nil {
		for _, run := range res.Runs {
			fmt.Fprintf(c.Log, "sluice sim overload --cpu: %s: p99 of a refusal at 5x: %v\n", run.Name, run.RejectionP99("5x"))
		}
	}
	return res, err
}

// runModel runs the contenders against the modelled server.
func (f *overloadFlags) runModel(c Options) (*overloadResult, error) {
	o := overloadOptions{RealTimeOptions: RealTimeOptions{Seed: c.Seed, Warmup: f.warmup, Phase: f.phase, Bin: f.bin,
		Model: IOModel{Capacity: f.capacity, Base: f.base, Noise: f.noise, Timeout: f.timeout}}}
	var err error
	if o.Mix, err = newClassMix(f.critical, shed.Classes{}); err != nil {
		return nil, fmt.Errorf("--critical: %w", err)
	}
	if f.shedders {
		sc, err := f.shedContenders(o.Mix)
		if err != nil {
			return nil, err
		}
		o.Contenders = append(OverloadContenders(), sc...)
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
	if c.Log != nil {
		o.Progress = func(done, total int) {
			fmt.Fprintf(c.Log, "sluice sim overload: %d of %d contenders done\n", done, total)
		}
	}
	return run(overload, o)
}

// shedContenders are the load shedders of --shed, on requests of mix.
func (f *overloadFlags) shedContenders(mix classMix) ([]OverloadContender, error) {
	if f.shedRamp <= 0 || f.fleetCap < 0 || f.fleetCap > 1_000_000 || !(f.reserved > 0) || !(f.gradReserved > 0) {
		return nil, fmt.Errorf("--shed-ramp %v / --fleet-cap %d / --reserved %v / --gradient-reserved %v: want a positive ramp, a cap of 0 to 1000000, shares above 0",
			f.shedRamp, f.fleetCap, f.reserved, f.gradReserved)
	}
	sc, err := run(shedContenders, shedOptions{Workers: f.capacity, Mix: mix, Ramp: f.shedRamp,
		FleetCap: f.fleetCap, Reserved: f.reserved, GradientReserved: f.gradReserved})
	if err != nil {
		return nil, fmt.Errorf("--reserved / --gradient-reserved: %w", err)
	}
	return sc, nil
}

// onlyContenders keeps the contenders named in the comma-separated list,
// and the oracle.
func onlyContenders(all []OverloadContender, list string) ([]OverloadContender, error) {
	if all == nil {
		all = OverloadContenders()
	}
	want := map[string]bool{OracleName: true}
	for _, n := range strings.Split(list, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []OverloadContender
	for _, c := range all {
		if want[c.Name] {
			out = append(out, c)
			delete(want, c.Name)
		}
	}
	delete(want, OracleName)
	for n := range want {
		names := make([]string, len(all))
		for i, c := range all {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("--only: no contender %q (have %s)", n, strings.Join(names, ", "))
	}
	return out, nil
}
