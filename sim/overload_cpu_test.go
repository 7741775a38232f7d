package sim

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"testing"
	"time"
)

// TestMain lets the test binary be the CPU server of TestOverloadCPU: run
// with SLUICE_SIM_CPU_SERVER=1, it serves as "sluice sim overload
// --cpu-limiter NAME --cpu-work D" does.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_SIM_CPU_SERVER") == "1" {
		fs := flag.NewFlagSet("cpu-server", flag.ExitOnError)
		limiter := fs.String("cpu-limiter", "", "")
		work := fs.Duration("cpu-work", 0, "")
		fs.Parse(os.Args[1:])
		if err := serveCPU(context.Background(), cpuServerOptions{Limiter: *limiter, Work: *work}, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOverloadCPU runs the real-process mode briefly: a server process per
// contender, driven over loopback. Its figures depend on the machine, so
// only their shape is checked.
func TestOverloadCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs about 10 s")
	}
	t.Setenv("SLUICE_SIM_CPU_SERVER", "1")
	res, err := overloadCPU(context.Background(), cpuOptions{Command: []string{os.Args[0]},
		Work: time.Millisecond, Warmup: 200 * time.Millisecond, Phase: 400 * time.Millisecond, Bin: 100 * time.Millisecond, Seed: 1,
		Limiters: []string{"sluice-gradient", "none"}, Log: tlog{t}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3*5 {
		t.Fatalf("%d rows, want 15", len(res.Rows))
	}
	for _, r := range res.Rows {
		// On a loaded machine the oracle may miss every deadline of a
		// phase: then there is no reference (NaN), never a made-up one.
		if r.Limiter == OracleName && r.GoodputRatio != 1 && !math.IsNaN(r.GoodputRatio) {
			t.Errorf("oracle at %s: goodput ratio %v, want 1 (or NaN)", r.Phase, r.GoodputRatio)
		}
	}
	if res.NoLoadP99 <= 0 {
		t.Errorf("no-load p99 %v", res.NoLoadP99)
	}
}

func TestServeCPURefusesBadLimiter(t *testing.T) {
	for _, name := range []string{"", "fixed:0", "fixed:x", "aimd"} {
		if err := serveCPU(context.Background(), cpuServerOptions{Limiter: name, Work: time.Microsecond}, nil, nil); err == nil {
			t.Errorf("serveCPU(limiter %q): no error", name)
		}
	}
}

// tlog writes progress lines to the test log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Logf("%s %s", time.Now().Format("15:04:05.000"), p)
	return len(p), nil
}
