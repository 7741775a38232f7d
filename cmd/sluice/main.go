package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand; each lives in its own file.
type command struct {
	name    string
	summary string
	// run executes the command. args excludes the command name. It returns
	// errUsage (wrapped or not) for bad flags, which main turns into exit 2.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands are sluice's subcommands, in the order --help lists them.
func commands() []command {
	return []command{
		{name: "serve", summary: "run the rate limiting gateway (a reverse proxy with per-identity limits)", run: runServe},
		{name: "rls", summary: "run a drop-in Envoy rate limit service (envoyproxy/ratelimit's gRPC API and config files)", run: runRLS},
		{name: "fetch", summary: "fetch URLs politely: per-host limits, AIMD, backoff, Retry-After", run: runFetch},
		{name: "sim", summary: "run a simulation (brooker, objectstore, aimd, buckets, windows) on sluice's own code", run: runSim},
		{name: "check", summary: "validate gateway configs and envoyproxy/ratelimit rules files offline", run: runCheck},
	}
}

// lookup returns the command named name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// errUsage marks an error caused by bad command-line usage (exit status 2).
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	c, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
		usage(stderr)
		return errUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "sluice: rate limits for both sides of HTTP 429")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: sluice COMMAND [flags]   (sluice COMMAND --help for its flags)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting and
// prints its usage to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sluice %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, mapping flag errors to errUsage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
