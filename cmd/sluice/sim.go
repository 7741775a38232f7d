package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/sim"
)

func simUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: sluice sim NAME [flags]

Runs a deterministic discrete-event simulation that drives sluice's real
components (backoff strategies, limiter steps, memstore, adaptive) on a
virtual clock. The same --seed prints the same bytes.

Scenarios:
`)
	for _, s := range sim.Scenarios() {
		fmt.Fprintf(w, "  %-12s %s\n", s.Name, s.Summary)
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
	sc, ok := sim.Lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "sluice sim: unknown scenario %q\n\n", args[0])
		simUsage(stderr)
		return shown(errUsage)
	}
	fs := newFlagSet("sim "+sc.Name, "[flags]", stderr)
	cf := defineSimFlags(fs)
	start := sc.Flags(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	// Say what is wrong, then the scenario's flags (run would print
	// sim's general usage instead).
	bad := func(format string, a ...any) error {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(stderr, "sluice sim %s: %s\n\n", sc.Name, msg)
		fs.Usage()
		return shown(fmt.Errorf("%w: %s", errUsage, msg))
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %q", fs.Args())
	}
	if err := cf.check(); err != nil {
		return bad("%v", err)
	}
	c := sim.Options{Seed: cf.seed, Runs: cf.runs}
	if !cf.quiet {
		c.Progress = progressPrinter(stderr, "sluice sim "+sc.Name)
		c.Log = stderr
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
	if err := res.WriteTable(stdout, cf.format); err != nil {
		return err
	}
	if cf.svg != "" {
		return writeFile(cf.svg, res.WriteSVG)
	}
	return nil
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
